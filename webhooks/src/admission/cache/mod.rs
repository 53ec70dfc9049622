//! [`CachedLookup`]: the handlers' reads served from memory, kept current by watches.
//!
//! Four watches (ExecAccessRequest, PodAccessRequest, ExecAccessTemplate, PodAccessTemplate)
//! keep what the handlers read of every object in the namespaces served. A request is kept
//! only as its [`GrantSummary`] (what grant matching reads), by namespace, so an audited exec
//! reads its own namespace's requests and costs no apiserver call at all, and a grant in force
//! costs a small summary here, not a copy of the whole object; templates are kept whole,
//! without `metadata.managedFields` and the last-applied annotation.
//!
//! The copies lag the apiserver by the watch's delivery delay, normally milliseconds. Where
//! that could change an answer, the apiserver is read instead:
//! - until every watch has listed once, every read goes to the apiserver;
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
//!
//! Where access is enforced, a fifth kind of watch keeps each pod's workload (`pods.rs`), so a
//! denial can name the templates that could grant the pod from memory
//! ([`AccessLookup::denial_facts`]); it is never read through the apiserver, and a pod it has not
//! seen is answered as unknown.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Debug,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use futures::{FutureExt, Stream, StreamExt, TryStreamExt, future::BoxFuture};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{ObjectRef, Store, store::Writer},
        watcher,
    },
};
use oz_api::{
    AccessKind, AccessRequest, AccessTemplate, ExecAccessRequest, ExecAccessTemplate,
    PodAccessRequest, PodAccessTemplate, WatchedRequest,
    grant_hint::{PodOwner, PodWorkload, TemplateTarget},
};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::warn;

use oz_api::AccessApproval;

use super::{
    AccessLookup, Answer, DenialFacts, GrantSummary, KubeLookup, RequestState, TemplateSummary,
};

mod pods;
mod summaries;

use pods::{PodOwners, watch_pod_owners};
pub use summaries::WatchesStopped;
use summaries::{RequestSummaries, SummaryWriter, summarize};

/// [`AccessLookup`] from in-memory copies kept by watches, reading through the apiserver where
/// a copy could be behind (see the module documentation). Needs get/list/watch on the four oz
/// kinds, in every namespace served, and list/watch on pods in the enforced namespaces.
pub struct CachedLookup {
    scope: Scope,
    live: Arc<dyn AccessLookup>,
    /// Each pod's workload, in the enforced namespaces only.
    pods: Arc<PodOwners>,
}

/// The stores, for all namespaces at once or one set per namespace.
enum Scope {
    Cluster(Stores),
    Namespaces(BTreeMap<String, Stores>),
}

/// One store per kind.
struct Stores {
    exec_requests: Arc<RequestSummaries>,
    pod_requests: Arc<RequestSummaries>,
    exec_templates: Store<ExecAccessTemplate>,
    pod_templates: Store<PodAccessTemplate>,
    /// Set once all four have listed; they stay usable while their watches recover.
    ready: AtomicBool,
}

/// The writers of a [`Stores`].
struct Writers {
    exec_requests: SummaryWriter,
    pod_requests: SummaryWriter,
    exec_templates: Writer<ExecAccessTemplate>,
    pod_templates: Writer<PodAccessTemplate>,
}

impl Writers {
    fn new() -> Self {
        Self {
            exec_requests: SummaryWriter::new(),
            pod_requests: SummaryWriter::new(),
            exec_templates: Writer::default(),
            pod_templates: Writer::default(),
        }
    }

    fn stores(&self) -> Stores {
        Stores {
            exec_requests: self.exec_requests.summaries.clone(),
            pod_requests: self.pod_requests.summaries.clone(),
            exec_templates: self.exec_templates.as_reader(),
            pod_templates: self.pod_templates.as_reader(),
            ready: AtomicBool::new(false),
        }
    }

    /// The four watches over `client`, in `namespace` or (`None`) all namespaces; the two of
    /// requests once `requests_after` is true (see [`CachedLookup::new`]).
    fn watch(
        self,
        client: &Client,
        namespace: Option<&str>,
        requests_after: Option<watch::Receiver<bool>>,
    ) -> Vec<BoxFuture<'static, ()>> {
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
            after::<ExecAccessRequest>(
                requests_after.clone(),
                run(summarize(
                    watch_requests::<ExecAccessRequest>(api(client, namespace)),
                    self.exec_requests,
                )),
            ),
            after::<PodAccessRequest>(
                requests_after,
                run(summarize(
                    watch_requests::<PodAccessRequest>(api(client, namespace)),
                    self.pod_requests,
                )),
            ),
            run(reflect_templates(
                watch_events(api(client, namespace)),
                self.exec_templates,
            )),
            run(reflect_templates(
                watch_events(api(client, namespace)),
                self.pod_templates,
            )),
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
        let ready = self.exec_requests.listed()
            && self.pod_requests.listed()
            && listed(self.exec_templates.wait_until_ready().now_or_never())
            && listed(self.pod_templates.wait_until_ready().now_or_never());
        if ready {
            self.ready.store(true, Ordering::Relaxed);
        }
        ready
    }

    async fn wait_until_ready(&self) -> Result<(), WatchesStopped> {
        self.exec_requests.wait_until_listed().await?;
        self.pod_requests.wait_until_listed().await?;
        let stopped = |_| WatchesStopped;
        self.exec_templates
            .wait_until_ready()
            .await
            .map_err(stopped)?;
        self.pod_templates.wait_until_ready().await.map_err(stopped)
    }

    fn template(&self, kind: AccessKind, namespace: &str, name: &str) -> Option<TemplateSummary> {
        match kind {
            AccessKind::Exec => template_summary(&self.exec_templates, namespace, name),
            AccessKind::Pod => template_summary(&self.pod_templates, namespace, name),
        }
    }

    /// The ExecAccessTemplates in `namespace` that target `workload`: the only templates a
    /// denial's hint names (see [`oz_api::grant_hint`]). Reads every template of the store,
    /// which only a denial does.
    fn exec_templates_for(&self, namespace: &str, workload: &PodWorkload) -> Vec<TemplateTarget> {
        let target = |t: &ExecAccessTemplate| {
            let target = &t.spec.controller_target_ref;
            t.metadata.namespace.as_deref() == Some(namespace)
                && target.kind == workload.kind
                && target.name == workload.name
        };
        let mut templates: Vec<TemplateTarget> = (self.exec_templates.state().iter())
            .filter(|t| target(t))
            .map(|t| TemplateTarget::of(t.as_ref()))
            .collect();
        templates.sort_by(|a, b| a.name.cmp(&b.name));
        templates
    }

    fn template_uid(&self, kind: AccessKind, namespace: &str, name: &str) -> Option<String> {
        match kind {
            AccessKind::Exec => self
                .exec_templates
                .get(&ObjectRef::new(name).within(namespace))?
                .uid(),
            AccessKind::Pod => self
                .pod_templates
                .get(&ObjectRef::new(name).within(namespace))?
                .uid(),
        }
    }

    /// The requests of both kinds in every namespace that are `wanted`, with their namespace.
    fn everywhere(&self, wanted: impl Fn(&GrantSummary) -> bool) -> Vec<(String, GrantSummary)> {
        let mut requests = self.exec_requests.everywhere(&wanted);
        requests.extend(self.pod_requests.everywhere(&wanted));
        requests
    }

    /// The requests of both kinds in `namespace` that are `wanted`.
    fn requests(
        &self,
        namespace: &str,
        wanted: impl Fn(&GrantSummary) -> bool,
    ) -> Vec<GrantSummary> {
        let mut requests = self.exec_requests.in_namespace(namespace, &wanted);
        requests.extend(self.pod_requests.in_namespace(namespace, &wanted));
        requests
    }
}

/// Template `name` in `store`, if it is there: its accessConfig and its hub, from the template
/// kept whole (its labels are kept), so the hub costs the cache nothing more.
fn template_summary<T: AccessTemplate>(
    store: &Store<T>,
    namespace: &str,
    name: &str,
) -> Option<TemplateSummary> {
    store
        .get(&ObjectRef::new(name).within(namespace))
        .map(|t| TemplateSummary::of(t.as_ref()))
}

impl CachedLookup {
    /// A lookup over `client` for `namespaces` (empty: all namespaces), and the future that
    /// runs its watches. Spawn the future for as long as the lookup is used: it runs until
    /// dropped, retrying a failed watch with kube's default backoff and logging the error.
    /// Reads go through the apiserver until the watches have listed everything once.
    ///
    /// The request watches start once `requests_after` is true (or its sender is gone; `None`:
    /// at once). oz-manager holds them back while its controllers list the same requests at
    /// start-up: both LISTs at once shared the apiserver, and the expiry timers wait for the
    /// controllers' (the restart figures are in docs/benchmarks.md).
    ///
    /// In each of `enforced` (the namespaces where access is enforced) the pods are watched
    /// too, by their metadata, for what a denial says (`pods.rs` has the cost); none when it is
    /// empty.
    pub fn new(
        client: Client,
        namespaces: &[String],
        enforced: &BTreeSet<String>,
        requests_after: Option<watch::Receiver<bool>>,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let mut watches = Vec::new();
        let pods = Arc::new(PodOwners::default());
        for namespace in enforced {
            watches.push(run(watch_pod_owners(&client, namespace, pods.clone())));
        }
        let scope = if namespaces.is_empty() {
            let writers = Writers::new();
            let stores = writers.stores();
            watches.extend(writers.watch(&client, None, requests_after));
            Scope::Cluster(stores)
        } else {
            let mut scoped = BTreeMap::new();
            for namespace in namespaces {
                let writers = Writers::new();
                scoped.insert(namespace.clone(), writers.stores());
                watches.extend(writers.watch(&client, Some(namespace), requests_after.clone()));
            }
            Scope::Namespaces(scoped)
        };
        let lookup = Self {
            scope,
            live: Arc::new(KubeLookup::new(client)),
            pods,
        };
        let run = futures::future::join_all(watches).map(|_| ());
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
    pub async fn wait_until_ready(&self) -> Result<(), WatchesStopped> {
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
    ) -> Answer<'_, Option<TemplateSummary>> {
        if let Some(template) = self
            .stores(namespace)
            .and_then(|stores| stores.template(kind, namespace, name))
        {
            return Box::pin(async move { Ok(Some(template)) });
        }
        // Not listed yet, or created a moment ago.
        self.live.template(kind, namespace, name)
    }

    fn template_uid(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<String>> {
        // From the cache only: not known here, the controller sets the owner reference itself,
        // which is better than a read on every create.
        let uid = self
            .stores(namespace)
            .and_then(|stores| stores.template_uid(kind, namespace, name));
        Box::pin(async move { Ok(uid) })
    }

    fn requests(&self, namespace: &str) -> Answer<'_, Vec<GrantSummary>> {
        match self.stores(namespace) {
            Some(stores) => {
                let requests = stores.requests(namespace, |_| true);
                Box::pin(async move { Ok(requests) })
            }
            None => self.live.requests(namespace),
        }
    }

    /// From memory only, once every store has listed: counting a user's grants across every
    /// namespace through the apiserver would be a LIST per namespace on every create.
    fn requests_of(&self, user: &str) -> Answer<'_, Vec<(String, GrantSummary)>> {
        if !self.is_ready() {
            let listing = "oz is still listing the requests; try again in a moment";
            return Box::pin(async { Err(super::LookupError(listing.into())) });
        }
        let theirs = |r: &GrantSummary| r.requested_by.as_deref() == Some(user);
        let found = match &self.scope {
            Scope::Cluster(stores) => stores.everywhere(theirs),
            Scope::Namespaces(scoped) => scoped
                .values()
                .flat_map(|stores| stores.everywhere(theirs))
                .collect(),
        };
        Box::pin(async move { Ok(found) })
    }

    /// Filtered under the stores' lock: an audited exec copies the few summaries that may
    /// grant it, not every request its namespace has kept (Expired ones stay for days).
    fn may_grant(&self, namespace: &str, pod: &str) -> Answer<'_, Vec<GrantSummary>> {
        match self.stores(namespace) {
            Some(stores) => {
                let requests = stores.requests(namespace, |r| r.ready_for(pod));
                Box::pin(async move { Ok(requests) })
            }
            None => self.live.may_grant(namespace, pod),
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

    /// From memory, or nothing known: the pod's workload from the pod watch, the templates and
    /// the Ready requests from the stores once listed. Before they have listed, the pod counts
    /// as unknown too: "no template grants it" would be a guess.
    fn denial_facts(&self, namespace: &str, pod: &str) -> DenialFacts {
        let Some(stores) = self.stores(namespace) else {
            return DenialFacts::default();
        };
        let owner = self.pods.owner(namespace, pod);
        let templates = match &owner {
            PodOwner::Workload(workload) => stores.exec_templates_for(namespace, workload),
            PodOwner::Unknown | PodOwner::NoWorkload => Vec::new(),
        };
        DenialFacts {
            owner,
            templates,
            ready: stores.requests(namespace, |r| r.ready_for(pod)),
        }
    }

    fn uncached(&self) -> Option<&dyn AccessLookup> {
        Some(self.live.as_ref())
    }
}

/// The request watch of kind `R`, started once `gate` is true or its sender is gone; at once
/// without a gate.
fn after<R: AccessRequest>(
    gate: Option<watch::Receiver<bool>>,
    watch: BoxFuture<'static, ()>,
) -> BoxFuture<'static, ()> {
    async move {
        if let Some(mut gate) = gate {
            let _ = gate.wait_for(|open| *open).await;
        }
        tracing::info!(kind = %R::kind(&()), "the handlers' request cache is listing");
        watch.await
    }
    .boxed()
}

/// `api`'s watch events, a failed watch retried with kube's default backoff.
fn watch_events<K>(api: Api<K>) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, watcher::Config::default()).default_backoff()
}

/// The watch events of requests of kind `R`, each parsed without the metadata a summary does
/// not read ([`WatchedRequest`]).
fn watch_requests<R: AccessRequest>(
    api: Api<WatchedRequest<R>>,
) -> impl Stream<Item = watcher::Result<watcher::Event<R>>> + Send {
    watch_events(api).map_ok(WatchedRequest::into_request_event)
}

/// Runs `events` until dropped, logging the failures of the watch behind them.
fn run<K>(events: impl Stream<Item = watcher::Result<K>> + Send + 'static) -> BoxFuture<'static, ()>
where
    K: Send + 'static,
{
    events
        .for_each(|event| {
            if let Err(e) = event {
                warn!(
                    error = %e,
                    "the audit and admission cache's watch failed; retrying with backoff"
                );
            }
            futures::future::ready(())
        })
        .boxed()
}

/// `events` applied to the template store `writer` keeps, each template without the metadata
/// no part of oz reads (`oz_api::strip_unread_metadata`).
fn reflect_templates<K, S>(
    events: S,
    writer: Writer<K>,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    events
        .modify(|template| oz_api::strip_unread_metadata(template.meta_mut()))
        .reflect(writer)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::channel::mpsc;
    use oz_api::{AccessConfig, RequestPhase};
    use serde_json::{Value, json};

    use oz_audit::Grant;

    use super::*;
    use crate::admission::{
        audit::find_grant,
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

    /// The fixtures' grants end long after the tests do.
    const FAR_FUTURE: &str = "2099-01-01T00:00:00Z";

    fn far_future() -> Option<chrono::DateTime<chrono::Utc>> {
        Some(FAR_FUTURE.parse().unwrap())
    }

    fn exec_request(namespace: &str, name: &str, user: &str, phase: &str) -> ExecAccessRequest {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessRequest",
            "metadata": metadata(namespace, name),
            "spec": {"templateName": "web", "requester": {"username": user, "groups": ["devs"]}},
            "status": {
                "phase": phase, "podName": "web-0", "ready": phase == "Ready",
                "expiresAt": FAR_FUTURE,
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
            "status": {"phase": "Ready", "podName": format!("{name}-pod"), "expiresAt": FAR_FUTURE},
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

    /// Watch events fed by hand through the same stream as a watch's ([`summarize`],
    /// [`reflect_templates`]).
    struct Feed<K> {
        events: mpsc::UnboundedSender<watcher::Result<watcher::Event<K>>>,
        applied: mpsc::UnboundedReceiver<()>,
    }

    type Events<K> = mpsc::UnboundedReceiver<watcher::Result<watcher::Event<K>>>;

    impl<K> Feed<K>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        /// Feeds requests to `writer`.
        fn requests(writer: SummaryWriter) -> Self
        where
            K: AccessRequest,
        {
            Self::start(|events: Events<K>| summarize(events, writer))
        }

        /// Feeds templates to `writer`'s store.
        fn templates(writer: Writer<K>) -> Self {
            Self::start(|events: Events<K>| reflect_templates(events, writer))
        }

        fn start<S, T>(apply: impl FnOnce(Events<K>) -> S) -> Self
        where
            S: Stream<Item = watcher::Result<T>> + Send + 'static,
        {
            let (events, received) = mpsc::unbounded();
            let (applied, acknowledged) = mpsc::unbounded();
            tokio::spawn(apply(received).for_each(move |_| {
                let _ = applied.unbounded_send(());
                futures::future::ready(())
            }));
            Self {
                events,
                applied: acknowledged,
            }
        }

        /// Returns once every event is in the store.
        async fn send(&mut self, events: Vec<watcher::Event<K>>) {
            let count = events.len();
            for event in events {
                self.events.unbounded_send(Ok(event)).unwrap();
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
                pods: Arc::default(),
            };
            Self {
                lookup,
                apiserver,
                exec_requests: Feed::requests(writers.exec_requests),
                pod_requests: Feed::requests(writers.pod_requests),
                exec_templates: Feed::templates(writers.exec_templates),
                pod_templates: Feed::templates(writers.pod_templates),
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
            let asked = oz_api::Asked {
                user,
                groups: &groups,
                namespace: NS,
                locks: &[],
                pod: "web-0",
                action: oz_api::PodAction::Exec,
                route: oz_api::Route::Direct,
                now: chrono::Utc::now(),
            };
            find_grant(&self.lookup, NS, &asked).await.unwrap()
        }
    }

    fn grant(name: &str) -> Option<Grant> {
        Some(Grant {
            kind: "ExecAccessRequest".into(),
            name: name.into(),
            template: "web".into(),
            approvers: Vec::new(),
            extensions: Vec::new(),
        })
    }

    fn summary(name: &str, user: &str, phase: RequestPhase) -> GrantSummary {
        GrantSummary {
            kind: AccessKind::Exec,
            name: name.into(),
            template: "web".into(),
            requested_by: Some(user.into()),
            phase: Some(phase),
            pod_name: Some("web-0".into()),
            session_mode: None,
            expires_at: far_future(),
            approvers: Vec::new(),
            extensions: Vec::new(),
        }
    }

    #[tokio::test]
    async fn until_every_store_has_listed_reads_go_to_the_apiserver() {
        let apiserver = Apiserver {
            requests: Mutex::new(vec![summary("alices", "alice", RequestPhase::Ready)]),
            templates: BTreeMap::from([(
                (AccessKind::Exec, "web".into()),
                access_config(&["devs"]).into(),
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
        // A denial knows nothing yet, not even the pod it has seen: without the templates,
        // "none grants it" would be a guess.
        list_pods(&fixture.lookup).await;
        assert_eq!(
            fixture.lookup.denial_facts(NS, "web-0"),
            DenialFacts::default()
        );

        let requests = fixture.lookup.requests(NS).await.unwrap();
        assert_eq!(
            requests,
            vec![summary("alices", "alice", RequestPhase::Ready)]
        );
        let template = fixture.lookup.template(AccessKind::Exec, NS, "web").await;
        assert_eq!(template, Ok(Some(access_config(&["devs"]).into())));
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
    async fn an_exec_reads_only_the_ready_requests_for_its_pod() {
        let fixture = Fixture::new(Apiserver::default()).listed().await;
        // bob's Pending request names web-0 too, and dave's Ready one is in team-b.
        let for_web = fixture.lookup.may_grant(NS, "web-0").await.unwrap();
        assert_eq!(
            for_web,
            vec![summary("alices", "alice", RequestPhase::Ready)]
        );
        let for_carols = fixture.lookup.may_grant(NS, "carols-pod").await.unwrap();
        let names: Vec<_> = for_carols
            .iter()
            .map(|r| (r.kind, r.name.as_str()))
            .collect();
        assert_eq!(names, [(AccessKind::Pod, "carols")]);
        assert_eq!(fixture.lookup.may_grant(NS, "web-9").await.unwrap(), []);
        assert_eq!(fixture.apiserver.reads(), (0, 0), "served from memory");
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
        assert_eq!(exec, Ok(Some(group_access_config(&["devs"]).into())));
        let other = fixture
            .lookup
            .template(AccessKind::Exec, "team-b", "web")
            .await;
        assert_eq!(other, Ok(Some(access_config(&["ops"]).into())));
        let pod = fixture.lookup.template(AccessKind::Pod, NS, "debug").await;
        assert_eq!(pod, Ok(Some(access_config(&["devs"]).into())));
        assert_eq!(fixture.apiserver.reads(), (0, 0));
    }

    #[tokio::test]
    async fn a_request_is_kept_as_what_grant_matching_and_the_audit_record_read() {
        let mut fixture = Fixture::new(Apiserver::default()).listed().await;
        let mut approved = exec_request(NS, "approved", "erin", "Ready");
        let requester = approved.spec.requester.as_mut().unwrap();
        requester.uid = Some("uid-erin".into());
        requester.groups = vec!["devs".into(), "oncall".into()];
        let status = approved.status.as_mut().unwrap();
        status.approvals = serde_json::from_value(json!([
            {"approver": "frank", "at": "2026-11-21T00:00:00Z", "name": "frank-approves"},
        ]))
        .unwrap();
        fixture
            .exec_requests
            .send(vec![watcher::Event::Apply(approved)])
            .await;

        let requests = fixture.lookup.requests(NS).await.unwrap();
        let kept = requests.iter().find(|r| r.name == "approved").unwrap();
        assert_eq!(
            *kept,
            GrantSummary {
                kind: AccessKind::Exec,
                name: "approved".into(),
                template: "web".into(),
                requested_by: Some("erin".into()),
                phase: Some(RequestPhase::Ready),
                pod_name: Some("web-0".into()),
                session_mode: None,
                expires_at: far_future(),
                approvers: vec!["frank".into()],
                extensions: Vec::new(),
            }
        );
        assert_eq!(fixture.apiserver.reads(), (0, 0));
    }

    #[tokio::test]
    async fn stored_templates_lose_what_no_handler_reads() {
        let fixture = Fixture::new(Apiserver::default()).listed().await;
        let Scope::Cluster(stores) = &fixture.lookup.scope else {
            unreachable!()
        };
        let template = stores
            .exec_templates
            .get(&ObjectRef::new("web").within(NS))
            .unwrap();
        assert_eq!(template.metadata.managed_fields, None);
        assert_eq!(
            template.metadata.annotations,
            Some(BTreeMap::from([(
                "team".to_string(),
                "payments".to_string()
            )]))
        );
        assert_eq!(template.spec.access_config, group_access_config(&["devs"]));
    }

    #[tokio::test]
    async fn a_hub_managed_template_is_answered_with_its_hub_from_memory() {
        let mut fixture = Fixture::new(Apiserver::default()).listed().await;
        let mut copy = exec_template(NS, "fleet-web", access_config(&["devs"]));
        copy.metadata.labels = Some(BTreeMap::from([(
            oz_api::HUB_MANAGED_LABEL.to_string(),
            "hub-1".to_string(),
        )]));
        fixture
            .exec_templates
            .send(vec![watcher::Event::Apply(copy)])
            .await;
        let found = fixture
            .lookup
            .template(AccessKind::Exec, NS, "fleet-web")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(found.hub.as_deref(), Some("hub-1"));
        assert_eq!(found.config, access_config(&["devs"]));
        let own = fixture.lookup.template(AccessKind::Exec, NS, "web").await;
        assert_eq!(own.unwrap().unwrap().hub, None, "the cluster's own");
        assert_eq!(fixture.apiserver.reads(), (0, 0), "served from memory");
    }

    #[tokio::test]
    async fn a_template_missing_from_memory_is_read_through_the_apiserver() {
        let apiserver = Apiserver {
            templates: BTreeMap::from([(
                (AccessKind::Exec, "new".into()),
                access_config(&["qa"]).into(),
            )]),
            ..Default::default()
        };
        let fixture = Fixture::new(apiserver).listed().await;
        let created = fixture.lookup.template(AccessKind::Exec, NS, "new").await;
        assert_eq!(created, Ok(Some(access_config(&["qa"]).into())));
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
    async fn a_request_changed_after_the_list_is_kept_once_as_it_is_now() {
        let mut fixture = Fixture::new(Apiserver::default()).listed().await;
        fixture
            .exec_requests
            .send(vec![watcher::Event::Apply(exec_request(
                NS, "alices", "alice", "Expired",
            ))])
            .await;
        let requests = fixture.lookup.requests(NS).await.unwrap();
        let alices: Vec<_> = requests.iter().filter(|r| r.name == "alices").collect();
        assert_eq!(alices.len(), 1, "{requests:?}");
        assert_eq!(alices[0].phase, Some(RequestPhase::Expired));
    }

    /// The pod watch of NS lists web-0 (of Deployment web's ReplicaSet) and a bare pod.
    async fn list_pods(lookup: &CachedLookup) {
        let (events, received) = mpsc::unbounded();
        let mut pods = pods::keep_pod_owners(received, NS, lookup.pods.clone());
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(pods::tests::pod("web-0", Some("web-7d9f"))),
            watcher::Event::InitApply(pods::tests::pod("bare", None)),
            watcher::Event::InitDone,
        ] {
            events.unbounded_send(Ok(event)).unwrap();
            pods.next().await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_denial_reads_the_pods_workload_and_its_templates_from_memory() {
        let mut fixture = Fixture::new(Apiserver::default()).listed().await;
        // Another template for Deployment web, one for Deployment api, and a pod of each kind.
        let mut web_rec = exec_template(NS, "web-rec", group_access_config(&["devs"]));
        web_rec.spec.access_config.session_mode = Some(oz_api::SessionMode::Brokered);
        web_rec.spec.controller_target_ref.name = "web".into();
        fixture
            .exec_templates
            .send(vec![
                watcher::Event::Apply(web_rec),
                watcher::Event::Apply(exec_template(NS, "api", access_config(&["devs"]))),
            ])
            .await;
        list_pods(&fixture.lookup).await;

        let facts = fixture.lookup.denial_facts(NS, "web-0");
        let web = oz_api::grant_hint::PodWorkload {
            kind: oz_api::ControllerKind::Deployment,
            name: "web".into(),
        };
        assert_eq!(facts.owner, PodOwner::Workload(web));
        let templates: Vec<_> = facts.templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(templates, ["web", "web-rec"], "not api's, nor team-b's");
        assert_eq!(
            facts.templates[1].session_mode,
            oz_api::SessionMode::Brokered
        );
        assert_eq!(
            facts.ready,
            [summary("alices", "alice", RequestPhase::Ready)]
        );

        let bare = fixture.lookup.denial_facts(NS, "bare");
        assert_eq!((bare.owner, bare.templates), (PodOwner::NoWorkload, vec![]));
        let unseen = fixture.lookup.denial_facts(NS, "web-9");
        assert_eq!(unseen.owner, PodOwner::Unknown);
        assert_eq!(fixture.apiserver.reads(), (0, 0), "from memory alone");
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
            pods: Arc::default(),
        };
        let mut exec_requests = Feed::requests(writers.exec_requests);
        Feed::<PodAccessRequest>::requests(writers.pod_requests)
            .list(Vec::new())
            .await;
        Feed::templates(writers.exec_templates)
            .list(Vec::new())
            .await;
        Feed::templates(writers.pod_templates)
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
