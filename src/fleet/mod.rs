//! Fleets, the hub's side: with `--fleet-hub`, oz-manager reads the ClusterProfiles of its
//! fleet namespace ([`profiles`]), reaches each spoke through the profile's access provider and
//! the hub's provider file ([`access`], [`spokes`]), and keeps every fleet template (one that
//! names `clusters`) on the spokes it covers ([`copies`], [`template_sync`]). Each spoke runs
//! its own oz, which grants, times and revokes; the hub's credential there can write oz's
//! templates and requests only (`crate::install::fleet`). `docs/fleet.md` tells the model.

pub mod access;
pub mod copies;
pub mod profiles;
pub mod spokes;
pub mod template_sync;

use std::{path::PathBuf, sync::Arc, time::Duration};

use futures::StreamExt;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, reflector, watcher},
};
use oz_api::{ExecAccessTemplate, PodAccessTemplate};
use tokio::sync::Notify;

use crate::manager::Shutdown;
use access::Providers;
use copies::HubTemplate;
use profiles::ClusterProfile;
use spokes::Spokes;

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

/// Runs the hub until `stop`: watches its ClusterProfiles and templates and keeps the spokes'
/// templates in step.
pub async fn run(client: Client, settings: HubSettings, stop: Shutdown) -> Result<(), String> {
    let providers = Providers::read(&settings.provider_file).map_err(|e| e.to_string())?;
    let wake = Arc::new(Notify::new());
    let profiles =
        watch_into::<ClusterProfile>(Api::namespaced(client.clone(), &settings.namespace), &wake);
    let exec = watch_into::<ExecAccessTemplate>(Api::all(client.clone()), &wake);
    let pod = watch_into::<PodAccessTemplate>(Api::all(client.clone()), &wake);
    tracing::info!(hub = %settings.name, namespace = %settings.namespace, "fleet hub: keeping templates on spokes");
    let mut spokes = Spokes::default();
    let mut stop = std::pin::pin!(stop);
    loop {
        let (profiles, exec, pod) = (profiles.0.state(), exec.0.state(), pod.0.state());
        spokes
            .refresh(&settings.name, &providers, &profiles, &wake)
            .await;
        let templates: Vec<HubTemplate> = exec
            .iter()
            .filter_map(|t| HubTemplate::of(t.as_ref()))
            .chain(pod.iter().filter_map(|t| HubTemplate::of(t.as_ref())))
            .collect();
        let outcome =
            template_sync::sync_templates(&client, &settings.name, &templates, &profiles, &spokes)
                .await;
        let wait = if outcome.failures > 0 { RETRY } else { RESYNC };
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// A store of `api`'s objects, kept by a watch whose every event wakes `wake`; the task ends
/// with the store's last holder.
fn watch_into<K>(
    api: Api<K>,
    wake: &Arc<Notify>,
) -> (reflector::Store<K>, tokio::task::JoinHandle<()>)
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
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            if let Err(error) = event {
                tracing::debug!(%error, "fleet hub watch");
            }
            wake.notify_one();
        }
    });
    (store, task)
}
