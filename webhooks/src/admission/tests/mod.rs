//! Handler tests: AdmissionReviews in, through the router, without a socket or a cluster.
//! This file holds the harness and what every handler shares (malformed bodies, unknown
//! kinds); each handler's own tests are in the file named after it.

use std::{collections::BTreeSet, sync::Arc};

use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, Version, header},
};

use oz_api::{AccessConfig, AccessKind, FleetNames, RequestPhase, Requester};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::fake_lookup::{FakeLookup, NS};
use super::*;
use super::{locks::Locks, places::AdmittedPlaces};
use crate::WebhookMetrics;
use oz_audit::{AuditLog, AuditRecord, Grant};
use oz_platform::{
    callers::{Caller, CallerPolicy},
    registration::{AUDIT_PATH, MUTATE_REQUESTS_PATH, VALIDATE_REQUESTS_PATH},
};

mod approval_webhooks;
mod audit_webhook;
mod callers;
mod fleet_webhooks;
mod request_webhooks;
mod template_webhooks;

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
    guarded_harness(
        lookup,
        enforce,
        CallerPolicy::anyone(),
        &WebhookMetrics::default(),
    )
    .await
}

/// A harness whose webhook paths answer only the callers `callers` admits.
async fn guarded_harness(
    lookup: FakeLookup,
    enforce: EnforceSettings,
    callers: CallerPolicy,
    metrics: &WebhookMetrics,
) -> Harness {
    harness_for(
        lookup,
        enforce,
        callers,
        metrics,
        None,
        FleetNames::default(),
        (Locks::default(), AdmittedPlaces::default()),
    )
}

/// A harness whose AccessLocks are `locks`.
fn locked_harness(lookup: FakeLookup, locks: Vec<oz_api::AccessLock>) -> Harness {
    harness_for(
        lookup,
        EnforceSettings::default(),
        CallerPolicy::anyone(),
        &WebhookMetrics::default(),
        None,
        FleetNames::default(),
        (Locks::of(locks), AdmittedPlaces::default()),
    )
}

/// A harness that lets one user hold `cap` grants at once across templates.
fn capped_harness(lookup: FakeLookup, cap: u32) -> Harness {
    harness_for(
        lookup,
        EnforceSettings::default(),
        CallerPolicy::anyone(),
        &WebhookMetrics::default(),
        None,
        FleetNames::default(),
        (Locks::default(), AdmittedPlaces::capped(Some(cap))),
    )
}

/// A harness on a fleet spoke whose hub's credential authenticates as `hub_user`.
async fn spoke_harness(lookup: FakeLookup, enforce: EnforceSettings, hub_user: &str) -> Harness {
    naming_spoke_harness(lookup, enforce, hub_user, FleetNames::default()).await
}

/// [`spoke_harness`], whose names for the hub's users and groups are `names`.
async fn naming_spoke_harness(
    lookup: FakeLookup,
    enforce: EnforceSettings,
    hub_user: &str,
    names: FleetNames,
) -> Harness {
    let metrics = WebhookMetrics::default();
    harness_for(
        lookup,
        enforce,
        CallerPolicy::anyone(),
        &metrics,
        Some(hub_user),
        names,
        (Locks::default(), AdmittedPlaces::default()),
    )
}

fn harness_for(
    lookup: FakeLookup,
    enforce: EnforceSettings,
    callers: CallerPolicy,
    metrics: &WebhookMetrics,
    fleet_hub_user: Option<&str>,
    fleet_names: FleetNames,
    (locks, places): (Locks, AdmittedPlaces),
) -> Harness {
    let audit_file = tempfile::NamedTempFile::new().unwrap();
    let state = AdmissionState {
        places,
        locks,
        lookup: Arc::new(lookup),
        audit_log: AuditLog::open(
            audit_file.path(),
            oz_audit::Signer::generate().unwrap(),
            oz_audit::Rotation::default(),
            oz_audit::LogCounters::default(),
        )
        .unwrap(),
        events: None,
        enforce,
        deletes: crate::admission::requests::DeletePolicy::new(
            ["system:masters".to_string()],
            "oz-system",
        ),
        unverified_reads: crate::admission::approvals::UnverifiedReads::default(),
        fleet_hub_user: fleet_hub_user.map(str::to_string),
        fleet_names,
    };
    Harness {
        router: guarded_router(Arc::new(state), callers, metrics.clone()),
        audit_file,
    }
}

impl Harness {
    async fn post(&self, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
        self.post_from(None, path, body).await
    }

    /// Posts as `caller`, as the TLS server marks a request its connection's certificate
    /// proved; `None` as a request without the mark.
    async fn post_from(
        &self,
        caller: Option<Caller>,
        path: &str,
        body: impl Into<Body>,
    ) -> (StatusCode, Value) {
        let mut request = Request::post(path)
            .header("content-type", "application/json")
            .body(body.into())
            .unwrap();
        if let Some(caller) = caller {
            request.extensions_mut().insert(caller);
        }
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
        self.review_from(None, path, review).await
    }

    /// [`Harness::review`], as `caller` (see [`Harness::post_from`]).
    async fn review_from(&self, caller: Option<Caller>, path: &str, review: Value) -> Value {
        let (status, body) = self.post_from(caller, path, review.to_string()).await;
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

/// A CREATE of a `kind` object.
fn create_review(kind: &str, user_info: Value, object: Value) -> Value {
    request_review(kind, "CREATE", user_info, object, Value::Null)
}

/// An UPDATE of an ExecAccessRequest from `old` to `new`.
fn update_review(user_info: Value, new: Value, old: Value) -> Value {
    request_review("ExecAccessRequest", "UPDATE", user_info, new, old)
}

/// A DELETE of an ExecAccessRequest that was `old`.
fn delete_review(user_info: Value, old: Value) -> Value {
    request_review("ExecAccessRequest", "DELETE", user_info, Value::Null, old)
}

/// alice, in devs, creating an ExecAccessRequest through template web, requester unstamped.
fn alice_creates_web() -> Value {
    create_review(
        "ExecAccessRequest",
        user("alice", &["devs"]),
        exec_request(json!({"templateName": "web"})),
    )
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
    create_from(h, None, who, groups, spec).await
}

/// [`create_as`], reviewed as sent by `caller` (`None`: unverified).
async fn create_from(
    h: &Harness,
    caller: Option<Caller>,
    who: &str,
    groups: &[&str],
    spec: Value,
) -> Value {
    let review = create_review(
        "ExecAccessRequest",
        user(who, groups),
        exec_request(stamped(spec, who, groups)),
    );
    h.review_from(caller, VALIDATE_REQUESTS_PATH, review).await
}

/// The kube-apiserver, its webhook client certificate verified.
fn apiserver() -> Caller {
    Caller::Verified {
        common_name: Some("kube-apiserver-webhook-client".into()),
        dns_names: vec![],
    }
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

        let mut old_version = alice_creates_web();
        old_version["apiVersion"] = json!("admission.k8s.io/v1beta1");
        let (status, body) = h.post(path, old_version.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            message(&body["response"]).contains("only admission.k8s.io/v1"),
            "{body}"
        );

        // A request whose operation is not one Kubernetes has.
        let mut bad_operation = alice_creates_web();
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
    let mut review = alice_creates_web();
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"padding": "x".repeat(MAX_BODY_BYTES)});
    let (status, body) = h.post(VALIDATE_REQUESTS_PATH, review.to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message(&body["response"]).contains("limit"), "{body}");

    // The unread rest of an HTTP/1 body makes the connection unusable: the answer says it
    // closes, so a client does not send its next request on it. HTTP/2 forbids the header.
    for (version, closes) in [(Version::HTTP_11, Some("close")), (Version::HTTP_2, None)] {
        let request = Request::post(VALIDATE_REQUESTS_PATH)
            .version(version)
            .body(Body::from(review.to_string()))
            .unwrap();
        let response = h.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let connection = response.headers().get(header::CONNECTION);
        assert_eq!(
            connection.map(|value| value.to_str().unwrap()),
            closes,
            "{version:?}"
        );
    }
    // A body that was read whole leaves the connection as it was.
    let request = Request::post(VALIDATE_REQUESTS_PATH)
        .body(Body::from("null"))
        .unwrap();
    let response = h.router.clone().oneshot(request).await.unwrap();
    assert!(response.headers().get(header::CONNECTION).is_none());
}

// === Unknown kinds ===

#[tokio::test]
async fn request_webhooks_refuse_kinds_that_are_not_requests() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    for kind in ["ConfigMap", "ExecAccessTemplate"] {
        let mut review = create_review(
            kind,
            user("alice", &["devs"]),
            json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}}),
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

// === Metrics ===

#[tokio::test]
async fn each_webhook_call_is_timed_under_its_path() {
    let metrics = crate::WebhookMetrics::default();
    let callers = CallerPolicy::for_client_ca(None, metrics.server.clone());
    let h = guarded_harness(
        standard_lookup(),
        EnforceSettings::default(),
        callers,
        &metrics,
    )
    .await;
    let (status, _) = h.post(AUDIT_PATH, "not a review").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let mut registry = prometheus_client::registry::Registry::with_prefix("oz");
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for sample in [
        "oz_webhook_request_duration_seconds_count{path=\"/audit\"} 1",
        "oz_webhook_request_duration_seconds_count{path=\"/validate-requests\"} 0",
    ] {
        assert!(text.contains(sample), "{sample} in\n{text}");
    }
}
