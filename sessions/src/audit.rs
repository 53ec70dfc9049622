//! A brokered session's audit records: `session-start` when it opens and `session-end` when it
//! ends, written through the same [`AuditLog`] as the webhooks' (the `oz::audit` log line and,
//! with `--audit-log-path`, the hash-chained file).

use chrono::{DateTime, SecondsFormat, Utc};
use oz_api::SessionEndReason;
use oz_audit::{AuditLog, AuditRecord, CallerKind, Grant, SessionAudit};

use crate::{SessionInfo, recording::RecordingDigest};

/// The `event` of the record written when a session opens.
pub const SESSION_START: &str = "session-start";
/// The `event` of the record written when a session ends.
pub const SESSION_END: &str = "session-end";

/// How a session ended, for its `session-end` record: when, why, and the digest of its
/// recording file (`None` when the store could not write it in time).
#[derive(Clone, Debug)]
pub struct SessionEnd {
    /// When.
    pub at: DateTime<Utc>,
    /// Why.
    pub reason: SessionEndReason,
    /// The recording file's SHA-256 and length.
    pub recording: Option<RecordingDigest>,
}

/// The record of `info`'s start (no `ended`) or end, under `grant` (approvers included), with
/// its recording key. The caller is the apiserver: the broker only serves requests whose
/// front-proxy certificate was verified.
pub fn session_record(
    info: &SessionInfo,
    grant: &Grant,
    stdin: bool,
    recording: &str,
    ended: Option<&SessionEnd>,
) -> AuditRecord {
    let (event, time) = match ended {
        None => (SESSION_START, info.started_at),
        Some(end) => (SESSION_END, end.at),
    };
    AuditRecord {
        time: time.to_rfc3339_opts(SecondsFormat::Micros, true),
        event: event.into(),
        request_uid: info.id.clone(),
        user: info.user.clone(),
        uid: None,
        groups: info.groups.clone(),
        namespace: info.namespace.clone(),
        pod: info.pod.clone(),
        operation: "CONNECT".into(),
        subresource: info.stream.subresource().into(),
        container: info.container.clone(),
        command: info.command.clone(),
        tty: info.tty,
        stdin,
        ports: Vec::new(),
        image: None,
        grant: Some(grant.clone()),
        grant_error: None,
        dry_run: false,
        allowed: true,
        denied_because: None,
        caller: CallerKind::Apiserver,
        caller_name: None,
        brokered: true,
        session: Some(SessionAudit {
            id: info.id.clone(),
            recording: Some(recording.to_string()),
            end_reason: ended.map(|end| end.reason.label().to_string()),
            recording_sha256: ended
                .and_then(|end| end.recording.as_ref())
                .map(|digest| digest.sha256.clone()),
            recording_bytes: ended
                .and_then(|end| end.recording.as_ref())
                .map(|digest| digest.bytes),
            replica: info.replica.clone(),
        }),
    }
}

/// Writes the record (see [`session_record`]).
pub async fn write(
    log: &AuditLog,
    info: &SessionInfo,
    grant: &Grant,
    stdin: bool,
    recording: &str,
    ended: Option<&SessionEnd>,
) {
    log.write(&session_record(info, grant, stdin, recording, ended))
        .await;
}

#[cfg(test)]
mod tests {
    use oz_api::AccessKind;

    use super::*;
    use crate::GrantRef;

    #[test]
    fn start_and_end_records_name_the_session_and_the_end_its_reason() {
        let started_at = DateTime::parse_from_rfc3339("2026-11-23T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let info = SessionInfo {
            id: "20261123-080000-abcdefgh".into(),
            namespace: "shop".into(),
            grant: GrantRef {
                kind: AccessKind::Exec,
                name: "alices".into(),
                uid: "u".into(),
                template: "web".into(),
            },
            user: "alice".into(),
            groups: vec!["devs".into()],
            stream: oz_api::SessionStream::Exec,
            pod: "web-0".into(),
            container: None,
            command: vec!["sh".into()],
            tty: true,
            started_at,
            replica: "oz-0".into(),
        };
        let grant = Grant {
            kind: "ExecAccessRequest".into(),
            name: "alices".into(),
            template: "web".into(),
            approvers: vec!["bob".into()],
            extensions: Vec::new(),
        };
        let start =
            serde_json::to_value(session_record(&info, &grant, true, "shop/x.cast", None)).unwrap();
        assert_eq!(start["event"], "session-start");
        assert_eq!(start["session"]["id"], "20261123-080000-abcdefgh");
        assert_eq!(start["session"]["recording"], "shop/x.cast");
        assert_eq!(start["grant"]["approvers"][0], "bob");
        assert!(start["session"].get("endReason").is_none());
        assert!(start["session"].get("recordingSha256").is_none());
        let end = serde_json::to_value(session_record(
            &info,
            &grant,
            true,
            "shop/x.cast",
            Some(&SessionEnd {
                at: started_at,
                reason: SessionEndReason::IdleTimeout,
                recording: Some(RecordingDigest {
                    sha256: "ab".repeat(32),
                    bytes: 1234,
                }),
            }),
        ))
        .unwrap();
        assert_eq!(end["event"], "session-end");
        assert_eq!(end["session"]["recordingSha256"], "ab".repeat(32));
        assert_eq!(end["session"]["recordingBytes"], 1234);
        assert_eq!(end["session"]["endReason"], "idle_timeout");
        assert_eq!(end["brokered"], true);
    }
}
