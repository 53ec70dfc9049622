//! The hub's connections to its spokes, one per ClusterProfile it can reach: a client made
//! from the profile's access provider ([`Providers`]), and a watch of the templates the hub
//! keeps there (the hub-managed label, with this hub's name), so a pass sees each spoke's
//! copies without asking, and an edit made on a spoke wakes the hub to undo it.
//!
//! A connection is made again when its profile's access changes (a new server, CA or
//! provider): the kubeconfig made from the profile is the key. A credential that stops working
//! (revoked, rotated) shows as errors on the spoke's calls, and kube's client runs the plugin
//! again when the token it gave expires.

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::{
    Api, Client,
    api::DynamicObject,
    core::{ApiResource, GroupVersionKind},
    runtime::{WatchStreamExt, reflector, watcher},
};
use oz_api::{AccessKind, HUB_MANAGED_LABEL};
use tokio::{sync::Notify, task::JoinHandle};

use super::{access::Providers, profiles::ClusterProfile};

/// One spoke the hub reaches.
pub struct Spoke {
    /// What the connection was made from; a profile that gives another is connected again.
    access: String,
    /// The spoke's apiserver, as the hub's credential.
    pub client: Client,
    /// The hub-managed templates on the spoke, by kind.
    copies: BTreeMap<AccessKind, reflector::Store<DynamicObject>>,
    watches: Vec<JoinHandle<()>>,
}

impl Drop for Spoke {
    fn drop(&mut self) {
        for watch in &self.watches {
            watch.abort();
        }
    }
}

impl Spoke {
    /// The spoke's copy of `kind`'s template `namespace/name`, if its watch has it. `None`
    /// also while the watch has not listed yet: see [`Spoke::listed`].
    pub fn copy(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Option<std::sync::Arc<DynamicObject>> {
        self.copies[&kind]
            .get(&reflector::ObjectRef::new_with(name, template_resource(kind)).within(namespace))
    }

    /// Every copy the spoke holds, by kind, once both watches have listed (`None` before).
    pub fn listed(&self) -> Option<Vec<(AccessKind, std::sync::Arc<DynamicObject>)>> {
        let mut all = Vec::new();
        for (kind, store) in &self.copies {
            if !store_ready(store) {
                return None;
            }
            all.extend(store.state().into_iter().map(|copy| (*kind, copy)));
        }
        Some(all)
    }
}

/// Whether `store` has had its first full list.
fn store_ready(store: &reflector::Store<DynamicObject>) -> bool {
    futures::FutureExt::now_or_never(store.wait_until_ready()).is_some_and(|r| r.is_ok())
}

/// The API resource of `kind`'s template.
pub fn template_resource(kind: AccessKind) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(oz_api::GROUP, oz_api::VERSION, kind.template_kind()),
        kind.template_plural(),
    )
}

/// The hub's spokes, by ClusterProfile name, and why the others cannot be reached.
#[derive(Default)]
pub struct Spokes {
    connected: BTreeMap<String, Spoke>,
    unreachable: BTreeMap<String, String>,
}

impl Spokes {
    /// Connects to each of `profiles` not yet connected (or whose access changed), and drops
    /// the connections of profiles gone. Changes to the spokes' copies wake `wake`.
    pub async fn refresh(
        &mut self,
        hub: &str,
        providers: &Providers,
        profiles: &[std::sync::Arc<ClusterProfile>],
        wake: &std::sync::Arc<Notify>,
    ) {
        let names: Vec<String> = profiles
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        self.connected.retain(|name, _| names.contains(name));
        self.unreachable.clear();
        for profile in profiles {
            let Some(name) = profile.metadata.name.clone() else {
                continue;
            };
            if profile.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let access = match providers.kubeconfig(profile) {
                Ok(kubeconfig) => serde_json::to_string(&kubeconfig).unwrap_or_default(),
                Err(error) => {
                    self.connected.remove(&name);
                    self.unreachable.insert(name, error.to_string());
                    continue;
                }
            };
            if self
                .connected
                .get(&name)
                .is_some_and(|s| s.access == access)
            {
                continue;
            }
            match providers.client(profile).await {
                Ok(client) => {
                    tracing::info!(cluster = %name, "connected to fleet spoke");
                    let spoke = connect(hub, access, client, wake);
                    self.connected.insert(name, spoke);
                }
                Err(error) => {
                    self.connected.remove(&name);
                    self.unreachable.insert(name, error.to_string());
                }
            }
        }
    }

    /// The spoke `name`, or why it cannot be reached.
    pub fn get(&self, name: &str) -> Result<&Spoke, String> {
        self.connected.get(name).ok_or_else(|| {
            self.unreachable.get(name).cloned().unwrap_or_else(|| {
                format!("no ClusterProfile {name:?} in the hub's fleet namespace")
            })
        })
    }

    /// Every connected spoke, by name.
    pub fn connected(&self) -> impl Iterator<Item = (&String, &Spoke)> {
        self.connected.iter()
    }
}

/// A connection to a spoke, with its copies' watches started.
fn connect(hub: &str, access: String, client: Client, wake: &std::sync::Arc<Notify>) -> Spoke {
    let mut copies = BTreeMap::new();
    let mut watches = Vec::new();
    for kind in AccessKind::ALL {
        let resource = template_resource(kind);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let config = watcher::Config::default().labels(&format!("{HUB_MANAGED_LABEL}={hub}"));
        let writer = reflector::store::Writer::new(resource);
        let store = writer.as_reader();
        let wake = wake.clone();
        // Every event wakes the hub: a copy changed or deleted on the spoke is put back.
        let events = watcher(api, config).default_backoff().reflect(writer);
        watches.push(tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                if let Err(error) = event {
                    tracing::debug!(%error, "watching a spoke's hub-managed templates");
                }
                wake.notify_one();
            }
        }));
        copies.insert(kind, store);
    }
    Spoke {
        access,
        client,
        copies,
        watches,
    }
}
