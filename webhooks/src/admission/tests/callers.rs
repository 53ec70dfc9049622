//! Who called: with a client CA, only a verified caller reaches a handler, and each audit record
//! says who sent its review.

use super::audit_webhook::alice_exec;
use super::*;
use oz_audit::CallerKind;
use oz_platform::{
    callers::{NAME_NOT_ALLOWED, NO_CERTIFICATE},
    metrics::RefusedLabels,
};

use crate::WebhookMetrics;

const APISERVER: &str = "kube-apiserver-webhook-client";

fn verified_only(names: &[&str], metrics: &WebhookMetrics) -> CallerPolicy {
    CallerPolicy {
        verified_only: true,
        allowed_names: names.iter().map(|n| n.to_string()).collect(),
        metrics: metrics.server.clone(),
    }
}

fn refused(metrics: &WebhookMetrics, reason: &'static str) -> u64 {
    metrics
        .server
        .refused_callers
        .get_or_create(&RefusedLabels { reason })
        .get()
}

#[tokio::test]
async fn an_exec_the_apiserver_reports_is_recorded_as_the_apiservers_with_its_name() {
    let metrics = WebhookMetrics::default();
    let policy = verified_only(&[], &metrics);
    let h = guarded_harness(
        standard_lookup(),
        EnforceSettings::default(),
        policy,
        &metrics,
    )
    .await;
    let (status, body) = h
        .post_from(Some(apiserver()), AUDIT_PATH, alice_exec().to_string())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["response"]["allowed"], true);
    let records = h.audit_records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].caller, CallerKind::Apiserver);
    assert_eq!(records[0].caller_name.as_deref(), Some(APISERVER));
    let line = std::fs::read_to_string(h.audit_file.path()).unwrap();
    let raw: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(raw["caller"], "apiserver");
    assert_eq!(raw["callerName"], APISERVER);
}

#[tokio::test]
async fn a_forged_exec_without_a_verified_caller_is_refused_and_recorded_nowhere() {
    let metrics = WebhookMetrics::default();
    let policy = verified_only(&[], &metrics);
    let h = guarded_harness(
        standard_lookup(),
        EnforceSettings::default(),
        policy,
        &metrics,
    )
    .await;
    for caller in [None, Some(Caller::Unverified)] {
        let (status, _) = h
            .post_from(caller, AUDIT_PATH, alice_exec().to_string())
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    // Every webhook path, whatever the body: it is never read.
    for path in [MUTATE_REQUESTS_PATH, VALIDATE_REQUESTS_PATH] {
        let (status, _) = h.post(path, alice_creates_web().to_string()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    let (status, _) = h.post(AUDIT_PATH, "{not json").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(h.audit_records().is_empty());
    assert_eq!(refused(&metrics, NO_CERTIFICATE), 5);
    // The probes, which carry no certificate, are answered.
    let healthz = Request::get(super::super::HEALTHZ_PATH)
        .body(Body::empty())
        .unwrap();
    let response = h.router.clone().oneshot(healthz).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_apiserver_under_a_name_not_allowed_is_refused_and_recorded_nowhere() {
    let metrics = WebhookMetrics::default();
    let policy = verified_only(&["other-name"], &metrics);
    let h = guarded_harness(
        standard_lookup(),
        EnforceSettings::default(),
        policy,
        &metrics,
    )
    .await;
    let (status, _) = h
        .post_from(Some(apiserver()), AUDIT_PATH, alice_exec().to_string())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(h.audit_records().is_empty());
    assert_eq!(refused(&metrics, NAME_NOT_ALLOWED), 1);
}

#[tokio::test]
async fn without_a_client_ca_an_exec_is_recorded_as_unverified() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    for caller in [None, Some(Caller::Unverified)] {
        let (status, _) = h
            .post_from(caller, AUDIT_PATH, alice_exec().to_string())
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let records = h.audit_records();
    assert_eq!(records.len(), 2);
    for record in &records {
        assert_eq!(record.caller, CallerKind::Unverified);
        assert_eq!(record.caller_name, None);
    }
    let text = std::fs::read_to_string(h.audit_file.path()).unwrap();
    let raw: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(raw["caller"], "unverified");
    assert!(raw.get("callerName").is_none(), "{raw}");
}
