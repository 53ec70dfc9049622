//! The admission handlers, as an axum [`Router`] that can be driven in-process
//! (`tower::ServiceExt::oneshot`) or served over TLS by [`crate::WebhookServer`].
//!
//! Each webhook oz registers ([`oz_platform::registration`] writes its configuration) and the
//! handler that answers it:
//!
//! | Path | Webhook | Handler |
//! |---|---|---|
//! | [`MUTATE_REQUESTS_PATH`] | [`REQUESTER_WEBHOOK`](oz_platform::registration::REQUESTER_WEBHOOK) | [`requests::mutate`] |
//! | [`VALIDATE_REQUESTS_PATH`] | [`REQUESTS_WEBHOOK`](oz_platform::registration::REQUESTS_WEBHOOK), [`REQUEST_DELETES_WEBHOOK`](oz_platform::registration::REQUEST_DELETES_WEBHOOK) | [`requests::validate`] |
//! | [`MUTATE_APPROVALS_PATH`] | [`APPROVER_WEBHOOK`](oz_platform::registration::APPROVER_WEBHOOK) | [`approvals::mutate`] |
//! | [`VALIDATE_APPROVALS_PATH`] | [`APPROVALS_WEBHOOK`](oz_platform::registration::APPROVALS_WEBHOOK) | [`approvals::validate`] |
//! | [`AUDIT_PATH`] | [`AUDIT_WEBHOOK`](oz_platform::registration::AUDIT_WEBHOOK), [`AUDIT_ENFORCED_WEBHOOK`](oz_platform::registration::AUDIT_ENFORCED_WEBHOOK) | [`audit::audit`] |
//! | [`VALIDATE_TEMPLATES_PATH`] | [`TEMPLATES_ENFORCED_WEBHOOK`](oz_platform::registration::TEMPLATES_ENFORCED_WEBHOOK) | [`templates::validate`] |
//!
//! - [`requests`]: stamp the requester on create, then validate creates, updates and deletes.
//! - [`approvals`]: stamp who decided on an AccessApproval's create, then validate the decision.
//! - [`audit`]: record every exec, attach, port-forward and debug into a pod.
//! - [`templates`]: where access is enforced, only the template admin groups write templates.
//! - [`lookup`]: what the handlers need to read from the cluster, behind a trait.
//! - [`cache`]: that, served from memory kept current by watches (what oz-manager uses).
//! - [`events`]: the audit Events, published from a bounded queue.
//!
//! A body that is not a v1 AdmissionReview with a request, or is larger than
//! [`MAX_BODY_BYTES`], gets HTTP 400 with the reason; nothing a client sends makes a handler
//! panic. With a client CA, a caller that is not the kube-apiserver gets HTTP 401 or 403 before
//! any handler runs ([`guarded_router`], [`oz_platform::callers`]).

pub mod approvals;
pub mod audit;
pub mod cache;
pub mod events;
#[cfg(test)]
mod fake_lookup;
pub mod lookup;
pub mod requests;
pub mod templates;

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, FromRequest, Request},
    http::{HeaderValue, StatusCode, Version, header},
    middleware,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use kube::core::{
    DynamicObject, Status, TypeMeta,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
};
use oz_audit::AuditLog;

use crate::WebhookMetrics;
use tracing::warn;

pub use audit::EnforceSettings;
pub use cache::CachedLookup;
pub use events::AuditEvents;
pub use lookup::{AccessLookup, Answer, GrantSummary, KubeLookup, LookupError, RequestState};

use oz_platform::{
    callers::{self, CallerPolicy},
    registration::{
        AUDIT_PATH, MUTATE_APPROVALS_PATH, MUTATE_REQUESTS_PATH, VALIDATE_APPROVALS_PATH,
        VALIDATE_REQUESTS_PATH, VALIDATE_TEMPLATES_PATH,
    },
};

/// The largest AdmissionReview accepted. The apiserver caps objects at about 1.5 MiB, and a
/// review of an update carries two of them.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Path of the liveness/readiness endpoint, served over the same TLS port.
pub const HEALTHZ_PATH: &str = "/healthz";

/// What the handlers share.
pub struct AdmissionState {
    /// Reads templates and requests.
    pub lookup: Arc<dyn AccessLookup>,
    /// Where audit records go.
    pub audit_log: AuditLog,
    /// Publishes the audit Events on pods; `None` publishes none (handler tests).
    pub events: Option<AuditEvents>,
    /// Which execs are denied without a grant; by default none.
    pub enforce: EnforceSettings,
    /// Who may delete requests besides their requester.
    pub deletes: requests::DeletePolicy,
    /// The apiserver reads that approval reviews from unverified callers may cost.
    pub unverified_reads: approvals::UnverifiedReads,
}

/// The routes: [`MUTATE_REQUESTS_PATH`], [`VALIDATE_REQUESTS_PATH`], [`MUTATE_APPROVALS_PATH`],
/// [`VALIDATE_APPROVALS_PATH`], [`AUDIT_PATH`], [`VALIDATE_TEMPLATES_PATH`] and
/// [`HEALTHZ_PATH`], answering anyone ([`CallerPolicy::anyone`]).
pub fn router(state: Arc<AdmissionState>) -> Router {
    guarded_router(state, CallerPolicy::anyone(), WebhookMetrics::default())
}

/// [`router`], whose webhook paths answer only the callers `callers` admits
/// ([`callers::guard`]); `/healthz` answers anyone, as probes carry no client certificate.
/// How long each call took is observed in `metrics`.
pub fn guarded_router(
    state: Arc<AdmissionState>,
    callers: CallerPolicy,
    metrics: WebhookMetrics,
) -> Router {
    Router::new()
        .route(MUTATE_REQUESTS_PATH, post(requests::mutate))
        .route(VALIDATE_REQUESTS_PATH, post(requests::validate))
        .route(MUTATE_APPROVALS_PATH, post(approvals::mutate))
        .route(VALIDATE_APPROVALS_PATH, post(approvals::validate))
        .route(AUDIT_PATH, post(audit::audit))
        .route(VALIDATE_TEMPLATES_PATH, post(templates::validate))
        // Before the body is read: a refused caller's review is never parsed.
        .route_layer(middleware::from_fn_with_state(
            Arc::new(callers),
            callers::guard,
        ))
        // Outside the guard: a refusal's time is measured too.
        .route_layer(middleware::from_fn_with_state(
            metrics,
            crate::metrics::measure,
        ))
        .route(HEALTHZ_PATH, get(|| async { "ok" }))
        // The extractor enforces MAX_BODY_BYTES itself, answering 400 rather than 413.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// A v1 AdmissionReview's request, as extracted from an HTTP body.
pub struct Review(pub AdmissionRequest<DynamicObject>);

/// Why a body is not a usable AdmissionReview; answered with HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    #[error(
        "the AdmissionReview body could not be read within the {MAX_BODY_BYTES}-byte limit: {reason}"
    )]
    Body {
        /// Why reading stopped: the limit, or a transfer that broke off.
        reason: String,
        /// The body came over HTTP/1, where its unread rest leaves the connection unusable.
        http1: bool,
    },
    #[error("the body is not a valid AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "unsupported review {api_version:?} {kind:?}: only admission.k8s.io/v1 AdmissionReview is served"
    )]
    Version {
        /// The apiVersion sent.
        api_version: String,
        /// The kind sent.
        kind: String,
    },
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

impl IntoResponse for BadReview {
    fn into_response(self) -> Response {
        let message = self.to_string();
        warn!(%message, "refused an AdmissionReview");
        let mut response = (
            StatusCode::BAD_REQUEST,
            Json(AdmissionResponse::invalid(message).into_review()),
        )
            .into_response();
        // Reading stopped part way, so the rest of the body is still on the connection and
        // hyper closes it after this answer. hyper may write the answer before it notices,
        // without saying so; a client that had finished uploading would then keep the
        // connection for its next request, which fails on it. (HTTP/2 has no such header: the
        // stream is reset on its own.)
        if matches!(self, BadReview::Body { http1: true, .. }) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

impl<S: Send + Sync> FromRequest<S> for Review {
    type Rejection = BadReview;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let http1 = request.version() < Version::HTTP_2;
        let body = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|e| BadReview::Body {
                reason: e.to_string(),
                http1,
            })?;
        parse_review(&body).map(Review)
    }
}

/// An AdmissionReview as it arrives. kube's [`AdmissionReview`] flattens its apiVersion and
/// kind into itself, and serde reads a struct with a flattened field by first buffering the
/// whole body into an intermediate tree and then reading that: this reads the body once (an
/// audit review parsed in 7.5 µs instead of 8.1).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    api_version: String,
    kind: String,
    request: Option<AdmissionRequest<DynamicObject>>,
}

/// Parses a v1 AdmissionReview and takes its request out.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, BadReview> {
    let review: IncomingReview = serde_json::from_slice(body)?;
    if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
        return Err(BadReview::Version {
            api_version: review.api_version,
            kind: review.kind,
        });
    }
    let mut request = review.request.ok_or(BadReview::NoRequest)?;
    request.types = TypeMeta {
        api_version: review.api_version,
        kind: review.kind,
    };
    Ok(request)
}

/// The object of an AdmissionReview (a request, an AccessApproval), decoded into its kind's own
/// type (as linkerd's policy-controller's `parse_spec` does), so the checks read typed fields
/// rather than JSON by field name. Only the metadata and spec are taken: the status is not the
/// caller's to write, and nothing here reads it. The error names the spec as the field at fault.
pub fn parse_object<K: serde::de::DeserializeOwned>(object: &DynamicObject) -> Result<K, String> {
    let spec = object.data.get("spec").ok_or("spec: required")?;
    let typed = serde_json::json!({ "metadata": object.metadata, "spec": spec });
    serde_json::from_value(typed).map_err(|e| format!("spec: {e}"))
}

/// The response as an AdmissionReview body.
fn reply(response: AdmissionResponse) -> Json<AdmissionReview<DynamicObject>> {
    Json(response.into_review())
}

/// A denial the apiserver reports as 403 Forbidden with `message`.
fn deny(
    request: &AdmissionRequest<DynamicObject>,
    message: impl Into<String>,
) -> AdmissionResponse {
    let message = message.into();
    let mut response = AdmissionResponse::from(request).deny(&message);
    response.result = Status::failure(&message, "Forbidden").with_code(403);
    response
}

#[cfg(test)]
mod tests;
