//! Step: verify the duration. The access window is decided from the request and the template,
//! and `expiresAt` is fixed from the creation time (or, for a template that requires approval,
//! from `approvedAt`, the creation of the approval that completed it): once made, a grant
//! never gets longer, by an edited template or an edited status alike; only its extensions
//! add to it ([`super::extend`]).

use chrono::TimeDelta;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::Resource;
use oz_api::{
    AccessConfig, AccessRequest, condition_reason as reason, condition_type as kind,
    conditions::Observation, duration::decide_access_duration, extension::recorded_added,
};

use super::{
    outcome::{Step, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::{builders::AccessBuilder, time};

/// The grant's window before any extension: where it starts, its decided duration and where it
/// ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Where it starts: creation, or approval, or `spec.startAt` when that is later.
    pub starts: Timestamp,
    /// The duration decided from the request and the template.
    pub duration: TimeDelta,
    /// Its end without extensions.
    pub ends: Timestamp,
}

/// The grant's window, its end recorded in the status as `expiresAt`; or the end of the grant
/// if the durations are not valid. The window starts at `approved_at` when the template
/// requires approval (the tally's, never the status's), else at creation; or at the request's
/// `spec.startAt` when that is later.
pub async fn verify_duration<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    config: &AccessConfig,
    approved_at: Option<Timestamp>,
) -> Step<Window> {
    let decision = match decide_access_duration(
        r.request.duration(),
        &config.default_duration,
        &config.max_duration,
    ) {
        Ok(decision) => decision,
        Err(e) => {
            // Nor without durations to bound it.
            let why = Observation::no(
                kind::ACCESS_DURATIONS_VALID,
                reason::BAD_REQUEST,
                e.condition_message(),
            );
            return stop(r.withdraw(pass, why).await?);
        }
    };
    pass.observe(Observation::yes(
        kind::ACCESS_DURATIONS_VALID,
        reason::SUCCESS,
        decision.message,
    ));
    let created = r.request.meta().creation_timestamp.as_ref().map(|t| t.0);
    let start = scheduled_start(approved_at.or(created), r.request.start_at());
    // What the recorded end holds of extensions is taken off, so that only the extension
    // step adds to the window. A status edited to claim less only shortens the grant.
    let extended = recorded_added(&pass.status.extensions);
    let recorded = pass
        .status
        .expires_at
        .as_ref()
        .map(|t| time::add(t.0, -extended));
    let ends = fix_expires_at(start, pass.now, decision.duration, recorded);
    pass.status.expires_at = Some(Time(ends));
    go_on(Window {
        starts: start.unwrap_or(pass.now),
        duration: decision.duration,
        ends,
    })
}

/// Where a window starts: at `admitted` (creation or approval), or at `start_at` if the request
/// asks for a later start.
pub fn scheduled_start(
    admitted: Option<Timestamp>,
    start_at: Option<Timestamp>,
) -> Option<Timestamp> {
    match (admitted, start_at) {
        (Some(admitted), Some(start_at)) => Some(admitted.max(start_at)),
        (admitted, start_at) => admitted.or(start_at),
    }
}

/// When a grant of `duration` ends: `created + duration` (`now` stands in for a missing creation
/// time), and never later than an `expiresAt` already `recorded`. Fixed at grant time, and never
/// later than the decision: whoever can write the status cannot extend a grant with it.
pub fn fix_expires_at(
    created: Option<Timestamp>,
    now: Timestamp,
    duration: TimeDelta,
    recorded: Option<Timestamp>,
) -> Timestamp {
    let decided = time::add(created.unwrap_or(now), duration);
    match recorded {
        Some(fixed) => fixed.min(decided),
        None => decided,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::at;

    #[test]
    fn expiry_counts_from_creation_not_from_now() {
        let created = at("2026-01-01T00:00:00Z");
        let now = at("2026-01-01T00:20:00Z");
        assert_eq!(
            fix_expires_at(Some(created), now, TimeDelta::hours(1), None),
            at("2026-01-01T01:00:00Z")
        );
        // Without a creation time (never from the apiserver), from now.
        assert_eq!(
            fix_expires_at(None, now, TimeDelta::hours(1), None),
            at("2026-01-01T01:20:00Z")
        );
    }

    #[test]
    fn a_scheduled_window_starts_at_its_start_or_at_approval_when_later() {
        let created = at("2026-01-01T00:00:00Z");
        let start = at("2026-01-01T02:00:00Z");
        assert_eq!(scheduled_start(Some(created), Some(start)), Some(start));
        // Approved after the start it asked for: from the approval.
        let approved = at("2026-01-01T03:00:00Z");
        assert_eq!(scheduled_start(Some(approved), Some(start)), Some(approved));
        assert_eq!(scheduled_start(Some(created), None), Some(created));
    }

    #[test]
    fn a_recorded_expiry_stands_but_never_extends_the_grant() {
        let created = at("2026-01-01T00:00:00Z");
        let now = at("2026-01-01T00:20:00Z");
        let hour = TimeDelta::hours(1);
        // Recorded earlier (a template whose maxDuration grew since): the recorded time stands.
        let earlier = at("2026-01-01T00:30:00Z");
        assert_eq!(
            fix_expires_at(Some(created), now, hour, Some(earlier)),
            earlier
        );
        // Recorded later (an edited status, e.g. 2099): the decision wins.
        let later = at("2099-01-01T00:00:00Z");
        assert_eq!(
            fix_expires_at(Some(created), now, hour, Some(later)),
            at("2026-01-01T01:00:00Z")
        );
    }
}
