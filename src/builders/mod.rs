//! Builders do the heavy lifting of a grant: they create the objects a request owns (Role,
//! RoleBinding, and for pod access the Pod) and say when they are ready. The generic request
//! reconciler decides *whether* to grant; a builder decides *what* a grant is.

use std::{collections::BTreeMap, future::Future};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use oz_api::AccessRequest;

use crate::{Context, Error};

pub mod exec;
pub mod pod;
pub mod rbac;
pub mod selector;

pub use exec::ExecAccessBuilder;
pub use pod::PodAccessBuilder;
pub use rbac::GrantIdentity;

/// The label every object oz creates carries, so its watches can ignore everything else.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "oz");
/// The label naming the request an object belongs to.
pub const REQUEST_LABEL: &str = "oz.wizardofoz.co/request";
/// The label naming the kind of that request.
pub const REQUEST_KIND_LABEL: &str = "oz.wizardofoz.co/request-kind";

/// What a build produced.
#[derive(Clone, Debug)]
pub struct Built {
    /// The pod the access is for; recorded in `status.podName` and never changed.
    pub pod: Pod,
    /// Oz's AccessResourcesCreated message, e.g. `Success. Role x, RoleBinding x created`.
    pub created_message: String,
    /// Whether the access is usable now. When it is not, the builder's watches will trigger
    /// another reconcile when it becomes so.
    pub ready: bool,
}

/// Why a build did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A problem with the user's objects, fit for a condition message: it says what is wrong and
    /// how to fix it. Retrying soon will not help.
    #[error("{0}")]
    Invalid(String),
    /// The machinery failed; retried with backoff.
    #[error(transparent)]
    Failed(#[from] Error),
}

impl From<kube::Error> for BuildError {
    fn from(e: kube::Error) -> Self {
        BuildError::Failed(e.into())
    }
}

/// Creates and removes the access resources of one request kind. Builders hold no state (their
/// context is passed in), so they are `Copy`: each expiry timer carries its own.
pub trait AccessBuilder: Copy + Send + Sync + 'static {
    /// The request kind this builder serves.
    type Request: AccessRequest;
    /// Whether the builder creates pods, so the controller must watch them.
    const OWNS_PODS: bool = false;

    /// Creates (or re-applies) the access resources for `request`, bound to `subjects`.
    /// `recorded_pod` is the pod chosen by an earlier reconcile, if any: it never changes.
    fn build(
        &self,
        ctx: &Context,
        request: &Self::Request,
        template: &<Self::Request as AccessRequest>::Template,
        grant: &GrantIdentity,
        subjects: Vec<k8s_openapi::api::rbac::v1::Subject>,
        recorded_pod: Option<&str>,
    ) -> impl Future<Output = Result<Built, BuildError>> + Send;

    /// Deletes every access resource of the grant at once. Returns whether anything existed.
    fn revoke(
        &self,
        ctx: &Context,
        grant: &GrantIdentity,
    ) -> impl Future<Output = Result<bool, Error>> + Send;
}

/// The identity of `request`'s grant: the shared object name `<request>-<uid8>` (Oz's naming),
/// labels, and the controller owner reference.
pub fn grant_identity<R: AccessRequest>(request: &R) -> Result<GrantIdentity, Error> {
    let name = request.name_any();
    let namespace = request
        .namespace()
        .ok_or_else(|| Error::MissingMetadata(name.clone(), "namespace"))?;
    let uid = request
        .uid()
        .ok_or_else(|| Error::MissingMetadata(name.clone(), "uid"))?;
    let owner = request
        .controller_owner_ref(&())
        .ok_or_else(|| Error::MissingMetadata(name.clone(), "uid"))?;
    let labels = BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (REQUEST_LABEL.to_string(), label_safe(&name)),
        (REQUEST_KIND_LABEL.to_string(), R::kind(&()).to_string()),
    ]);
    Ok(GrantIdentity {
        name: resource_name(&name, &uid),
        namespace,
        labels,
        owner,
    })
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

/// Whether a pod can be exec'd into: Running and not being deleted.
pub fn is_running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Whether every container of a pod reports Ready.
pub fn is_ready(pod: &Pod) -> bool {
    is_running(pod)
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_oz() {
        // Oz's own unit test: 17 characters for a request named test-req.
        let name = resource_name("test-req", "1a2b3c4d-5e6f-7a8b-9c0d-112233445566");
        assert_eq!(name, "test-req-1a2b3c4d");
        assert_eq!(name.len(), 17);
    }

    #[test]
    fn long_names_stay_valid() {
        let long = "a".repeat(300);
        assert_eq!(resource_name(&long, "1a2b3c4d").len(), 253);
        assert_eq!(label_safe(&"b".repeat(70)).len(), 63);
    }
}
