//! How many calls oz makes, counted by the apiserver itself: a control plane of this file's own
//! records every request in its audit log, and oz-manager names itself in its User-Agent
//! (`oz-manager/VERSION`). oz-bench prints the per-grant figures; this pins the ones that must
//! never regress: a reconcile that finds everything as it should be writes nothing, and a new
//! grant's Role and RoleBinding are one create each.

use k8s_openapi::jiff::Timestamp;
use oz_api::RequestPhase;
use oz_testenv::{
    ControlPlane, ControlPlaneOptions,
    workloads::{self, WorkloadSpec},
};
use serde::Deserialize;

use crate::support::{
    cluster::install_crds_into,
    manifests::create_manifest,
    operator::{Operator, http_get},
    polling::{SETTLE, event_reasons_once, eventually},
    requests::{create_requests, exec_template, wait_until_all_in},
};

/// What this file reads of an audit event.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuditEvent {
    verb: String,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
    stage_timestamp: Timestamp,
}

#[derive(Deserialize)]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    name: String,
}

/// oz's writes in `log` from `since` on, as `verb resource[/subresource] name`.
fn oz_writes_since(log: &str, since: Timestamp) -> Vec<String> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<AuditEvent>(line).ok())
        .filter(|e| e.user_agent.starts_with("oz-manager/") && e.stage_timestamp >= since)
        .filter(|e| matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete"))
        // Reviews are questions, not writes: nothing is stored (oz asks at start what RBAC
        // allows it).
        .filter(|e| {
            !e.object_ref
                .as_ref()
                .is_some_and(|o| o.resource.ends_with("reviews"))
        })
        .map(|e| {
            let o = e.object_ref.unwrap_or(ObjectRef {
                resource: String::new(),
                subresource: String::new(),
                name: String::new(),
            });
            let sub = if o.subresource.is_empty() {
                String::new()
            } else {
                format!("/{}", o.subresource)
            };
            format!("{} {}{} {}", e.verb, o.resource, sub, o.name)
        })
        .collect()
}

/// How many ExecAccessRequest reconciles the oz-manager serving metrics on `port` has finished.
async fn reconciles_finished(port: u16) -> u64 {
    let line =
        "oz_reconcile_duration_seconds_count{controller=\"request\",kind=\"ExecAccessRequest\"} ";
    http_get(&format!("http://127.0.0.1:{port}/metrics"))
        .await
        .lines()
        .find_map(|l| l.strip_prefix(line))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
}

#[tokio::test]
async fn a_restarted_oz_reconciles_the_grants_in_force_without_writing_anything() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("api-calls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (policy, log) = (dir.join("audit-policy.yaml"), dir.join("audit.log"));
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let args = [
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
    ];
    let plane = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ControlPlane::start(
            ControlPlaneOptions::empty()
                .user("alice", &["devs"])
                .controllers(&["all"])
                .nodes(1)
                .apiserver_args(&args),
        )
        .unwrap()
    })
    .await
    .unwrap();
    let admin = plane.admin().await.unwrap();
    install_crds_into(&admin).await;
    let ns = plane.namespace("api-calls").await.unwrap();
    workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    let mut operator = Operator::builder(&ns)
        .kubeconfig(plane.admin_kubeconfig())
        .metrics()
        .start();
    let port = operator.metrics_port();
    let requests: Vec<_> = (0..3)
        .map(|i| (format!("g{i}"), "alice", "1h".to_string()))
        .collect();
    create_requests(&admin, &ns, "web-exec", requests, 3).await;
    wait_until_all_in(
        &admin,
        &ns,
        3,
        &[RequestPhase::Ready],
        &format!("3 grants (log: {})", operator.log.display()),
    )
    .await;

    // Everything the first process had to say has been said (an Event is published just
    // after the status it announces).
    for i in 0..3 {
        event_reasons_once(&admin, &ns, &format!("g{i}"), "Ready", SETTLE).await;
    }
    // A new process: its caches are empty and every request is reconciled once.
    operator.kill();
    let restarted = Timestamp::now();
    operator.restart();
    eventually(
        SETTLE,
        &format!(
            "the restarted oz-manager to reconcile all 3 requests (log: {})",
            operator.log.display()
        ),
        || async { (reconciles_finished(port).await >= 3).then_some(()) },
    )
    .await;
    // The audit log is written before each call returns, so every call of those reconciles is
    // in it now.
    let written = oz_writes_since(&std::fs::read_to_string(&log).unwrap(), restarted);
    assert_eq!(
        written,
        Vec::<String>::new(),
        "a reconcile of grants that are as they should be wrote (log: {})",
        operator.log.display()
    );
    // And the count is real: the grants were made by calls the same log holds.
    let before = oz_writes_since(
        &std::fs::read_to_string(&log).unwrap(),
        Timestamp::UNIX_EPOCH,
    );
    assert!(
        before.iter().any(|w| w.starts_with("create rolebindings ")),
        "{before:?}"
    );
    // Each new grant's Role and RoleBinding is created, which costs the apiserver less than an
    // apply that creates, and only once: none was then applied.
    let count = |prefix: &str| before.iter().filter(|w| w.starts_with(prefix)).count();
    assert_eq!(
        (count("create roles "), count("create rolebindings ")),
        (3, 3),
        "{before:?}"
    );
    assert_eq!(
        (count("patch roles "), count("patch rolebindings ")),
        (0, 0),
        "{before:?}"
    );
}
