//! Fleets, the hub's side: with `--fleet-hub`, oz-manager reads the ClusterProfiles of its
//! fleet namespace ([`profiles`]), reaches each spoke through the profile's access provider and
//! the hub's provider file ([`access`], [`spokes`]), keeps every fleet template (one that names
//! `clusters`) on the spokes it covers ([`copies`], [`template_sync`]), and lets the request
//! controllers forward decided requests to a spoke and follow them there
//! (`crate::controllers` `forward` step). Each spoke runs its own oz, which grants, times and
//! revokes; the hub's credential there can write oz's templates and requests only
//! (`crate::install::fleet`). `docs/fleet.md` tells the model.

pub mod access;
pub mod copies;
pub mod profiles;
pub mod spokes;
pub mod template_sync;

use std::{path::PathBuf, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject},
    runtime::{WatchStreamExt, reflector, watcher},
};
use oz_api::{AccessKind, AccessRequest, ExecAccessTemplate, FleetClusters, PodAccessTemplate};
use tokio::sync::{Notify, RwLock, broadcast, mpsc};

use crate::manager::Shutdown;
use access::Providers;
use copies::HubTemplate;
use profiles::ClusterProfile;
pub use spokes::{SpokeRequestChange, SpokeView, explain_spoke_error};
use spokes::{Spokes, request_resource};

/// How a hub runs (`--fleet-hub` and the flags beside it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubSettings {
    /// The hub's name, on everything it keeps on spokes (`--fleet-name`).
    pub name: String,
    /// Where its ClusterProfiles are (`--fleet-namespace`).
    pub namespace: String,
    /// The provider file (`--fleet-provider-file`).
    pub provider_file: PathBuf,
}

/// How long a hub waits before looking again after a pass with failures (a spoke down, a
/// namespace missing there); with none, it looks again on any change, and every
/// [`RESYNC`] in case a change went unseen.
const RETRY: Duration = Duration::from_secs(5);
/// See [`RETRY`].
const RESYNC: Duration = Duration::from_secs(300);

/// Why a request cannot be forwarded to the spoke it names.
#[derive(Debug)]
pub enum SpokeError {
    /// No such ClusterProfile (or it is being deleted).
    NotInInventory(String),
    /// The template does not cover it.
    NotCovered(String),
    /// The hub cannot reach it now.
    Unreachable(String),
}

/// The hub: its inventory, its spokes, and the news of its requests there.
pub struct FleetHub {
    /// Its settings.
    pub settings: HubSettings,
    client: Client,
    providers: Providers,
    profiles: reflector::Store<ClusterProfile>,
    exec_templates: reflector::Store<ExecAccessTemplate>,
    pod_templates: reflector::Store<PodAccessTemplate>,
    spokes: RwLock<Spokes>,
    wake: Arc<Notify>,
    changes: broadcast::Sender<SpokeRequestChange>,
    /// Spokes whose watches were refused the hub's token, sent by those watches.
    refusals: (
        mpsc::UnboundedSender<String>,
        tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>,
    ),
}

impl FleetHub {
    /// Reads the provider file and starts watching the inventory and the hub's templates.
    pub fn start(client: Client, settings: HubSettings) -> Result<Arc<Self>, String> {
        let providers = Providers::read(&settings.provider_file).map_err(|e| e.to_string())?;
        let wake = Arc::new(Notify::new());
        let profiles = watch_into::<ClusterProfile>(
            Api::namespaced(client.clone(), &settings.namespace),
            &wake,
        );
        let exec_templates = watch_into::<ExecAccessTemplate>(Api::all(client.clone()), &wake);
        let pod_templates = watch_into::<PodAccessTemplate>(Api::all(client.clone()), &wake);
        let (changes, _) = broadcast::channel(1024);
        let (refused, refusals) = mpsc::unbounded_channel();
        Ok(Arc::new(Self {
            settings,
            client,
            providers,
            profiles,
            exec_templates,
            pod_templates,
            spokes: RwLock::new(Spokes::default()),
            wake,
            changes,
            refusals: (refused, tokio::sync::Mutex::new(refusals)),
        }))
    }

    /// Keeps the spokes' connections and templates in step until `stop`.
    pub async fn run(self: Arc<Self>, stop: Shutdown) {
        let hub = &self.settings.name;
        tracing::info!(%hub, namespace = %self.settings.namespace, "fleet hub: keeping templates on spokes");
        let mut stop = std::pin::pin!(stop);
        let mut refusals = self.refusals.1.lock().await;
        loop {
            let profiles = self.profiles.state();
            self.spokes
                .write()
                .await
                .refresh(
                    hub,
                    &self.providers,
                    &profiles,
                    &self.wake,
                    &self.changes,
                    &self.refusals.0,
                )
                .await;
            let templates: Vec<HubTemplate> = self
                .exec_templates
                .state()
                .iter()
                .filter_map(|t| HubTemplate::of(t.as_ref()))
                .chain(
                    self.pod_templates
                        .state()
                        .iter()
                        .filter_map(|t| HubTemplate::of(t.as_ref())),
                )
                .collect();
            let spokes = self.spokes.read().await;
            let outcome =
                template_sync::sync_templates(&self.client, hub, &templates, &profiles, &spokes)
                    .await;
            drop(spokes);
            for cluster in &outcome.refused {
                self.spokes.write().await.forget(cluster);
            }
            let wait = if outcome.failures > 0 { RETRY } else { RESYNC };
            tokio::select! {
                _ = &mut stop => return,
                _ = self.wake.notified() => {}
                Some(cluster) = refusals.recv() => self.spokes.write().await.forget(&cluster),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The spoke `cluster`, if `clusters` covers it and the hub reaches it; otherwise why not,
    /// in words for the request's status.
    pub async fn spoke(
        &self,
        cluster: &str,
        clusters: &FleetClusters,
    ) -> Result<SpokeView, SpokeError> {
        let profile = self
            .profiles
            .get(&reflector::ObjectRef::new(cluster).within(&self.settings.namespace));
        let Some(profile) = profile.filter(|p| p.metadata.deletion_timestamp.is_none()) else {
            return Err(SpokeError::NotInInventory(format!(
                "spec.cluster: no ClusterProfile {cluster:?} in the hub's fleet namespace {:?}",
                self.settings.namespace
            )));
        };
        if !clusters.covers(cluster, profile.labels()) {
            return Err(SpokeError::NotCovered(format!(
                "spec.cluster: the template does not cover cluster {cluster:?}; it covers {}",
                self.covered(clusters).join(", ")
            )));
        }
        self.spokes
            .read()
            .await
            .get(cluster)
            .map(|s| s.view())
            .map_err(SpokeError::Unreachable)
    }

    /// After a spoke refused the hub's credential (401): connect again, with a token the
    /// plugin reads afresh.
    pub async fn refused(&self, cluster: &str) {
        self.spokes.write().await.forget(cluster);
        self.wake.notify_one();
    }

    /// Deletes the spoke's copy of a hub request, if it has one (its grant ends there). `Ok`
    /// once the spoke has none, and for a request that names no cluster or a spoke the hub is
    /// not connected to (out of the inventory: what it held was withdrawn as it left).
    pub async fn withdraw<R: AccessRequest>(&self, request: &R) -> Result<(), kube::Error> {
        let Some(cluster) = request.cluster() else {
            return Ok(());
        };
        let Ok(client) = self
            .spokes
            .read()
            .await
            .get(cluster)
            .map(|s| s.client.clone())
        else {
            return Ok(());
        };
        let api: Api<DynamicObject> = Api::namespaced_with(
            client,
            &request.namespace().unwrap_or_default(),
            &request_resource(R::KIND),
        );
        match api
            .delete(&request.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// The clusters `clusters` covers now, by name.
    pub fn covered(&self, clusters: &FleetClusters) -> Vec<String> {
        let mut names: Vec<String> = self
            .profiles
            .state()
            .iter()
            .filter(|p| clusters.covers(&p.name_any(), p.labels()))
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names
    }

    /// The requests of `kind` on any spoke that changed, as the namespace and name of their
    /// hub request, for as long as the hub runs.
    pub fn request_changes(
        &self,
        kind: AccessKind,
    ) -> impl Stream<Item = (String, String)> + Send + 'static {
        let receiver = self.changes.subscribe();
        futures::stream::unfold(receiver, move |mut receiver| async move {
            loop {
                match receiver.recv().await {
                    Ok((changed, namespace, name)) if changed == kind => {
                        return Some(((namespace, name), receiver));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }
}

/// A store of `api`'s objects, kept by a watch whose every event wakes `wake`, for as long
/// as the process runs.
fn watch_into<K>(api: Api<K>, wake: &Arc<Notify>) -> reflector::Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let wake = wake.clone();
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|object: &mut K| oz_api::strip_unread_metadata(object.meta_mut()))
        .reflect(writer);
    tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            if let Err(error) = event {
                tracing::debug!(%error, "fleet hub watch");
            }
            wake.notify_one();
        }
    });
    store
}
