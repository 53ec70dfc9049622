//! `ozctl extend` end to end, against oz's webhooks and controller: alice's grant gets more
//! time without being made again, its RBAC lasts exactly to the new end, and no one else may
//! extend it. (An open brokered session across an extension: `sessions/extended.rs`.)

use std::time::Duration;

use k8s_openapi::{
    api::rbac::v1::RoleBinding,
    jiff::{SignedDuration, Timestamp},
};
use kube::{Api, ResourceExt};
use oz_api::{ExecAccessRequest, ExtensionPhase, RequestPhase};

use super::requests::{OzctlFixture, error_line};
use crate::support::{
    fixture::Fixture,
    ozctl::{assert_ok, stderr, stdout},
    polling::{eventually, sleep_past},
    users::can_exec,
};

/// Long enough for oz to act on a busy 2-core machine.
const WAIT: Duration = Duration::from_secs(60);

fn expires_at(request: &ExecAccessRequest) -> Timestamp {
    request
        .status
        .as_ref()
        .unwrap()
        .expires_at
        .clone()
        .unwrap()
        .0
}

#[tokio::test]
async fn extend_moves_the_end_of_alices_grant_and_keeps_everything_else() {
    let f = Fixture::new("ozctl-extend").await;
    let created = f
        .ozctl(
            "alice",
            &[
                "create",
                "exec",
                "web-exec",
                "-D",
                "20s",
                "--timeout",
                "60s",
            ],
        )
        .await;
    assert_ok(&created, "ozctl create exec");
    let request = f.only_exec_request().await;
    let name = request.name_any();
    let first_end = expires_at(&request);
    let pod = request.status.clone().unwrap().pod_name.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(f.admin.clone(), &f.ns);
    let binding = |all: Vec<RoleBinding>| {
        all.into_iter()
            .find(|b| b.owner_references().iter().any(|o| o.name == name))
    };
    let before = binding(bindings.list(&Default::default()).await.unwrap().items).unwrap();

    // Not bob's to extend (he may patch requests here), nor past what the template allows.
    let bobs = f.ozctl("bob", &["extend", &name, "--by", "10m"]).await;
    assert_eq!(bobs.status.code(), Some(1), "{}", stderr(&bobs));
    assert!(
        error_line(&bobs).contains("only the requester (alice) may extend this grant"),
        "{}",
        stderr(&bobs)
    );

    let extended = f.ozctl("alice", &["extend", &name, "--by", "20s"]).await;
    assert_ok(&extended, "ozctl extend");
    assert!(
        stdout(&extended).starts_with(&format!("Extended {name} by 20s: access now ends at ")),
        "{}",
        stdout(&extended)
    );
    let now = f.only_exec_request().await;
    let new_end = expires_at(&now);
    assert_eq!(new_end, first_end + SignedDuration::from_secs(20));
    let status = now.status.clone().unwrap();
    assert_eq!(status.phase, Some(RequestPhase::Ready));
    assert_eq!(status.extensions.len(), 1, "{status:?}");
    assert_eq!(status.extensions[0].phase, ExtensionPhase::Granted);
    assert_eq!(status.extensions[0].added.as_deref(), Some("20s"));
    assert_eq!(status.extensions[0].asked_by, "alice");

    // Past the first end, the same RoleBinding still grants her the pod.
    sleep_past(first_end + SignedDuration::from_secs(2)).await;
    assert!(
        can_exec("alice", &f.ns, &pod).await,
        "extended past {first_end}"
    );
    let after = binding(bindings.list(&Default::default()).await.unwrap().items).unwrap();
    assert_eq!(after.uid(), before.uid(), "the grant was not made again");
    assert_eq!(
        f.only_exec_request().await.status.unwrap().phase,
        Some(RequestPhase::Ready)
    );

    // At the new end it ends, on its timer.
    let ended = eventually(WAIT, "the extended grant to expire", || async {
        let request = f.only_exec_request().await;
        (request.status.as_ref()?.phase == Some(RequestPhase::Expired)).then_some(request)
    })
    .await;
    assert_eq!(expires_at(&ended), new_end);
    assert!(!can_exec("alice", &f.ns, &pod).await, "access has ended");
    assert!(
        binding(bindings.list(&Default::default()).await.unwrap().items).is_none(),
        "its RoleBinding is gone"
    );
    let late = f.ozctl("alice", &["extend", &name, "--by", "20s"]).await;
    assert_eq!(late.status.code(), Some(1), "{}", stderr(&late));
    assert!(
        error_line(&late).contains("only a Ready grant can be extended"),
        "{}",
        stderr(&late)
    );
    f.cleanup().await;
}
