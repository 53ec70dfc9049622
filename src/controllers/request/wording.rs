//! The sentences a request's Events and its notices share, and when a status change is news.
//! A leaf: the status pass and the notices both use it.

use oz_api::{RequestPhase, RequestStatus};

/// What a Ready request is told, as its Event and its notice: "access to pod web-0 granted
/// until 2026-01-01T01:00:00Z".
pub fn granted_message(status: &RequestStatus) -> String {
    format!(
        "access to pod {} granted until {}",
        status.pod_name.as_deref().unwrap_or_default(),
        until(status)
    )
}

/// `status.expiresAt`, as messages say it (empty before it is fixed).
pub fn until(status: &RequestStatus) -> String {
    status
        .expires_at
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

/// Whether the request has just entered `phase`.
pub fn became(previous: &RequestStatus, status: &RequestStatus, phase: RequestPhase) -> bool {
    status.phase == Some(phase) && previous.phase != Some(phase)
}
