//! Requests for the unit tests of the reconcile's steps.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use oz_api::{ExecAccessRequest, ExecAccessRequestSpec, RequestPhase, RequestStatus};

/// An ExecAccessRequest named `r` in `phase`, with `expiresAt` if given.
pub fn request(phase: RequestPhase, expires_at: Option<Timestamp>) -> ExecAccessRequest {
    let spec = ExecAccessRequestSpec {
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
