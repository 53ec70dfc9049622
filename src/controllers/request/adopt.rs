//! Step: adopt a grant Oz made. A request Oz granted before oz took over has no requester (Oz
//! records none), so the requester step would deny it and revoke access that Oz gave, in the
//! middle of its window. Instead, a grant that is provably Oz's is kept exactly as Oz made it
//! (its Role and RoleBinding, bound to the template's allowedGroups) until Oz's end, then
//! revoked on time like any other.
//!
//! Provably Oz's, because nobody but the operator and cluster admins can forge it:
//!
//! - the request has no `spec.requester`: a request created while oz's webhook runs has one;
//! - its status is as Oz leaves it (`AccessResourcesCreated=True` and no `phase`, which oz
//!   always writes), or says oz adopted it earlier: users cannot write the status subresource;
//! - its Role and RoleBinding `<request>-<uid8>` exist, are controlled by this request (its
//!   uid), and the binding binds that Role: creating them takes the power to grant exec itself.
//!
//! Anything less (an Oz-like status without the grant's objects, objects controlled by
//! another request) is not adopted: the requester step denies it, as any request without a
//! requester.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    core::v1::Pod,
    rbac::v1::{Role, RoleBinding},
};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::events::EventType,
};
use oz_api::{
    AccessConfig, AccessRequest, RequestStatus, SessionMode, condition_reason as reason,
    condition_type as kind, conditions::Observation,
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;

use super::{reconciling::Reconciling, status::Pass};
use crate::{
    FIELD_MANAGER, Result,
    builders::{AccessBuilder, Built, controlled_by, is_ready},
};

/// A grant Oz made, as found: its Role and RoleBinding, and the pod the Role names.
pub struct OzGrant {
    pub role: Role,
    pub binding: RoleBinding,
    pub pod: Pod,
}

/// Oz's grant of this request, if it is provably Oz's (see the module docs).
pub async fn oz_grant<B: AccessBuilder>(r: &Reconciling<'_, B>) -> Result<Option<OzGrant>> {
    if r.request.requester().is_some() || !left_by_oz_or_adopted(r.request.request_status()) {
        return Ok(None);
    }
    let uid = r.grant.owner.uid.as_str();
    let roles: Api<Role> = Api::namespaced(r.ctx.client.clone(), &r.grant.namespace);
    let bindings: Api<RoleBinding> = Api::namespaced(r.ctx.client.clone(), &r.grant.namespace);
    let (Some(role), Some(binding)) = (
        roles.get_opt(&r.grant.name).await?,
        bindings.get_opt(&r.grant.name).await?,
    ) else {
        return Ok(None);
    };
    if !controlled_by(role.owner_references(), uid)
        || !controlled_by(binding.owner_references(), uid)
        || binding.role_ref.kind != "Role"
        || binding.role_ref.name != r.grant.name
    {
        return Ok(None);
    }
    // The pod: for pod access Oz's own `<request>-<uid8>`, also controlled by the request; for
    // exec access the one the Role names (Oz never records it in status.podName).
    let pod_name = if B::OWNS_PODS {
        r.grant.name.clone()
    } else {
        match granted_pod(&role) {
            Some(pod) => pod,
            None => return Ok(None),
        }
    };
    let pods: Api<Pod> = Api::namespaced(r.ctx.client.clone(), &r.grant.namespace);
    let Some(pod) = pods.get_opt(&pod_name).await? else {
        return Ok(None);
    };
    if B::OWNS_PODS && !controlled_by(pod.owner_references(), uid) {
        return Ok(None);
    }
    Ok(Some(OzGrant { role, binding, pod }))
}

/// Keeps Oz's grant, in force until `expires_at` (Oz's end: creation plus the duration Oz
/// decided, clamped to the template's max, as the duration step decides for any grant), as
/// what the build step found. The Role, RoleBinding and Pod get oz's labels, so oz's watches
/// see them, but keep Oz's rules and subjects: rewriting them could take away access Oz gave
/// within its window.
pub async fn keep_oz_grant<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    config: &AccessConfig,
    grant: OzGrant,
    expires_at: Timestamp,
) -> Result<Built> {
    // The objects as oz_grant just read them: no second read to see their labels.
    take_over(r, &grant.role).await?;
    take_over(r, &grant.binding).await?;
    if B::OWNS_PODS {
        take_over(r, &grant.pod).await?;
    }
    let adopted = adopted_message(&config.allowed_groups, &expires_at.to_string());
    if !adopted_earlier(pass.previous()) {
        pass.note(EventType::Normal, "AdoptedFromOz", adopted.clone());
    }
    pass.observe(Observation::yes(
        kind::ADOPTED_FROM_OZ,
        reason::OZ_GRANT,
        adopted,
    ));
    let pod_name = grant.pod.name_any();
    pass.observe(Observation::yes(
        kind::ACCESS_RESOURCES_CREATED,
        reason::SUCCESS,
        created_message(B::OWNS_PODS, &r.grant.name),
    ));
    pass.status.pod_name = Some(pod_name);
    Ok(Built {
        // An exec grant is usable as soon as it exists; a pod grant once its pod is ready.
        ready: !B::OWNS_PODS || is_ready(&grant.pod),
        pod: grant.pod,
        created_message: String::new(),
        session_mode: SessionMode::Direct,
    })
}

/// Puts oz's labels on `object`, one of the grant's, with oz's field manager, leaving everything
/// else as Oz wrote it, unless it has them already.
async fn take_over<K>(r: &Reconciling<'_, impl AccessBuilder>, object: &K) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    if has_labels(object.labels(), &r.grant.labels) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        // At the version read: an apply never recreates an object deleted since (it fails).
        "metadata": {
            "name": r.grant.name,
            "labels": r.grant.labels,
            "resourceVersion": object.resource_version(),
        },
    });
    let api: Api<K> = Api::namespaced(r.ctx.client.clone(), &r.grant.namespace);
    api.patch(
        &r.grant.name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// Whether the status is one Oz left (the grant made, and no `phase`: oz always writes one),
/// or one where oz recorded that it adopted the grant.
pub fn left_by_oz_or_adopted(status: Option<&RequestStatus>) -> bool {
    let Some(status) = status else {
        return false;
    };
    let left_by_oz = status.phase.is_none()
        && oz_api::conditions::is_true(&status.conditions, kind::ACCESS_RESOURCES_CREATED);
    left_by_oz || adopted_earlier(status)
}

/// Whether oz recorded that it adopted the grant from Oz.
pub fn adopted_earlier(status: &RequestStatus) -> bool {
    oz_api::conditions::is_true(&status.conditions, kind::ADOPTED_FROM_OZ)
}

/// The pod a grant's Role names (Oz's rules name it in both).
fn granted_pod(role: &Role) -> Option<String> {
    role.rules
        .iter()
        .flatten()
        .find_map(|rule| rule.resource_names.as_ref()?.first().cloned())
}

fn has_labels(present: &BTreeMap<String, String>, wanted: &BTreeMap<String, String>) -> bool {
    wanted.iter().all(|(k, v)| present.get(k) == Some(v))
}

/// What the AdoptedFromOz condition and Event say.
fn adopted_message(groups: &[String], expires_at: &str) -> String {
    format!(
        "granted by Oz before oz took over, with no requester recorded: kept as Oz made it, for the groups {}, until {expires_at}",
        groups.join(", ")
    )
}

/// Oz's AccessResourcesCreated message.
fn created_message(with_pod: bool, name: &str) -> String {
    if with_pod {
        format!("Success. Pod {name}, Role {name}, RoleBinding {name} created")
    } else {
        format!("Success. Role {name}, RoleBinding {name} created")
    }
}

#[cfg(test)]
mod tests {
    use oz_api::RequestPhase;

    use super::*;
    use crate::controllers::fixtures::conditions_of;

    fn created() -> Observation {
        Observation::yes(kind::ACCESS_RESOURCES_CREATED, reason::SUCCESS, "Success.")
    }

    #[test]
    fn a_status_as_oz_leaves_it_or_as_oz_adopted_it_is_evidence() {
        let oz = RequestStatus {
            conditions: conditions_of(&[created()]),
            ready: true,
            ..Default::default()
        };
        assert!(left_by_oz_or_adopted(Some(&oz)));
        let adopted = RequestStatus {
            conditions: conditions_of(&[Observation::yes(
                kind::ADOPTED_FROM_OZ,
                reason::OZ_GRANT,
                "",
            )]),
            phase: Some(RequestPhase::Ready),
            ..Default::default()
        };
        assert!(left_by_oz_or_adopted(Some(&adopted)));
    }

    #[test]
    fn no_status_or_one_oz_wrote_is_no_evidence() {
        assert!(!left_by_oz_or_adopted(None));
        assert!(!left_by_oz_or_adopted(Some(&RequestStatus::default())));
        // oz always writes a phase: a request it denied is not Oz's.
        let denied = RequestStatus {
            conditions: conditions_of(&[created()]),
            phase: Some(RequestPhase::Denied),
            ..Default::default()
        };
        assert!(!left_by_oz_or_adopted(Some(&denied)));
        let failed_build = RequestStatus {
            conditions: conditions_of(&[Observation::no(
                kind::ACCESS_RESOURCES_CREATED,
                reason::FAILURE,
                "ERROR: x",
            )]),
            ..Default::default()
        };
        assert!(!left_by_oz_or_adopted(Some(&failed_build)));
    }
}
