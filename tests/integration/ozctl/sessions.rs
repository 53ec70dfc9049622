//! `ozctl sessions` end to end: the real binary, as alice, over requests whose
//! `status.sessions` the test writes as admin (a merge patch on the status subresource, as the
//! oz replica serving each session does). No oz-manager runs: nothing else writes the status.

use kube::{
    Api,
    api::{Patch, PatchParams},
};
use oz_api::ExecAccessRequest;
use serde_json::{Value, json};

use crate::support::{
    cluster::{env, install_crds},
    manifests::create_manifest,
    ozctl::{assert_ok, ozctl_with, stderr, stdout},
    rbac::{grant, rule, subject},
};

/// Creates ExecAccessRequest `name` by alice and writes `sessions` and `counts` into its status.
async fn request_with_sessions(
    requests: &Api<ExecAccessRequest>,
    admin: &kube::Client,
    ns: &str,
    name: &str,
    sessions: Value,
    counts: Value,
) {
    let yaml = format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\n\
         spec:\n  templateName: web\n  requester: {{username: alice, groups: [devs, system:authenticated]}}\n"
    );
    create_manifest(admin, ns, &yaml).await.unwrap();
    requests
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "sessionMode": "Brokered", "sessions": sessions, "sessionCounts": counts,
            }})),
        )
        .await
        .unwrap();
}

fn session(
    id: &str,
    pod: &str,
    command: &[&str],
    started: &str,
    ended: Option<(&str, &str)>,
) -> Value {
    let mut value = json!({
        "id": id, "user": "alice", "stream": "Exec", "pod": pod, "command": command,
        "startedAt": started,
    });
    if let Some((at, reason)) = ended {
        value["endedAt"] = json!(at);
        value["endReason"] = json!(reason);
    }
    value
}

#[tokio::test]
async fn ozctl_sessions_lists_the_sessions_of_a_request_or_of_the_namespace_newest_first() {
    install_crds().await;
    let ns = env().namespace("ozctl-sessions").await.unwrap();
    let admin = env().admin().await.unwrap();
    grant(
        &admin,
        &ns,
        "readers",
        vec![rule(
            &[oz_api::GROUP],
            &["execaccessrequests", "podaccessrequests"],
            &["get", "list"],
        )],
        vec![subject("Group", "system:authenticated")],
    )
    .await;
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    request_with_sessions(
        &requests,
        &admin,
        &ns,
        "alice-web",
        json!([
            session(
                "s-first",
                "web-0",
                &["ls", "-l"],
                "2026-11-21T10:00:00Z",
                Some(("2026-11-21T10:01:00Z", "Exited"))
            ),
            session(
                "s-open",
                "web-0",
                &["/bin/sh"],
                "2026-11-21T10:30:00Z",
                None
            ),
        ]),
        json!({"total": 23, "open": 1}),
    )
    .await;
    request_with_sessions(
        &requests,
        &admin,
        &ns,
        "alice-db",
        json!([session(
            "s-mid",
            "db-0",
            &["psql"],
            "2026-11-21T10:10:00Z",
            Some(("2026-11-21T10:20:00Z", "Expired"))
        )]),
        json!({"total": 1, "open": 0}),
    )
    .await;
    let alice = env().kubeconfig_of("alice").unwrap();

    // Every request in the namespace, newest first, the session id first.
    let all = ozctl_with(alice, &ns, &["sessions"]).await;
    assert_ok(&all, "ozctl sessions");
    let text = stdout(&all);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("SESSION "), "{text}");
    for header in [
        "REQUEST", "USER", "POD", "COMMAND", "STARTED", "ENDED", "REASON",
    ] {
        assert!(lines[0].contains(header), "{text}");
    }
    let ids: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids, ["s-open", "s-mid", "s-first"], "{text}");
    assert!(
        lines[1].contains("alice-web") && lines[1].contains(" open"),
        "{text}"
    );
    assert!(
        lines[2].contains("alice-db") && lines[2].ends_with("Expired"),
        "{text}"
    );
    assert!(
        lines[3].contains("ls -l") && lines[3].ends_with("Exited"),
        "{text}"
    );
    // alice-web had more sessions than its status keeps.
    assert!(
        stderr(&all).contains("alice-web had 23 sessions (1 open); its status keeps the newest 2"),
        "{}",
        stderr(&all)
    );

    // One request's sessions; as JSON.
    let one = ozctl_with(alice, &ns, &["sessions", "alice-db", "-o", "json"]).await;
    assert_ok(&one, "ozctl sessions alice-db -o json");
    let entries: Value = serde_json::from_str(&stdout(&one)).unwrap();
    assert_eq!(entries.as_array().unwrap().len(), 1, "{entries}");
    assert_eq!(entries[0]["id"], "s-mid");
    assert_eq!(entries[0]["request"], "alice-db");
    assert_eq!(entries[0]["endReason"], "Expired");
}
