//! What a request controller's watches hold of the objects grants are made of and stand on: the
//! grants' Roles and RoleBindings and, for exec access, the workloads' selectors. Builders read
//! them here instead of asking the apiserver on every reconcile (oz-bench counted a GET of each
//! per reconcile). A cached copy that oz itself has just overwritten is not trusted: the
//! apiserver is asked then ([`crate::own_writes`]).

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Resource,
    runtime::reflector::{ObjectRef, Store},
};
use oz_api::{ControllerKind, CrossVersionObjectReference};

use super::{
    GrantIdentity,
    workload::{Lookup, Workload},
};
use crate::{Context, Result};

/// The caches one request controller's builder reads.
#[derive(Clone)]
pub struct GrantCache {
    /// oz's Roles in the controller's scope, without managedFields.
    pub roles: Store<Role>,
    /// oz's RoleBindings in the controller's scope, without managedFields.
    pub bindings: Store<RoleBinding>,
    /// The workloads' uids and selectors, when the builder reads them ([`super::AccessBuilder::CACHES_WORKLOADS`]).
    pub workloads: Option<WorkloadStores>,
}

/// Deployments, StatefulSets and DaemonSets, each kept as its uid and selector only.
#[derive(Clone)]
pub struct WorkloadStores {
    pub deployments: Store<Deployment>,
    pub stateful_sets: Store<StatefulSet>,
    pub daemon_sets: Store<DaemonSet>,
}

impl GrantCache {
    /// Waits until every store has been filled by its first LIST, so that a reconcile never
    /// takes "not cached yet" for "does not exist".
    pub async fn wait_until_ready(&self) {
        // A store whose writer is gone is one whose controller is stopping: nothing to wait for.
        let _ = self.roles.wait_until_ready().await;
        let _ = self.bindings.wait_until_ready().await;
        if let Some(w) = &self.workloads {
            let _ = w.deployments.wait_until_ready().await;
            let _ = w.stateful_sets.wait_until_ready().await;
            let _ = w.daemon_sets.wait_until_ready().await;
        }
    }

    /// The grant's Role, as the cache has it, or as the apiserver has it if oz has written it
    /// since the cache last heard.
    pub async fn role(&self, ctx: &Context, grant: &GrantIdentity) -> Result<Option<Role>> {
        current(ctx, &self.roles, grant).await
    }

    /// The grant's RoleBinding, the same way.
    pub async fn binding(
        &self,
        ctx: &Context,
        grant: &GrantIdentity,
    ) -> Result<Option<RoleBinding>> {
        current(ctx, &self.bindings, grant).await
    }
}

impl WorkloadStores {
    /// The workload `target` names, from the cache; `None` when the cache cannot say (a Rollout,
    /// which is not cached, or a workload the cache has not seen, perhaps only yet): the caller
    /// asks the apiserver.
    pub fn lookup(&self, namespace: &str, target: &CrossVersionObjectReference) -> Option<Lookup> {
        fn cached<K: Resource<DynamicType = ()> + Clone>(
            store: &Store<K>,
            namespace: &str,
            name: &str,
        ) -> Option<std::sync::Arc<K>> {
            store.get(&ObjectRef::new(name).within(namespace))
        }
        let name = target.name.as_str();
        let (uid, selector) = match target.kind {
            ControllerKind::Deployment => cached(&self.deployments, namespace, name).map(|d| {
                (
                    d.metadata.uid.clone(),
                    d.spec.as_ref().map(|s| s.selector.clone()),
                )
            })?,
            ControllerKind::StatefulSet => {
                cached(&self.stateful_sets, namespace, name).map(|d| {
                    (
                        d.metadata.uid.clone(),
                        d.spec.as_ref().map(|s| s.selector.clone()),
                    )
                })?
            }
            ControllerKind::DaemonSet => cached(&self.daemon_sets, namespace, name).map(|d| {
                (
                    d.metadata.uid.clone(),
                    d.spec.as_ref().map(|s| s.selector.clone()),
                )
            })?,
            ControllerKind::Rollout => return None,
        };
        // A cached workload without a spec is left to the apiserver's answer and its message.
        let selector = selector?;
        Some(Lookup::Found(Box::new(Workload {
            uid,
            selector,
            pod_template: Default::default(),
        })))
    }
}

async fn current<K>(ctx: &Context, store: &Store<K>, grant: &GrantIdentity) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    if ctx
        .own_writes
        .ahead_of_cache::<K>(&grant.namespace, &grant.name)
    {
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        return Ok(api.get_opt(&grant.name).await?);
    }
    let key = ObjectRef::new(&grant.name).within(&grant.namespace);
    Ok(store.get(&key).map(|object| (*object).clone()))
}

/// Keeps of a workload what [`WorkloadStores::lookup`] reads: its name, namespace, uid and
/// selector. Its pod template and status (most of its size) are dropped as it is cached.
pub fn keep_selector_only<W: Resource>(workload: &mut W, clear_spec: impl FnOnce(&mut W)) {
    let meta = workload.meta_mut();
    *meta = kube::api::ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        ..Default::default()
    };
    clear_spec(workload);
}
