//! Admission of extension asks: a request UPDATE that changes its annotation
//! [`oz_api::EXTEND_ANNOTATION`] (`ozctl extend`). Earlier asks never change and are never
//! removed (they are the record of what was granted, and approvals name them by number); one
//! ask is added at a time, by the requester, in their own name, on a Ready grant, within the
//! template's bounds ([`oz_api::extension::check_ask`]). The controller bounds what each ask
//! adds again, from the template as it is then.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::DynamicObject;
use oz_api::{
    AccessKind, AccessRequest, EXTEND_ANNOTATION, ExecAccessRequest, PodAccessRequest,
    RequestPhase, RequestStatus,
    duration::decide_access_duration,
    extension::{AskedOf, ExtensionAsk, check_ask, parse_asks},
};

use super::{AccessLookup, parse_object};

/// Checks the extension asks an update makes, if it changes them.
pub async fn check_extension_update(
    lookup: &dyn AccessLookup,
    kind: AccessKind,
    namespace: &str,
    old: Option<&DynamicObject>,
    new: Option<&DynamicObject>,
    user: &UserInfo,
) -> Result<(), String> {
    let annotation = |object: Option<&DynamicObject>| {
        object
            .and_then(|o| o.metadata.annotations.as_ref())
            .and_then(|a| a.get(EXTEND_ANNOTATION))
            .cloned()
    };
    let (before, after) = (annotation(old), annotation(new));
    if before == after {
        return Ok(());
    }
    let field = format!("metadata.annotations[{EXTEND_ANNOTATION:?}]");
    let read = |value: Option<String>| value.map_or(Ok(Vec::new()), |v| parse_asks(&v));
    let earlier = read(before)?;
    let asks = read(after)?;
    let Some((ask, kept)) = asks.split_last() else {
        return Err(format!(
            "{field}: records the grant's extensions and cannot be removed"
        ));
    };
    if kept != earlier.as_slice() {
        return Err(format!(
            "{field}: add one extension ask at a time, at the end; earlier asks cannot be \
             changed or removed (use `ozctl extend`)"
        ));
    }
    let old = old.ok_or("the UPDATE review carries no old object")?;
    let caller = user.username.as_deref().unwrap_or_default();
    let checked = match kind {
        AccessKind::Exec => {
            check::<ExecAccessRequest>(lookup, namespace, old, ask, earlier.len(), caller).await
        }
        AccessKind::Pod => {
            check::<PodAccessRequest>(lookup, namespace, old, ask, earlier.len(), caller).await
        }
    };
    checked.map_err(|e| format!("{field}: extension {}: {e}", earlier.len() + 1))
}

async fn check<R: AccessRequest>(
    lookup: &dyn AccessLookup,
    namespace: &str,
    old: &DynamicObject,
    ask: &ExtensionAsk,
    earlier: usize,
    caller: &str,
) -> Result<(), String> {
    let request = parse_object::<R>(old)?;
    let name = request.template_name();
    let template = lookup
        .template(R::KIND, namespace, name)
        .await
        .map_err(|e| format!("could not read {} {name:?}: {e}", R::KIND.template_kind()))?
        .ok_or_else(|| {
            format!(
                "{} {name:?} no longer exists, so the grant cannot be extended",
                R::KIND.template_kind()
            )
        })?;
    let config = &template.config;
    let base = decide_access_duration(
        request.duration(),
        &config.default_duration,
        &config.max_duration,
    )
    .map_err(|e| e.condition_message())?
    .duration;
    // The typed parse reads the spec alone; the status, as oz last wrote it, says whether the
    // grant is in force and what its asks stand at.
    let status: Option<RequestStatus> = old
        .data
        .get("status")
        .and_then(|s| serde_json::from_value(s.clone()).ok());
    let ready = status.as_ref().and_then(|s| s.phase) == Some(RequestPhase::Ready);
    let records = status
        .as_ref()
        .map(|s| s.extensions.as_slice())
        .unwrap_or_default();
    let state = AskedOf::of(ready, base, earlier, records);
    let requester = request.requester().map(|r| r.username.as_str());
    check_ask(ask, caller, requester, state, config)
}
