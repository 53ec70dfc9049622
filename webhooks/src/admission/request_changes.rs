//! Changes to a request after its creation, as the validating webhook judges them: the spec
//! never changes ([`check_update`]), the revocation annotation is set once by the requester or
//! a trusted group ([`check_revocation`]), and a delete erases no access-review record
//! ([`check_delete`]). Extension asks are `extensions.rs`'.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::DynamicObject;
use oz_api::AccessKind;
use serde_json::Value;

use super::{delete_policy::DeletePolicy, requests::TARGET_POD_IMMUTABLE};

/// Checks an update of a request: its spec, requester included, may not change.
pub fn check_update(
    kind: AccessKind,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Result<(), String> {
    let old_spec = old.and_then(|o| o.get("spec"));
    let new_spec = new.and_then(|o| o.get("spec"));
    if old_spec == new_spec {
        return Ok(());
    }
    let field = |spec: Option<&Value>, name: &str| spec.and_then(|s| s.get(name)).cloned();
    if kind == AccessKind::Exec && field(old_spec, "targetPod") != field(new_spec, "targetPod") {
        return Err(TARGET_POD_IMMUTABLE.into());
    }
    if field(old_spec, "requester") != field(new_spec, "requester") {
        return Err(
            "spec.requester: is recorded at creation and cannot be changed; a request cannot be \
             changed after creation, only deleted"
                .into(),
        );
    }
    Err("spec: a request cannot be changed after creation, only deleted".into())
}

/// The revocation an update asks for ([`oz_api::REVOKE_ANNOTATION`]): only by its requester
/// (while the grant has not ended) or a trusted group, naming themselves, and never changed or
/// taken back once set (it is the record of who revoked the grant; oz acts on it at once).
pub fn check_revocation(
    old: Option<&DynamicObject>,
    new: Option<&DynamicObject>,
    user: &UserInfo,
    policy: &DeletePolicy,
) -> Result<(), String> {
    let asked = |object: Option<&DynamicObject>| {
        object
            .and_then(|o| o.metadata.annotations.as_ref())
            .and_then(|a| a.get(oz_api::REVOKE_ANNOTATION))
            .cloned()
    };
    let (before, after) = (asked(old), asked(new));
    if before == after {
        return Ok(());
    }
    let annotation = oz_api::REVOKE_ANNOTATION;
    if before.is_some() {
        return Err(format!(
            "metadata.annotations[{annotation:?}]: records who revoked this grant and cannot be \
             changed or removed"
        ));
    }
    let caller = user.username.as_deref().unwrap_or_default();
    if after.as_deref() != Some(caller) || caller.is_empty() {
        return Err(format!(
            "metadata.annotations[{annotation:?}]: must be your own user name ({caller:?}): it \
             records who revoked the grant"
        ));
    }
    let old = old.map(|o| &o.data);
    let phase = old
        .and_then(|o| o.pointer("/status/phase"))
        .and_then(Value::as_str);
    if matches!(phase, Some("Expired" | "Revoked")) {
        return Err(format!(
            "this request's grant has already ended ({}); there is nothing to revoke",
            phase.unwrap_or_default()
        ));
    }
    check_delete(old, user, policy)
}

/// A request may be deleted (revoked) by its requester while it is not expired, and by trusted
/// groups at any time; an expired request is an access-review record kept for the history
/// retention, which only trusted groups may cut short.
pub fn check_delete(
    old: Option<&Value>,
    user: &UserInfo,
    policy: &DeletePolicy,
) -> Result<(), String> {
    if super::fleet::is_hub(policy.fleet_hub_user.as_deref(), user) {
        return hub_withdrawal(old);
    }
    let groups = user.groups.as_deref().unwrap_or_default();
    if groups.iter().any(|g| policy.trusted_groups.contains(g)) {
        return Ok(());
    }
    let trusted = policy
        .trusted_groups
        .iter()
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let requester = old
        .and_then(|o| o.pointer("/spec/requester/username"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ended = old
        .and_then(|o| o.pointer("/status/phase"))
        .and_then(Value::as_str)
        .filter(|phase| matches!(*phase, "Expired" | "Revoked"));
    if let Some(phase) = ended {
        let ended = phase.to_lowercase();
        return Err(format!(
            "this request's grant has {ended} and the request is kept as an access-review record until oz deletes it; only members of {trusted} may delete it sooner"
        ));
    }
    if !requester.is_empty() && user.username.as_deref() == Some(requester) {
        return Ok(());
    }
    Err(format!(
        "only the requester ({requester}) or members of {trusted} may revoke this request"
    ))
}

/// A fleet hub deleting a request on its spoke: allowed for a live request it made there (a
/// revocation on the hub, or its request deleted there), never for another's request or an
/// ended one (the spoke's access-review record).
fn hub_withdrawal(old: Option<&Value>) -> Result<(), String> {
    // Only the hub's credential can write spec.forwarded (the request webhooks refuse it from
    // anyone else), so it marks a request the hub made.
    let made_by_hub = old.and_then(|o| o.pointer("/spec/forwarded")).is_some();
    let ended = old
        .and_then(|o| o.pointer("/status/phase"))
        .and_then(Value::as_str)
        .is_some_and(|phase| matches!(phase, "Expired" | "Revoked"));
    if made_by_hub && !ended {
        Ok(())
    } else {
        Err(
            "the fleet hub may withdraw only the live requests it made on this cluster; \
             ended requests are kept here as access-review records"
                .into(),
        )
    }
}
