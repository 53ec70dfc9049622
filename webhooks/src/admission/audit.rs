//! The exec/attach/port-forward/debug audit: one structured record per way into a pod, with
//! the grant (the Ready request) that let the user in, or none.
//!
//! Each record goes to the log (target `oz::audit`) and, when configured, to a JSON-lines file;
//! an Event is published on the pod (in the background, by [`AuditEvents`](super::AuditEvents),
//! which may drop it under load), and the response carries `auditAnnotations` so the
//! apiserver's own audit log shows the grant too. The operation is always allowed unless
//! [`EnforceSettings`] names the namespace and no grant is found.

use std::{
    collections::{BTreeMap, BTreeSet},
    io,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use axum::{Json, extract::State};
use k8s_openapi::{api::core::v1::ObjectReference, jiff::Timestamp};
use kube::{
    core::{
        DynamicObject,
        admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation},
    },
    runtime::events::{Event, EventType},
};
use oz_api::{GrantTo, RequestPhase};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::{fs::File, io::AsyncWriteExt, sync::Mutex};
use tracing::{info, warn};

use super::{AccessLookup, AdmissionState, LookupError, RequestSummary, Review, deny, reply};

/// The Events' reporting controller.
pub const EVENT_REPORTER: &str = "oz-webhooks";

/// How long the grant lookup may take; the audit webhook's own timeout is 5 s.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// A way into a pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodAction {
    /// CONNECT pods/exec.
    Exec,
    /// CONNECT pods/attach.
    Attach,
    /// CONNECT pods/portforward.
    PortForward,
    /// UPDATE pods/ephemeralcontainers (`kubectl debug`).
    Debug,
}

impl PodAction {
    /// The action an admission request is, if it is one that is audited.
    pub fn of(request: &AdmissionRequest<DynamicObject>) -> Option<Self> {
        if !request.resource.group.is_empty() || request.resource.resource != "pods" {
            return None;
        }
        match (&request.operation, request.sub_resource.as_deref()?) {
            (Operation::Connect, "exec") => Some(Self::Exec),
            (Operation::Connect, "attach") => Some(Self::Attach),
            (Operation::Connect, "portforward") => Some(Self::PortForward),
            (Operation::Update, "ephemeralcontainers") => Some(Self::Debug),
            _ => None,
        }
    }

    /// The Event reason, as Oz names the first two: `PodExec`, `PodAttach`, `PodPortForward`,
    /// `PodDebug`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Exec => "PodExec",
            Self::Attach => "PodAttach",
            Self::PortForward => "PodPortForward",
            Self::Debug => "PodDebug",
        }
    }

    /// The Event action, as Oz names the first two.
    pub fn event_action(self) -> &'static str {
        match self {
            Self::Exec => "RecordedExec",
            Self::Attach => "RecordedAttach",
            Self::PortForward => "RecordedPortForward",
            Self::Debug => "RecordedDebug",
        }
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
}

/// Which pod accesses are denied without a grant. Off (no namespaces) by default.
///
/// Enforcement is only as strong as the audit webhook's failure policy: with the default
/// `Ignore`, an unreachable oz lets every access through. Pair it with
/// [`FailurePolicy::Fail`](crate::FailurePolicy) (and a namespaceSelector) to make it binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnforceSettings {
    /// Namespaces in which an access without an active grant is denied.
    pub namespaces: BTreeSet<String>,
    /// Members of these groups are never denied. Default `system:masters`.
    pub exempt_groups: BTreeSet<String>,
}

impl Default for EnforceSettings {
    fn default() -> Self {
        Self {
            namespaces: BTreeSet::new(),
            exempt_groups: BTreeSet::from(["system:masters".to_string()]),
        }
    }
}

impl EnforceSettings {
    /// Whether a user in `groups` needs a grant in `namespace`.
    pub fn applies(&self, namespace: &str, groups: &[String]) -> bool {
        self.namespaces.contains(namespace)
            && !groups.iter().any(|g| self.exempt_groups.contains(g))
    }
}

/// Where audit records go: always the log, and a JSON-lines file if one is configured.
#[derive(Debug, Default)]
pub struct AuditLog {
    file: Option<(PathBuf, Mutex<File>)>,
}

impl AuditLog {
    /// Records go to the log only.
    pub fn log_only() -> Self {
        Self { file: None }
    }

    /// Records also go to `path`, appended one JSON object per line; created if missing.
    pub async fn open(path: &Path) -> io::Result<Self> {
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .await?;
        Ok(Self {
            file: Some((path.to_path_buf(), Mutex::new(file))),
        })
    }

    /// Writes one record. A failed file write is logged; the record is still in the log.
    pub async fn write(&self, record: &AuditRecord) {
        let line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(e) => {
                warn!(error = %e, "could not encode an audit record");
                return;
            }
        };
        info!(
            target: "oz::audit",
            event = %record.event, user = %record.user, namespace = %record.namespace,
            pod = %record.pod, allowed = record.allowed, record = %line,
            "pod access"
        );
        if let Some((path, file)) = &self.file {
            let mut file = file.lock().await;
            let written = async {
                file.write_all(format!("{line}\n").as_bytes()).await?;
                file.flush().await
            };
            if let Err(e) = written.await {
                warn!(path = %path.display(), error = %e, "could not write the audit log file");
            }
        }
    }
}

/// The audit handler.
pub async fn audit(
    State(state): State<Arc<AdmissionState>>,
    Review(request): Review,
) -> Json<AdmissionReview<DynamicObject>> {
    reply(audit_decision(&state, &request).await)
}

/// Records the access `request` makes and answers it: allowed, unless enforcement applies and
/// there is no grant. Requests that are not an audited action are allowed unrecorded.
pub async fn audit_decision(
    state: &AdmissionState,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let Some(action) = PodAction::of(request) else {
        return AdmissionResponse::from(request);
    };
    let mut record = describe(request, action);
    let lookup = find_grant(
        state.lookup.as_ref(),
        &record.namespace,
        &record.pod,
        &record.user,
        &record.groups,
    );
    match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
        Ok(Ok(grant)) => record.grant = grant,
        Ok(Err(e)) => record.grant_error = Some(e.0),
        Err(_) => record.grant_error = Some(format!("timed out after {LOOKUP_TIMEOUT:?}")),
    }
    if record.grant.is_none() && state.enforce.applies(&record.namespace, &record.groups) {
        record.allowed = false;
        record.denied_because = Some(match &record.grant_error {
            Some(e) => format!("oz could not check {}'s access requests: {e}", record.user),
            None => format!(
                "{} has no active access request for pod {}/{}: create an ExecAccessRequest \
                 or PodAccessRequest and wait until it is Ready",
                record.user, record.namespace, record.pod
            ),
        });
    }
    state.audit_log.write(&record).await;
    let mut response = match &record.denied_because {
        None => AdmissionResponse::from(request),
        Some(reason) => deny(request, reason.clone()),
    };
    response.audit_annotations = audit_annotations(&record).into_iter().collect();
    if !record.dry_run
        && let Some(events) = &state.events
    {
        // Queued, not awaited: the Event is not worth delaying the operation for.
        events.publish(action, record);
    }
    response
}

/// The record for `request`, before the grant is looked up: allowed, no grant.
pub fn describe(request: &AdmissionRequest<DynamicObject>, action: PodAction) -> AuditRecord {
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

/// The active grant that lets `user` (in `groups`) into `pod`: a Ready request in the pod's
/// namespace whose `status.podName` is the pod, and which `user` created, or whose template
/// grants to its allowedGroups and `user` is in one of them. The user's own requests win;
/// ties go to the first by kind and name.
///
/// When `lookup` is a cache that finds none, its [`AccessLookup::uncached`] lookup is asked
/// before concluding there is none: the cache may not have seen a request become Ready yet.
pub async fn find_grant(
    lookup: &dyn AccessLookup,
    namespace: &str,
    pod: &str,
    user: &str,
    groups: &[String],
) -> Result<Option<Grant>, LookupError> {
    let grant = grant_in(lookup, namespace, pod, user, groups).await?;
    match (grant, lookup.uncached()) {
        (None, Some(live)) => grant_in(live, namespace, pod, user, groups).await,
        (grant, _) => Ok(grant),
    }
}

/// [`find_grant`], with what `lookup` reads.
async fn grant_in(
    lookup: &dyn AccessLookup,
    namespace: &str,
    pod: &str,
    user: &str,
    groups: &[String],
) -> Result<Option<Grant>, LookupError> {
    let mut candidates: Vec<RequestSummary> = lookup
        .requests(namespace)
        .await?
        .into_iter()
        .filter(|r| r.phase == Some(RequestPhase::Ready) && r.pod_name.as_deref() == Some(pod))
        .collect();
    candidates.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    if let Some(own) = candidates
        .iter()
        .find(|r| r.requester.as_ref().is_some_and(|q| q.username == user))
    {
        return Ok(Some(grant_of(own)));
    }
    for candidate in &candidates {
        let Some(template) = lookup
            .template(candidate.kind, namespace, &candidate.template)
            .await?
        else {
            continue;
        };
        if template.grant_to() == GrantTo::AllowedGroups
            && template.allowed_groups.iter().any(|g| groups.contains(g))
        {
            return Ok(Some(grant_of(candidate)));
        }
    }
    Ok(None)
}

fn grant_of(request: &RequestSummary) -> Grant {
    Grant {
        kind: request.kind.kind().into(),
        name: request.name.clone(),
        template: request.template.clone(),
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

/// The note of the Event, in Oz's words:
/// `CONNECT/exec operation on Pod web-0 (container: app) by alice (interactive: true)`.
pub fn event_note(record: &AuditRecord) -> String {
    format!(
        "{}/{} operation on Pod {} (container: {}) by {} (interactive: {})",
        record.operation,
        record.subresource,
        record.pod,
        record.container.as_deref().unwrap_or_default(),
        record.user,
        record.tty
    )
}

/// The Event for a record; its `related` object is the granting request, if any.
pub fn audit_event(action: PodAction, record: &AuditRecord) -> Event {
    Event {
        type_: if record.allowed {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: action.reason().into(),
        note: Some(event_note(record)),
        action: action.event_action().into(),
        secondary: record.grant.as_ref().map(|grant| ObjectReference {
            api_version: Some(format!("{}/{}", oz_api::GROUP, oz_api::VERSION)),
            kind: Some(grant.kind.clone()),
            name: Some(grant.name.clone()),
            namespace: Some(record.namespace.clone()),
            ..Default::default()
        }),
    }
}
