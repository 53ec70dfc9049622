//! The exec/attach/port-forward/debug audit: one structured record per way into a pod, with
//! the grant (the Ready request) that let the user in, or none.
//!
//! Each record goes to the log (target `oz::audit`) and, when configured, to the audit file
//! (a hash chain of JSON lines with signed checkpoints: [`oz_audit`]);
//! an Event is published on the pod (in the background, by [`AuditEvents`](super::AuditEvents),
//! which may drop it under load), and the response carries `auditAnnotations` so the
//! apiserver's own audit log shows the grant too. The operation is always allowed unless
//! [`EnforceSettings`] names the namespace and no grant is found.
//!
//! - `describe.rs`: the record ([`oz_audit::AuditRecord`]) of an AdmissionReview.
//! - `decision.rs`: the grant that covers an access ([`find_grant`]), and enforcement
//!   ([`EnforceSettings`], [`denial`]).
//! - `hint.rs`: what a denial for want of a grant tells the user to do
//!   ([`no_grant_message`]): use their Brokered grant with `ozctl exec`, or ask through one of
//!   the templates that can grant the pod, with the `ozctl create` line for each.
//! - `unwritable.rs`: the Warning Event published when the audit file cannot take a record;
//!   the record itself is written through [`oz_audit::AuditLog`].
//! - The Event: [`AuditEvents`](super::AuditEvents), in [`super::events`].

mod decision;
mod describe;
mod hint;
mod unwritable;

use std::{sync::Arc, time::Duration};

use axum::{Extension, Json, extract::State};
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
};

pub use decision::{EnforceSettings, denial, find_grant};
pub use describe::{describe, pod_action};
pub use hint::no_grant_message;
pub use oz_api::PodAction;
pub use unwritable::{UNWRITABLE_REASON, report_unwritable_with_events};

use oz_api::{Asked, Route};
use oz_audit::audit_annotations;

use super::{AdmissionState, Review, deny, reply};
use oz_platform::callers::Caller;

/// How long the grant lookup may take; the audit webhook's own timeout is 5 s.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// The audit handler.
pub async fn audit(
    State(state): State<Arc<AdmissionState>>,
    caller: Option<Extension<Caller>>,
    Review(request): Review,
) -> Json<AdmissionReview<DynamicObject>> {
    let caller = caller.map(|Extension(caller)| caller).unwrap_or_default();
    reply(audit_decision(&state, &request, &caller).await)
}

/// Records the access `request` makes and answers it: allowed, unless enforcement applies and
/// there is no grant. Requests that are not an audited action are allowed unrecorded. `caller`
/// is who sent the review (the TLS server's verdict on the connection).
pub async fn audit_decision(
    state: &AdmissionState,
    request: &AdmissionRequest<DynamicObject>,
    caller: &Caller,
) -> AdmissionResponse {
    let Some(action) = pod_action(request) else {
        return AdmissionResponse::from(request);
    };
    let mut record = describe(request, action, caller);
    record.brokered = state.enforce.is_broker(&record.user, action);
    // This webhook sees the core API: the Direct route. (A Brokered session reaches the pod
    // through oz's own exec, marked `brokered` above; the broker judged its grant.)
    let locks = state.locks.current();
    let asked = Asked {
        user: &record.user,
        groups: &record.groups,
        namespace: &record.namespace,
        locks: &locks,
        pod: &record.pod,
        action,
        route: Route::Direct,
        now: chrono::Utc::now(),
    };
    let lookup = find_grant(state.lookup.as_ref(), &record.namespace, &asked);
    match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
        Ok(Ok(grant)) => record.grant = grant,
        Ok(Err(e)) => record.grant_error = Some(e.0),
        Err(_) => record.grant_error = Some(format!("timed out after {LOOKUP_TIMEOUT:?}")),
    }
    record.denied_because = denial(&state.enforce, &record, || {
        // From memory only: the denial waits for no further apiserver call.
        let facts = state.lookup.denial_facts(&record.namespace, &record.pod);
        let writers = &state.enforce.template_writers;
        no_grant_message(&facts, writers, &record.namespace, &asked)
    });
    record.allowed = record.denied_because.is_none();
    state.audit_log.write(&record).await;
    let mut response = match &record.denied_because {
        None => AdmissionResponse::from(request),
        Some(reason) => deny(request, reason.clone()),
    };
    response.audit_annotations = audit_annotations(&record).into_iter().collect();
    if !record.dry_run
        && let Some(events) = &state.events
    {
        // Queued, not awaited: the Event is not worth delaying the operation for.
        events.publish(action, record);
    }
    response
}
