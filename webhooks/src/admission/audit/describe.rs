//! The audit record ([`oz_audit::AuditRecord`]) of an AdmissionReview: [`pod_action`] says
//! whether the review is an audited way into a pod, [`describe`] what it asks.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, Operation},
};
use oz_api::PodAction;
use serde_json::Value;

use oz_audit::AuditRecord;
use oz_platform::callers::Caller;

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
