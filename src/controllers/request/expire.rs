//! Steps: is the access over, is it expired? An ended request stays ended; a grant past its
//! `expiresAt` ends now, through [`super::ending`], as its timer would have ended it.

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use oz_api::{
    RequestPhase, condition_reason as reason, condition_type as kind, conditions::Observation,
};

use super::{
    ending,
    outcome::{Step, Stop, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::builders::AccessBuilder;

/// Goes on only with a request whose access may still be granted: an ended (Expired or
/// Revoked) request is kept revoked (and deleted after its retention, counted from its end), a
/// Denied one stays so, and one past a recorded `expiresAt` ends now, whatever else has changed
/// since.
pub async fn is_access_over<B: AccessBuilder>(r: &Reconciling<'_, B>, pass: &mut Pass) -> Step {
    match pass.status.phase {
        Some(phase) if phase.is_ended() => {
            r.revoke_leftovers().await?;
            let ended_at = match phase {
                RequestPhase::Revoked => ending::revoked_at(pass),
                _ => pass.status.expires_at.as_ref().map(|t| t.0),
            };
            return stop(Stop::Retained(ended_at.unwrap_or(pass.now)));
        }
        Some(RequestPhase::Denied) => return stop(Stop::Leave(Action::await_change())),
        _ => {}
    }
    match pass.status.expires_at.as_ref().map(|t| t.0) {
        Some(expires_at) => is_access_expired(r, pass, expires_at).await,
        None => go_on(()),
    }
}

/// Goes on while `expires_at` is ahead; otherwise ends the grant now.
pub async fn is_access_expired<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    expires_at: Timestamp,
) -> Step {
    if pass.now < expires_at {
        return go_on(());
    }
    ending::revoke_at_expiry(r.ctx, r.builder, &r.grant, expires_at).await?;
    ending::record_expiry(pass, expires_at);
    stop(Stop::Ended(expires_at))
}

/// Records that access is still valid: a step of its own, after the expiry's timer is armed.
pub fn still_valid(pass: &mut Pass) {
    pass.observe(Observation::yes(
        kind::ACCESS_STILL_VALID,
        reason::SUCCESS,
        "Access still valid",
    ));
}
