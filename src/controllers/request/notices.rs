//! The notices a request's status change sends (pending approval, approved, denied, ready,
//! expired, break-glass), and the one way a [`Notice`] is built from a request, its status and
//! its template's notification config. The status pass calls this module once it has written
//! the status; it calls nothing back.

use kube::ResourceExt;
use oz_api::{
    AccessRequest, Condition, ExtensionPhase, NotificationConfig, RequestPhase, RequestStatus,
    condition_reason as reason, condition_type as kind, conditions,
};

use super::wording::{became, granted_message, until};
use crate::notify::{Notice, NoticeKind};

/// The notices a status change from `previous` to `status` sends, each with its sentence for
/// humans: entering PendingApproval, Denied, Ready or Expired; being approved (and, by the
/// requester alone, break-glass).
pub fn notices_for(previous: &RequestStatus, status: &RequestStatus) -> Vec<(NoticeKind, String)> {
    let mut notices = Vec::new();
    fn approved(s: &RequestStatus) -> Option<&Condition> {
        approved_condition(s).filter(|c| c.status() == "True")
    }
    if became(previous, status, RequestPhase::PendingApproval) {
        notices.push((NoticeKind::PendingApproval, approval_message(status)));
    }
    if let Some(condition) = approved(status)
        && (approved(previous).is_none() || previous.approved_at != status.approved_at)
    {
        notices.push((NoticeKind::Approved, condition.message.clone()));
        if condition.reason() == reason::BREAK_GLASS {
            notices.push((NoticeKind::BreakGlass, condition.message.clone()));
        }
    }
    if became(previous, status, RequestPhase::Denied) {
        let why = approved_condition(status)
            .filter(|c| c.status() == "False" && c.reason() == reason::DENIED)
            .or_else(|| conditions::failing(&status.conditions).next())
            .map(|c| c.message.clone())
            .unwrap_or_else(|| "denied".into());
        notices.push((NoticeKind::Denied, why));
    }
    if became(previous, status, RequestPhase::Ready) {
        notices.push((NoticeKind::Ready, granted_message(status)));
    }
    if became(previous, status, RequestPhase::Expired) {
        let message = match approved_condition(status) {
            Some(c) if c.reason() == reason::TIMEOUT => c.message.clone(),
            _ => format!("access ended at {}", until(status)),
        };
        notices.push((NoticeKind::Expired, message));
    }
    notices
}

/// The notices the extension asks' changes from `previous` to `status` send, each with the
/// ask's number and its sentence: an ask waiting for approval, granted, or denied.
pub fn extension_notices(
    previous: &RequestStatus,
    status: &RequestStatus,
) -> Vec<(NoticeKind, u32, String)> {
    status
        .extensions
        .iter()
        .filter(|ask| {
            let before = previous.extensions.get(ask.number as usize - 1);
            before.is_none_or(|b| b.phase != ask.phase)
        })
        .map(|ask| {
            let why = ask
                .message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            let (kind, sentence) = match ask.phase {
                ExtensionPhase::PendingApproval => (
                    NoticeKind::ExtensionPending,
                    format!(
                        "{} asks for {} more on pod {}; it waits for approval",
                        ask.asked_by,
                        ask.by,
                        status.pod_name.as_deref().unwrap_or_default()
                    ),
                ),
                ExtensionPhase::Granted => (
                    NoticeKind::Extended,
                    format!(
                        "extended by {}{why}; access now ends at {}",
                        ask.added.as_deref().unwrap_or_default(),
                        until(status)
                    ),
                ),
                ExtensionPhase::Denied => (
                    NoticeKind::ExtensionDenied,
                    format!(
                        "extension denied{why}; access still ends at {}",
                        until(status)
                    ),
                ),
            };
            (kind, ask.number, sentence)
        })
        .collect()
}

/// The uid a notice of `kind` about request `uid` carries, which the notifier drops repeats
/// by: the request's, except that an ExpiringSoon after `n` granted extensions is
/// `UID.extended-n`, so each new end is announced before it comes.
pub fn notice_uid(kind: NoticeKind, uid: &str, status: &RequestStatus) -> String {
    let extended = status
        .extensions
        .iter()
        .filter(|e| e.phase == ExtensionPhase::Granted)
        .count();
    match kind {
        NoticeKind::ExpiringSoon if extended > 0 => format!("{uid}.extended-{extended}"),
        _ => uid.to_string(),
    }
}

/// The sentence of an ExpiringSoon notice.
pub fn expiring_soon_message(status: &RequestStatus) -> String {
    format!(
        "access to pod {} ends at {}",
        status.pod_name.as_deref().unwrap_or_default(),
        until(status)
    )
}

/// A notice of `kind` about `request`, whose status is now `status`, through a template whose
/// notification config is `sinks`.
pub fn notice<R: AccessRequest>(
    kind: NoticeKind,
    request: &R,
    status: &RequestStatus,
    sinks: Option<NotificationConfig>,
    message: String,
) -> Notice {
    Notice {
        kind,
        access: R::KIND,
        namespace: request.namespace().unwrap_or_default(),
        name: request.name_any(),
        uid: notice_uid(kind, &request.uid().unwrap_or_default(), status),
        sinks,
        requester: request
            .requester()
            .map(|r| r.username.clone())
            .unwrap_or_default(),
        template: request.template_name().to_string(),
        reason: request.reason().map(str::to_string),
        ticket: request.ticket().map(str::to_string),
        pod: status.pod_name.clone(),
        expires_at: status.expires_at.as_ref().map(|t| t.0),
        approvers: status
            .approvals
            .iter()
            .map(|a| a.approver.clone())
            .collect(),
        message,
    }
}

fn approved_condition(status: &RequestStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_() == kind::APPROVED)
}

fn approval_message(status: &RequestStatus) -> String {
    approved_condition(status)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use oz_api::conditions::Observation;

    use super::*;
    use crate::controllers::fixtures::{at, conditions_of};

    fn status(phase: RequestPhase, observations: &[Observation]) -> RequestStatus {
        RequestStatus {
            phase: Some(phase),
            conditions: conditions_of(observations),
            ..Default::default()
        }
    }

    fn kinds(notices: &[(NoticeKind, String)]) -> Vec<NoticeKind> {
        notices.iter().map(|(k, _)| *k).collect()
    }

    fn pending() -> RequestStatus {
        status(
            RequestPhase::PendingApproval,
            &[Observation::no(
                kind::APPROVED,
                reason::PENDING_APPROVAL,
                "0 of 1 approvals; waiting for a member of leads",
            )],
        )
    }

    fn approved(reason: &'static str) -> RequestStatus {
        let mut s = status(
            RequestPhase::Pending,
            &[Observation::yes(kind::APPROVED, reason, "approved by bob")],
        );
        s.approved_at = Some(Time(at("2026-01-01T00:00:05Z")));
        s
    }

    #[test]
    fn each_end_an_extension_moves_to_is_announced_as_expiring_soon_again() {
        let mut status = RequestStatus::default();
        assert_eq!(notice_uid(NoticeKind::ExpiringSoon, "u", &status), "u");
        status.extensions = serde_json::from_value(serde_json::json!([
            {"number": 1, "by": "30m", "askedBy": "alice", "phase": "Granted", "added": "30m"},
            {"number": 2, "by": "1h", "askedBy": "alice", "phase": "Denied"},
        ]))
        .unwrap();
        assert_eq!(
            notice_uid(NoticeKind::ExpiringSoon, "u", &status),
            "u.extended-1"
        );
        // Other notices are once per request, as before.
        assert_eq!(notice_uid(NoticeKind::Ready, "u", &status), "u");
    }

    #[test]
    fn each_state_is_announced_when_entered_and_not_again() {
        let new = RequestStatus::default();
        let notices = notices_for(&new, &pending());
        assert_eq!(kinds(&notices), [NoticeKind::PendingApproval]);
        assert_eq!(
            notices[0].1,
            "0 of 1 approvals; waiting for a member of leads"
        );
        assert!(notices_for(&pending(), &pending()).is_empty());

        let approved = approved(reason::SUCCESS);
        assert_eq!(
            kinds(&notices_for(&pending(), &approved)),
            [NoticeKind::Approved]
        );
        assert!(notices_for(&approved, &approved).is_empty());

        let mut ready = approved.clone();
        ready.phase = Some(RequestPhase::Ready);
        ready.pod_name = Some("web-0".into());
        ready.expires_at = Some(Time(at("2026-01-01T01:00:05Z")));
        let notices = notices_for(&approved, &ready);
        assert_eq!(kinds(&notices), [NoticeKind::Ready]);
        assert_eq!(
            notices[0].1,
            "access to pod web-0 granted until 2026-01-01T01:00:05Z"
        );

        let mut expired = ready.clone();
        expired.phase = Some(RequestPhase::Expired);
        assert_eq!(
            notices_for(&ready, &expired),
            [(
                NoticeKind::Expired,
                "access ended at 2026-01-01T01:00:05Z".to_string()
            )]
        );
    }

    #[test]
    fn a_break_glass_approval_is_announced_as_approved_and_as_break_glass() {
        assert_eq!(
            kinds(&notices_for(&pending(), &approved(reason::BREAK_GLASS))),
            [NoticeKind::Approved, NoticeKind::BreakGlass]
        );
    }

    #[test]
    fn a_denial_and_a_timeout_say_why() {
        let denied = status(
            RequestPhase::Denied,
            &[Observation::no(
                kind::APPROVED,
                reason::DENIED,
                "denied by bob: not now",
            )],
        );
        assert_eq!(
            notices_for(&pending(), &denied),
            [(NoticeKind::Denied, "denied by bob: not now".to_string())]
        );
        let timed_out = status(
            RequestPhase::Expired,
            &[Observation::no(
                kind::APPROVED,
                reason::TIMEOUT,
                "no decision within pendingTimeout 1h",
            )],
        );
        assert_eq!(
            notices_for(&pending(), &timed_out),
            [(
                NoticeKind::Expired,
                "no decision within pendingTimeout 1h".to_string()
            )]
        );
    }
}
