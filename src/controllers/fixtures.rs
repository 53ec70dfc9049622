//! Objects for the controllers' unit tests.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use oz_api::{
    Condition, ExecAccessRequest, ExecAccessRequestSpec, RequestPhase, RequestStatus,
    conditions::{self, Observation},
};

/// An instant, from its RFC 3339 text.
pub fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// The conditions that record `observations`, in order.
pub fn conditions_of(observations: &[Observation]) -> Vec<Condition> {
    let mut recorded = Vec::new();
    for observation in observations {
        conditions::set(
            &mut recorded,
            observation.clone(),
            Some(1),
            Timestamp::UNIX_EPOCH,
        );
    }
    recorded
}

/// An ExecAccessRequest named `r` in `phase`, with `expiresAt` if given.
pub fn request(phase: RequestPhase, expires_at: Option<Timestamp>) -> ExecAccessRequest {
    let spec = ExecAccessRequestSpec {
        start_at: None,
        cluster: None,
        forwarded: None,
        reason: None,
        ticket: None,
        template_name: "t".into(),
        target_pod: None,
        duration: None,
        requester: None,
    };
    let mut request = ExecAccessRequest::new("r", spec);
    request.status = Some(RequestStatus {
        phase: Some(phase),
        expires_at: expires_at.map(Time),
        ..Default::default()
    });
    request
}
