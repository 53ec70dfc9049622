//! Builders do the heavy lifting of a grant: they create the objects a request owns (Role,
//! RoleBinding, and for pod access the Pod) and say when they are ready. The generic request
//! reconciler decides *whether* to grant; a builder decides *what* a grant is.

use std::future::Future;

use k8s_openapi::api::core::v1::Pod;
use oz_api::{AccessRequest, Requester, SessionMode};

use crate::{Context, Error, cache::BuildCaches};

pub mod exec;
pub mod grant;
pub mod pod;
pub mod rbac;
pub mod selector;
pub mod workload;

pub use exec::ExecAccessBuilder;
pub use grant::{
    GrantIdentity, MANAGED_BY, blocking, controlled_by, grant_identity, grant_identity_of,
    resource_name, revoke_grant,
};
pub use pod::PodAccessBuilder;

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
    /// How the grant's Role lets its subjects reach the pod (see
    /// [`rbac::granted_session_mode`]); recorded in `status.sessionMode` when Brokered.
    pub session_mode: SessionMode,
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
    /// Whether the builder reads workloads from the cache ([`BuildCaches::workloads`]): only
    /// their selectors are cached, which is all exec access needs.
    const CACHES_WORKLOADS: bool = false;

    /// Creates (or re-applies) the access resources for `request`, granted to `requester` (or
    /// to whom the template's `grantTo` names instead: the builder chooses the subjects).
    /// `recorded_pod` is the pod chosen by an earlier reconcile, if any: it never changes.
    #[allow(clippy::too_many_arguments)]
    fn build(
        &self,
        ctx: &Context,
        cache: &BuildCaches,
        request: &Self::Request,
        template: &<Self::Request as AccessRequest>::Template,
        grant: &GrantIdentity,
        requester: &Requester,
        recorded_pod: Option<&str>,
    ) -> impl Future<Output = Result<Built, BuildError>> + Send;

    /// Deletes every access resource of the grant at once. Returns whether anything existed.
    fn revoke(
        &self,
        ctx: &Context,
        grant: &GrantIdentity,
    ) -> impl Future<Output = Result<bool, Error>> + Send;
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
