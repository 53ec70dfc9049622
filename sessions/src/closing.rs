//! When an open session must be closed, and what the user is told. Plain functions: the broker's
//! session loop calls [`close_reason`] on every change to the grants it watches, and sends the
//! frames made by [`closing_frames`] before it closes the stream.

use chrono::{DateTime, Utc};
use oz_api::{RequestPhase, SessionEndReason};
use serde_json::json;

use crate::{
    broker::frames::{ERROR, STDOUT},
    grants::{RequestView, TemplateView},
};

/// Who holds an open session: its user and their groups when they opened it.
#[derive(Clone, Copy, Debug)]
pub struct Holder<'a> {
    pub user: &'a str,
    pub groups: &'a [String],
}

/// Why `holder`'s session under the grant `uid` (last known to expire at `expires_at`) must
/// close now, given what is known of its request (`None`: deleted) and template (`None`:
/// deleted); `None` while it may go on. Expiry wins over every other reason, then a deleted
/// template (its requests are deleted with it), then a deleted or no longer Ready request, then
/// a template that no longer grants the request to the holder (its allowedGroups lost their
/// group, or its grantTo became Requester): the grant rule is asked again on every change, as
/// it was when the session opened.
pub fn close_reason(
    holder: Holder<'_>,
    uid: &str,
    expires_at: DateTime<Utc>,
    request: Option<&RequestView>,
    template: Option<&TemplateView>,
    now: DateTime<Utc>,
) -> Option<SessionEndReason> {
    let request = request.filter(|r| r.uid == uid);
    let expired = now >= expires_at
        || request.is_some_and(|r| {
            r.summary.phase == Some(RequestPhase::Expired)
                || r.summary.expires_at.is_some_and(|at| now >= at)
        });
    if expired {
        return Some(SessionEndReason::Expired);
    }
    if template.is_none_or(|t| t.deleting) {
        return Some(SessionEndReason::TemplateDeleted);
    }
    let config = template.map(|t| &t.config);
    match request {
        None => Some(SessionEndReason::Revoked),
        Some(r) if r.summary.phase != Some(RequestPhase::Ready) => Some(SessionEndReason::Revoked),
        Some(r) if !r.summary.is_for(config, holder.user, holder.groups) => {
            Some(SessionEndReason::Revoked)
        }
        Some(_) => None,
    }
}

/// The line the user's terminal gets before the stream is closed.
pub fn closing_line(reason: SessionEndReason) -> String {
    format!("\r\noz: {}; session closed\r\n", reason.describe())
}

/// The two frames sent before the websocket close: the line on stdout (channel 1), and a
/// Status on the error channel (3) that kubectl reports as the command's failure.
pub fn closing_frames(reason: SessionEndReason) -> [Vec<u8>; 2] {
    let mut line = vec![STDOUT];
    line.extend_from_slice(closing_line(reason).as_bytes());
    let status = json!({
        "metadata": {},
        "status": "Failure",
        "message": reason.closed_message(),
        "reason": "Forbidden",
        "details": {"causes": [{"reason": "SessionClosed", "message": reason.label()}]},
        "code": 403,
    });
    let mut error = vec![ERROR];
    error.extend_from_slice(status.to_string().as_bytes());
    [line, error]
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-23T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn request(phase: RequestPhase) -> RequestView {
        RequestView {
            namespace: "shop".into(),
            uid: "u1".into(),
            summary: oz_api::GrantSummary {
                kind: oz_api::AccessKind::Exec,
                name: "alices".into(),
                template: "web".into(),
                requested_by: Some("alice".into()),
                phase: Some(phase),
                pod_name: Some("web-0".into()),
                session_mode: None,
                expires_at: Some(now() + TimeDelta::minutes(5)),
                approvers: Vec::new(),
                extensions: Vec::new(),
            },
        }
    }

    fn template(deleting: bool) -> TemplateView {
        TemplateView {
            config: serde_json::from_value(json!({"allowedGroups": ["devs"]})).unwrap(),
            deleting,
        }
    }

    #[test]
    fn each_change_to_the_grant_closes_for_its_own_reason() {
        let at = now() + TimeDelta::minutes(5);
        let ready = request(RequestPhase::Ready);
        let t = template(false);
        let alice = Holder {
            user: "alice",
            groups: &["devs".to_string()],
        };
        let reason = |r: Option<&RequestView>, t: Option<&TemplateView>, now| {
            close_reason(alice, "u1", at, r, t, now)
        };
        assert_eq!(reason(Some(&ready), Some(&t), now()), None);
        assert_eq!(
            reason(Some(&ready), Some(&t), at),
            Some(SessionEndReason::Expired)
        );
        assert_eq!(
            reason(None, None, at),
            Some(SessionEndReason::Expired),
            "expiry wins"
        );
        assert_eq!(
            reason(Some(&request(RequestPhase::Expired)), Some(&t), now()),
            Some(SessionEndReason::Expired),
            "the controller saw expiresAt first"
        );
        assert_eq!(
            reason(None, Some(&t), now()),
            Some(SessionEndReason::Revoked)
        );
        assert_eq!(
            reason(Some(&request(RequestPhase::Failed)), Some(&t), now()),
            Some(SessionEndReason::Revoked)
        );
        let mut recreated = ready.clone();
        recreated.uid = "u2".into();
        assert_eq!(
            reason(Some(&recreated), Some(&t), now()),
            Some(SessionEndReason::Revoked),
            "a new request of the same name is another grant"
        );
        assert_eq!(
            reason(Some(&ready), None, now()),
            Some(SessionEndReason::TemplateDeleted)
        );
        assert_eq!(
            reason(Some(&ready), Some(&template(true)), now()),
            Some(SessionEndReason::TemplateDeleted)
        );
        assert_eq!(
            reason(None, None, now()),
            Some(SessionEndReason::TemplateDeleted)
        );
    }

    /// bob's session under alice's grant, which its template shares with the allowedGroups:
    /// it closes when the template stops sharing it with bob, and alice's own does not.
    #[test]
    fn a_template_that_no_longer_grants_the_request_to_the_holder_closes_the_session() {
        let at = now() + TimeDelta::minutes(5);
        let ready = request(RequestPhase::Ready);
        let shared = |groups: &[&str], grant_to: &str| TemplateView {
            config: serde_json::from_value(json!({"allowedGroups": groups, "grantTo": grant_to}))
                .unwrap(),
            deleting: false,
        };
        let qa = ["qa".to_string()];
        let bob = Holder {
            user: "bob",
            groups: &qa,
        };
        let devs = ["devs".to_string()];
        let alice = Holder {
            user: "alice",
            groups: &devs,
        };
        let judge = |holder, template: &TemplateView| {
            close_reason(holder, "u1", at, Some(&ready), Some(template), now())
        };
        let before = shared(&["devs", "qa"], "AllowedGroups");
        assert_eq!(judge(bob, &before), None);
        for narrowed in [
            shared(&["devs"], "AllowedGroups"),
            shared(&["devs", "qa"], "Requester"),
        ] {
            assert_eq!(
                judge(bob, &narrowed),
                Some(SessionEndReason::Revoked),
                "{:?}",
                narrowed.config
            );
            assert_eq!(judge(alice, &narrowed), None, "the requester's own grant");
        }
    }

    #[test]
    fn the_user_is_told_why_on_stdout_and_in_a_status() {
        let [line, status] = closing_frames(SessionEndReason::Expired);
        assert_eq!(line[0], 1);
        assert_eq!(
            &line[1..],
            b"\r\noz: your access expired; session closed\r\n"
        );
        assert_eq!(status[0], 3);
        let status: serde_json::Value = serde_json::from_slice(&status[1..]).unwrap();
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(
            status["message"],
            "oz closed the session: your access expired"
        );
    }
}
