//! The audit webhook: records, grants, enforcement and the Event.

use super::*;

// === Audit ===

fn exec_review(who: Value, pod: &str, subresource: &str, options: Value) -> Value {
    let kind = match subresource {
        "exec" => "PodExecOptions",
        "attach" => "PodAttachOptions",
        "portforward" => "PodPortForwardOptions",
        _ => "PodProxyOptions",
    };
    let mut object = options;
    object["kind"] = json!(kind);
    object["apiVersion"] = json!("v1");
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "review-uid",
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": subresource,
            "requestKind": {"group": "", "version": "v1", "kind": kind},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": subresource,
            "name": pod,
            "namespace": NS,
            "operation": "CONNECT",
            "userInfo": who,
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": null,
        }
    })
}

fn grant_request(
    kind: AccessKind,
    name: &str,
    template: &str,
    who: &str,
    phase: RequestPhase,
    pod: &str,
) -> GrantSummary {
    GrantSummary {
        kind,
        name: name.into(),
        template: template.into(),
        requested_by: Some(who.into()),
        phase: Some(phase),
        pod_name: Some(pod.into()),
        session_mode: None,
        expires_at: Some(chrono::Utc::now() + chrono::TimeDelta::hours(1)),
        approvers: Vec::new(),
        extensions: Vec::new(),
    }
}

/// A Ready request for pod web-0.
pub(super) fn ready(kind: AccessKind, name: &str, template: &str, who: &str) -> GrantSummary {
    grant_request(kind, name, template, who, RequestPhase::Ready, "web-0")
}

pub(super) fn alice_exec() -> Value {
    exec_review(
        user("alice", &["devs"]),
        "web-0",
        "exec",
        json!({"command": ["cat", "/etc/hostname"], "container": "app", "tty": true, "stdin": true, "stdout": true}),
    )
}

#[tokio::test]
async fn an_exec_is_recorded_with_its_grant_and_allowed() {
    let lookup = standard_lookup()
        .with_request(grant_request(
            AccessKind::Exec,
            "pending",
            "web",
            "alice",
            RequestPhase::Pending,
            "web-0",
        ))
        .with_request(grant_request(
            AccessKind::Exec,
            "other-pod",
            "web",
            "alice",
            RequestPhase::Ready,
            "web-1",
        ))
        .with_request(ready(AccessKind::Exec, "alices", "web", "alice"));
    let h = harness(lookup, EnforceSettings::default()).await;
    let response = h.review(AUDIT_PATH, alice_exec()).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["auditAnnotations"],
        json!({"grant": "ExecAccessRequest/alices", "template": "web"})
    );

    let records = h.audit_records();
    assert_eq!(records.len(), 1, "one record per exec");
    let record = &records[0];
    assert_eq!(record.event, "PodExec");
    assert_eq!(record.user, "alice");
    assert_eq!(record.uid.as_deref(), Some("alice-uid"));
    assert_eq!(record.groups, ["devs", "system:authenticated"]);
    assert_eq!(
        (record.namespace.as_str(), record.pod.as_str()),
        (NS, "web-0")
    );
    assert_eq!(
        (record.operation.as_str(), record.subresource.as_str()),
        ("CONNECT", "exec")
    );
    assert_eq!(record.container.as_deref(), Some("app"));
    assert_eq!(record.command, ["cat", "/etc/hostname"]);
    assert!(record.tty && record.stdin && record.allowed && !record.dry_run);
    assert_eq!(record.request_uid, "review-uid");
    assert_eq!(
        record.grant,
        Some(Grant {
            kind: "ExecAccessRequest".into(),
            name: "alices".into(),
            template: "web".into(),
            approvers: Vec::new(),
            extensions: Vec::new(),
        })
    );
    assert!(record.time.ends_with('Z'), "{}", record.time);

    // The raw line is what log shippers read: the grant is an object, never absent.
    let line = std::fs::read_to_string(h.audit_file.path()).unwrap();
    let raw: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(raw["grant"]["name"], "alices");
    assert_eq!(raw["requestUid"], "review-uid");
}

#[tokio::test]
async fn an_exec_without_a_grant_is_recorded_with_a_null_grant_and_allowed() {
    // Someone else's Ready request for the same pod grants nothing under grantTo Requester.
    let lookup = standard_lookup().with_request(ready(AccessKind::Exec, "carols", "web", "carol"));
    let h = harness(lookup, EnforceSettings::default()).await;
    let response = h.review(AUDIT_PATH, alice_exec()).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(response["auditAnnotations"], json!({"grant": "none"}));
    let line = std::fs::read_to_string(h.audit_file.path()).unwrap();
    let raw: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(raw["grant"], Value::Null);
    assert!(raw.as_object().unwrap().contains_key("grant"));
}

#[tokio::test]
async fn a_group_grant_lets_other_members_in() {
    let lookup = FakeLookup::default()
        .with_template(
            AccessKind::Pod,
            "shared",
            access_config(&["devs"], Some("AllowedGroups")),
        )
        .with_request(ready(AccessKind::Pod, "carols", "shared", "carol"));
    let h = harness(lookup, EnforceSettings::default()).await;
    h.review(AUDIT_PATH, alice_exec()).await;
    let bob = exec_review(
        user("bob", &["qa"]),
        "web-0",
        "exec",
        json!({"command": ["sh"]}),
    );
    h.review(AUDIT_PATH, bob).await;
    let records = h.audit_records();
    assert_eq!(
        records[0].grant,
        Some(Grant {
            kind: "PodAccessRequest".into(),
            name: "carols".into(),
            template: "shared".into(),
            approvers: Vec::new(),
            extensions: Vec::new(),
        }),
        "alice is in devs"
    );
    assert_eq!(records[1].grant, None, "bob is not");
}

#[tokio::test]
async fn attach_port_forward_and_debug_are_recorded_too() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let attach = exec_review(
        user("alice", &["devs"]),
        "web-0",
        "attach",
        json!({"container": "app", "stdin": true, "tty": false}),
    );
    h.review(AUDIT_PATH, attach).await;
    let forward = exec_review(
        user("alice", &["devs"]),
        "web-0",
        "portforward",
        json!({"ports": [8080, 9090]}),
    );
    h.review(AUDIT_PATH, forward).await;

    let pod = |ephemeral: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"}, "spec": {"containers": [{"name": "app"}], "ephemeralContainers": ephemeral}});
    let old = pod(json!([{"name": "debugger-old", "image": "busybox"}]));
    let new = pod(json!([
        {"name": "debugger-old", "image": "busybox"},
        {"name": "debugger-abc", "image": "busybox:1.36", "command": ["sh"], "args": ["-c", "id"], "tty": true, "stdin": true, "targetContainerName": "app"}
    ]));
    let mut debug = exec_review(
        user("alice", &["devs"]),
        "web-0",
        "ephemeralcontainers",
        json!({}),
    );
    debug["request"]["operation"] = json!("UPDATE");
    debug["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    debug["request"]["object"] = new;
    debug["request"]["oldObject"] = old;
    debug["request"]["dryRun"] = json!(true);
    assert_eq!(h.review(AUDIT_PATH, debug).await["allowed"], true);

    let records = h.audit_records();
    assert_eq!(records.len(), 3);
    assert_eq!(records[0].event, "PodAttach");
    assert_eq!((records[0].stdin, records[0].tty), (true, false));
    assert!(records[0].command.is_empty());
    assert_eq!(records[1].event, "PodPortForward");
    assert_eq!(records[1].ports, [8080, 9090]);
    assert_eq!(records[2].event, "PodDebug");
    assert_eq!(records[2].operation, "UPDATE");
    assert_eq!(records[2].container.as_deref(), Some("debugger-abc"));
    assert_eq!(records[2].image.as_deref(), Some("busybox:1.36"));
    assert_eq!(records[2].command, ["sh", "-c", "id"]);
    assert!(records[2].tty && records[2].dry_run);
}

#[tokio::test]
async fn other_pod_operations_pass_unrecorded() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let proxy = exec_review(user("alice", &["devs"]), "web-0", "proxy", json!({}));
    assert_eq!(h.review(AUDIT_PATH, proxy).await["allowed"], true);
    let mut configmap = exec_review(user("alice", &["devs"]), "web-0", "exec", json!({}));
    configmap["request"]["resource"]["resource"] = json!("configmaps");
    assert_eq!(h.review(AUDIT_PATH, configmap).await["allowed"], true);
    assert!(h.audit_records().is_empty());
}

#[tokio::test]
async fn a_failed_grant_lookup_still_allows_and_says_why() {
    let mut lookup = standard_lookup();
    lookup.broken = true;
    let h = harness(lookup, EnforceSettings::default()).await;
    assert_eq!(h.review(AUDIT_PATH, alice_exec()).await["allowed"], true);
    let record = &h.audit_records()[0];
    assert_eq!(record.grant, None);
    assert_eq!(record.grant_error.as_deref(), Some("the apiserver is away"));
}

fn enforcing(namespace: &str) -> EnforceSettings {
    EnforceSettings {
        namespaces: BTreeSet::from([namespace.to_string()]),
        ..Default::default()
    }
}

#[tokio::test]
async fn enforcement_denies_access_without_a_grant_in_its_namespaces_only() {
    let h = harness(standard_lookup(), enforcing(NS)).await;
    let response = h.review(AUDIT_PATH, alice_exec()).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).starts_with("alice has no active access request for pod team-a/web-0"),
        "{response}"
    );
    assert_eq!(response["auditAnnotations"]["grant"], "none");
    let record = &h.audit_records()[0];
    assert!(!record.allowed);
    assert!(record.denied_because.is_some());

    // Cluster admins are exempt by default.
    let admin = exec_review(
        user("root", &["system:masters"]),
        "web-0",
        "exec",
        json!({"command": ["sh"]}),
    );
    assert_eq!(h.review(AUDIT_PATH, admin).await["allowed"], true);

    // Elsewhere nothing is enforced.
    let h = harness(standard_lookup(), enforcing("prod")).await;
    assert_eq!(h.review(AUDIT_PATH, alice_exec()).await["allowed"], true);
}

/// What a denial says is read from the lookup's memory: the pod's workload and the templates
/// that target it, each named with the command that asks through it.
#[tokio::test]
async fn an_enforced_denial_names_the_templates_that_can_grant_the_pod() {
    use oz_api::{
        ControllerKind, SessionMode,
        grant_hint::{PodOwner, PodWorkload, TemplateTarget},
    };
    let web = PodWorkload {
        kind: ControllerKind::Deployment,
        name: "web".into(),
    };
    let mut lookup = standard_lookup();
    lookup.denial_facts = DenialFacts {
        owner: PodOwner::Workload(web.clone()),
        templates: vec![TemplateTarget {
            kind: AccessKind::Exec,
            name: "web".into(),
            workload: Some(web),
            allowed_groups: vec!["devs".into()],
            session_mode: SessionMode::Direct,
            hub: None,
            names_clusters: false,
        }],
        ready: Vec::new(),
    };
    let h = harness(lookup, enforcing(NS)).await;
    let response = h.review(AUDIT_PATH, alice_exec()).await;
    assert_eq!(response["allowed"], false);
    let told = "alice has no active access request for pod team-a/web-0; ExecAccessTemplate \
                web can grant it to alice: ozctl create exec web --target-pod web-0 -n team-a";
    assert_eq!(message(&response), told, "{response}");
    // The audit trail keeps what the user was told.
    assert_eq!(response["auditAnnotations"]["denied"], told);
    assert_eq!(h.audit_records()[0].denied_because.as_deref(), Some(told));
}

#[tokio::test]
async fn enforcement_allows_a_granted_user_and_fails_closed_on_lookup_errors() {
    let lookup = standard_lookup().with_request(ready(AccessKind::Exec, "alices", "web", "alice"));
    let h = harness(lookup, enforcing(NS)).await;
    assert_eq!(h.review(AUDIT_PATH, alice_exec()).await["allowed"], true);

    let mut broken = standard_lookup();
    broken.broken = true;
    let h = harness(broken, enforcing(NS)).await;
    let response = h.review(AUDIT_PATH, alice_exec()).await;
    assert_eq!(response["allowed"], false);
    assert!(message(&response).contains("could not check"), "{response}");
}

#[test]
fn the_event_reads_like_ozs() {
    let review = alice_exec();
    let request = parse_review(review.to_string().as_bytes()).unwrap();
    let action = audit::pod_action(&request).unwrap();
    let unverified = audit::describe(&request, action, &Caller::Unverified);
    assert_eq!(
        events::event_note(&unverified, 0),
        format!(
            "CONNECT/exec operation on Pod web-0 (container: app) by alice (interactive: true){}",
            events::UNVERIFIED_NOTE
        ),
        "anyone could have sent it: the Event says so"
    );
    let mut record = audit::describe(&request, action, &apiserver());
    assert_eq!(
        events::event_note(&record, 0),
        "CONNECT/exec operation on Pod web-0 (container: app) by alice (interactive: true)"
    );
    assert_eq!(
        events::event_note(&record, 12),
        "CONNECT/exec operation on Pod web-0 (container: app) by alice (interactive: true); \
         12 more execs by alice since this pod's last such Event were recorded in oz's audit log only"
    );
    let event = events::audit_event(action, &record, 0);
    assert_eq!(
        (event.reason.as_str(), event.action.as_str()),
        ("PodExec", "RecordedExec")
    );
    assert!(event.secondary.is_none());

    record.grant = Some(Grant {
        kind: "ExecAccessRequest".into(),
        name: "alices".into(),
        template: "web".into(),
        approvers: Vec::new(),
        extensions: Vec::new(),
    });
    let related = events::audit_event(action, &record, 0).secondary.unwrap();
    assert_eq!(related.kind.as_deref(), Some("ExecAccessRequest"));
    assert_eq!(related.name.as_deref(), Some("alices"));
    assert_eq!(related.namespace.as_deref(), Some(NS));
    assert_eq!(
        related.api_version.as_deref(),
        Some("crds.wizardofoz.co/v1alpha1")
    );
}

#[tokio::test]
async fn the_record_names_the_approvers_of_the_grant_and_its_extensions() {
    // The summary the lookups make of a request approved by bob, then dave, and extended twice
    // (a third ask denied).
    let request: oz_api::ExecAccessRequest = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
        "metadata": {"name": "alices", "namespace": NS},
        "spec": {"templateName": "web", "requester": {"username": "alice", "groups": ["devs"]}},
        "status": {
            "phase": "Ready", "podName": "web-0", "approvedAt": "2026-11-21T00:01:00Z",
            "expiresAt": "2099-01-01T00:00:00Z",
            "approvals": [
                {"approver": "bob", "at": "2026-11-21T00:00:00Z", "name": "alices-bob"},
                {"approver": "dave", "at": "2026-11-21T00:01:00Z", "name": "alices-dave", "comment": "ok"},
            ],
            "extensions": [
                {"number": 1, "by": "30m", "askedBy": "alice", "phase": "Granted", "added": "30m",
                 "approvals": [{"approver": "dave", "at": "2026-11-21T00:31:00Z", "name": "x"}]},
                {"number": 2, "by": "1h", "askedBy": "alice", "phase": "Denied"},
                {"number": 3, "by": "2h", "askedBy": "alice", "phase": "Granted", "added": "1h",
                 "approvals": [{"approver": "bob", "at": "2026-11-21T00:41:00Z", "name": "y"},
                               {"approver": "dave", "at": "2026-11-21T00:42:00Z", "name": "z"}]},
            ],
        },
    }))
    .unwrap();
    let lookup = standard_lookup().with_request(GrantSummary::of(&request));
    let h = harness(lookup, EnforceSettings::default()).await;
    let response = h.review(AUDIT_PATH, alice_exec()).await;
    assert_eq!(
        response["auditAnnotations"],
        json!({"grant": "ExecAccessRequest/alices", "template": "web", "approvers": "bob,dave"})
    );
    let records = h.audit_records();
    let grant = records[0].grant.as_ref().unwrap();
    assert_eq!(grant.approvers, ["bob", "dave"]);
    let line = std::fs::read_to_string(h.audit_file.path()).unwrap();
    let raw: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(raw["grant"]["approvers"], json!(["bob", "dave"]));
    assert_eq!(
        raw["grant"]["extensions"],
        json!([
            "+30m asked by alice, approved by dave",
            "+1h asked by alice, approved by bob, dave"
        ])
    );
}

#[tokio::test]
async fn a_lock_takes_the_grant_away_from_the_exec_at_once() {
    // alice's grant is Ready; a lock on her group in this namespace holds: the record names no
    // grant, before oz has revoked anything.
    let lookup = standard_lookup().with_request(ready(AccessKind::Exec, "alices", "web", "alice"));
    let lock = oz_api::AccessLock::new(
        "devs-freeze",
        serde_json::from_value(json!({"group": "devs", "namespace": NS, "reason": "freeze"}))
            .unwrap(),
    );
    let h = locked_harness(lookup, vec![lock]);
    let response = h.review(AUDIT_PATH, alice_exec()).await;
    assert_eq!(response["auditAnnotations"]["grant"], "none", "{response}");
    assert_eq!(h.audit_records()[0].grant, None);
}
