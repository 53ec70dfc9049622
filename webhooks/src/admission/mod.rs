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
//! | [`VALIDATE_TEMPLATES_PATH`] | [`TEMPLATES_ENFORCED_WEBHOOK`](oz_platform::registration::TEMPLATES_ENFORCED_WEBHOOK), [`TEMPLATES_WEBHOOK`](oz_platform::registration::TEMPLATES_WEBHOOK) | [`templates::validate`] |
//!
//! - [`requests`]: stamp the requester on create, then validate creates, updates and deletes;
//!   an update that asks to extend the grant is checked by `extensions.rs`.
//! - [`approvals`]: stamp who decided on an AccessApproval's create, then validate the decision.
//! - [`audit`]: record every exec, attach, port-forward and debug into a pod.
//! - [`templates`]: where access is enforced, only the template admin groups write templates.
//! - [`fleet`]: on a fleet spoke, only the hub's credential writes the hub's templates and
//!   requests through them, and it writes nothing else; the requester it attests is put into
//!   this cluster's names.
//! - [`lookup`]: what the handlers need to read from the cluster, behind a trait.
//! - [`locks`]: the AccessLocks, kept by a watch, that refuse what they hold over.
//! - [`places`]: the places a template's limits leave, counted at admission.
//! - [`cache`]: that, served from memory kept current by watches (what oz-manager uses).
//! - [`events`]: the audit Events, published from a bounded queue.
//! - `review.rs`: the AdmissionReview on the wire ([`Review`], the answers); `state.rs`: what
//!   the handlers share ([`AdmissionState`]), with the delete policy (`delete_policy.rs`) and
//!   the unverified callers' read budget (`unverified_reads.rs`).
//!
//! A body that is not a v1 AdmissionReview with a request, or is larger than
//! [`MAX_BODY_BYTES`], gets HTTP 400 with the reason; nothing a client sends makes a handler
//! panic. With a client CA, a caller that is not the kube-apiserver gets HTTP 401 or 403 before
//! any handler runs ([`guarded_router`], [`oz_platform::callers`]).

pub mod approvals;
pub mod audit;
pub mod cache;
mod delete_policy;
pub mod events;
mod extensions;
#[cfg(test)]
mod fake_lookup;
pub mod fleet;
pub mod locks;
pub mod lookup;
pub mod places;
mod request_changes;
pub mod requests;
mod review;
mod state;
pub mod templates;
mod unverified_reads;

use std::sync::Arc;

use axum::{
    Router,
    extract::DefaultBodyLimit,
    middleware,
    routing::{get, post},
};

use crate::WebhookMetrics;

pub use audit::EnforceSettings;
pub use cache::CachedLookup;
pub use events::AuditEvents;
pub use lookup::{
    AccessLookup, Answer, DenialFacts, GrantSummary, KubeLookup, LookupError, RequestState,
    TemplateSummary,
};
pub use review::{BadReview, MAX_BODY_BYTES, Review, parse_object, parse_review};
use review::{deny, reply};
pub use state::AdmissionState;

use oz_platform::{
    callers::{self, CallerPolicy},
    registration::{
        AUDIT_PATH, MUTATE_APPROVALS_PATH, MUTATE_REQUESTS_PATH, VALIDATE_APPROVALS_PATH,
        VALIDATE_REQUESTS_PATH, VALIDATE_TEMPLATES_PATH,
    },
};

/// Path of the liveness/readiness endpoint, served over the same TLS port.
pub const HEALTHZ_PATH: &str = "/healthz";

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

#[cfg(test)]
mod tests;
