//! Step: has someone asked for the grant to be revoked (the annotation
//! `crds.wizardofoz.co/revoked-by`, which `ozctl revoke` sets and oz's webhook lets only the
//! requester or a request admin set, naming themselves)? Then its resources are deleted now,
//! the request is marked Revoked with who (the condition's message) and when (its transition
//! time), and it is kept as the grant's record for the history retention, as an expired one is.
//! Deleting the request also revokes, but leaves no record: this is how a revocation stays in
//! access reviews.

use std::ops::ControlFlow;

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, runtime::events::EventType};
use oz_api::{
    RequestPhase, condition_reason as reason, condition_type as kind, conditions::Observation,
};

use super::{
    expire,
    reconciling::{Reconciling, Step},
    status::{Pass, Wake},
};
use crate::builders::AccessBuilder;

/// Ends the grant now if its revocation was asked for; goes on otherwise.
pub async fn is_revocation_asked<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
) -> Step {
    let Some(by) = oz_api::revoke_asked_by(r.request.meta()) else {
        return Ok(ControlFlow::Continue(()));
    };
    // Before the status says so: what users read never runs ahead of their access.
    r.revoke().await?;
    pass.observe(Observation::no(
        kind::ACCESS_STILL_VALID,
        reason::REVOKED,
        format!("Access revoked by {by}"),
    ));
    pass.status.phase = Some(RequestPhase::Revoked);
    pass.status.access_message = None;
    pass.note(
        EventType::Normal,
        "Revoked",
        format!("access revoked by {by}; its access resources were deleted"),
    );
    pass.finish(r.ctx, r.request, Wake::OnChange).await?;
    let revoked_at = pass.now;
    Ok(ControlFlow::Break(
        expire::after_expiry(r.ctx, r.request, revoked_at).await?,
    ))
}

/// When a Revoked request's grant was revoked: its AccessStillValid condition's transition.
pub fn revoked_at(pass: &Pass) -> Option<Timestamp> {
    pass.status
        .conditions
        .iter()
        .find(|c| c.type_() == kind::ACCESS_STILL_VALID && c.reason() == reason::REVOKED)
        .map(|c| c.last_transition_time.0)
}
