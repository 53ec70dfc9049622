//! The workload each pod belongs to, where access is enforced: what a denial reads to name the
//! templates that could grant the pod ([`oz_api::grant_hint`]).
//!
//! Cost: one metadata-only watch of pods per enforced namespace (the apiserver sends no spec or
//! status, and a LIST of metadata when a watch starts or restarts); each pod is kept as its
//! name and the kind and name of the workload its controller owner reference names, a few
//! dozen bytes, everything else dropped as it arrives. Nothing is watched when no namespace is
//! enforced. RBAC: list and watch on pods in those namespaces (oz-manager's ClusterRole for
//! the webhooks holds them: `src/install/rbac/rules.rs`).

use std::{
    collections::HashMap,
    sync::{Arc, PoisonError, RwLock},
};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    core::PartialObjectMeta,
    runtime::{WatchStreamExt, watcher},
};
use oz_api::grant_hint::{PodOwner, PodWorkload};

/// The pods of one namespace: each pod's workload, `None` for a pod no workload controls.
type Pods = HashMap<String, Option<PodWorkload>>;

/// The pods of the watched namespaces, by namespace; a namespace is here once its watch has
/// listed.
#[derive(Default)]
pub(super) struct PodOwners {
    by_namespace: RwLock<HashMap<String, Pods>>,
}

impl PodOwners {
    /// What `pod` in `namespace` belongs to: [`PodOwner::Unknown`] when the namespace is not
    /// watched or not listed yet, or the pod is not seen (created a moment ago, or gone).
    pub(super) fn owner(&self, namespace: &str, pod: &str) -> PodOwner {
        let by_namespace = self
            .by_namespace
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        match by_namespace.get(namespace).and_then(|pods| pods.get(pod)) {
            None => PodOwner::Unknown,
            Some(None) => PodOwner::NoWorkload,
            Some(Some(workload)) => PodOwner::Workload(workload.clone()),
        }
    }
}

/// The watch events of the pods in `namespace`, kept in `owners`. Runs until dropped; a failed
/// watch is retried with kube's default backoff, its errors passed on.
pub(super) fn watch_pod_owners(
    client: &Client,
    namespace: &str,
    owners: Arc<PodOwners>,
) -> impl Stream<Item = watcher::Result<()>> + Send + 'static {
    // An Api of PartialObjectMeta asks for metadata only.
    let api = Api::<PartialObjectMeta<Pod>>::namespaced(client.clone(), namespace);
    let events = watcher(api, watcher::Config::default()).default_backoff();
    keep_pod_owners(events, namespace, owners)
}

/// `events`, those of the pods in `namespace`, kept in `owners`.
pub(super) fn keep_pod_owners<S>(
    events: S,
    namespace: &str,
    owners: Arc<PodOwners>,
) -> impl Stream<Item = watcher::Result<()>> + Send + 'static
where
    S: Stream<Item = watcher::Result<watcher::Event<PartialObjectMeta<Pod>>>> + Send + 'static,
{
    let mut writer = PodOwnerWriter::new(namespace, owners);
    events.map_ok(move |event| writer.apply(event)).boxed()
}

/// Keeps one namespace of a [`PodOwners`] from its watch's events, the way a reflector's writer
/// keeps its store: a (re)list replaces the namespace once complete.
struct PodOwnerWriter {
    namespace: String,
    owners: Arc<PodOwners>,
    listing: Pods,
}

impl PodOwnerWriter {
    fn new(namespace: &str, owners: Arc<PodOwners>) -> Self {
        Self {
            namespace: namespace.to_string(),
            owners,
            listing: Pods::new(),
        }
    }

    fn apply(&mut self, event: watcher::Event<PartialObjectMeta<Pod>>) {
        let kept = |pod: PartialObjectMeta<Pod>| {
            let workload = PodWorkload::of_pod(&pod.metadata);
            (pod.metadata.name.unwrap_or_default(), workload)
        };
        let write = || {
            self.owners
                .by_namespace
                .write()
                .unwrap_or_else(PoisonError::into_inner)
        };
        match event {
            watcher::Event::Init => self.listing = Pods::new(),
            watcher::Event::InitApply(pod) => {
                let (name, workload) = kept(pod);
                self.listing.insert(name, workload);
            }
            watcher::Event::InitDone => {
                let listed = std::mem::take(&mut self.listing);
                write().insert(self.namespace.clone(), listed);
            }
            watcher::Event::Apply(pod) => {
                let (name, workload) = kept(pod);
                let mut by_namespace = write();
                by_namespace
                    .entry(self.namespace.clone())
                    .or_default()
                    .insert(name, workload);
            }
            watcher::Event::Delete(pod) => {
                let name = pod.metadata.name.unwrap_or_default();
                if let Some(pods) = write().get_mut(&self.namespace) {
                    pods.remove(&name);
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use futures::channel::mpsc;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use oz_api::ControllerKind;

    use super::*;

    /// Pod `name` in shop, of ReplicaSet `owner` with hash 7d9f, or no one's.
    pub(in crate::admission::cache) fn pod(
        name: &str,
        owner: Option<&str>,
    ) -> PartialObjectMeta<Pod> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                labels: Some([("pod-template-hash".to_string(), "7d9f".to_string())].into()),
                owner_references: owner.map(|rs| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: rs.into(),
                        uid: "rs".into(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]
                }),
                ..Default::default()
            },
            _phantom: Default::default(),
        }
    }

    fn web() -> PodOwner {
        PodOwner::Workload(PodWorkload {
            kind: ControllerKind::Deployment,
            name: "web".into(),
        })
    }

    #[tokio::test]
    async fn pods_are_kept_as_their_workload_once_listed_and_follow_the_watch() {
        let owners = Arc::new(PodOwners::default());
        let (events, received) = mpsc::unbounded();
        let mut kept = keep_pod_owners(received, "shop", owners.clone());
        let send = |event| {
            events.unbounded_send(Ok(event)).unwrap();
        };
        send(watcher::Event::Init);
        send(watcher::Event::InitApply(pod("web-0", Some("web-7d9f"))));
        for _ in 0..2 {
            kept.next().await.unwrap().unwrap();
        }
        assert_eq!(owners.owner("shop", "web-0"), PodOwner::Unknown, "listing");

        send(watcher::Event::InitApply(pod("bare", None)));
        send(watcher::Event::InitDone);
        send(watcher::Event::Apply(pod("web-1", Some("web-7d9f"))));
        for _ in 0..3 {
            kept.next().await.unwrap().unwrap();
        }
        assert_eq!(owners.owner("shop", "web-0"), web());
        assert_eq!(owners.owner("shop", "web-1"), web());
        assert_eq!(owners.owner("shop", "bare"), PodOwner::NoWorkload);
        assert_eq!(owners.owner("shop", "web-9"), PodOwner::Unknown);
        assert_eq!(owners.owner("other", "web-0"), PodOwner::Unknown);

        send(watcher::Event::Delete(pod("web-0", Some("web-7d9f"))));
        kept.next().await.unwrap().unwrap();
        assert_eq!(owners.owner("shop", "web-0"), PodOwner::Unknown);

        // A relist replaces the namespace.
        send(watcher::Event::Init);
        send(watcher::Event::InitDone);
        for _ in 0..2 {
            kept.next().await.unwrap().unwrap();
        }
        assert_eq!(owners.owner("shop", "web-1"), PodOwner::Unknown);
    }
}
