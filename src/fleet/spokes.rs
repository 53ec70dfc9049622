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
use tokio::{
    sync::{Notify, broadcast, mpsc},
    task::JoinHandle,
};

use super::{access::Providers, profiles::ClusterProfile};

/// How old a connection must be before a refusal of its token has the hub connect again.
pub const RECONNECT_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// A request on a spoke that changed, by kind, namespace and name: the same as its hub
/// request's.
pub type SpokeRequestChange = (AccessKind, String, String);

/// One spoke the hub reaches.
pub struct Spoke {
    /// What the connection was made from; a profile that gives another is connected again.
    access: String,
    /// The spoke's apiserver, as the hub's credential.
    pub client: Client,
    /// The hub-managed templates on the spoke, by kind.
    copies: BTreeMap<AccessKind, reflector::Store<DynamicObject>>,
    /// The requests the hub made on the spoke, by kind.
    requests: BTreeMap<AccessKind, reflector::Store<DynamicObject>>,
    watches: Vec<JoinHandle<()>>,
    /// When the connection was made: a refusal soon after is not taken for a stale token.
    connected_at: std::time::Instant,
}

/// What a request controller uses of a spoke: its client, and the requests the hub made
/// there as the spoke's watch last showed them.
#[derive(Clone)]
pub struct SpokeView {
    /// The spoke's apiserver, as the hub's credential.
    pub client: Client,
    requests: BTreeMap<AccessKind, reflector::Store<DynamicObject>>,
}

impl SpokeView {
    /// The hub's request `namespace/name` of `kind` on the spoke: `Ok(None)` if the spoke has
    /// none, `Err` while the watch has not listed the spoke's requests yet (absence would mean
    /// nothing).
    pub fn request(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<std::sync::Arc<DynamicObject>>, String> {
        let store = &self.requests[&kind];
        if !store_ready(store) {
            return Err(
                "the hub cannot list the requests there yet: the spoke is out of reach, \
                        or refuses the hub's credential (see the ClusterProfile's access provider)"
                    .into(),
            );
        }
        Ok(store
            .get(&reflector::ObjectRef::new_with(name, request_resource(kind)).within(namespace)))
    }
}

impl Drop for Spoke {
    fn drop(&mut self) {
        for watch in &self.watches {
            watch.abort();
        }
    }
}

impl Spoke {
    /// The spoke leaves the fleet (its ClusterProfile deleted): the grants the hub made there
    /// are withdrawn and its templates removed, while the hub can still reach it. Best effort:
    /// what a call misses ends at its own expiry on the spoke.
    async fn leave(&self, cluster: &str) {
        tracing::info!(%cluster, "a spoke left the fleet: withdrawing the hub's requests and templates there");
        let requests = self
            .requests
            .iter()
            .map(|(kind, store)| (request_resource(*kind), store));
        let copies = self
            .copies
            .iter()
            .map(|(kind, store)| (template_resource(*kind), store));
        for (resource, store) in requests.chain(copies) {
            for object in store.state() {
                let (Some(namespace), Some(name)) =
                    (&object.metadata.namespace, &object.metadata.name)
                else {
                    continue;
                };
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), namespace, &resource);
                if let Err(error) = api
                    .delete(name, &kube::api::DeleteParams::background())
                    .await
                {
                    tracing::warn!(%cluster, %namespace, %name, %error, "could not withdraw from a spoke leaving the fleet");
                }
            }
        }
    }

    /// What a request controller uses of the spoke.
    pub fn view(&self) -> SpokeView {
        SpokeView {
            client: self.client.clone(),
            requests: self.requests.clone(),
        }
    }

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

/// Whether a watch failed because the spoke refused the hub's token.
fn unauthorized(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 401,
        watcher::Error::WatchError(status) => status.code == 401,
        _ => false,
    }
}

/// The API resource of `kind`'s request.
pub fn request_resource(kind: AccessKind) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(oz_api::GROUP, oz_api::VERSION, kind.request_kind()),
        kind.request_plural(),
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
        changes: &broadcast::Sender<SpokeRequestChange>,
        refusals: &mpsc::UnboundedSender<String>,
    ) {
        let names: Vec<String> = profiles
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let leaving: Vec<String> = self
            .connected
            .keys()
            .filter(|name| !names.contains(name))
            .cloned()
            .collect();
        for name in leaving {
            if let Some(spoke) = self.connected.remove(&name) {
                spoke.leave(&name).await;
            }
        }
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
                    let spoke = connect(&name, hub, access, client, wake, changes, refusals);
                    self.connected.insert(name, spoke);
                }
                Err(error) => {
                    self.connected.remove(&name);
                    self.unreachable.insert(name, error.to_string());
                }
            }
        }
    }

    /// Drops the connection to `name`, so that the next refresh connects again and runs the
    /// credential plugin afresh: for a spoke that refused the hub's token (revoked, or rotated
    /// while the client kept the old one). A connection younger than [`RECONNECT_AFTER`] is
    /// kept: its token was read just now, and a refused one is retried at that pace.
    pub fn forget(&mut self, name: &str) {
        let stale = self
            .connected
            .get(name)
            .is_some_and(|s| s.connected_at.elapsed() >= RECONNECT_AFTER);
        if stale {
            self.connected.remove(name);
            tracing::info!(cluster = %name, "a spoke refused the hub's credential: connecting again");
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

/// A connection to a spoke, with its watches started: the copies' (each event wakes the
/// hub's template pass) and the requests' (each event is news for the request controllers).
fn connect(
    cluster: &str,
    hub: &str,
    access: String,
    client: Client,
    wake: &std::sync::Arc<Notify>,
    changes: &broadcast::Sender<SpokeRequestChange>,
    refusals: &mpsc::UnboundedSender<String>,
) -> Spoke {
    let refused = {
        let (refusals, cluster) = (refusals.clone(), cluster.to_string());
        move || {
            let _ = refusals.send(cluster.clone());
        }
    };
    let mut copies = BTreeMap::new();
    let mut requests = BTreeMap::new();
    let mut watches = Vec::new();
    let labels = format!("{HUB_MANAGED_LABEL}={hub}");
    for kind in AccessKind::ALL {
        let wake = wake.clone();
        // Listed or changed: the pass looks (a first list lets it remove copies not wanted).
        let (store, watch) = watch_labelled(
            &client,
            template_resource(kind),
            &labels,
            refused.clone(),
            move |_| wake.notify_one(),
        );
        copies.insert(kind, store);
        watches.push(watch);
        let changes = changes.clone();
        let (store, watch) = watch_labelled(
            &client,
            request_resource(kind),
            &labels,
            refused.clone(),
            move |request| {
                let Some(request) = request else { return };
                if let (Some(namespace), Some(name)) =
                    (&request.metadata.namespace, &request.metadata.name)
                {
                    // No receiver (no request controller yet) is not an error.
                    let _ = changes.send((kind, namespace.clone(), name.clone()));
                }
            },
        );
        requests.insert(kind, store);
        watches.push(watch);
    }
    Spoke {
        access,
        client,
        copies,
        requests,
        watches,
        connected_at: std::time::Instant::now(),
    }
}

/// A store of the spoke's `resource` objects labelled `labels`, and the task that keeps it;
/// `changed` is called with every object a watch event brings (applied or deleted), and with
/// `None` once a list is complete.
fn watch_labelled(
    client: &Client,
    resource: ApiResource,
    labels: &str,
    refused: impl Fn() + Send + 'static,
    changed: impl Fn(Option<&DynamicObject>) + Send + 'static,
) -> (reflector::Store<DynamicObject>, JoinHandle<()>) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let writer = reflector::store::Writer::new(resource);
    let store = writer.as_reader();
    let events = watcher(api, watcher::Config::default().labels(labels))
        .default_backoff()
        // managedFields, in a DynamicObject's JSON, were most of a fleet grant's memory here.
        .modify(|object| oz_api::strip_unread_metadata(&mut object.metadata))
        .reflect(writer);
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(
                    watcher::Event::Apply(object)
                    | watcher::Event::Delete(object)
                    | watcher::Event::InitApply(object),
                ) => changed(Some(&object)),
                Ok(watcher::Event::InitDone) => changed(None),
                Ok(watcher::Event::Init) => {}
                Err(error) => {
                    tracing::debug!(%error, "watching a fleet spoke");
                    if unauthorized(&error) {
                        refused();
                    }
                }
            }
        }
    });
    (store, task)
}

/// A spoke's refusal of a write in `namespace`, in words for a status: the namespace missing
/// there, the hub's token refused, or the spoke's own message. One wording for the template
/// sync and the request controllers alike.
pub fn explain_spoke_error(namespace: &str, error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.code == 404 => {
            format!("namespace {namespace:?} does not exist on this spoke; create it there")
        }
        kube::Error::Api(status) if status.code == 401 => format!(
            "the spoke refused the hub's credential ({}); check the access provider's token",
            status.message
        ),
        kube::Error::Api(status) => status.message,
        other => format!("the spoke could not be reached: {other}"),
    }
}
