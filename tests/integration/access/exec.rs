//! Exec access end to end: a real oz-manager process against the real control plane. alice and
//! carol are in devs, bob is not. Requests are created by admin with `spec.requester` set the way
//! oz's admission webhook sets it.

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::rbac::v1::{Role, RoleBinding},
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use oz_api::{ExecAccessRequest, ExecAccessTemplate, RequestPhase, condition_type};
use oz_testenv::workloads::{self, WorkloadSpec};
use serde_json::json;

use crate::notifications::{TestSink, events, of_request, sink_secret};
use crate::support::{
    cluster::{env, install_crds},
    fixture::Fixture,
    manifests::create_manifest,
    operator::Operator,
    polling::{event_reasons_once, eventually},
    timing::strict_timing,
    users::can_exec,
};

/// The exec tests' requests through `web-exec`, made as their users would get them.
trait ExecFixture {
    /// A namespace with Deployment `web` (2 ready pods), ExecAccessTemplate `web-exec` for devs
    /// (default 1h, max 2h), and an oz-manager watching it.
    async fn new(prefix: &str, template_extra: &str, operator_args: &[&str]) -> Fixture;

    fn requests(&self) -> Api<ExecAccessRequest>;

    /// Creates a request as `user` would get it through the webhook.
    async fn request(&self, name: &str, user: &str, spec_extra: &str) -> ExecAccessRequest;

    /// Waits until the request reaches `phase`.
    async fn wait_for(&self, name: &str, phase: RequestPhase) -> ExecAccessRequest;

    /// Touches request `name` (a label: its spec is immutable) and waits for the positive
    /// marker that a reconcile has run since: oz's log says it reconciled that version of it,
    /// or a later one.
    async fn reconciled_after_touch(&self, name: &str) -> ExecAccessRequest;

    async fn grant_objects_exist(&self, name: &str) -> (bool, bool);

    /// The reasons of the Events published about request `name`, once `reason` is among them.
    async fn events_once(&self, name: &str, reason: &str) -> Vec<String>;

    async fn oz_roles(&self) -> Vec<Role>;
}

impl ExecFixture for Fixture {
    async fn new(prefix: &str, template_extra: &str, operator_args: &[&str]) -> Fixture {
        Fixture::builder(prefix)
            .web(2)
            .manifest(template_yaml("web-exec", "web", template_extra))
            .operator_args(operator_args)
            .start()
            .await
    }

    fn requests(&self) -> Api<ExecAccessRequest> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    async fn request(&self, name: &str, user: &str, spec_extra: &str) -> ExecAccessRequest {
        let groups = match user {
            "bob" => "[qa, system:authenticated]",
            _ => "[devs, system:authenticated]",
        };
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\n\
             spec:\n  templateName: web-exec\n  requester: {{username: {user}, groups: {groups}}}\n{spec_extra}"
        );
        create_manifest(&self.admin, &self.ns, &yaml).await.unwrap();
        self.requests().get(name).await.unwrap()
    }

    async fn wait_for(&self, name: &str, phase: RequestPhase) -> ExecAccessRequest {
        let requests = self.requests();
        eventually(
            Duration::from_secs(20),
            &format!(
                "{name} to become {phase:?} (log: {})",
                self.operator.log.display()
            ),
            || {
                let requests = requests.clone();
                async move {
                    let request = requests.get(name).await.ok()?;
                    (request.status.as_ref()?.phase == Some(phase)).then_some(request)
                }
            },
        )
        .await
    }

    async fn reconciled_after_touch(&self, name: &str) -> ExecAccessRequest {
        static TOUCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let touch = TOUCHES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let touched = self
            .requests()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"touch": touch.to_string()}}})),
            )
            .await
            .unwrap();
        let version: u64 = touched.resource_version().unwrap().parse().unwrap();
        let (namespace, subject) = (format!("namespace={}", self.ns), format!("name={name} "));
        eventually(
            Duration::from_secs(20),
            &format!(
                "a reconcile of {name} at version {version} or later (log: {})",
                self.operator.log.display()
            ),
            || {
                let log = self.operator.log_text();
                let seen = log.lines().any(|line| {
                    line.contains("request reconciled")
                        && line.contains(&namespace)
                        && line.contains(&subject)
                        && line
                            .split_once("resource_version=")
                            .and_then(|(_, rest)| rest.split(' ').next()?.parse::<u64>().ok())
                            .is_some_and(|v| v >= version)
                });
                let requests = self.requests();
                async move {
                    if !seen {
                        return None;
                    }
                    requests.get(name).await.ok()
                }
            },
        )
        .await
    }

    async fn grant_objects_exist(&self, name: &str) -> (bool, bool) {
        let roles: Api<Role> = Api::namespaced(self.admin.clone(), &self.ns);
        let bindings: Api<RoleBinding> = Api::namespaced(self.admin.clone(), &self.ns);
        (
            roles.get_opt(name).await.unwrap().is_some(),
            bindings.get_opt(name).await.unwrap().is_some(),
        )
    }

    async fn events_once(&self, name: &str, reason: &str) -> Vec<String> {
        event_reasons_once(&self.admin, &self.ns, name, reason, Duration::from_secs(10)).await
    }

    async fn oz_roles(&self) -> Vec<Role> {
        let roles: Api<Role> = Api::namespaced(self.admin.clone(), &self.ns);
        roles
            .list(&ListParams::default().labels("app.kubernetes.io/managed-by=oz"))
            .await
            .unwrap()
            .items
    }
}

fn template_yaml(name: &str, deployment: &str, extra: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {name}}}\nspec:\n  \
         accessConfig:\n    allowedGroups: [devs]\n    defaultDuration: 1h\n    maxDuration: 2h\n{extra}  \
         controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {deployment}}}\n"
    )
}

fn condition<'a>(request: &'a ExecAccessRequest, type_: &str) -> &'a oz_api::Condition {
    let status = request.status.as_ref().unwrap();
    status
        .conditions
        .iter()
        .find(|c| c.type_() == type_)
        .unwrap_or_else(|| panic!("no {type_} condition: {status:?}"))
}

fn grant_name(request: &ExecAccessRequest) -> String {
    format!("{}-{}", request.name_any(), &request.uid().unwrap()[..8])
}

#[tokio::test]
async fn alice_gets_exec_on_the_recorded_pod_only_and_no_one_else_does() {
    let f = Fixture::new("exec-scope", "", &[]).await;
    let request = f.request("alice-web", "alice", "  duration: 5m\n").await;
    let ready = f.wait_for("alice-web", RequestPhase::Ready).await;
    let status = ready.status.as_ref().unwrap();
    let pod = status.pod_name.clone().unwrap();
    assert!(
        f.web().pod_names().contains(&pod),
        "{pod} is one of web's pods"
    );

    // Oz scenario 5: all conditions True with Oz's messages, ready, accessMessage rendered.
    assert!(status.ready);
    assert_eq!(
        condition(&ready, condition_type::ACCESS_DURATIONS_VALID).message,
        "Access requested custom duration (5m0s)"
    );
    let name = grant_name(&request);
    assert_eq!(
        condition(&ready, condition_type::ACCESS_RESOURCES_CREATED).message,
        format!("Success. Role {name}, RoleBinding {name} created")
    );
    assert_eq!(
        status.access_message.as_deref(),
        Some(format!("kubectl exec -ti -n {} {pod} -- /bin/sh", f.ns).as_str())
    );
    let created = ready.metadata.creation_timestamp.clone().unwrap().0;
    let expires = status.expires_at.clone().unwrap().0;
    assert_eq!(expires.duration_since(created).as_secs(), 300);

    // Least privilege: one pod, exactly the verbs exec needs.
    let roles: Api<Role> = Api::namespaced(f.admin.clone(), &f.ns);
    let role = roles.get(&name).await.unwrap();
    let rules = role.rules.clone().unwrap();
    assert_eq!(rules.len(), 2);
    for rule in &rules {
        assert_eq!(rule.resource_names.as_deref(), Some(&[pod.clone()][..]));
    }
    assert_eq!(role.owner_references()[0].uid, request.uid().unwrap());
    assert_eq!(role.owner_references()[0].controller, Some(true));
    assert_eq!(
        role.labels()
            .get("oz.wizardofoz.co/request")
            .map(String::as_str),
        Some("alice-web")
    );
    let bindings: Api<RoleBinding> = Api::namespaced(f.admin.clone(), &f.ns);
    let subjects = bindings.get(&name).await.unwrap().subjects.unwrap();
    assert_eq!(
        subjects
            .iter()
            .map(|s| (s.kind.as_str(), s.name.as_str()))
            .collect::<Vec<_>>(),
        [("User", "alice")]
    );
    // The request is owned by its template, as in Oz.
    assert_eq!(ready.owner_references()[0].kind, "ExecAccessTemplate");
    // One Event says it all: made and ready in one pass, exec access is announced once.
    let reasons = f.events_once("alice-web", "Ready").await;
    assert_eq!(reasons, ["Ready"]);

    // What the apiserver says, asked by each user.
    let other = f.web().pod_names().into_iter().find(|p| *p != pod).unwrap();
    assert!(
        can_exec("alice", &f.ns, &pod).await,
        "alice may exec into {pod}"
    );
    assert!(
        !can_exec("alice", &f.ns, &other).await,
        "alice may not exec into {other}"
    );
    assert!(!can_exec("carol", &f.ns, &pod).await, "carol did not ask");
    assert!(!can_exec("bob", &f.ns, &pod).await, "bob is not in devs");

    // The choice never changes across reconciles (Oz re-picked every 5 minutes): once a
    // reconcile has seen a later version of the request, the pod is the same.
    let again = f.reconciled_after_touch("alice-web").await;
    assert_eq!(again.status.unwrap().pod_name, Some(pod.clone()));
    let role = roles.get(&name).await.unwrap();
    assert_eq!(
        role.rules.unwrap()[0].resource_names.as_deref(),
        Some(&[pod][..])
    );
}

#[tokio::test]
async fn allowed_groups_grants_every_member_of_devs_as_oz_does() {
    let f = Fixture::new("exec-groups", "    grantTo: AllowedGroups\n", &[]).await;
    f.request("alice-web", "alice", "").await;
    let ready = f.wait_for("alice-web", RequestPhase::Ready).await;
    let pod = ready.status.unwrap().pod_name.unwrap();
    assert!(can_exec("alice", &f.ns, &pod).await);
    assert!(can_exec("carol", &f.ns, &pod).await);
    assert!(!can_exec("bob", &f.ns, &pod).await);

    // Editing the template after the grant does not widen it.
    let templates: Api<ExecAccessTemplate> = Api::namespaced(f.admin.clone(), &f.ns);
    templates
        .patch(
            "web-exec",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"accessConfig": {"allowedGroups": ["devs", "qa"]}}})),
        )
        .await
        .unwrap();
    // A reconcile after the edit (the template's change wakes it too; this one is seen).
    f.reconciled_after_touch("alice-web").await;
    assert!(
        !can_exec("bob", &f.ns, &pod).await,
        "a template edit must not widen an existing grant"
    );
    assert!(can_exec("carol", &f.ns, &pod).await);
}

#[tokio::test]
async fn bob_is_denied_and_nothing_is_created() {
    let f = Fixture::new("exec-denied", "", &[]).await;
    f.request("bob-web", "bob", "").await;
    let denied = f.wait_for("bob-web", RequestPhase::Denied).await;
    let reason = condition(&denied, "RequesterAllowed");
    assert_eq!(reason.status(), "False");
    assert_eq!(reason.reason(), "NotAllowed");
    assert!(
        reason
            .message
            .contains("\"bob\" is not in any of the template's allowedGroups (devs)"),
        "{}",
        reason.message
    );
    assert!(!denied.status.unwrap().ready);
    // The Denied status and Event are written by the pass that decided, and Denied is final:
    // no later pass builds anything.
    f.events_once("bob-web", "Denied").await;
    assert!(
        f.oz_roles().await.is_empty(),
        "a denied request creates nothing"
    );
    for pod in f.web().pod_names() {
        assert!(!can_exec("bob", &f.ns, &pod).await);
    }
}

#[tokio::test]
async fn access_ends_within_a_second_of_expires_at() {
    let f = Fixture::new("exec-expiry", "", &[]).await;
    // From before the grant is made until its end is measured: never under a burst.
    let _timing = strict_timing().await;
    f.request("alice-short", "alice", "  duration: 3s\n").await;
    let ready = f.wait_for("alice-short", RequestPhase::Ready).await;
    let status = ready.status.unwrap();
    let pod = status.pod_name.unwrap();
    let expires_at = status.expires_at.unwrap().0;
    assert!(
        Timestamp::now() < expires_at,
        "the grant should still be valid"
    );
    assert!(
        can_exec("alice", &f.ns, &pod).await,
        "alice may exec before expiry"
    );

    let lag = eventually(Duration::from_secs(10), "alice's access to end", || {
        let (ns, pod) = (f.ns.clone(), pod.clone());
        async move { (!can_exec("alice", &ns, &pod).await).then(Timestamp::now) }
    })
    .await
    .duration_since(expires_at)
    .as_secs_f64();
    assert!(lag < 1.0, "access outlived expiresAt by {lag:.3}s");

    let expired = f.wait_for("alice-short", RequestPhase::Expired).await;
    let still_valid = condition(&expired, condition_type::ACCESS_STILL_VALID);
    assert_eq!(
        (
            still_valid.status(),
            still_valid.reason(),
            still_valid.message.as_str()
        ),
        ("False", "Timeout", "Access expired")
    );
    assert_eq!(
        f.grant_objects_exist(&grant_name(&expired)).await,
        (false, false)
    );
}

/// A grant is announced as expiring soon at `expiresAt` less the template's
/// `expiringSoonBefore`, by the reconcile its expiry timer asks for then (long after the last
/// watch event of the grant), and as expired at its end: through a real sink.
#[tokio::test]
async fn a_grant_is_announced_as_expiring_soon_on_time_then_as_expired() {
    const BEFORE: Duration = Duration::from_secs(8);
    let sink = TestSink::start().await;
    let prepared = Fixture::builder("exec-soon")
        .web(2)
        .manifest(template_yaml(
            "web-exec",
            "web",
            "    notifications: {expiringSoonBefore: 8s}\n",
        ))
        // The test's sink listens on 127.0.0.1.
        .operator_args(&["--notifications-allow-sinks-in=loopback"])
        .prepare()
        .await;
    // Before oz starts, so that its first list of sinks has it: made later, the watch might
    // not have it yet when the Ready notice is sent.
    let (admin, ns) = (&prepared.admin, &prepared.ns);
    sink_secret(admin, ns, "oz-notifications", &sink.url, None, true).await;
    let f = prepared.start();
    f.request("soon", "alice", "  duration: 20s\n").await;
    let ready = f.wait_for("soon", RequestPhase::Ready).await;
    let expires_at = ready.status.unwrap().expires_at.unwrap().0;

    let received = sink.wait_for(3, "ready, expiringsoon and expired").await;
    assert_eq!(
        of_request(&events(&received), &format!("{}/soon", f.ns)),
        ["ready", "expiringsoon", "expired"],
        "{received:?}"
    );
    let sent_at: Timestamp = received[1].body["time"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("a CloudEvent time: {:?}", received[1].body));
    let soon = expires_at - BEFORE;
    assert!(
        soon <= sent_at && sent_at < expires_at,
        "announced as expiring soon at {sent_at}, not between {soon} and {expires_at}"
    );
}

#[tokio::test]
async fn a_grant_is_revoked_on_time_across_operator_restarts() {
    let mut f = Fixture::new("exec-restart", "", &[]).await;
    let _timing = strict_timing().await;
    f.request("alice-restart", "alice", "  duration: 12s\n")
        .await;
    let ready = f.wait_for("alice-restart", RequestPhase::Ready).await;
    let status = ready.status.unwrap();
    let (pod, expires_at) = (status.pod_name.unwrap(), status.expires_at.unwrap().0);

    // Restarted while the grant is active: once the new process has reconciled the request,
    // the grant is still there (and its timer re-armed).
    f.operator.restart();
    f.reconciled_after_touch("alice-restart").await;
    assert!(
        Timestamp::now() < expires_at,
        "the test needs the grant to outlive the restart"
    );
    assert!(
        can_exec("alice", &f.ns, &pod).await,
        "the grant survives a restart"
    );

    // Down at expiry: nothing revokes, so the grant is overdue until the operator is back.
    f.operator.kill();
    let wait = expires_at.duration_since(Timestamp::now()).as_secs_f64() + 1.5;
    tokio::time::sleep(Duration::from_secs_f64(wait.max(0.0))).await;
    assert!(
        can_exec("alice", &f.ns, &pod).await,
        "with oz down nothing revokes (this is the overdue case)"
    );

    f.operator.restart();
    let restarted = Instant::now();
    eventually(
        Duration::from_secs(10),
        "the overdue grant to be revoked",
        || {
            let (ns, pod) = (f.ns.clone(), pod.clone());
            async move { (!can_exec("alice", &ns, &pod).await).then_some(()) }
        },
    )
    .await;
    let after = restarted.elapsed();
    assert!(
        after < Duration::from_secs(3),
        "overdue grant revoked {after:?} after the restart"
    );
    f.wait_for("alice-restart", RequestPhase::Expired).await;
}

#[tokio::test]
async fn with_no_history_retention_an_expired_request_is_deleted_as_in_oz() {
    let f = Fixture::new("exec-noretain", "", &["--history-retention=0"]).await;
    let request = f.request("alice-gone", "alice", "  duration: 2s\n").await;
    f.wait_for("alice-gone", RequestPhase::Ready).await;
    let requests = f.requests();
    eventually(
        Duration::from_secs(10),
        "the expired request to be deleted",
        || {
            let requests = requests.clone();
            async move {
                requests
                    .get_opt("alice-gone")
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    assert_eq!(
        f.grant_objects_exist(&grant_name(&request)).await,
        (false, false)
    );
}

#[tokio::test]
async fn durations_default_and_clamp_with_ozs_messages() {
    let f = Fixture::new("exec-durations", "", &[]).await;
    f.request("default", "alice", "").await;
    f.request("long", "alice", "  duration: 3h\n").await;
    let defaulted = f.wait_for("default", RequestPhase::Ready).await;
    assert_eq!(
        condition(&defaulted, condition_type::ACCESS_DURATIONS_VALID).message,
        "Access request duration defaulting to template duration time (1h0m0s)"
    );
    let clamped = f.wait_for("long", RequestPhase::Ready).await;
    assert_eq!(
        condition(&clamped, condition_type::ACCESS_DURATIONS_VALID).message,
        "Access requested duration (3h0m0s) larger than template maximum duration (2h0m0s)"
    );
    let status = clamped.status.unwrap();
    let granted = status
        .expires_at
        .unwrap()
        .0
        .duration_since(clamped.metadata.creation_timestamp.unwrap().0);
    assert_eq!(granted.as_secs(), 7200);
}

#[tokio::test]
async fn a_target_pod_is_honoured_and_a_bad_one_is_explained() {
    let f = Fixture::new("exec-targetpod", "", &[]).await;
    let wanted = f.web().pod_names()[1].clone();
    f.request("chosen", "alice", &format!("  targetPod: {wanted}\n"))
        .await;
    let ready = f.wait_for("chosen", RequestPhase::Ready).await;
    assert_eq!(
        ready.status.as_ref().unwrap().pod_name.as_deref(),
        Some(wanted.as_str())
    );
    let roles: Api<Role> = Api::namespaced(f.admin.clone(), &f.ns);
    let role = roles.get(&grant_name(&ready)).await.unwrap();
    assert_eq!(
        role.rules.unwrap()[0].resource_names.as_deref(),
        Some(&[wanted][..])
    );

    // Oz scenario 6: a pod that does not exist.
    f.request("ghost", "alice", "  targetPod: ghost\n").await;
    let failed = f.wait_for("ghost", RequestPhase::Failed).await;
    let created = condition(&failed, condition_type::ACCESS_RESOURCES_CREATED);
    assert_eq!((created.status(), created.reason()), ("False", "Failure"));
    assert!(
        created.message.contains("pod named ghost not found"),
        "{}",
        created.message
    );
    assert!(!failed.status.unwrap().ready);

    // A pod of another workload.
    let other = workloads::deployment(&f.admin, &f.ns, WorkloadSpec::new("db", 1))
        .await
        .unwrap();
    f.request(
        "stranger",
        "alice",
        &format!("  targetPod: {}\n", other.pod_names()[0]),
    )
    .await;
    let failed = f.wait_for("stranger", RequestPhase::Failed).await;
    let message = &condition(&failed, condition_type::ACCESS_RESOURCES_CREATED).message;
    assert!(
        message.contains("is not part of Deployment \"web\"") && message.contains("app=web"),
        "{message}"
    );
    assert_eq!(
        f.oz_roles().await.len(),
        1,
        "only the valid request has a Role"
    );
}

#[tokio::test]
async fn bad_input_gives_a_condition_and_no_access_resources() {
    let f = Fixture::new("exec-badinput", "", &[]).await;
    // Oz scenario 11: a missing template.
    let yaml = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {name: nope}\n\
                spec: {templateName: nope, requester: {username: alice, groups: [devs]}}\n";
    create_manifest(&f.admin, &f.ns, yaml).await.unwrap();
    let failed = f.wait_for("nope", RequestPhase::Failed).await;
    let exists = condition(&failed, condition_type::TARGET_TEMPLATE_EXISTS);
    assert_eq!((exists.status(), exists.reason()), ("False", "NotFound"));
    assert!(
        exists.message.starts_with("Error: template does not exist"),
        "{}",
        exists.message
    );

    // A template whose workload has no running pods.
    let admin = f.admin.clone();
    workloads::deployment(&admin, &f.ns, WorkloadSpec::new("idle", 0))
        .await
        .unwrap();
    create_manifest(&admin, &f.ns, &template_yaml("idle-exec", "idle", ""))
        .await
        .unwrap();
    let yaml = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {name: idle}\n\
                spec: {templateName: idle-exec, requester: {username: alice, groups: [devs]}}\n";
    create_manifest(&admin, &f.ns, yaml).await.unwrap();
    let failed = f.wait_for("idle", RequestPhase::Failed).await;
    let message = &condition(&failed, condition_type::ACCESS_RESOURCES_CREATED).message;
    assert!(
        message.contains("no running pods of Deployment \"idle\""),
        "{message}"
    );
    assert!(f.oz_roles().await.is_empty());

    // The missing template appears: the request proceeds without a poll interval.
    create_manifest(&admin, &f.ns, &template_yaml("nope", "web", ""))
        .await
        .unwrap();
    f.wait_for("nope", RequestPhase::Ready).await;
}

#[tokio::test]
async fn deleted_access_objects_are_recreated_while_the_grant_is_valid() {
    let f = Fixture::new("exec-heal", "", &[]).await;
    let request = f.request("alice-web", "alice", "").await;
    let ready = f.wait_for("alice-web", RequestPhase::Ready).await;
    let pod = ready.status.unwrap().pod_name.unwrap();
    let name = grant_name(&request);
    let bindings: Api<RoleBinding> = Api::namespaced(f.admin.clone(), &f.ns);
    bindings
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let roles: Api<Role> = Api::namespaced(f.admin.clone(), &f.ns);
    roles.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the Role and RoleBinding to come back",
        || async { (f.grant_objects_exist(&name).await == (true, true)).then_some(()) },
    )
    .await;
    assert!(can_exec("alice", &f.ns, &pod).await);
}

#[tokio::test]
async fn deleting_a_request_or_its_template_revokes_access() {
    let f = Fixture::new("exec-delete", "", &[]).await;
    let first = f.request("first", "alice", "").await;
    let second = f.request("second", "alice", "").await;
    let pod = f
        .wait_for("first", RequestPhase::Ready)
        .await
        .status
        .unwrap()
        .pod_name
        .unwrap();
    f.wait_for("second", RequestPhase::Ready).await;

    // Deleting the request: its Role and RoleBinding go with it (owner references + GC).
    f.requests()
        .delete("first", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(15),
        "first's grant objects to be collected",
        || async {
            (f.grant_objects_exist(&grant_name(&first)).await == (false, false)).then_some(())
        },
    )
    .await;

    // Oz scenario 12: deleting the template cascades through its requests.
    let templates: Api<ExecAccessTemplate> = Api::namespaced(f.admin.clone(), &f.ns);
    templates
        .delete("web-exec", &DeleteParams::default())
        .await
        .unwrap();
    let requests = f.requests();
    eventually(
        Duration::from_secs(20),
        "the template's request and grant to be collected",
        || {
            let requests = requests.clone();
            let second = &second;
            let f = &f;
            async move {
                let gone = requests.get_opt("second").await.unwrap().is_none();
                (gone && f.grant_objects_exist(&grant_name(second)).await == (false, false))
                    .then_some(())
            }
        },
    )
    .await;
    assert!(!can_exec("alice", &f.ns, &pod).await);
}

#[tokio::test]
async fn a_template_notices_its_target_appearing_without_polling() {
    install_crds().await;
    let ns = env().namespace("tpl-watch").await.unwrap();
    let admin = env().admin().await.unwrap();
    let _operator = Operator::start(&ns, &[]);
    // Oz scenario 3: the target is missing...
    create_manifest(&admin, &ns, &template_yaml("later", "later", ""))
        .await
        .unwrap();
    let templates: Api<ExecAccessTemplate> = Api::namespaced(admin.clone(), &ns);
    let missing = eventually(Duration::from_secs(15), "TargetRefExists=False", || {
        let templates = templates.clone();
        async move {
            let t = templates.get("later").await.ok()?;
            let status = t.status?;
            status
                .conditions
                .iter()
                .any(|c| c.type_() == "TargetRefExists" && c.status() == "False")
                .then_some(status)
        }
    })
    .await;
    assert!(!missing.ready);
    let target = missing
        .conditions
        .iter()
        .find(|c| c.type_() == "TargetRefExists")
        .unwrap();
    assert_eq!(target.reason(), "NotFound");
    assert!(target.message.starts_with("Error:"), "{}", target.message);

    // ...then created: the watch makes the template ready within seconds (Oz: up to 5 minutes).
    workloads::deployment(&admin, &ns, WorkloadSpec::new("later", 1))
        .await
        .unwrap();
    let ready = eventually(
        Duration::from_secs(10),
        "the template to become ready",
        || {
            let templates = templates.clone();
            async move {
                templates
                    .get("later")
                    .await
                    .ok()?
                    .status
                    .filter(|s| s.ready)
            }
        },
    )
    .await;
    // Oz scenario 1: the conditions and their messages.
    let durations = ready
        .conditions
        .iter()
        .find(|c| c.type_() == "TemplateDurationsValid")
        .unwrap();
    assert_eq!(
        durations.message,
        "spec.defaultDuration and spec.maxDuration valid"
    );

    // And disappearing again.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(admin, &ns);
    deployments
        .delete("later", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the template to become not ready",
        || {
            let templates = templates.clone();
            async move {
                templates
                    .get("later")
                    .await
                    .ok()?
                    .status
                    .filter(|s| !s.ready)
            }
        },
    )
    .await;
}

#[tokio::test]
async fn an_expired_request_is_kept_for_its_history_retention_then_deleted() {
    let retention = 20.0;
    let f = Fixture::new("exec-retain", "", &["--history-retention=20s"]).await;
    f.request("alice-kept", "alice", "  duration: 2s\n").await;
    let expired = f.wait_for("alice-kept", RequestPhase::Expired).await;
    let expires_at = expired.status.clone().unwrap().expires_at.unwrap().0;
    assert_eq!(
        f.grant_objects_exist(&grant_name(&expired)).await,
        (false, false),
        "kept as a record, with its access revoked"
    );
    // Watched until it goes: when it was last seen (Expired), and when it was gone.
    let requests = f.requests();
    let mut last_seen = Timestamp::now();
    let deadline = Instant::now() + Duration::from_secs(90);
    let gone_at = loop {
        let before = Timestamp::now();
        match requests.get_opt("alice-kept").await.unwrap() {
            Some(r) => {
                assert_eq!(r.status.and_then(|s| s.phase), Some(RequestPhase::Expired));
                last_seen = before;
            }
            None => break Timestamp::now(),
        }
        assert!(
            Instant::now() < deadline,
            "the expired request was never deleted (log: {})",
            f.operator.log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let kept = last_seen.duration_since(expires_at).as_secs_f64();
    let deleted = gone_at.duration_since(expires_at).as_secs_f64();
    eprintln!(
        "retention {retention}s: last seen {kept:.1}s after expiresAt, gone {deleted:.1}s after"
    );
    assert!(
        kept >= retention / 2.0,
        "deleted too early: last seen {kept:.1}s into a {retention}s retention"
    );
    assert!(
        deleted < retention + 15.0,
        "kept {deleted:.1}s past expiresAt with a {retention}s retention"
    );
}

#[tokio::test]
async fn lowering_a_templates_max_duration_shortens_existing_grants_raising_it_never_lengthens() {
    // Template: default 1h, max 2h.
    let f = Fixture::new("exec-maxdown", "", &[]).await;
    f.request("long", "alice", "  duration: 2h\n").await;
    f.request("short", "alice", "  duration: 10m\n").await;
    let long = f.wait_for("long", RequestPhase::Ready).await;
    let short = f.wait_for("short", RequestPhase::Ready).await;
    let created = |r: &ExecAccessRequest| r.metadata.creation_timestamp.clone().unwrap().0;
    let expires = |r: &ExecAccessRequest| r.status.as_ref().unwrap().expires_at.clone().unwrap().0;
    let after = |r: &ExecAccessRequest| expires(r).duration_since(created(r)).as_secs();
    assert_eq!((after(&long), after(&short)), (7200, 600));
    let pod = long.status.clone().unwrap().pod_name.unwrap();

    let templates: Api<ExecAccessTemplate> = Api::namespaced(f.admin.clone(), &f.ns);
    let set_durations = |default: &'static str, max: &'static str| {
        let templates = templates.clone();
        async move {
            templates
                .patch(
                    "web-exec",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"accessConfig": {
                        "defaultDuration": default, "maxDuration": max}}})),
                )
                .await
                .unwrap();
        }
    };
    // Lowered to 30m: the 2h grant now ends 30m after its creation; the 10m one is unchanged.
    set_durations("20m", "30m").await;
    let requests = f.requests();
    let shortened = eventually(
        Duration::from_secs(20),
        "the 2h grant to be shortened to 30m",
        || {
            let requests = requests.clone();
            async move {
                let r = requests.get("long").await.ok()?;
                (after(&r) == 1800).then_some(r)
            }
        },
    )
    .await;
    assert_eq!(
        condition(&shortened, condition_type::ACCESS_DURATIONS_VALID).message,
        "Access requested duration (2h0m0s) larger than template maximum duration (30m0s)"
    );
    let short = f.reconciled_after_touch("short").await;
    assert_eq!(after(&short), 600);

    // Raised again: nothing grows back.
    set_durations("1h", "2h").await;
    let long = f.reconciled_after_touch("long").await;
    assert_eq!(
        after(&long),
        1800,
        "raising the maximum never lengthens a grant"
    );
    assert!(can_exec("alice", &f.ns, &pod).await);

    // Lowered below the grants' age: both end now.
    set_durations("1s", "1s").await;
    for name in ["long", "short"] {
        let expired = f.wait_for(name, RequestPhase::Expired).await;
        assert_eq!(
            f.grant_objects_exist(&grant_name(&expired)).await,
            (false, false)
        );
    }
    assert!(!can_exec("alice", &f.ns, &pod).await);
}
