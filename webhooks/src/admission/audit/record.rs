//! The audit record: what one way into a pod was, who took it, and the grant that let them
//! in. [`describe`] makes it from an AdmissionReview; [`audit_annotations`] is its short form
//! in the apiserver's own audit log.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, Operation},
};
use oz_api::PodAction;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::callers::{Caller, CallerKind};

/// The audited action an admission request is, if it is one: CONNECT of `pods/exec`,
/// `pods/attach`, `pods/portforward`, or UPDATE of `pods/ephemeralcontainers` (`kubectl debug`).
pub fn pod_action(request: &AdmissionRequest<DynamicObject>) -> Option<PodAction> {
    if !request.resource.group.is_empty() || request.resource.resource != "pods" {
        return None;
    }
    match (&request.operation, request.sub_resource.as_deref()?) {
        (Operation::Connect, "exec") => Some(PodAction::Exec),
        (Operation::Connect, "attach") => Some(PodAction::Attach),
        (Operation::Connect, "portforward") => Some(PodAction::PortForward),
        (Operation::Update, "ephemeralcontainers") => Some(PodAction::Debug),
        _ => None,
    }
}

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
    /// template requires no approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
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
    /// Why it was denied, in enforcing namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_because: Option<String>,
    /// Who sent the review: `apiserver` (its client certificate verified) or `unverified`.
    #[serde(default)]
    pub caller: CallerKind,
    /// With `caller` `apiserver`: the subject CN of its client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_name: Option<String>,
    /// True when `user` is oz itself opening the pod's stream for a brokered session
    /// ([`EnforceSettings::brokers`](super::EnforceSettings::brokers)): oz checked the grant
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
    /// `session-end` only: why it ended ([`oz_api::SessionEndReason::label`]).
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

/// The record for `request`, before the grant is looked up: allowed, no grant, sent by
/// `caller`.
pub fn describe(
    request: &AdmissionRequest<DynamicObject>,
    action: PodAction,
    caller: &Caller,
) -> AuditRecord {
    let user = &request.user_info;
    let object = request.object.as_ref().map(|o| &o.data);
    let text = |key: &str| {
        object
            .and_then(|o| o.get(key))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let flag = |key: &str| {
        object
            .and_then(|o| o.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let mut record = AuditRecord {
        time: Timestamp::now().to_string(),
        event: action.reason().into(),
        request_uid: request.uid.clone(),
        user: user.username.clone().unwrap_or_default(),
        uid: user.uid.clone(),
        groups: user.groups.clone().unwrap_or_default(),
        namespace: request.namespace.clone().unwrap_or_default(),
        pod: request.name.clone(),
        operation: operation_name(&request.operation).into(),
        subresource: request.sub_resource.clone().unwrap_or_default(),
        container: None,
        command: Vec::new(),
        tty: false,
        stdin: false,
        ports: Vec::new(),
        image: None,
        grant: None,
        grant_error: None,
        dry_run: request.dry_run,
        allowed: true,
        denied_because: None,
        caller: caller.kind(),
        caller_name: caller.name().map(String::from),
        brokered: false,
        session: None,
    };
    match action {
        PodAction::Exec | PodAction::Attach => {
            record.container = text("container");
            record.command = strings(object.and_then(|o| o.get("command")));
            record.tty = flag("tty");
            record.stdin = flag("stdin");
        }
        PodAction::PortForward => {
            record.ports = object
                .and_then(|o| o.get("ports"))
                .and_then(Value::as_array)
                .map(|ports| ports.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
        }
        PodAction::Debug => {
            let old = request.old_object.as_ref().map(|o| &o.data);
            if let Some(added) = added_ephemeral_container(old, object) {
                record.container = added.get("name").and_then(Value::as_str).map(String::from);
                record.image = added.get("image").and_then(Value::as_str).map(String::from);
                record.command = strings(added.get("command"));
                record.command.extend(strings(added.get("args")));
                record.tty = added.get("tty").and_then(Value::as_bool).unwrap_or(false);
                record.stdin = added.get("stdin").and_then(Value::as_bool).unwrap_or(false);
            }
        }
    }
    record
}

/// The first ephemeral container in `new` that `old` does not have.
fn added_ephemeral_container<'a>(old: Option<&Value>, new: Option<&'a Value>) -> Option<&'a Value> {
    fn ephemeral(pod: Option<&Value>) -> impl Iterator<Item = &Value> {
        pod.and_then(|p| p.pointer("/spec/ephemeralContainers"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    }
    let name = |c: &'a Value| c.get("name").and_then(Value::as_str);
    let old_names: BTreeSet<&str> = ephemeral(old)
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    ephemeral(new).find(|c| name(c).is_some_and(|n| !old_names.contains(n)))
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
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
