//! What a sink is sent: a CloudEvents 1.0 event in structured mode, or a Slack message. Pure
//! functions of a [`Notice`] and the time it was sent.

use k8s_openapi::jiff::Timestamp;
use oz_api::SinkFormat;
use serde_json::{Value, json};

use super::{Notice, NoticeKind};

/// The CloudEvents structured-mode media type.
pub const CLOUDEVENTS_CONTENT_TYPE: &str = "application/cloudevents+json";
/// What a Slack incoming webhook accepts.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// Every event type starts with this, then the kind's suffix.
pub const EVENT_TYPE_PREFIX: &str = "co.wizardofoz.access.request.";

impl NoticeKind {
    /// The lower-case word that ends the CloudEvent's `type` and `id`: `pendingapproval`,
    /// `approved`, `denied`, `ready`, `expiringsoon`, `expired`, `breakglass`,
    /// `extensionpending`, `extended` or `extensiondenied`.
    pub fn suffix(self) -> &'static str {
        match self {
            NoticeKind::PendingApproval => "pendingapproval",
            NoticeKind::Approved => "approved",
            NoticeKind::Denied => "denied",
            NoticeKind::Ready => "ready",
            NoticeKind::ExpiringSoon => "expiringsoon",
            NoticeKind::Expired => "expired",
            NoticeKind::BreakGlass => "breakglass",
            NoticeKind::ExtensionPending => "extensionpending",
            NoticeKind::Extended => "extended",
            NoticeKind::ExtensionDenied => "extensiondenied",
        }
    }

    /// The CloudEvent's `type`, e.g. `co.wizardofoz.access.request.approved`.
    pub fn event_type(self) -> String {
        format!("{EVENT_TYPE_PREFIX}{}", self.suffix())
    }

    /// How a human reads it, e.g. `Pending approval`.
    fn title(self) -> &'static str {
        match self {
            NoticeKind::PendingApproval => "Pending approval",
            NoticeKind::Approved => "Approved",
            NoticeKind::Denied => "Denied",
            NoticeKind::Ready => "Access granted",
            NoticeKind::ExpiringSoon => "Expiring soon",
            NoticeKind::Expired => "Expired",
            NoticeKind::BreakGlass => "BREAK-GLASS",
            NoticeKind::ExtensionPending => "Extension pending approval",
            NoticeKind::Extended => "Extended",
            NoticeKind::ExtensionDenied => "Extension denied",
        }
    }
}

/// A body to POST and its content type.
#[derive(Clone, Debug, PartialEq)]
pub struct Payload {
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

/// The payload `notice` makes for a sink of `format`, sent at `time`.
pub fn payload(notice: &Notice, format: SinkFormat, time: Timestamp) -> Payload {
    let (content_type, value) = match format {
        SinkFormat::CloudEvents => (CLOUDEVENTS_CONTENT_TYPE, cloud_event(notice, time)),
        SinkFormat::Slack => (JSON_CONTENT_TYPE, slack_message(notice)),
    };
    Payload {
        content_type,
        body: serde_json::to_vec(&value).expect("a JSON value always serialises"),
    }
}

/// The CloudEvents 1.0 structured-mode event for `notice`. Its `id` is the request's uid and
/// the kind, so a sink that receives a retry or a repeat can drop it.
pub fn cloud_event(notice: &Notice, time: Timestamp) -> Value {
    let kind = notice.kind;
    json!({
        "specversion": "1.0",
        "id": format!("{}.{}", notice.uid, kind.suffix()),
        "source": format!(
            "/apis/{}/{}/namespaces/{}/{}/{}",
            oz_api::GROUP,
            oz_api::VERSION,
            notice.namespace,
            notice.access.request_plural(),
            notice.name
        ),
        "type": kind.event_type(),
        "subject": format!("{}/{}", notice.namespace, notice.name),
        "time": time.to_string(),
        "datacontenttype": "application/json",
        "data": {
            "kind": notice.access.request_kind(),
            "namespace": notice.namespace,
            "name": notice.name,
            "requester": notice.requester,
            "template": notice.template,
            "reason": notice.reason,
            "ticket": notice.ticket,
            "pod": notice.pod,
            "expiresAt": notice.expires_at.map(|t| t.to_string()),
            "approvers": notice.approvers,
            "message": notice.message,
        },
    })
}

/// `{"text": ...}` for a Slack incoming webhook: one line saying what happened to which
/// request, then the reason, ticket, approvers and expiry when there are any.
pub fn slack_message(notice: &Notice) -> Value {
    json!({ "text": slack_escaped(&slack_text(notice)) })
}

/// `text` with Slack's three control characters escaped, as Slack asks of any text it should
/// show as written: the reason, ticket and comments are users' words, and unescaped they could
/// mention `<!channel>` or dress a link as `<https://...|Approve>`.
fn slack_escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn slack_text(notice: &Notice) -> String {
    let mut text = format!(
        "{}: {} {}/{} by {} (template {})",
        notice.kind.title(),
        notice.access.request_kind(),
        notice.namespace,
        notice.name,
        notice.requester,
        notice.template
    );
    if !notice.message.is_empty() {
        text.push_str(&format!(": {}", notice.message));
    }
    if let Some(reason) = &notice.reason {
        text.push_str(&format!("\nReason: {reason}"));
    }
    if let Some(ticket) = &notice.ticket {
        text.push_str(&format!("\nTicket: {ticket}"));
    }
    if !notice.approvers.is_empty() {
        text.push_str(&format!("\nApprovers: {}", notice.approvers.join(", ")));
    }
    if let Some(pod) = &notice.pod {
        text.push_str(&format!("\nPod: {pod}"));
    }
    if let Some(expires_at) = notice.expires_at {
        text.push_str(&format!("\nExpires at: {expires_at}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use oz_api::AccessKind;

    use super::*;

    pub(crate) fn notice(kind: NoticeKind) -> Notice {
        Notice {
            kind,
            access: AccessKind::Pod,
            namespace: "payments".into(),
            name: "debug-1".into(),
            uid: "0b7e6c1a-uid".into(),
            sinks: None,
            requester: "alice".into(),
            template: "payments-debug".into(),
            reason: Some("INC-42 card declines".into()),
            ticket: Some("INC-42".into()),
            pod: Some("debug-1-pod".into()),
            expires_at: Some("2026-11-23T10:00:00Z".parse().unwrap()),
            approvers: vec!["bob".into(), "carol".into()],
            message: "approved by bob, carol".into(),
        }
    }

    #[test]
    fn a_cloud_event_carries_every_attribute_in_structured_mode() {
        let time: Timestamp = "2026-11-23T09:00:00.5Z".parse().unwrap();
        let event = cloud_event(&notice(NoticeKind::Approved), time);
        assert_eq!(
            event,
            json!({
                "specversion": "1.0",
                "id": "0b7e6c1a-uid.approved",
                "source": "/apis/crds.wizardofoz.co/v1alpha1/namespaces/payments/podaccessrequests/debug-1",
                "type": "co.wizardofoz.access.request.approved",
                "subject": "payments/debug-1",
                "time": "2026-11-23T09:00:00.5Z",
                "datacontenttype": "application/json",
                "data": {
                    "kind": "PodAccessRequest",
                    "namespace": "payments",
                    "name": "debug-1",
                    "requester": "alice",
                    "template": "payments-debug",
                    "reason": "INC-42 card declines",
                    "ticket": "INC-42",
                    "pod": "debug-1-pod",
                    "expiresAt": "2026-11-23T10:00:00Z",
                    "approvers": ["bob", "carol"],
                    "message": "approved by bob, carol",
                },
            })
        );
        let sent = payload(&notice(NoticeKind::Approved), SinkFormat::CloudEvents, time);
        assert_eq!(sent.content_type, "application/cloudevents+json");
        assert_eq!(serde_json::from_slice::<Value>(&sent.body).unwrap(), event);
    }

    #[test]
    fn every_kind_has_its_own_event_type_and_id() {
        let kinds = [
            (NoticeKind::PendingApproval, "pendingapproval"),
            (NoticeKind::Approved, "approved"),
            (NoticeKind::Denied, "denied"),
            (NoticeKind::Ready, "ready"),
            (NoticeKind::ExpiringSoon, "expiringsoon"),
            (NoticeKind::Expired, "expired"),
            (NoticeKind::BreakGlass, "breakglass"),
            (NoticeKind::ExtensionPending, "extensionpending"),
            (NoticeKind::Extended, "extended"),
            (NoticeKind::ExtensionDenied, "extensiondenied"),
        ];
        for (kind, suffix) in kinds {
            let mut n = notice(kind);
            n.access = AccessKind::Exec;
            let event = cloud_event(&n, Timestamp::UNIX_EPOCH);
            assert_eq!(
                event["type"],
                format!("co.wizardofoz.access.request.{suffix}")
            );
            assert_eq!(event["id"], format!("0b7e6c1a-uid.{suffix}"));
            assert_eq!(
                event["source"],
                "/apis/crds.wizardofoz.co/v1alpha1/namespaces/payments/execaccessrequests/debug-1"
            );
        }
    }

    #[test]
    fn absent_details_are_null_in_the_event() {
        let mut n = notice(NoticeKind::PendingApproval);
        n.reason = None;
        n.ticket = None;
        n.pod = None;
        n.expires_at = None;
        n.approvers.clear();
        let data = &cloud_event(&n, Timestamp::UNIX_EPOCH)["data"];
        for key in ["reason", "ticket", "pod", "expiresAt"] {
            assert_eq!(data[key], Value::Null, "{key}");
        }
        assert_eq!(data["approvers"], json!([]));
    }

    #[test]
    fn a_slack_message_is_one_text_field_naming_the_request_and_its_details() {
        let sent = payload(
            &notice(NoticeKind::BreakGlass),
            SinkFormat::Slack,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(sent.content_type, "application/json");
        let value: Value = serde_json::from_slice(&sent.body).unwrap();
        assert_eq!(value.as_object().unwrap().len(), 1, "{value}");
        assert_eq!(
            value["text"],
            "BREAK-GLASS: PodAccessRequest payments/debug-1 by alice (template payments-debug): \
             approved by bob, carol\nReason: INC-42 card declines\nTicket: INC-42\n\
             Approvers: bob, carol\nPod: debug-1-pod\nExpires at: 2026-11-23T10:00:00Z"
        );
    }

    #[test]
    fn users_words_cannot_mention_the_channel_or_forge_a_link_in_slack() {
        let mut n = notice(NoticeKind::PendingApproval);
        n.reason = Some("<!channel> urgent & <https://evil.example/|Approve>".into());
        n.ticket = Some("INC-1 <@U123>".into());
        let value = slack_message(&n);
        let text = value["text"].as_str().unwrap();
        assert!(
            text.contains(
                "Reason: &lt;!channel&gt; urgent &amp; &lt;https://evil.example/|Approve&gt;"
            ),
            "{text}"
        );
        assert!(text.contains("Ticket: INC-1 &lt;@U123&gt;"), "{text}");
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
    }
}
