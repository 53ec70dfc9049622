//! Brokered sessions (oz only): a template's `accessConfig.sessionMode: Brokered` sends every
//! exec and attach of its grants through oz's aggregated API (`sessions.wizardofoz.co`), which
//! pipes the stream to the pod, records it, and closes it when the grant ends. The request's
//! status lists its last sessions ([`SessionRecord`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// The API group oz serves brokered sessions under, as an aggregated API.
pub const SESSIONS_GROUP: &str = "sessions.wizardofoz.co";
/// Its only version.
pub const SESSIONS_VERSION: &str = "v1alpha1";
/// The APIService that registers it: `<version>.<group>`.
pub const SESSIONS_API_SERVICE: &str = "v1alpha1.sessions.wizardofoz.co";

/// What the message of the Status that ends a session oz closed starts with.
pub const CLOSED_BY_OZ: &str = "oz closed the session";

/// How many sessions a request's `status.sessions` keeps: the newest; `status.sessionCounts`
/// still counts all of them.
pub const MAX_SESSIONS_IN_STATUS: usize = 20;
/// How many words of a session's command its record keeps.
pub const MAX_COMMAND_WORDS: usize = 32;
/// How long each recorded word of a command may be; a longer one is cut, marked with `…`.
pub const MAX_COMMAND_WORD_LENGTH: usize = 256;

/// How the users of a template's grants reach the pod.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum SessionMode {
    /// `kubectl exec` straight to the pod, as in Oz (the default). RBAC is checked when a
    /// stream opens, so a session opened before expiresAt outlives the grant.
    #[default]
    Direct,
    /// Only through oz (`ozctl exec`): the grant allows `pods/exec` (and `pods/attach` for pod
    /// access) in `sessions.wizardofoz.co` alone, and oz records every session and closes it
    /// when the grant ends.
    Brokered,
}

/// Why a brokered session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum SessionEndReason {
    /// The command ended, or the user closed the stream.
    Exited,
    /// The grant's window ended (expiresAt).
    Expired,
    /// The grant was revoked: its request was deleted, or is no longer Ready, or its template
    /// no longer grants it to the session's user.
    Revoked,
    /// The grant's template was deleted.
    TemplateDeleted,
    /// No input for the template's sessionIdleTimeout.
    IdleTimeout,
    /// The oz replica serving it shut down.
    ServerShutdown,
    /// The stream to the pod failed.
    Failed,
}

impl SessionEndReason {
    /// Every reason, in declaration order (each gets its metric series from the start).
    pub const ALL: [SessionEndReason; 7] = [
        Self::Exited,
        Self::Expired,
        Self::Revoked,
        Self::TemplateDeleted,
        Self::IdleTimeout,
        Self::ServerShutdown,
        Self::Failed,
    ];

    /// The line a user's terminal gets before oz closes the stream, and what the records say.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Exited => "the session ended",
            Self::Expired => "your access expired",
            Self::Revoked => "your access was revoked",
            Self::TemplateDeleted => "the access template was deleted",
            Self::IdleTimeout => "the session was idle for too long",
            Self::ServerShutdown => "the oz replica serving it shut down; reconnect",
            Self::Failed => "the stream to the pod failed",
        }
    }

    /// The message of the Status oz sends as a session's last frame when it closes it
    /// ([`CLOSED_BY_OZ`] and why), which ozctl tells apart from the command's own end.
    pub fn closed_message(self) -> String {
        format!("{CLOSED_BY_OZ}: {}", self.describe())
    }

    /// The metric label and audit word: the variant's name in snake case.
    pub fn label(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
            Self::TemplateDeleted => "template_deleted",
            Self::IdleTimeout => "idle_timeout",
            Self::ServerShutdown => "server_shutdown",
            Self::Failed => "failed",
        }
    }
}

/// Which stream a session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum SessionStream {
    /// `pods/exec`: a command run in the container.
    Exec,
    /// `pods/attach`: the container's own process.
    Attach,
}

impl SessionStream {
    /// The pod subresource, as Kubernetes names it in paths, RBAC rules and audit records.
    pub fn subresource(self) -> &'static str {
        match self {
            Self::Exec => "exec",
            Self::Attach => "attach",
        }
    }

    /// The stream a pod subresource names, if it is one oz brokers.
    pub fn of_subresource(subresource: &str) -> Option<Self> {
        [Self::Exec, Self::Attach]
            .into_iter()
            .find(|s| s.subresource() == subresource)
    }
}

/// One brokered session of a grant, as `status.sessions` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    /// The session's id: also the name of its recording (`ozctl replay ID`).
    #[schemars(length(max = 64))]
    pub id: String,
    /// Who opened it, as the apiserver authenticated them.
    #[schemars(length(max = 256))]
    pub user: String,
    /// exec or attach.
    pub stream: SessionStream,
    /// The pod.
    #[schemars(length(max = 253))]
    pub pod: String,
    /// The container, when the client named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub container: Option<String>,
    /// The command of an exec (at most [`MAX_COMMAND_WORDS`] words, each cut at
    /// [`MAX_COMMAND_WORD_LENGTH`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_COMMAND_WORDS as u32), inner(length(max = 257)))]
    pub command: Vec<String>,
    /// Whether the client asked for a terminal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tty: bool,
    /// When oz opened the stream to the pod.
    pub started_at: Time,
    /// When it ended; absent while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Time>,
    /// Why it ended; absent while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<SessionEndReason>,
    /// Where its recording is kept, relative to oz's recordings store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub recording: Option<String>,
}

/// How many brokered sessions a grant has had.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SessionCounts {
    /// Every session opened, including those no longer in `status.sessions`.
    pub total: u32,
    /// Those still open.
    pub open: u32,
}

/// `command` as a [`SessionRecord`] keeps it: at most [`MAX_COMMAND_WORDS`] words, each cut at
/// [`MAX_COMMAND_WORD_LENGTH`] characters with `…` appended.
pub fn recorded_command(command: &[String]) -> Vec<String> {
    command
        .iter()
        .take(MAX_COMMAND_WORDS)
        .map(
            |word| match word.char_indices().nth(MAX_COMMAND_WORD_LENGTH) {
                Some((cut, _)) => format!("{}…", &word[..cut]),
                None => word.clone(),
            },
        )
        .collect()
}

/// `sessions` with `record` in it: replaced where its id already is, else appended; then only
/// the newest [`MAX_SESSIONS_IN_STATUS`] kept (records are in the order they started).
pub fn with_session(mut sessions: Vec<SessionRecord>, record: SessionRecord) -> Vec<SessionRecord> {
    match sessions.iter_mut().find(|s| s.id == record.id) {
        Some(existing) => *existing = record,
        None => sessions.push(record),
    }
    let excess = sessions.len().saturating_sub(MAX_SESSIONS_IN_STATUS);
    sessions.drain(..excess);
    sessions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            user: "alice".into(),
            stream: SessionStream::Exec,
            pod: "web-1".into(),
            container: None,
            command: vec!["/bin/sh".into()],
            tty: true,
            started_at: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            ended_at: None,
            end_reason: None,
            recording: None,
        }
    }

    #[test]
    fn a_session_is_replaced_by_id_and_only_the_newest_twenty_are_kept() {
        let mut sessions = Vec::new();
        for i in 0..25 {
            sessions = with_session(sessions, record(&format!("s{i}")));
        }
        assert_eq!(sessions.len(), MAX_SESSIONS_IN_STATUS);
        assert_eq!(sessions[0].id, "s5");
        assert_eq!(sessions[19].id, "s24");

        let mut ended = record("s10");
        ended.end_reason = Some(SessionEndReason::Expired);
        let sessions = with_session(sessions, ended.clone());
        assert_eq!(sessions.len(), MAX_SESSIONS_IN_STATUS);
        assert_eq!(sessions[5], ended);
    }

    #[test]
    fn a_long_command_is_cut_to_bounded_words() {
        let long = "x".repeat(MAX_COMMAND_WORD_LENGTH + 10);
        let command: Vec<String> = std::iter::repeat_n(long, MAX_COMMAND_WORDS + 5).collect();
        let kept = recorded_command(&command);
        assert_eq!(kept.len(), MAX_COMMAND_WORDS);
        assert_eq!(kept[0].chars().count(), MAX_COMMAND_WORD_LENGTH + 1);
        assert!(kept[0].ends_with('…'));
        assert_eq!(recorded_command(&["ls".into()]), vec!["ls".to_string()]);
    }

    #[test]
    fn a_stream_is_named_by_its_subresource() {
        for stream in [SessionStream::Exec, SessionStream::Attach] {
            assert_eq!(
                SessionStream::of_subresource(stream.subresource()),
                Some(stream)
            );
        }
        assert_eq!(SessionStream::Attach.subresource(), "attach");
        assert_eq!(SessionStream::of_subresource("portforward"), None);
    }

    #[test]
    fn direct_is_the_default_mode() {
        assert_eq!(SessionMode::default(), SessionMode::Direct);
        assert_eq!(
            serde_json::to_value(SessionEndReason::TemplateDeleted).unwrap(),
            serde_json::json!("TemplateDeleted")
        );
        assert_eq!(
            SessionEndReason::TemplateDeleted.label(),
            "template_deleted"
        );
    }
}
