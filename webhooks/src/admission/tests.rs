//! Handler tests: AdmissionReviews in, through the router, without a socket or a cluster.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode},
};
use futures::future::BoxFuture;
use oz_api::{AccessConfig, AccessKind, RequestPhase, Requester};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::registration::{AUDIT_PATH, MUTATE_REQUESTS_PATH, VALIDATE_REQUESTS_PATH};

const NS: &str = "team-a";

/// Templates and requests in memory; `broken` makes every read fail.
#[derive(Default)]
struct FakeLookup {
    templates: BTreeMap<(AccessKind, String), AccessConfig>,
    requests: Vec<RequestSummary>,
    broken: bool,
}

impl FakeLookup {
    fn with_template(mut self, kind: AccessKind, name: &str, config: AccessConfig) -> Self {
        self.templates.insert((kind, name.into()), config);
        self
    }

    fn with_request(mut self, request: RequestSummary) -> Self {
        self.requests.push(request);
        self
    }
}

impl AccessLookup for FakeLookup {
    fn template(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<AccessConfig>, LookupError>> {
        let found = (namespace == NS)
            .then(|| self.templates.get(&(kind, name.to_string())).cloned())
            .flatten();
        let broken = self.broken;
        Box::pin(async move {
            if broken {
                return Err(LookupError("the apiserver is away".into()));
            }
            Ok(found)
        })
    }

    fn requests(&self, namespace: &str) -> BoxFuture<'_, Result<Vec<RequestSummary>, LookupError>> {
        let found = if namespace == NS {
            self.requests.clone()
        } else {
            Vec::new()
        };
        let broken = self.broken;
        Box::pin(async move {
            if broken {
                return Err(LookupError("the apiserver is away".into()));
            }
            Ok(found)
        })
    }
}

fn access_config(groups: &[&str], grant_to: Option<&str>) -> AccessConfig {
    let mut config = json!({
        "allowedGroups": groups,
        "defaultDuration": "1h",
        "maxDuration": "2h",
    });
    if let Some(grant_to) = grant_to {
        config["grantTo"] = json!(grant_to);
    }
    serde_json::from_value(config).unwrap()
}

fn standard_lookup() -> FakeLookup {
    FakeLookup::default()
        .with_template(AccessKind::Exec, "web", access_config(&["devs"], None))
        .with_template(AccessKind::Pod, "debug", access_config(&["devs"], None))
}

struct Harness {
    router: Router,
    audit_file: tempfile::NamedTempFile,
}

async fn harness(lookup: FakeLookup, enforce: EnforceSettings) -> Harness {
    let audit_file = tempfile::NamedTempFile::new().unwrap();
    let state = AdmissionState {
        lookup: Arc::new(lookup),
        audit_log: AuditLog::open(audit_file.path()).await.unwrap(),
        events: None,
        enforce,
        deletes: crate::admission::requests::DeletePolicy::new(
            ["system:masters".to_string()],
            "oz-system",
        ),
    };
    Harness {
        router: router(Arc::new(state)),
        audit_file,
    }
}

impl Harness {
    async fn post(&self, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
        let request = Request::post(path)
            .header("content-type", "application/json")
            .body(body.into())
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, body)
    }

    /// Posts a review and returns its `response`, which must come with HTTP 200.
    async fn review(&self, path: &str, review: Value) -> Value {
        let (status, body) = self.post(path, review.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(body["kind"], "AdmissionReview");
        assert_eq!(body["response"]["uid"], "review-uid", "the uid is echoed");
        body["response"].clone()
    }

    fn audit_records(&self) -> Vec<AuditRecord> {
        std::fs::read_to_string(self.audit_file.path())
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

fn user(name: &str, groups: &[&str]) -> Value {
    let mut groups: Vec<&str> = groups.to_vec();
    groups.push("system:authenticated");
    json!({ "username": name, "uid": format!("{name}-uid"), "groups": groups })
}

fn requester(name: &str, groups: &[&str]) -> Value {
    user(name, groups)
}

/// A v1 AdmissionReview of a request kind.
fn request_review(
    kind: &str,
    operation: &str,
    user_info: Value,
    object: Value,
    old_object: Value,
) -> Value {
    let resource = format!("{}s", kind.to_lowercase());
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "review-uid",
            "kind": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "resource": resource},
            "name": "req",
            "namespace": NS,
            "operation": operation,
            "userInfo": user_info,
            "object": object,
            "oldObject": old_object,
            "dryRun": false,
        }
    })
}

fn exec_request(spec: Value) -> Value {
    json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": "req", "namespace": NS},
        "spec": spec,
    })
}

fn stamped(spec: Value, who: &str, groups: &[&str]) -> Value {
    let mut spec = spec;
    spec["requester"] = requester(who, groups);
    spec
}

async fn create_as(h: &Harness, who: &str, groups: &[&str], spec: Value) -> Value {
    let review = request_review(
        "ExecAccessRequest",
        "CREATE",
        user(who, groups),
        exec_request(stamped(spec, who, groups)),
        Value::Null,
    );
    h.review(VALIDATE_REQUESTS_PATH, review).await
}

fn message(response: &Value) -> String {
    response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

// === Malformed bodies ===

#[tokio::test]
async fn malformed_bodies_get_400_with_a_reason() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    for path in [MUTATE_REQUESTS_PATH, VALIDATE_REQUESTS_PATH, AUDIT_PATH] {
        let (status, body) = h.post(path, "{not json").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        let reason = message(&body["response"]);
        assert!(reason.contains("not a valid AdmissionReview"), "{reason}");
        assert_eq!(body["response"]["allowed"], false);

        let (status, body) = h.post(path, "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

        let (status, body) = h
            .post(
                path,
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string(),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(message(&body["response"]).contains("no request"), "{body}");

        let mut old_version = request_review(
            "ExecAccessRequest",
            "CREATE",
            user("alice", &["devs"]),
            exec_request(json!({"templateName": "web"})),
            Value::Null,
        );
        old_version["apiVersion"] = json!("admission.k8s.io/v1beta1");
        let (status, body) = h.post(path, old_version.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            message(&body["response"]).contains("only admission.k8s.io/v1"),
            "{body}"
        );

        // A request whose operation is not one Kubernetes has.
        let mut bad_operation = request_review(
            "ExecAccessRequest",
            "CREATE",
            user("alice", &["devs"]),
            exec_request(json!({"templateName": "web"})),
            Value::Null,
        );
        bad_operation["request"]["operation"] = json!("EXPLODE");
        let (status, _) = h.post(path, bad_operation.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
    // And the server is still fine afterwards.
    let (status, _) = h.post(super::HEALTHZ_PATH, Body::empty()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let response = h
        .router
        .clone()
        .oneshot(
            Request::get(super::HEALTHZ_PATH)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn oversized_bodies_get_400_with_a_reason() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let mut review = request_review(
        "ExecAccessRequest",
        "CREATE",
        user("alice", &["devs"]),
        exec_request(json!({"templateName": "web"})),
        Value::Null,
    );
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"padding": "x".repeat(MAX_BODY_BYTES)});
    let (status, body) = h.post(VALIDATE_REQUESTS_PATH, review.to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message(&body["response"]).contains("limit"), "{body}");
}

// === Unknown kinds ===

#[tokio::test]
async fn request_webhooks_refuse_kinds_that_are_not_requests() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    for kind in ["ConfigMap", "ExecAccessTemplate"] {
        let mut review = request_review(
            kind,
            "CREATE",
            user("alice", &["devs"]),
            json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}}),
            Value::Null,
        );
        if kind == "ConfigMap" {
            review["request"]["kind"]["group"] = json!("");
        }
        for path in [MUTATE_REQUESTS_PATH, VALIDATE_REQUESTS_PATH] {
            let response = h.review(path, review.clone()).await;
            assert_eq!(response["allowed"], false, "{kind} at {path}");
            assert!(message(&response).contains("only admit"), "{response}");
        }
    }
}

// === Mutating: the requester ===

/// Applies the response's JSON patch to `object`.
fn patched(object: &Value, response: &Value) -> Value {
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["patchType"], "JSONPatch");
    // kube-core sends the patch bytes as a JSON array of numbers, which the apiserver accepts.
    let bytes: Vec<u8> = serde_json::from_value(response["patch"].clone()).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let mut object = object.clone();
    json_patch::patch(&mut object, &patch).unwrap();
    object
}

#[tokio::test]
async fn create_stamps_the_requester_over_a_forged_one() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let forged = exec_request(json!({
        "templateName": "web",
        "requester": {"username": "admin", "groups": ["system:masters"]},
    }));
    let review = request_review(
        "ExecAccessRequest",
        "CREATE",
        user("alice", &["devs"]),
        forged.clone(),
        Value::Null,
    );
    let response = h.review(MUTATE_REQUESTS_PATH, review).await;
    let object = patched(&forged, &response);
    assert_eq!(
        object["spec"]["requester"],
        json!({"username": "alice", "uid": "alice-uid", "groups": ["devs", "system:authenticated"]})
    );
    assert_eq!(object["spec"]["templateName"], "web", "the rest is kept");
}

#[tokio::test]
async fn create_stamps_the_requester_of_both_kinds_even_without_a_spec() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let bare = json!({"apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "PodAccessRequest", "metadata": {"name": "req"}});
    let review = request_review(
        "PodAccessRequest",
        "CREATE",
        json!({"username": "bob", "groups": ["qa"]}),
        bare.clone(),
        Value::Null,
    );
    let object = patched(&bare, &h.review(MUTATE_REQUESTS_PATH, review).await);
    assert_eq!(
        object["spec"]["requester"],
        json!({"username": "bob", "groups": ["qa"]}),
        "no uid is written when the authenticator gives none"
    );
}

#[tokio::test]
async fn mutation_leaves_updates_alone_and_refuses_anonymous_creates() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let object = exec_request(stamped(json!({"templateName": "web"}), "alice", &["devs"]));
    let update = request_review(
        "ExecAccessRequest",
        "UPDATE",
        user("bob", &["qa"]),
        object.clone(),
        object.clone(),
    );
    let response = h.review(MUTATE_REQUESTS_PATH, update).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");

    let anonymous = request_review(
        "ExecAccessRequest",
        "CREATE",
        json!({"groups": ["system:unauthenticated"]}),
        object,
        Value::Null,
    );
    let response = h.review(MUTATE_REQUESTS_PATH, anonymous).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).starts_with("spec.requester:"),
        "{response}"
    );
}

// === Validating: create ===

#[tokio::test]
async fn a_member_of_the_allowed_groups_may_create_a_request() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let response = create_as(
        &h,
        "alice",
        &["devs"],
        json!({"templateName": "web", "duration": "30m"}),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    // No duration means the template's default.
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], true, "{response}");
    // Longer than maxDuration is clamped later, as in Oz, not refused.
    let response = create_as(
        &h,
        "alice",
        &["devs"],
        json!({"templateName": "web", "duration": "72h"}),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn a_request_for_a_missing_template_is_refused() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "nope"})).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        message(&response),
        r#"spec.templateName: ExecAccessTemplate "nope" does not exist in namespace "team-a""#
    );
    // The template must be of the request's own family: "debug" is a PodAccessTemplate.
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "debug"})).await;
    assert_eq!(response["allowed"], false);
    assert!(message(&response).contains(r#"ExecAccessTemplate "debug" does not exist"#));
}

#[tokio::test]
async fn a_user_outside_the_allowed_groups_is_refused() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let response = create_as(&h, "bob", &["qa"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], false);
    let message = message(&response);
    assert!(
        message.starts_with("spec.requester: bob is not a member"),
        "{message}"
    );
    assert!(message.contains(r#"["devs"]"#), "{message}");
    assert!(message.contains(r#"ExecAccessTemplate "web""#), "{message}");
}

#[tokio::test]
async fn an_invalid_duration_is_refused_naming_the_field() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    for duration in ["abc", "1d", "-5m"] {
        let response = create_as(
            &h,
            "alice",
            &["devs"],
            json!({"templateName": "web", "duration": duration}),
        )
        .await;
        assert_eq!(response["allowed"], false, "{duration}");
        assert!(
            message(&response).starts_with("spec.duration: "),
            "{response}"
        );
    }
}

#[tokio::test]
async fn a_template_with_broken_durations_cannot_grant() {
    let mut broken = access_config(&["devs"], None);
    broken.default_duration = "3h".into();
    let h = harness(
        FakeLookup::default().with_template(AccessKind::Exec, "web", broken),
        EnforceSettings::default(),
    )
    .await;
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response)
            .starts_with(r#"spec.templateName: ExecAccessTemplate "web" cannot grant access"#),
        "{response}"
    );
}

#[tokio::test]
async fn a_requester_that_is_not_the_creator_is_refused() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    // As if the mutating webhook had not run: the spec names someone else, or no one.
    for spec in [
        stamped(json!({"templateName": "web"}), "carol", &["devs"]),
        json!({"templateName": "web"}),
    ] {
        let review = request_review(
            "ExecAccessRequest",
            "CREATE",
            user("alice", &["devs"]),
            exec_request(spec),
            Value::Null,
        );
        let response = h.review(VALIDATE_REQUESTS_PATH, review).await;
        assert_eq!(response["allowed"], false);
        assert!(
            message(&response)
                .starts_with("spec.requester: must be the user creating the request (alice)"),
            "{response}"
        );
    }
}

#[tokio::test]
async fn creates_fail_closed_when_templates_cannot_be_read() {
    let mut lookup = standard_lookup();
    lookup.broken = true;
    let h = harness(lookup, EnforceSettings::default()).await;
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("the apiserver is away"),
        "{response}"
    );
}

#[tokio::test]
async fn pod_access_requests_are_checked_against_pod_access_templates() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let object = |who: &str, groups: &[&str]| {
        json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "PodAccessRequest",
            "metadata": {"name": "req"},
            "spec": stamped(json!({"templateName": "debug", "duration": "2h"}), who, groups),
        })
    };
    let alice = request_review(
        "PodAccessRequest",
        "CREATE",
        user("alice", &["devs"]),
        object("alice", &["devs"]),
        Value::Null,
    );
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, alice).await["allowed"],
        true
    );
    let bob = request_review(
        "PodAccessRequest",
        "CREATE",
        user("bob", &["qa"]),
        object("bob", &["qa"]),
        Value::Null,
    );
    let response = h.review(VALIDATE_REQUESTS_PATH, bob).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains(r#"PodAccessTemplate "debug""#),
        "{response}"
    );
}

// === Validating: update ===

#[tokio::test]
async fn the_spec_of_a_request_cannot_change() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let old = exec_request(stamped(
        json!({"templateName": "web", "targetPod": "web-0", "duration": "1h"}),
        "alice",
        &["devs"],
    ));
    let update = |new: Value| {
        request_review(
            "ExecAccessRequest",
            "UPDATE",
            user("alice", &["devs"]),
            new,
            old.clone(),
        )
    };

    let mut longer = old.clone();
    longer["spec"]["duration"] = json!("9h");
    let response = h.review(VALIDATE_REQUESTS_PATH, update(longer)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        message(&response),
        "spec: a request cannot be changed after creation, only deleted"
    );

    let mut other_pod = old.clone();
    other_pod["spec"]["targetPod"] = json!("web-1");
    let response = h.review(VALIDATE_REQUESTS_PATH, update(other_pod)).await;
    assert_eq!(message(&response), requests::TARGET_POD_IMMUTABLE);

    let mut no_pod = old.clone();
    no_pod["spec"].as_object_mut().unwrap().remove("targetPod");
    let response = h.review(VALIDATE_REQUESTS_PATH, update(no_pod)).await;
    assert_eq!(message(&response), requests::TARGET_POD_IMMUTABLE);

    let mut takeover = old.clone();
    takeover["spec"]["requester"] = requester("bob", &["qa"]);
    let response = h.review(VALIDATE_REQUESTS_PATH, update(takeover)).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).starts_with("spec.requester: "),
        "{response}"
    );
}

#[tokio::test]
async fn metadata_and_status_updates_are_allowed() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let old = exec_request(stamped(json!({"templateName": "web"}), "alice", &["devs"]));
    let mut owned = old.clone();
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "1"}]);
    owned["status"] = json!({"phase": "Ready"});
    let review = request_review(
        "ExecAccessRequest",
        "UPDATE",
        user("system:serviceaccount:oz:oz", &[]),
        owned,
        old.clone(),
    );
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, review).await["allowed"],
        true
    );

    // The status subresource, should it ever be routed here.
    let mut changed = old.clone();
    changed["spec"]["duration"] = json!("9h");
    let mut status = request_review(
        "ExecAccessRequest",
        "UPDATE",
        user("alice", &["devs"]),
        changed,
        old.clone(),
    );
    status["request"]["subResource"] = json!("status");
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, status).await["allowed"],
        true
    );

    let delete = request_review(
        "ExecAccessRequest",
        "DELETE",
        user("alice", &["devs"]),
        Value::Null,
        old,
    );
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, delete).await["allowed"],
        true
    );
}

#[tokio::test]
async fn only_the_requester_or_trusted_groups_may_delete_a_request() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let active = exec_request(stamped(json!({"templateName": "web"}), "alice", &["devs"]));
    let mut expired = active.clone();
    expired["status"] = json!({"phase": "Expired"});
    let delete = |who: Value, old: &Value| {
        request_review("ExecAccessRequest", "DELETE", who, Value::Null, old.clone())
    };

    // The requester revokes her own access.
    let response = h
        .review(
            VALIDATE_REQUESTS_PATH,
            delete(user("alice", &["devs"]), &active),
        )
        .await;
    assert_eq!(response["allowed"], true);
    // Someone else may not, even from the same group.
    let response = h
        .review(
            VALIDATE_REQUESTS_PATH,
            delete(user("carol", &["devs"]), &active),
        )
        .await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("only the requester (alice) or members of"),
        "{response}"
    );
    // An expired request is an access-review record: not even its requester erases it.
    let response = h
        .review(
            VALIDATE_REQUESTS_PATH,
            delete(user("alice", &["devs"]), &expired),
        )
        .await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("kept as an access-review record"),
        "{response}"
    );
    // Administrators, the cluster's controllers and oz itself may delete anything.
    for trusted in [
        user("root", &["system:masters"]),
        user(
            "system:serviceaccount:kube-system:generic-garbage-collector",
            &["system:serviceaccounts:kube-system"],
        ),
        user(
            "system:serviceaccount:oz-system:oz-manager",
            &["system:serviceaccounts:oz-system"],
        ),
    ] {
        let response = h
            .review(VALIDATE_REQUESTS_PATH, delete(trusted.clone(), &expired))
            .await;
        assert_eq!(response["allowed"], true, "{trusted}");
    }
}

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
) -> RequestSummary {
    RequestSummary {
        kind,
        name: name.into(),
        template: template.into(),
        requester: Some(Requester {
            username: who.into(),
            uid: None,
            groups: vec!["devs".into()],
        }),
        phase: Some(phase),
        pod_name: Some(pod.into()),
    }
}

fn alice_exec() -> Value {
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
        .with_request(grant_request(
            AccessKind::Exec,
            "alices",
            "web",
            "alice",
            RequestPhase::Ready,
            "web-0",
        ));
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
            template: "web".into()
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
    let lookup = standard_lookup().with_request(grant_request(
        AccessKind::Exec,
        "carols",
        "web",
        "carol",
        RequestPhase::Ready,
        "web-0",
    ));
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
        .with_request(grant_request(
            AccessKind::Pod,
            "carols",
            "shared",
            "carol",
            RequestPhase::Ready,
            "web-0",
        ));
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
            template: "shared".into()
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

#[tokio::test]
async fn enforcement_allows_a_granted_user_and_fails_closed_on_lookup_errors() {
    let lookup = standard_lookup().with_request(grant_request(
        AccessKind::Exec,
        "alices",
        "web",
        "alice",
        RequestPhase::Ready,
        "web-0",
    ));
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
    let action = audit::PodAction::of(&request).unwrap();
    let mut record = audit::describe(&request, action);
    assert_eq!(
        events::event_note(&record),
        "CONNECT/exec operation on Pod web-0 (container: app) by alice (interactive: true)"
    );
    let event = events::audit_event(action, &record);
    assert_eq!(
        (event.reason.as_str(), event.action.as_str()),
        ("PodExec", "RecordedExec")
    );
    assert!(event.secondary.is_none());

    record.grant = Some(Grant {
        kind: "ExecAccessRequest".into(),
        name: "alices".into(),
        template: "web".into(),
    });
    let related = events::audit_event(action, &record).secondary.unwrap();
    assert_eq!(related.kind.as_deref(), Some("ExecAccessRequest"));
    assert_eq!(related.name.as_deref(), Some("alices"));
    assert_eq!(related.namespace.as_deref(), Some(NS));
    assert_eq!(
        related.api_version.as_deref(),
        Some("crds.wizardofoz.co/v1alpha1")
    );
}
