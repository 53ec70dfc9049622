//! The audit record: what one way into a pod was, who took it, and the grant that let them
//! in, one JSON object a line of the audit file. Admission makes it from an AdmissionReview and
//! the sessions broker from a session; [`audit_annotations`] is its short form in the
//! apiserver's own audit log.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The request that grants a user access to a pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// `ExecAccessRequest` or `PodAccessRequest`.
    pub kind: String,
    /// The request's name (in the pod's namespace).
    pub name: String,
    /// The template it was granted through.
    pub template: String,
    /// Who approved the grant (the request's `status.approvals`), oldest first; empty when its
    /// template requires no approval. On a fleet spoke, the approvers the hub counted, as
    /// `NAME@HUB`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// The extensions that moved the grant's end (`ozctl extend`), oldest first, each as
    /// `+30m asked by alice` (with `, approved by dave` under a template with approval).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// One audit record, written as one JSON object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// When the webhook saw it (RFC 3339, UTC).
    pub time: String,
    /// The Event reason: `PodExec`, `PodAttach`, `PodPortForward` or `PodDebug`.
    pub event: String,
    /// The AdmissionReview uid, to find the apiserver's audit entry.
    pub request_uid: String,
    /// The user name.
    pub user: String,
    /// The user's uid, if the authenticator gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The user's groups.
    pub groups: Vec<String>,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// `CONNECT` or `UPDATE`.
    pub operation: String,
    /// `exec`, `attach`, `portforward` or `ephemeralcontainers`.
    pub subresource: String,
    /// The container (for debug: the new ephemeral container), if named.
    pub container: Option<String>,
    /// The command (for debug: command then args of the ephemeral container).
    pub command: Vec<String>,
    /// Whether a TTY was asked for.
    pub tty: bool,
    /// Whether stdin was attached.
    pub stdin: bool,
    /// Port-forward: the ports, when given in the request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<i64>,
    /// Debug: the ephemeral container's image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The active grant that lets this user into this pod, or null.
    pub grant: Option<Grant>,
    /// Why the grant could not be looked up, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_error: Option<String>,
    /// Whether this was a dry run (no Event is published for those).
    pub dry_run: bool,
    /// Whether the operation was allowed.
    pub allowed: bool,
    /// Why it was denied, in enforcing namespaces: the message the user got, with what it told
    /// them to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_because: Option<String>,
    /// Who sent the review: `apiserver` (its client certificate verified) or `unverified`.
    #[serde(default)]
    pub caller: CallerKind,
    /// With `caller` `apiserver`: the subject CN of its client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_name: Option<String>,
    /// True when `user` is oz itself opening the pod's stream for a brokered session
    /// (oz-webhooks' `EnforceSettings::brokers`): oz checked the grant
    /// itself, and the session's own `session-start` record names the user.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub brokered: bool,
    /// Brokered sessions' records only (`event` `session-start` or `session-end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionAudit>,
}

/// What a brokered session's audit record adds: which session, its recording, how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionAudit {
    /// The session id (also its recording's name).
    pub id: String,
    /// The recording's key in oz's recordings store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<String>,
    /// `session-end` only: why it ended (`oz_api::SessionEndReason::label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// `session-end` only, once the recording file was written: its SHA-256 (lowercase hex),
    /// which `ozctl audit verify --recordings` checks the file against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_sha256: Option<String>,
    /// `session-end` only, with `recordingSha256`: the recording file's length in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_bytes: Option<u64>,
    /// The oz replica that served it.
    pub replica: String,
}

/// What an audit record says of who sent the review it was made from (its `caller`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallerKind {
    /// The kube-apiserver: its webhook client certificate was verified against the client CA
    /// (`--webhook-client-ca-file`), so the record describes an access the apiserver saw.
    Apiserver,
    /// Anyone who could reach the webhook port (no client CA): the record is only as true as
    /// that network is closed.
    #[default]
    Unverified,
}

/// The `auditAnnotations` of the response; the apiserver prefixes each key with the webhook
/// name, as in `audit.oz.wizardofoz.co/grant`.
pub fn audit_annotations(record: &AuditRecord) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    match &record.grant {
        Some(grant) => {
            annotations.insert("grant".into(), format!("{}/{}", grant.kind, grant.name));
            annotations.insert("template".into(), grant.template.clone());
            if !grant.approvers.is_empty() {
                annotations.insert("approvers".into(), grant.approvers.join(","));
            }
        }
        None => {
            annotations.insert("grant".into(), "none".into());
        }
    }
    if let Some(reason) = &record.denied_because {
        annotations.insert("denied".into(), reason.clone());
    }
    annotations
}
