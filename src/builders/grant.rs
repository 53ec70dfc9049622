//! What a grant is, whatever the kind of access: the name, labels and owner its objects share,
//! and the one way its Role and RoleBinding are taken back.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{Role, RoleBinding},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{Api, Resource, ResourceExt};

use crate::{Context, Error, apply::delete_if_present};

/// The label every object oz creates carries, so its watches can ignore everything else.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "oz");
/// The label naming the request an object belongs to.
pub const REQUEST_LABEL: &str = "oz.wizardofoz.co/request";
/// The label naming the kind of that request.
pub const REQUEST_KIND_LABEL: &str = "oz.wizardofoz.co/request-kind";

/// Everything about a grant that does not depend on the kind of access.
#[derive(Clone, Debug)]
pub struct GrantIdentity {
    /// The name shared by the Role, RoleBinding and access Pod: `<request>-<uid8>`.
    pub name: String,
    pub namespace: String,
    /// Labels that let people and oz find the grant's objects.
    pub labels: BTreeMap<String, String>,
    /// The controller owner reference to the request.
    pub owner: OwnerReference,
}

/// The identity of `request`'s grant: the shared object name `<request>-<uid8>` (Oz's naming),
/// labels, and the controller owner reference. (A cached request packs its uid: ask it,
/// [`CachedRequest::grant_identity`](crate::cache::requests::CachedRequest::grant_identity).)
pub fn grant_identity<R: oz_api::AccessRequest>(request: &R) -> Result<GrantIdentity, Error> {
    let name = request.name_any();
    let namespace = request
        .namespace()
        .ok_or_else(|| Error::MissingMetadata(name.clone(), "namespace"))?;
    let uid = request
        .uid()
        .ok_or_else(|| Error::MissingMetadata(name.clone(), "uid"))?;
    Ok(grant_identity_of::<R>(&name, namespace, &uid))
}

/// [`grant_identity`] of the request of kind `R` named `request` in `namespace`, with `uid`:
/// for a holder that keeps only those three (an expiry timer, one per grant in force).
pub fn grant_identity_of<R: Resource<DynamicType = ()>>(
    request: &str,
    namespace: String,
    uid: &str,
) -> GrantIdentity {
    let owner = blocking(OwnerReference {
        api_version: R::api_version(&()).to_string(),
        kind: R::kind(&()).to_string(),
        name: request.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        ..Default::default()
    });
    let labels = BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (REQUEST_LABEL.to_string(), label_safe(request)),
        (REQUEST_KIND_LABEL.to_string(), R::kind(&()).to_string()),
    ]);
    GrantIdentity {
        name: resource_name(request, uid),
        namespace,
        labels,
        owner,
    }
}

/// An owner reference that blocks its owner's foreground deletion until the garbage collector
/// has deleted the owned object, as controller-runtime's (and so Oz's) controller references do:
/// a request deleted with `--cascade=foreground` is gone only once its grant is. kube's
/// `controller_owner_ref` leaves it unset. Setting it needs `update` on the owner's
/// `finalizers` where OwnerReferencesPermissionEnforcement is on, which oz's RBAC grants.
pub fn blocking(owner: OwnerReference) -> OwnerReference {
    OwnerReference {
        block_owner_deletion: Some(true),
        ..owner
    }
}

/// `<request>-<first 8 characters of its uid>`, as Oz names every object of a grant.
pub fn resource_name(request: &str, uid: &str) -> String {
    let short: String = uid.chars().take(8).collect();
    // Object names are at most 253 characters; keep room for the suffix.
    let base: String = request.chars().take(253 - 9).collect();
    format!("{base}-{short}")
}

// Label values are at most 63 characters; request names may be longer.
fn label_safe(value: &str) -> String {
    let cut: String = value.chars().take(63).collect();
    cut.trim_end_matches(['-', '.', '_']).to_string()
}

/// Deletes the grant's RoleBinding, then its Role. Returns whether either existed.
///
/// The binding goes first: it is what lets anyone in, so access ends with the first call even if
/// the second fails (and is retried).
pub async fn revoke_grant(ctx: &Context, grant: &GrantIdentity) -> Result<bool, Error> {
    let bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &grant.namespace);
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), &grant.namespace);
    let binding = delete_own(ctx, &bindings, grant).await?;
    let role = delete_own(ctx, &roles, grant).await?;
    Ok(binding || role)
}

/// Deletes the grant's object of `api`'s kind, recorded as oz's own write so that its watch event
/// does not wake the request (which already knows).
async fn delete_own<K>(ctx: &Context, api: &Api<K>, grant: &GrantIdentity) -> Result<bool, Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    ctx.echoes.deleting::<K>(&grant.namespace, &grant.name);
    let existed = delete_if_present(api, &grant.name).await;
    if !matches!(existed, Ok(true)) {
        ctx.echoes.gone::<K>(&grant.namespace, &grant.name);
    }
    existed
}

/// Whether `owners` has a controller reference to the object with `uid`: for a grant's
/// objects, whether its request controls them, which is what makes them oz's to use and delete.
pub fn controlled_by(owners: &[OwnerReference], uid: &str) -> bool {
    owners
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_controller_reference_with_the_uid_controls() {
        let owner = |uid: &str, controller| OwnerReference {
            uid: uid.into(),
            controller: Some(controller),
            ..Default::default()
        };
        assert!(controlled_by(&[owner("u1", true)], "u1"));
        assert!(!controlled_by(&[owner("u1", false)], "u1"));
        assert!(!controlled_by(&[owner("u2", true)], "u1"));
        assert!(!controlled_by(&[], "u1"));
    }

    #[test]
    fn names_follow_oz() {
        // Oz's own unit test: 17 characters for a request named test-req.
        let name = resource_name("test-req", "1a2b3c4d-5e6f-7a8b-9c0d-112233445566");
        assert_eq!(name, "test-req-1a2b3c4d");
        assert_eq!(name.len(), 17);
    }

    #[test]
    fn a_grants_owner_blocks_the_requests_foreground_deletion() {
        let mut request = crate::controllers::fixtures::request(oz_api::RequestPhase::Ready, None);
        request.metadata.namespace = Some("shop".into());
        request.metadata.uid = Some("1a2b3c4d-0000".into());
        let owner = grant_identity(&request).unwrap().owner;
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("ExecAccessRequest", Some(true), Some(true))
        );
    }

    #[test]
    fn long_names_stay_valid() {
        let long = "a".repeat(300);
        assert_eq!(resource_name(&long, "1a2b3c4d").len(), 253);
        assert_eq!(label_safe(&"b".repeat(70)).len(), 63);
    }
}
