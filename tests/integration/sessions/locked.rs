//! The kill switch, every part real (the install and its RBAC, oz's webhooks and controllers,
//! the aggregated sessions API, kwok's streams): a lock on alice closes her open brokered
//! session and revokes her grant within a second, and refuses her next request with the lock's
//! reason, while carol's grant and session go on. Only a lock admin may lock.

use std::time::{Duration, Instant};

use kube::{Api, api::PostParams};
use oz_api::{AccessRequest, ExecAccessRequest, RequestPhase};

use super::end_to_end::{Installed, Shell, WAIT};
use crate::support::polling::eventually;

/// How soon a lock must have closed a session and revoked a grant, as the users expect
/// of a kill switch; measured from the moment `ozctl lock` returned.
const LOCKED_WITHIN: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_lock_on_alice_ends_her_session_and_grant_at_once_and_leaves_carols() {
    let installed = Installed::start("sessions-lock").await;
    let port = crate::support::operator::free_port();
    let replica = installed.replica(port, port);
    installed.sessions.wait_available().await;
    installed
        .granted("alice-locked", "web-exec", "10m", &replica)
        .await;
    installed
        .asked_as("carol", "carol-kept", ("db-exec", "10m"), &replica)
        .await;
    installed.ready("carol-kept", &replica).await;
    let mut alices = Shell::open(&installed, "alice-locked");
    alices.type_line("echo alice-$((40+2))").await;
    alices.wait_for("alice-42\n").await;
    let mut carols = Shell::open_as(&installed, "carol", "carol-kept");
    carols.type_line("echo carol-$((40+2))").await;
    carols.wait_for("carol-42\n").await;

    // Not alice's (or any requester's) to lock: RBAC refuses before oz.
    let refused = installed
        .ozctl(
            Some("alice"),
            &["lock", "--user", "carol", "--reason", "mine"],
        )
        .await;
    assert!(
        !refused.success() && refused.stderr.contains("forbidden"),
        "{refused}"
    );

    let locked = installed
        .ozctl(
            None,
            &["lock", "--user", "alice", "--reason", "INC-9: laptop lost"],
        )
        .await;
    let (at, at_stamp) = (Instant::now(), k8s_openapi::jiff::Timestamp::now());
    assert!(locked.success(), "{locked}");
    let name = locked
        .stdout
        .split("AccessLock ")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .expect("the lock's name")
        .to_string();

    // Her session closes, and her grant is revoked, within the second.
    let requests = installed.requests();
    let revoked_after = eventually(WAIT, "alice-locked to be Revoked", || async {
        let request = requests.get("alice-locked").await.ok()?;
        (request.request_status()?.phase == Some(RequestPhase::Revoked)).then(|| at.elapsed())
    })
    .await;
    let ended = alices.ended(WAIT).await;
    let closed_after = Duration::try_from(ended.at.duration_since(at_stamp)).unwrap_or_default();
    eprintln!("lock to session closed: {closed_after:?}; to request Revoked: {revoked_after:?}");
    assert!(
        closed_after < LOCKED_WITHIN,
        "closed {closed_after:?} after the lock"
    );
    assert!(
        revoked_after < LOCKED_WITHIN,
        "revoked {revoked_after:?} after the lock"
    );
    assert_eq!(ended.code, Some(3), "oz closed it: {}", ended.stderr);
    let alice = requests.get("alice-locked").await.unwrap();
    let why = &alice.request_status().unwrap().conditions;
    assert!(
        why.iter()
            .any(|c| c.message
                == format!("Access revoked by AccessLock {name} (INC-9: laptop lost)")),
        "{why:?}"
    );

    // carol's session still answers, and her grant stands.
    carols.type_line("echo still-$((40+2))").await;
    carols.wait_for("still-42\n").await;
    let carol = requests.get("carol-kept").await.unwrap();
    assert_eq!(
        carol.request_status().unwrap().phase,
        Some(RequestPhase::Ready)
    );

    // alice's next request is refused with the lock's reason, until it is removed.
    let as_alice: Api<ExecAccessRequest> = Api::namespaced(
        installed.sessions.plane.client_as("alice").await.unwrap(),
        &installed.ns,
    );
    let again: ExecAccessRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
        "metadata": {"name": "alice-again"}, "spec": {"templateName": "web-exec"},
    }))
    .unwrap();
    let refusal = as_alice
        .create(&PostParams::default(), &again)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refusal.contains(&format!("locked by AccessLock {name}: INC-9: laptop lost")),
        "{refusal}"
    );
    let unlocked = installed.ozctl(None, &["unlock", &name]).await;
    assert!(unlocked.success(), "{unlocked}");
    eventually(
        WAIT,
        "alice's request to be admitted once unlocked",
        || async { as_alice.create(&PostParams::default(), &again).await.ok() },
    )
    .await;
    drop(carols);
}
