//! Step: has the access started? A request with `spec.startAt` is admitted (and approved)
//! ahead and granted nothing until its window starts: it waits in phase Scheduled, and its
//! grant's timer has it reconciled at the start, as exactly as expiry
//! ([`super::timers::ExpiryTimers::wake`]). A request without `spec.startAt` passes through,
//! and nothing about it is written.

use k8s_openapi::jiff::Timestamp;
use oz_api::{
    AccessRequest, RequestPhase, condition_reason as reason, condition_type as kind,
    conditions::Observation,
};

use super::{
    outcome::{Step, Stop, Wake, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::builders::AccessBuilder;

/// Goes on once `starts` has come; until then, nothing is granted and the request waits
/// Scheduled, to be woken at `starts`.
pub async fn is_access_started<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    starts: Timestamp,
) -> Step {
    if r.request.start_at().is_none() {
        pass.status
            .conditions
            .retain(|c| c.type_() != kind::ACCESS_STARTED);
        return go_on(());
    }
    if pass.now >= starts {
        pass.observe(Observation::yes(
            kind::ACCESS_STARTED,
            reason::SUCCESS,
            format!("access started at {starts}"),
        ));
        return go_on(());
    }
    // Nothing stands before the start: not even what an earlier pass left.
    r.revoke_leftovers().await?;
    pass.observe(Observation::no(
        kind::ACCESS_STARTED,
        reason::SCHEDULED,
        format!("access starts at {starts}"),
    ));
    pass.status.phase = Some(RequestPhase::Scheduled);
    pass.status.access_message = None;
    pass.status.pod_name = None;
    stop(Stop::Write(Wake::BeforeExpiry(starts)))
}
