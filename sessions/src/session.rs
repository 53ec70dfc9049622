//! What a brokered session is, known when it opens: who, which grant, which pod, which command.
//! Its recording's header, its audit records and its entry in the request's `status.sessions`
//! are all made from one [`SessionInfo`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use oz_api::{AccessKind, SessionRecord, SessionStream, session::recorded_command};

/// Who the apiserver says is calling, from the front-proxy headers of a request whose client
/// certificate was verified (never from headers alone).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// `X-Remote-User`.
    pub user: String,
    /// Every `X-Remote-Group`.
    pub groups: Vec<String>,
    /// `X-Remote-Extra-<key>`, keys lowercased and unescaped.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The grant a session is opened under: one ExecAccessRequest or PodAccessRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRef {
    /// Exec or Pod.
    pub kind: AccessKind,
    /// The request's name (in [`SessionInfo::namespace`]).
    pub name: String,
    /// The request's uid.
    pub uid: String,
    /// Its template's name.
    pub template: String,
}

/// One session, as it was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// [`new_session_id`]: unique, sortable by start time, safe in a path and an object key.
    pub id: String,
    /// The pod's (and the grant's) namespace.
    pub namespace: String,
    /// The grant it is opened under.
    pub grant: GrantRef,
    /// Who opened it.
    pub user: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// exec or attach.
    pub stream: SessionStream,
    /// The pod.
    pub pod: String,
    /// The container the client named, if any.
    pub container: Option<String>,
    /// The exec's command (empty for attach).
    pub command: Vec<String>,
    /// Whether the client asked for a terminal.
    pub tty: bool,
    /// When oz opened the stream to the pod.
    pub started_at: DateTime<Utc>,
    /// The oz replica serving it (its pod name, else its host name).
    pub replica: String,
}

impl SessionInfo {
    /// Its entry in the request's `status.sessions`, while open.
    pub fn record(&self) -> SessionRecord {
        SessionRecord {
            id: self.id.clone(),
            user: self.user.clone(),
            stream: self.stream,
            pod: self.pod.clone(),
            container: self.container.clone(),
            command: recorded_command(&self.command),
            tty: self.tty,
            started_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_microsecond(self.started_at.timestamp_micros())
                    .expect("a chrono time is within jiff's range"),
            ),
            ended_at: None,
            end_reason: None,
            recording: None,
        }
    }
}

/// A new session id: the UTC start time to the second and 8 random lowercase letters and
/// digits, as `20261123-081500-k3x9qa7m`; sorts by start time, fits object keys and paths.
pub fn new_session_id(now: DateTime<Utc>) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut random = [0u8; 8];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random)
        .expect("the OS random source works");
    let suffix: String = random
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("{}-{suffix}", now.format("%Y%m%d-%H%M%S"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sortable_path_safe_and_distinct() {
        let now = DateTime::parse_from_rfc3339("2026-11-23T08:15:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let a = new_session_id(now);
        let b = new_session_id(now);
        assert!(a.starts_with("20261123-081500-"), "{a}");
        assert_eq!(a.len(), "20261123-081500-".len() + 8);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert_ne!(a, b);
    }
}
