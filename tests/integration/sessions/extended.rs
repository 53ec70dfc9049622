//! An open brokered session across an extension of its grant, every part real (the install,
//! oz's webhooks, `ozctl extend`, `ozctl approve`, the aggregated sessions API, kwok's streams):
//! the session is never reopened, runs past the grant's first end once the extension is
//! granted, and is closed by oz at the new end; an extension still waiting for approval
//! changes nothing, and the session closes at the first end.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use oz_api::{AccessRequest, ExecAccessRequest, ExtensionPhase, RequestPhase, SessionEndReason};
use oz_testenv::workloads::{self, WorkloadSpec};

use super::end_to_end::{CLOSE_WITHIN, Installed, Replica, Shell, WAIT, expires_at};
use crate::support::{
    manifests::create_manifest,
    polling::{eventually, sleep_past},
    rbac::{grant, rule, subject},
};

/// Brokered templates for devs whose grants dave (leads) approves, each on a workload of its
/// own (a session stands on any of alice's grants on its pod).
async fn gated_templates(installed: &Installed, names: &[&str]) {
    let admin = installed.sessions.admin.clone();
    for target in names {
        workloads::deployment(&admin, &installed.ns, WorkloadSpec::new(target, 1))
            .await
            .unwrap();
        let template = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {target}-gated}}\n\
             spec:\n  accessConfig: {{allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h, \
             sessionMode: Brokered, approval: {{approverGroups: [leads]}}}}\n  \
             controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {target}}}\n"
        );
        create_manifest(&admin, &installed.ns, &template)
            .await
            .unwrap();
    }
    grant(
        &admin,
        &installed.ns,
        "leads",
        vec![
            rule(
                &[oz_api::GROUP],
                &[
                    "execaccessrequests",
                    "podaccessrequests",
                    "execaccesstemplates",
                    "podaccesstemplates",
                ],
                &["get", "list", "watch"],
            ),
            rule(&[oz_api::GROUP], &["accessapprovals"], &["create", "get"]),
        ],
        vec![subject("Group", "leads")],
    )
    .await;
}

/// alice's request `name` through `template` for `duration`, approved by dave, Ready, with a
/// shell open on it that has answered.
async fn approved_with_a_shell(
    installed: &Installed,
    replica: &Replica,
    (name, template, duration): (&str, &str, &str),
) -> (ExecAccessRequest, Shell) {
    installed.asked(name, template, duration, replica).await;
    let approved = installed.ozctl(Some("dave"), &["approve", name]).await;
    assert!(approved.success(), "{approved}");
    let ready = installed.ready(name, replica).await;
    let mut shell = Shell::open(installed, name);
    shell.type_line("echo before-$((40+2))").await;
    shell.wait_for("before-42\n").await;
    (ready, shell)
}

/// Request `name` once `check` accepts it.
async fn request_once(
    installed: &Installed,
    name: &str,
    what: &str,
    check: impl Fn(&ExecAccessRequest) -> bool,
) -> ExecAccessRequest {
    let requests = installed.requests();
    eventually(WAIT, &format!("{name} {what}"), || async {
        let request = requests.get(name).await.ok()?;
        check(&request).then_some(request)
    })
    .await
}

fn ask_phase(request: &ExecAccessRequest) -> Option<ExtensionPhase> {
    Some(request.request_status()?.extensions.first()?.phase)
}

/// How long after `end` the session was seen closed: within oz's bound, never before.
fn assert_closed_at(closed: Timestamp, end: Timestamp, stdout: &str) {
    let lag = closed.duration_since(end);
    assert!(
        lag >= SignedDuration::ZERO && lag < SignedDuration::try_from(CLOSE_WITHIN).unwrap(),
        "closed {lag:?} after {end} (stdout {stdout:?})"
    );
}

/// An extension dave approves: the open session runs past the first end, on the same stream,
/// and is closed at the new one.
async fn approved_extension(installed: &Installed, replica: &Replica) {
    let name = "alice-approved";
    let (ready, mut shell) =
        approved_with_a_shell(installed, replica, (name, "api2-gated", "30s")).await;
    let first_end = expires_at(&ready);
    let asked = installed
        .ozctl(Some("alice"), &["extend", name, "--by", "20s", "--no-wait"])
        .await;
    assert!(asked.success(), "{asked}");
    let waiting = request_once(installed, name, "to record extension 1 waiting", |r| {
        ask_phase(r) == Some(ExtensionPhase::PendingApproval)
    })
    .await;
    assert_eq!(
        expires_at(&waiting),
        first_end,
        "nothing added before approval"
    );

    // dave approves the extension (ozctl picks the one waiting).
    let approved = installed.ozctl(Some("dave"), &["approve", name]).await;
    assert!(approved.success(), "{approved}");
    assert!(
        approved.stdout.contains(&format!(
            "Approved extension 1 of ExecAccessRequest {name} as dave"
        )),
        "{approved}"
    );
    let extended = request_once(installed, name, "to be extended", |r| {
        ask_phase(r) == Some(ExtensionPhase::Granted)
    })
    .await;
    let new_end = expires_at(&extended);
    assert_eq!(new_end, first_end + SignedDuration::from_secs(20));
    let ask = &extended.request_status().unwrap().extensions[0];
    assert_eq!(ask.approvals.len(), 1, "{ask:?}");
    assert_eq!(ask.approvals[0].approver, "dave");

    // The same session answers past the first end, and is closed at the new one.
    sleep_past(first_end + SignedDuration::try_from(CLOSE_WITHIN).unwrap()).await;
    shell.type_line("echo after-$((40+3))").await;
    shell.wait_for("after-43\n").await;
    let ended = shell.ended(WAIT).await;
    assert_closed_at(ended.at, new_end, &ended.stdout);
    assert_eq!(ended.code, Some(3), "oz closed it: {}", ended.stderr);
    let record = installed.ended_session(name, &["sh"]).await;
    assert_eq!(record.end_reason, Some(SessionEndReason::Expired));
    let sessions = installed.requests().get(name).await.unwrap();
    assert_eq!(
        sessions.request_status().unwrap().sessions.len(),
        1,
        "one session, never reopened"
    );
}

/// An extension no one approves: the grant and its session end at the first end, and the ask
/// is recorded as never granted.
async fn waiting_extension(installed: &Installed, replica: &Replica) {
    let name = "alice-waits";
    let (ready, shell) =
        approved_with_a_shell(installed, replica, (name, "api-gated", "20s")).await;
    let first_end = expires_at(&ready);
    let asked = installed
        .ozctl(Some("alice"), &["extend", name, "--by", "20s", "--no-wait"])
        .await;
    assert!(asked.success(), "{asked}");
    assert!(
        asked
            .stdout
            .starts_with(&format!("Asked to extend {name} by 20s (extension 1)")),
        "{asked}"
    );
    request_once(installed, name, "to record extension 1 waiting", |r| {
        ask_phase(r) == Some(ExtensionPhase::PendingApproval)
    })
    .await;
    let ended = shell.ended(WAIT).await;
    assert_closed_at(ended.at, first_end, &ended.stdout);
    let expired = request_once(installed, name, "to expire", |r| {
        r.request_status().and_then(|s| s.phase) == Some(RequestPhase::Expired)
    })
    .await;
    assert_eq!(expires_at(&expired), first_end);
    let ask = &expired.request_status().unwrap().extensions[0];
    assert_eq!(ask.phase, ExtensionPhase::Denied);
    assert_eq!(
        ask.message.as_deref(),
        Some("the grant ended before it was approved")
    );
}

#[tokio::test]
async fn an_open_session_runs_on_to_an_approved_extensions_end_and_not_past_a_waiting_ones() {
    let installed = Installed::start("sessions-extend").await;
    gated_templates(&installed, &["api", "api2"]).await;
    let port = crate::support::operator::free_port();
    let replica = installed.replica(port, port);
    installed.sessions.wait_available().await;
    tokio::join!(
        approved_extension(&installed, &replica),
        waiting_extension(&installed, &replica)
    );
}
