//! [`CachedLookup`]: the handlers' reads served from memory, kept current by watches.
//!
//! Four reflectors (ExecAccessRequest, PodAccessRequest, ExecAccessTemplate, PodAccessTemplate)
//! keep copies of every object in the namespaces served, without what the handlers never read:
//! `metadata.managedFields`, the last-applied annotation, and a request's conditions and access
//! message. The requests are also indexed by namespace, so an audited exec reads its own
//! namespace's requests and costs no apiserver call at all.
//!
//! The copies lag the apiserver by the watch's delivery delay, normally milliseconds. Where
//! that could change an answer, the apiserver is read instead:
//! - until every store has listed once, every read goes to the apiserver;
//! - a template that is not in the cache is read (it may have been created a moment ago);
//! - [`find_grant`](super::audit::find_grant) asks the apiserver before concluding that there
//!   is no grant ([`AccessLookup::uncached`]), so an exec right after its request became Ready
//!   is still attributed to it;
//! - AccessApprovals, and the request a decision is made on, are not served from memory at all
//!   ([`AccessLookup::decisions`], [`AccessLookup::request`]): decisions are rare, a decision on
//!   a request that became Ready a moment ago must be refused, and a person's second decision
//!   made a moment after their first must be seen.
//!
//! What remains: for those milliseconds, a request that has just expired or been deleted can
//! still be named as the grant, and a template's just-changed accessConfig is not yet seen.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt::Debug,
    sync::{
        Arc, PoisonError, RwLock,
        atomic::{AtomicBool, Ordering},
    },
};

use futures::{FutureExt, Stream, StreamExt, TryStreamExt, future::BoxFuture};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store, store::Writer},
        watcher,
    },
};
use oz_api::{
    AccessConfig, AccessKind, AccessRequest, AccessTemplate, ExecAccessRequest, ExecAccessTemplate,
    PodAccessRequest, PodAccessTemplate,
};
use serde::de::DeserializeOwned;
use tracing::warn;

use oz_api::AccessApproval;

use super::{AccessLookup, Answer, KubeLookup, RequestState, RequestSummary};

/// [`AccessLookup`] from in-memory copies kept by watches, reading through the apiserver where
/// a copy could be behind (see the module documentation). Needs get/list/watch on the four oz
/// kinds, in every namespace served.
pub struct CachedLookup {
    scope: Scope,
    live: Arc<dyn AccessLookup>,
}

/// The stores, for all namespaces at once or one set per namespace.
enum Scope {
    Cluster(Stores),
    Namespaces(BTreeMap<String, Stores>),
}

/// One store per kind; the requests' indexed by namespace.
struct Stores {
    exec_requests: Store<ExecAccessRequest>,
    exec_requests_by_namespace: Arc<NamespaceIndex>,
    pod_requests: Store<PodAccessRequest>,
    pod_requests_by_namespace: Arc<NamespaceIndex>,
    exec_templates: Store<ExecAccessTemplate>,
    pod_templates: Store<PodAccessTemplate>,
    /// Set once all four have listed; they stay usable while their watches recover.
    ready: AtomicBool,
}

/// The writers of a [`Stores`].
struct Writers {
    exec_requests: Writer<ExecAccessRequest>,
    exec_requests_by_namespace: NamespaceIndexer,
    pod_requests: Writer<PodAccessRequest>,
    pod_requests_by_namespace: NamespaceIndexer,
    exec_templates: Writer<ExecAccessTemplate>,
    pod_templates: Writer<PodAccessTemplate>,
}

impl Writers {
    fn new() -> Self {
        Self {
            exec_requests: Writer::default(),
            exec_requests_by_namespace: NamespaceIndexer::default(),
            pod_requests: Writer::default(),
            pod_requests_by_namespace: NamespaceIndexer::default(),
            exec_templates: Writer::default(),
            pod_templates: Writer::default(),
        }
    }

    fn stores(&self) -> Stores {
        Stores {
            exec_requests: self.exec_requests.as_reader(),
            exec_requests_by_namespace: self.exec_requests_by_namespace.index.clone(),
            pod_requests: self.pod_requests.as_reader(),
            pod_requests_by_namespace: self.pod_requests_by_namespace.index.clone(),
            exec_templates: self.exec_templates.as_reader(),
            pod_templates: self.pod_templates.as_reader(),
            ready: AtomicBool::new(false),
        }
    }

    /// The four reflectors over `client`, in `namespace` or (`None`) all namespaces.
    fn reflect(self, client: &Client, namespace: Option<&str>) -> Vec<BoxFuture<'static, ()>> {
        fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
        where
            K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
        {
            match namespace {
                Some(namespace) => Api::namespaced(client.clone(), namespace),
                None => Api::all(client.clone()),
            }
        }
        vec![
            run(
                api(client, namespace),
                self.exec_requests,
                strip_request,
                Some(self.exec_requests_by_namespace),
            ),
            run(
                api(client, namespace),
                self.pod_requests,
                strip_request,
                Some(self.pod_requests_by_namespace),
            ),
            run(
                api(client, namespace),
                self.exec_templates,
                strip_metadata,
                None,
            ),
            run(
                api(client, namespace),
                self.pod_templates,
                strip_metadata,
                None,
            ),
        ]
    }
}

impl Stores {
    /// Whether all four stores have listed once.
    fn ready(&self) -> bool {
        if self.ready.load(Ordering::Relaxed) {
            return true;
        }
        let listed = |ready: Option<Result<(), _>>| matches!(ready, Some(Ok(())));
        let ready = listed(self.exec_requests.wait_until_ready().now_or_never())
            && listed(self.pod_requests.wait_until_ready().now_or_never())
            && listed(self.exec_templates.wait_until_ready().now_or_never())
            && listed(self.pod_templates.wait_until_ready().now_or_never());
        if ready {
            self.ready.store(true, Ordering::Relaxed);
        }
        ready
    }

    async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.exec_requests.wait_until_ready().await?;
        self.pod_requests.wait_until_ready().await?;
        self.exec_templates.wait_until_ready().await?;
        self.pod_templates.wait_until_ready().await
    }

    fn template(&self, kind: AccessKind, namespace: &str, name: &str) -> Option<AccessConfig> {
        match kind {
            AccessKind::Exec => access_config(&self.exec_templates, namespace, name),
            AccessKind::Pod => access_config(&self.pod_templates, namespace, name),
        }
    }

    fn requests(&self, namespace: &str) -> Vec<RequestSummary> {
        let mut requests = Vec::new();
        self.exec_requests_by_namespace
            .each(&self.exec_requests, namespace, |r| {
                requests.push(RequestSummary::of(r))
            });
        self.pod_requests_by_namespace
            .each(&self.pod_requests, namespace, |r| {
                requests.push(RequestSummary::of(r))
            });
        requests
    }
}

/// The `spec.accessConfig` of template `name` in `store`, if it is there.
fn access_config<T: AccessTemplate>(
    store: &Store<T>,
    namespace: &str,
    name: &str,
) -> Option<AccessConfig> {
    store
        .get(&ObjectRef::new(name).within(namespace))
        .map(|t| t.access_config().clone())
}

impl CachedLookup {
    /// A lookup over `client` for `namespaces` (empty: all namespaces), and the future that
    /// runs its watches. Spawn the future for as long as the lookup is used: it runs until
    /// dropped, retrying a failed watch with kube's default backoff and logging the error.
    /// Reads go through the apiserver until the watches have listed everything once.
    pub fn new(
        client: Client,
        namespaces: &[String],
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let mut reflectors = Vec::new();
        let scope = if namespaces.is_empty() {
            let writers = Writers::new();
            let stores = writers.stores();
            reflectors.extend(writers.reflect(&client, None));
            Scope::Cluster(stores)
        } else {
            let mut scoped = BTreeMap::new();
            for namespace in namespaces {
                let writers = Writers::new();
                scoped.insert(namespace.clone(), writers.stores());
                reflectors.extend(writers.reflect(&client, Some(namespace)));
            }
            Scope::Namespaces(scoped)
        };
        let lookup = Self {
            scope,
            live: Arc::new(KubeLookup::new(client)),
        };
        let run = futures::future::join_all(reflectors).map(|_| ());
        (lookup, run)
    }

    /// Whether reads are served from memory yet: every store has listed once.
    pub fn is_ready(&self) -> bool {
        match &self.scope {
            Scope::Cluster(stores) => stores.ready(),
            Scope::Namespaces(scoped) => scoped.values().all(Stores::ready),
        }
    }

    /// Returns once [`CachedLookup::is_ready`], which needs the future from
    /// [`CachedLookup::new`] to be running; fails if that future was dropped first.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        match &self.scope {
            Scope::Cluster(stores) => stores.wait_until_ready().await,
            Scope::Namespaces(scoped) => {
                for stores in scoped.values() {
                    stores.wait_until_ready().await?;
                }
                Ok(())
            }
        }
    }

    /// The stores `namespace` is read from, once they have listed.
    fn stores(&self, namespace: &str) -> Option<&Stores> {
        let stores = match &self.scope {
            Scope::Cluster(stores) => stores,
            Scope::Namespaces(scoped) => scoped.get(namespace)?,
        };
        stores.ready().then_some(stores)
    }
}

impl AccessLookup for CachedLookup {
    fn template(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<AccessConfig>> {
        if let Some(config) = self
            .stores(namespace)
            .and_then(|stores| stores.template(kind, namespace, name))
        {
            return Box::pin(async move { Ok(Some(config)) });
        }
        // Not listed yet, or created a moment ago.
        self.live.template(kind, namespace, name)
    }

    fn requests(&self, namespace: &str) -> Answer<'_, Vec<RequestSummary>> {
        match self.stores(namespace) {
            Some(stores) => {
                let requests = stores.requests(namespace);
                Box::pin(async move { Ok(requests) })
            }
            None => self.live.requests(namespace),
        }
    }

    /// Always the apiserver's: the approval handlers need the request as it is now (see the
    /// module documentation), and nothing else reads a single request.
    fn request(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<RequestState>> {
        self.live.request(kind, namespace, name)
    }

    /// Always the apiserver's: see [`AccessLookup::decisions`].
    fn decisions(&self, namespace: &str) -> Answer<'_, Vec<AccessApproval>> {
        self.live.decisions(namespace)
    }

    fn uncached(&self) -> Option<&dyn AccessLookup> {
        Some(self.live.as_ref())
    }
}

/// One reflector: `writer`'s store (and `index`) follows `api`, each object passed through
/// `strip` first.
fn run<K>(
    api: Api<K>,
    writer: Writer<K>,
    strip: fn(&mut K),
    index: Option<NamespaceIndexer>,
) -> BoxFuture<'static, ()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let events = watcher(api, watcher::Config::default()).default_backoff();
    reflect(events, writer, strip, index)
        .for_each(|event| {
            if let Err(e) = event {
                warn!(
                    kind = K::kind(&()).as_ref(), error = %e,
                    "the audit and admission cache's watch failed; retrying with backoff"
                );
            }
            futures::future::ready(())
        })
        .boxed()
}

/// `events` applied to `writer`'s store, then to `index`, each object passed through `strip`
/// first.
fn reflect<K, S>(
    events: S,
    writer: Writer<K>,
    strip: fn(&mut K),
    mut index: Option<NamespaceIndexer>,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    events.modify(strip).reflect(writer).map_ok(move |event| {
        if let Some(index) = index.as_mut() {
            index.apply(&event);
        }
        event
    })
}

/// The names of a store's objects, by namespace: one namespace's requests are found without
/// going through every namespace's (the store is keyed by namespace and name, unordered).
#[derive(Default)]
struct NamespaceIndex(RwLock<HashMap<String, BTreeSet<String>>>);

impl NamespaceIndex {
    /// Calls `f` with each object of `store` in `namespace`.
    fn each<K>(&self, store: &Store<K>, namespace: &str, mut f: impl FnMut(&K))
    where
        K: Resource<DynamicType = ()> + Clone + 'static,
    {
        let index = self.0.read().unwrap_or_else(PoisonError::into_inner);
        for name in index.get(namespace).into_iter().flatten() {
            // Gone from the store, not yet from the index: deleted a moment ago.
            if let Some(object) = store.get(&ObjectRef::new(name).within(namespace)) {
                f(&object);
            }
        }
    }
}

/// Keeps a [`NamespaceIndex`] from the watch events its store is kept from, the way the
/// store's writer does: a (re)list replaces the index once complete.
#[derive(Default)]
struct NamespaceIndexer {
    index: Arc<NamespaceIndex>,
    listing: HashMap<String, BTreeSet<String>>,
}

impl NamespaceIndexer {
    fn apply<K: Resource>(&mut self, event: &watcher::Event<K>) {
        fn key<K: Resource>(object: &K) -> (String, String) {
            let meta = object.meta();
            (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            )
        }
        match event {
            watcher::Event::Init => self.listing = HashMap::new(),
            watcher::Event::InitApply(object) => {
                let (namespace, name) = key(object);
                self.listing.entry(namespace).or_default().insert(name);
            }
            watcher::Event::InitDone => {
                let listed = std::mem::take(&mut self.listing);
                *self.index.0.write().unwrap_or_else(PoisonError::into_inner) = listed;
            }
            watcher::Event::Apply(object) => {
                let (namespace, name) = key(object);
                let mut index = self.index.0.write().unwrap_or_else(PoisonError::into_inner);
                index.entry(namespace).or_default().insert(name);
            }
            watcher::Event::Delete(object) => {
                let (namespace, name) = key(object);
                let mut index = self.index.0.write().unwrap_or_else(PoisonError::into_inner);
                if let Some(names) = index.get_mut(&namespace) {
                    names.remove(&name);
                    if names.is_empty() {
                        index.remove(&namespace);
                    }
                }
            }
        }
    }
}

/// Drops the metadata no part of oz reads (`oz_api::strip_unread_metadata`).
fn strip_metadata<K: ResourceExt>(object: &mut K) {
    oz_api::strip_unread_metadata(object.meta_mut());
}

/// As [`strip_metadata`], and the status fields grant matching does not read.
fn strip_request<K: AccessRequest>(request: &mut K) {
    strip_metadata(request);
    if let Some(status) = request.request_status_mut() {
        status.conditions = Vec::new();
        status.access_message = None;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::channel::mpsc;
    use oz_api::RequestPhase;
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::{
        audit::{Grant, find_grant},
        // The apiserver, as far as the cache's fallbacks can tell: what it holds, and how
        // often it was asked.
        fake_lookup::{FakeLookup as Apiserver, NS},
    };

    fn access_config(groups: &[&str]) -> AccessConfig {
        serde_json::from_value(json!({
            "allowedGroups": groups, "defaultDuration": "1h", "maxDuration": "2h",
        }))
        .unwrap()
    }

    /// Metadata as the apiserver sends it: managedFields and a last-applied annotation included.
    fn metadata(namespace: &str, name: &str) -> Value {
        json!({
            "name": name,
            "namespace": namespace,
            "uid": format!("uid-{namespace}-{name}"),
            "annotations": {oz_api::LAST_APPLIED_ANNOTATION: "{\"a\":\"whole copy\"}", "team": "payments"},
            "managedFields": [{
                "manager": "kubectl", "operation": "Apply", "apiVersion": "v1alpha1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}},
            }],
        })
    }

    fn exec_request(namespace: &str, name: &str, user: &str, phase: &str) -> ExecAccessRequest {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessRequest",
            "metadata": metadata(namespace, name),
            "spec": {"templateName": "web", "requester": {"username": user, "groups": ["devs"]}},
            "status": {
                "phase": phase, "podName": "web-0", "ready": phase == "Ready",
                "accessMessage": "kubectl exec -ti -n team-a web-0 -- /bin/sh",
                "conditions": [{
                    "type": "AccessResourcesReady", "status": "True", "reason": "Ready",
                    "message": "the Role and RoleBinding exist",
                    "lastTransitionTime": "2026-11-21T00:00:00Z",
                }],
            },
        }))
        .unwrap()
    }

    fn pod_request(namespace: &str, name: &str, user: &str) -> PodAccessRequest {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "PodAccessRequest",
            "metadata": metadata(namespace, name),
            "spec": {"templateName": "debug", "requester": {"username": user}},
            "status": {"phase": "Ready", "podName": format!("{name}-pod")},
        }))
        .unwrap()
    }

    /// As [`access_config`], granting to the groups rather than the requester.
    fn group_access_config(groups: &[&str]) -> AccessConfig {
        let mut config = access_config(groups);
        config.grant_to = Some(oz_api::GrantTo::AllowedGroups);
        config
    }

    fn exec_template(namespace: &str, name: &str, config: AccessConfig) -> ExecAccessTemplate {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessTemplate",
            "metadata": metadata(namespace, name),
            "spec": {
                "accessConfig": config,
                "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            },
        }))
        .unwrap()
    }

    fn pod_template(namespace: &str, name: &str, groups: &[&str]) -> PodAccessTemplate {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "PodAccessTemplate",
            "metadata": metadata(namespace, name),
            "spec": {
                "accessConfig": access_config(groups),
                "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            },
        }))
        .unwrap()
    }

    /// Watch events fed by hand through the same stream as a watch's ([`reflect`]).
    struct Feed<K> {
        events: mpsc::UnboundedSender<watcher::Event<K>>,
        applied: mpsc::UnboundedReceiver<()>,
    }

    impl<K> Feed<K>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        fn start(writer: Writer<K>, strip: fn(&mut K), index: Option<NamespaceIndexer>) -> Self {
            let (events, received) = mpsc::unbounded();
            let (applied, acknowledged) = mpsc::unbounded();
            tokio::spawn(
                reflect(received.map(Ok), writer, strip, index).for_each(move |_| {
                    let _ = applied.unbounded_send(());
                    futures::future::ready(())
                }),
            );
            Self {
                events,
                applied: acknowledged,
            }
        }

        /// Returns once every event is in the store.
        async fn send(&mut self, events: Vec<watcher::Event<K>>) {
            let count = events.len();
            for event in events {
                self.events.unbounded_send(event).unwrap();
            }
            for _ in 0..count {
                self.applied.next().await.unwrap();
            }
        }

        /// A complete list, as after a watch (re)starts.
        async fn list(&mut self, objects: Vec<K>) {
            let mut events = vec![watcher::Event::Init];
            events.extend(objects.into_iter().map(watcher::Event::InitApply));
            events.push(watcher::Event::InitDone);
            self.send(events).await;
        }
    }

    /// A cluster-wide lookup whose stores the test fills, and whose fallback is `apiserver`.
    struct Fixture {
        lookup: CachedLookup,
        apiserver: Arc<Apiserver>,
        exec_requests: Feed<ExecAccessRequest>,
        pod_requests: Feed<PodAccessRequest>,
        exec_templates: Feed<ExecAccessTemplate>,
        pod_templates: Feed<PodAccessTemplate>,
    }

    impl Fixture {
        fn new(apiserver: Apiserver) -> Self {
            let writers = Writers::new();
            let apiserver = Arc::new(apiserver);
            let lookup = CachedLookup {
                scope: Scope::Cluster(writers.stores()),
                live: apiserver.clone(),
            };
            Self {
                lookup,
                apiserver,
                exec_requests: Feed::start(
                    writers.exec_requests,
                    strip_request,
                    Some(writers.exec_requests_by_namespace),
                ),
                pod_requests: Feed::start(
                    writers.pod_requests,
                    strip_request,
                    Some(writers.pod_requests_by_namespace),
                ),
                exec_templates: Feed::start(writers.exec_templates, strip_metadata, None),
                pod_templates: Feed::start(writers.pod_templates, strip_metadata, None),
            }
        }

        /// team-a: alice's Ready exec grant for web-0, bob's Pending one, carol's Ready pod
        /// grant, templates web (exec, granting to its groups) and debug (pod) for devs; team-b: dave's Ready grant
        /// for a web-0 of its own.
        async fn listed(mut self) -> Self {
            self.exec_requests
                .list(vec![
                    exec_request(NS, "alices", "alice", "Ready"),
                    exec_request(NS, "bobs", "bob", "Pending"),
                    exec_request("team-b", "daves", "dave", "Ready"),
                ])
                .await;
            self.pod_requests
                .list(vec![pod_request(NS, "carols", "carol")])
                .await;
            self.exec_templates
                .list(vec![
                    exec_template(NS, "web", group_access_config(&["devs"])),
                    exec_template("team-b", "web", access_config(&["ops"])),
                ])
                .await;
            self.pod_templates
                .list(vec![pod_template(NS, "debug", &["devs"])])
                .await;
            self
        }

        async fn grant(&self, user: &str, groups: &[&str]) -> Option<Grant> {
            let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
            find_grant(&self.lookup, NS, "web-0", user, &groups)
                .await
                .unwrap()
        }
    }

    fn grant(name: &str) -> Option<Grant> {
        Some(Grant {
            kind: "ExecAccessRequest".into(),
            name: name.into(),
            template: "web".into(),
            approvers: Vec::new(),
        })
    }

    fn summary(name: &str, user: &str, phase: RequestPhase) -> RequestSummary {
        RequestSummary {
            kind: AccessKind::Exec,
            name: name.into(),
            template: "web".into(),
            requester: Some(oz_api::Requester {
                username: user.into(),
                uid: None,
                groups: vec!["devs".into()],
            }),
            phase: Some(phase),
            pod_name: Some("web-0".into()),
            approvers: Vec::new(),
        }
    }

    #[tokio::test]
    async fn until_every_store_has_listed_reads_go_to_the_apiserver() {
        let apiserver = Apiserver {
            requests: Mutex::new(vec![summary("alices", "alice", RequestPhase::Ready)]),
            templates: BTreeMap::from([(
                (AccessKind::Exec, "web".into()),
                access_config(&["devs"]),
            )]),
            ..Default::default()
        };
        let mut fixture = Fixture::new(apiserver);
        // Three of four listed is not enough.
        fixture
            .exec_requests
            .list(vec![exec_request(NS, "stale", "alice", "Ready")])
            .await;
        fixture.pod_requests.list(Vec::new()).await;
        fixture.exec_templates.list(Vec::new()).await;
        assert!(!fixture.lookup.is_ready());

        let requests = fixture.lookup.requests(NS).await.unwrap();
        assert_eq!(
            requests,
            vec![summary("alices", "alice", RequestPhase::Ready)]
        );
        let template = fixture.lookup.template(AccessKind::Exec, NS, "web").await;
        assert_eq!(template, Ok(Some(access_config(&["devs"]))));
        assert_eq!(fixture.apiserver.reads(), (1, 1));

        fixture.pod_templates.list(Vec::new()).await;
        assert!(fixture.lookup.is_ready());
        fixture.lookup.wait_until_ready().await.unwrap();
        let requests = fixture.lookup.requests(NS).await.unwrap();
        assert_eq!(
            requests,
            vec![summary("stale", "alice", RequestPhase::Ready)]
        );
        assert_eq!(
            fixture.apiserver.reads(),
            (1, 1),
            "served from memory once listed"
        );
    }

    #[tokio::test]
    async fn listed_requests_and_templates_are_served_from_memory_by_namespace() {
        let fixture = Fixture::new(Apiserver::default()).listed().await;
        let mut requests = fixture.lookup.requests(NS).await.unwrap();
        requests.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<_> = requests.iter().map(|r| (r.kind, r.name.as_str())).collect();
        assert_eq!(
            names,
            [
                (AccessKind::Exec, "alices"),
                (AccessKind::Exec, "bobs"),
                (AccessKind::Pod, "carols"),
            ]
        );
        assert_eq!(requests[0], summary("alices", "alice", RequestPhase::Ready));
        assert_eq!(requests[2].pod_name.as_deref(), Some("carols-pod"));
        assert_eq!(requests[2].template, "debug");

        let exec = fixture.lookup.template(AccessKind::Exec, NS, "web").await;
        assert_eq!(exec, Ok(Some(group_access_config(&["devs"]))));
        let other = fixture
            .lookup
            .template(AccessKind::Exec, "team-b", "web")
            .await;
        assert_eq!(other, Ok(Some(access_config(&["ops"]))));
        let pod = fixture.lookup.template(AccessKind::Pod, NS, "debug").await;
        assert_eq!(pod, Ok(Some(access_config(&["devs"]))));
        assert_eq!(fixture.apiserver.reads(), (0, 0));
    }

    #[tokio::test]
    async fn stored_objects_lose_what_no_handler_reads() {
        let fixture = Fixture::new(Apiserver::default()).listed().await;
        let Scope::Cluster(stores) = &fixture.lookup.scope else {
            unreachable!()
        };
        let request = stores
            .exec_requests
            .get(&ObjectRef::new("alices").within(NS))
            .unwrap();
        assert_eq!(request.metadata.managed_fields, None);
        let annotations = request.metadata.annotations.clone().unwrap();
        assert_eq!(
            annotations,
            BTreeMap::from([("team".to_string(), "payments".to_string())])
        );
        let status = request.status.clone().unwrap();
        assert!(status.conditions.is_empty());
        assert_eq!(status.access_message, None);
        assert_eq!(status.phase, Some(RequestPhase::Ready));
        assert_eq!(status.pod_name.as_deref(), Some("web-0"));
        assert!(status.ready);
        assert_eq!(request.spec.template_name, "web");

        let template = stores
            .exec_templates
            .get(&ObjectRef::new("web").within(NS))
            .unwrap();
        assert_eq!(template.metadata.managed_fields, None);
        assert!(
            !template
                .annotations()
                .contains_key(oz_api::LAST_APPLIED_ANNOTATION)
        );
        assert_eq!(template.spec.access_config, group_access_config(&["devs"]));
    }

    #[tokio::test]
    async fn a_template_missing_from_memory_is_read_through_the_apiserver() {
        let apiserver = Apiserver {
            templates: BTreeMap::from([((AccessKind::Exec, "new".into()), access_config(&["qa"]))]),
            ..Default::default()
        };
        let fixture = Fixture::new(apiserver).listed().await;
        let created = fixture.lookup.template(AccessKind::Exec, NS, "new").await;
        assert_eq!(created, Ok(Some(access_config(&["qa"]))));
        let missing = fixture.lookup.template(AccessKind::Pod, NS, "web").await;
        assert_eq!(missing, Ok(None));
        assert_eq!(fixture.apiserver.reads(), (0, 2));
    }

    #[tokio::test]
    async fn a_grant_in_memory_is_found_without_the_apiserver() {
        let fixture = Fixture::new(Apiserver::default()).listed().await;
        assert_eq!(fixture.grant("alice", &[]).await, grant("alices"));
        // Through the template's allowedGroups, read from memory too.
        assert_eq!(fixture.grant("erin", &["devs"]).await, grant("alices"));
        assert_eq!(fixture.apiserver.reads(), (0, 0));
    }

    #[tokio::test]
    async fn no_grant_in_memory_is_checked_against_the_apiserver() {
        // bob's request became Ready a moment ago: the apiserver knows, the watch has not
        // delivered it yet.
        let apiserver = Apiserver {
            requests: Mutex::new(vec![summary("bobs", "bob", RequestPhase::Ready)]),
            ..Default::default()
        };
        let fixture = Fixture::new(apiserver).listed().await;
        assert_eq!(fixture.grant("bob", &[]).await, grant("bobs"));
        assert_eq!(fixture.apiserver.reads(), (1, 0));

        // No grant anywhere: still none, after asking (and reading the template of bob's
        // request, which the apiserver's answer included).
        assert_eq!(fixture.grant("mallory", &["qa"]).await, None);
        assert_eq!(fixture.apiserver.reads(), (2, 1));
    }

    #[tokio::test]
    async fn watch_events_after_the_list_update_the_answers() {
        let mut fixture = Fixture::new(Apiserver::default()).listed().await;
        fixture
            .exec_requests
            .send(vec![watcher::Event::Apply(exec_request(
                NS, "bobs", "bob", "Ready",
            ))])
            .await;
        assert_eq!(fixture.grant("bob", &[]).await, grant("bobs"));
        assert_eq!(fixture.apiserver.reads(), (0, 0));

        fixture
            .exec_requests
            .send(vec![watcher::Event::Delete(exec_request(
                NS, "alices", "alice", "Ready",
            ))])
            .await;
        // Gone from memory, and from the apiserver (empty here): no grant.
        assert_eq!(fixture.grant("alice", &[]).await, None);
        assert_eq!(fixture.apiserver.reads(), (1, 0));

        // A relist replaces everything.
        fixture.exec_requests.list(Vec::new()).await;
        assert!(
            fixture
                .lookup
                .requests(NS)
                .await
                .unwrap()
                .iter()
                .all(|r| r.kind == AccessKind::Pod)
        );
    }

    #[tokio::test]
    async fn a_scoped_lookup_reads_its_own_namespaces_from_memory_and_others_through() {
        let writers = Writers::new();
        let apiserver = Arc::new(Apiserver {
            requests: Mutex::new(vec![summary("live", "alice", RequestPhase::Ready)]),
            ..Default::default()
        });
        let lookup = CachedLookup {
            scope: Scope::Namespaces(BTreeMap::from([("team-b".to_string(), writers.stores())])),
            live: apiserver.clone(),
        };
        let mut exec_requests = Feed::start(
            writers.exec_requests,
            strip_request,
            Some(writers.exec_requests_by_namespace),
        );
        Feed::start(
            writers.pod_requests,
            strip_request,
            Some(writers.pod_requests_by_namespace),
        )
        .list(Vec::new())
        .await;
        Feed::start(writers.exec_templates, strip_metadata, None)
            .list(Vec::new())
            .await;
        Feed::start(writers.pod_templates, strip_metadata, None)
            .list(Vec::new())
            .await;
        exec_requests
            .list(vec![exec_request("team-b", "daves", "dave", "Ready")])
            .await;
        assert!(lookup.is_ready());

        let scoped = lookup.requests("team-b").await.unwrap();
        assert_eq!(scoped.len(), 1);
        assert_eq!(scoped[0].name, "daves");
        assert_eq!(apiserver.reads(), (0, 0));
        let elsewhere = lookup.requests(NS).await.unwrap();
        assert_eq!(
            elsewhere,
            vec![summary("live", "alice", RequestPhase::Ready)]
        );
        assert_eq!(apiserver.reads(), (1, 0));
    }
}
