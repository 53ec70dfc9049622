//! The admission handlers (`oz_webhooks::admission::router`, in process) on arbitrary bodies.
//!
//! The first byte picks the path (mutate, validate, audit, healthz, one that does not exist,
//! or the approval webhooks); the second picks the mode and the user: the rest of the input as
//! the raw body, or as the `spec` (when it is JSON) or the `templateName|duration` (with the
//! user stamped as the requester) of an otherwise valid review, so the fuzzer reaches the decisions and not only the
//! parser. Seeds: `fuzz/seeds/admission/`.
//!
//! Properties: nothing panics; every answer is 200, 400 (with an AdmissionReview saying why),
//! 404 or 405; a 200 echoes the review's uid; the mutating webhook's patch, applied, records
//! exactly the authenticated user; the validating webhook admits a create only from a member of
//! the template's allowed groups, carrying the requester it was stamped with.
#![no_main]

use std::sync::{Arc, LazyLock};

use axum::{Router, body::Body};
use futures::future::BoxFuture;
use http::Request;
use libfuzzer_sys::fuzz_target;
use oz_api::{AccessConfig, AccessKind};
use oz_audit::AuditLog;
use oz_webhooks::admission::{
    AccessLookup, AdmissionState, EnforceSettings, GrantSummary, LookupError, TemplateSummary,
    approvals::UnverifiedReads, requests::DeletePolicy, router,
};
use serde_json::{Value, json};
use tower::ServiceExt;

/// One template per kind, `web`, in namespace `team`, open to `devs`.
struct Lookup;

impl AccessLookup for Lookup {
    fn template(
        &self,
        _kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<TemplateSummary>, LookupError>> {
        let found = (namespace == "team" && name == "web").then(|| {
            serde_json::from_value::<AccessConfig>(json!({
                "allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h"
            }))
            .unwrap()
            .into()
        });
        Box::pin(async move { Ok(found) })
    }

    fn requests(&self, namespace: &str) -> BoxFuture<'_, Result<Vec<GrantSummary>, LookupError>> {
        let mine = namespace == "team";
        Box::pin(async move {
            Ok(if mine {
                vec![GrantSummary {
                    kind: AccessKind::Exec,
                    name: "granted".into(),
                    template: "web".into(),
                    requested_by: Some("alice".into()),
                    phase: Some(oz_api::RequestPhase::Ready),
                    pod_name: Some("web-0".into()),
                    session_mode: None,
                    expires_at: chrono::DateTime::from_timestamp(4_102_444_800, 0),
                    approvers: Vec::new(),
                    extensions: Vec::new(),
                }]
            } else {
                Vec::new()
            })
        })
    }
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
});

static ROUTER: LazyLock<Router> = LazyLock::new(|| {
    router(Arc::new(AdmissionState {
        places: Default::default(),
        locks: Default::default(),
        lookup: Arc::new(Lookup),
        audit_log: AuditLog::log_only(),
        events: None,
        enforce: EnforceSettings {
            namespaces: ["team".to_string()].into(),
            ..EnforceSettings::default()
        },
        deletes: DeletePolicy::new(["system:masters".to_string()], "oz-system"),
        // Reads cost the fuzzer's in-memory lookup nothing: every review is judged in full.
        unverified_reads: UnverifiedReads::new(1e9, 1e9),
        fleet_hub_user: None,
        fleet_names: Default::default(),
    }))
});

const PATHS: &[&str] = &[
    "/mutate-requests",
    "/validate-requests",
    "/audit",
    "/healthz",
    "/nope",
    // Last, so the seeds (first bytes 0 to 2) keep the paths they were written for. This lookup reads no requests
    // by name, so these refuse every decision; what they show is that no body makes them panic.
    "/mutate-approvals",
    "/validate-approvals",
];

/// Who sends the review: a member of devs, a non-member, an admin, and nobody.
const USERS: &[(&str, &[&str])] = &[
    ("alice", &["devs", "system:authenticated"]),
    ("bob", &["qa", "system:authenticated"]),
    ("mallory", &["system:masters"]),
    ("", &[]),
];

fn envelope(spec: Value, user: usize) -> Value {
    let (username, groups) = USERS[user % USERS.len()];
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "fuzz-uid",
            "kind": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "kind": "ExecAccessRequest"},
            "resource": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "resource": "execaccessrequests"},
            "name": "req",
            "namespace": "team",
            "operation": "CREATE",
            "userInfo": {"username": username, "groups": groups},
            "object": {
                "apiVersion": "crds.wizardofoz.co/v1alpha1",
                "kind": "ExecAccessRequest",
                "metadata": {"name": "req", "namespace": "team"},
                "spec": spec,
            },
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let [path, mode, rest @ ..] = data else {
        return;
    };
    let path = PATHS[*path as usize % PATHS.len()];
    let user = (*mode / 3) as usize;
    let body: Vec<u8> = match mode % 3 {
        0 => rest.to_vec(),
        1 => match serde_json::from_slice::<Value>(rest) {
            Ok(spec) => envelope(spec, user).to_string().into_bytes(),
            Err(_) => return,
        },
        _ => {
            let text = String::from_utf8_lossy(rest);
            let (template, duration) = text.split_once('|').unwrap_or((&text, ""));
            let (username, groups) = USERS[user % USERS.len()];
            let spec = json!({
                "templateName": template,
                "duration": duration,
                "requester": {"username": username, "groups": groups},
            });
            envelope(spec, user).to_string().into_bytes()
        }
    };
    // serde_json does not check the UTF-8 of strings it skips, so a review may be accepted with
    // invalid UTF-8 inside a field oz ignores (the apiserver never sends such a body): read it
    // here the same way.
    let sent: Option<Value> = serde_json::from_slice(&body)
        .ok()
        .or_else(|| serde_json::from_str(&String::from_utf8_lossy(&body)).ok());
    let method = if path == "/healthz" { "GET" } else { "POST" };
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let (status, answer) = RUNTIME.block_on(async {
        let response = ROUTER.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, bytes)
    });
    match (path, status) {
        ("/healthz", 200) => return,
        ("/nope", 404) => return,
        (_, 400) => {
            let answer: Value =
                serde_json::from_slice(&answer).expect("a 400 is an AdmissionReview");
            assert_eq!(answer["response"]["allowed"], false);
            assert!(
                answer["response"]["status"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty())
            );
            return;
        }
        (_, 200) => {}
        (path, status) => panic!("{path} answered {status}"),
    }
    let answer: Value = serde_json::from_slice(&answer).expect("a 200 is an AdmissionReview");
    let sent = sent.expect("only a review gets a 200");
    let response = &answer["response"];
    assert_eq!(response["uid"], sent["request"]["uid"], "the uid is echoed");
    let request = &sent["request"];
    let is_create_of_exec = request["operation"] == "CREATE"
        && request["kind"]["group"] == "crds.wizardofoz.co"
        && request["kind"]["kind"] == "ExecAccessRequest";
    match path {
        "/mutate-requests" if response["allowed"] == true && is_create_of_exec => {
            // The stamped requester is exactly who asked.
            // kube-core writes the patch's bytes as a JSON array, which Go reads as []byte.
            let patch: Vec<u8> =
                serde_json::from_value(response["patch"].clone()).expect("a create is patched");
            let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
            let mut object = request["object"].clone();
            json_patch::patch(&mut object, &patch).expect("the patch applies to the object");
            assert_eq!(
                object["spec"]["requester"]["username"], request["userInfo"]["username"],
                "the requester is the authenticated user"
            );
        }
        "/validate-requests" if response["allowed"] == true && is_create_of_exec => {
            let user = &request["userInfo"];
            let groups = user["groups"].as_array().cloned().unwrap_or_default();
            assert!(
                groups.contains(&json!("devs")),
                "admitted a non-member: {request}"
            );
            assert_eq!(request["object"]["spec"]["templateName"], "web");
            assert_eq!(
                request["object"]["spec"]["requester"]["username"],
                user["username"]
            );
            assert_eq!(request["namespace"], "team");
        }
        _ => {}
    }
});
