//! What a request controller's watches hold of the objects grants are made of and stand on: the
//! grants' Roles and RoleBindings and, for exec access, the workloads' selectors. Builders read
//! them here instead of asking the apiserver on every reconcile (a GET of each per reconcile).
//! A cached copy that oz itself has just overwritten is not trusted: the
//! apiserver is asked then ([`crate::cache::echoes`]).

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        rbac::v1::{Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{
    Api, Resource,
    runtime::reflector::{ObjectRef, Store},
};
use oz_api::{ControllerKind, CrossVersionObjectReference};

use super::{
    grant_rbac::{CachedBinding, CachedRole, WatchedBinding, WatchedRole},
    grant_rbac_store::{GrantObject, GrantRbacStore},
};
use crate::{
    Context, Result,
    builders::{
        GrantIdentity,
        workload::{Lookup, Workload},
    },
};

/// The caches one request controller's builder reads.
#[derive(Clone)]
pub struct BuildCaches {
    /// oz's Roles and RoleBindings in the controller's scope, as much of them as the builders
    /// read.
    pub grants: GrantRbacStore,
    /// The workloads' uids and selectors, when the builder reads them (`AccessBuilder::CACHES_WORKLOADS`).
    pub workloads: Option<WorkloadStores>,
}

/// Deployments, StatefulSets and DaemonSets, each kept as its uid and selector only.
#[derive(Clone)]
pub struct WorkloadStores {
    pub deployments: Store<Deployment>,
    pub stateful_sets: Store<StatefulSet>,
    pub daemon_sets: Store<DaemonSet>,
}

impl BuildCaches {
    /// Waits until every store has been filled by its first LIST, so that a reconcile never
    /// takes "not cached yet" for "does not exist".
    pub async fn wait_until_ready(&self) {
        // A store whose writer is gone is one whose controller is stopping: nothing to wait for.
        self.grants.wait_until_ready().await;
        if let Some(w) = &self.workloads {
            let _ = w.deployments.wait_until_ready().await;
            let _ = w.stateful_sets.wait_until_ready().await;
            let _ = w.daemon_sets.wait_until_ready().await;
        }
    }

    /// The grant's Role, as the cache has it, or as the apiserver has it if oz has written it
    /// since the cache last heard.
    pub async fn role(&self, ctx: &Context, grant: &GrantIdentity) -> Result<Option<CachedRole>> {
        current::<Role, WatchedRole>(ctx, &self.grants, grant).await
    }

    /// The grant's RoleBinding, the same way.
    pub async fn binding(
        &self,
        ctx: &Context,
        grant: &GrantIdentity,
    ) -> Result<Option<CachedBinding>> {
        current::<RoleBinding, WatchedBinding>(ctx, &self.grants, grant).await
    }
}

impl WorkloadStores {
    /// The workload `target` names, from the cache; `None` when the cache cannot say (a Rollout,
    /// which is not cached, or a workload the cache has not seen, perhaps only yet): the caller
    /// asks the apiserver.
    pub fn lookup(&self, namespace: &str, target: &CrossVersionObjectReference) -> Option<Lookup> {
        let name = target.name.as_str();
        let (uid, selector) = match target.kind {
            ControllerKind::Deployment => selector_of(&self.deployments, namespace, name)?,
            ControllerKind::StatefulSet => selector_of(&self.stateful_sets, namespace, name)?,
            ControllerKind::DaemonSet => selector_of(&self.daemon_sets, namespace, name)?,
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

/// The uid and selector of workload `name`, if the cache has it.
fn selector_of<W: CachedWorkload>(
    store: &Store<W>,
    namespace: &str,
    name: &str,
) -> Option<(Option<String>, Option<LabelSelector>)> {
    let workload = store.get(&ObjectRef::new(name).within(namespace))?;
    Some((workload.meta().uid.clone(), workload.selector().cloned()))
}

/// A workload kind [`WorkloadStores`] caches: a selector to read, and a pod template and status
/// (most of its size) to drop as it is cached.
pub trait CachedWorkload:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// `spec.selector`, if it has a spec.
    fn selector(&self) -> Option<&LabelSelector>;

    /// Keeps what [`WorkloadStores::lookup`] reads: its name, namespace, uid and selector.
    fn keep_selector_only(&mut self);
}

/// Implements [`CachedWorkload`] for apps/v1 kinds, whose specs share `selector` and
/// `template`; `$clear`, if given, drops whatever else of the kind's spec is large.
macro_rules! cached_workload {
    ($kind:ty $(, |$spec:ident| $clear:expr)?) => {
        impl CachedWorkload for $kind {
            fn selector(&self) -> Option<&LabelSelector> {
                self.spec.as_ref().map(|s| &s.selector)
            }

            fn keep_selector_only(&mut self) {
                let meta = &mut self.metadata;
                *meta = kube::api::ObjectMeta {
                    name: meta.name.take(),
                    namespace: meta.namespace.take(),
                    uid: meta.uid.take(),
                    resource_version: meta.resource_version.take(),
                    ..Default::default()
                };
                self.status = None;
                if let Some(spec) = &mut self.spec {
                    spec.template = Default::default();
                    $(
                        let $spec = spec;
                        $clear;
                    )?
                }
            }
        }
    };
}

cached_workload!(Deployment);
cached_workload!(StatefulSet, |spec| spec.volume_claim_templates = None);
cached_workload!(DaemonSet);

/// Grant object `grant.name` of kind `K` as `store` has it, or as the apiserver has it when oz
/// has written it since the store last heard.
async fn current<K, W>(
    ctx: &Context,
    store: &GrantRbacStore,
    grant: &GrantIdentity,
) -> Result<Option<W::Cached>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    W: GrantObject,
    W::Cached: From<K>,
{
    let cached = store.get::<W>(&grant.namespace, &grant.name);
    if ctx.echoes.ahead_of::<K>(
        &grant.namespace,
        &grant.name,
        cached.as_ref().map(W::cached_version),
    ) {
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        return Ok(api.get_opt(&grant.name).await?.map(W::Cached::from));
    }
    Ok(cached)
}

#[cfg(test)]
mod tests {
    use kube::runtime::{reflector, watcher};
    use oz_api::ControllerApiVersion;

    use super::*;

    fn cached<W: CachedWorkload>(json: serde_json::Value) -> Store<W> {
        let mut workload: W = serde_json::from_value(json).unwrap();
        workload.keep_selector_only();
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Apply(workload));
        store
    }

    fn spec(extra: serde_json::Value) -> serde_json::Value {
        let mut spec = serde_json::json!({
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        });
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        spec
    }

    fn object(kind: &str, extra: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "web", "namespace": "shop", "uid": "w-1",
                         "labels": {"team": "a"}, "annotations": {"a": "b"}},
            "spec": spec(extra),
            "status": {"replicas": 1},
        })
    }

    fn target(kind: ControllerKind) -> CrossVersionObjectReference {
        CrossVersionObjectReference {
            api_version: ControllerApiVersion::AppsV1,
            kind,
            name: "web".into(),
        }
    }

    #[test]
    fn a_cached_workload_keeps_its_uid_and_selector_and_nothing_large() {
        let stores = WorkloadStores {
            deployments: cached(object("Deployment", serde_json::json!({}))),
            stateful_sets: cached(object(
                "StatefulSet",
                serde_json::json!({"serviceName": "web",
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}),
            )),
            daemon_sets: cached(object("DaemonSet", serde_json::json!({}))),
        };
        for kind in [
            ControllerKind::Deployment,
            ControllerKind::StatefulSet,
            ControllerKind::DaemonSet,
        ] {
            let Some(Lookup::Found(workload)) = stores.lookup("shop", &target(kind)) else {
                panic!("{kind:?} not found in the cache");
            };
            assert_eq!(workload.uid.as_deref(), Some("w-1"), "{kind:?}");
            assert_eq!(
                workload.selector.match_labels.unwrap()["app"],
                "web",
                "{kind:?}"
            );
        }
        let deployment = stores
            .deployments
            .get(&ObjectRef::new("web").within("shop"))
            .unwrap();
        assert_eq!(
            deployment.spec.as_ref().unwrap().template,
            Default::default()
        );
        assert!(deployment.status.is_none() && deployment.metadata.labels.is_none());
        let stateful_set = stores
            .stateful_sets
            .get(&ObjectRef::new("web").within("shop"))
            .unwrap();
        assert!(
            stateful_set
                .spec
                .as_ref()
                .unwrap()
                .volume_claim_templates
                .is_none()
        );
        assert!(
            stores
                .lookup("shop", &target(ControllerKind::Rollout))
                .is_none()
        );
        assert!(
            stores
                .lookup("other", &target(ControllerKind::Deployment))
                .is_none()
        );
    }
}
