//! Which grant a session opens under, and the watch cache it is chosen from.
//!
//! Every replica watches both request kinds and both template kinds (in the broker's
//! namespaces, or all), leader or not: it chooses grants from what it has seen
//! ([`choose_grant`], a plain function), and its open sessions re-judge their grant on every
//! change ([`RequestTemplateCache::subscribe`]).

use std::{
    collections::HashMap,
    fmt::Debug,
    pin::pin,
    sync::{Arc, RwLock},
    time::Duration,
};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use oz_api::{
    AccessConfig, AccessKind, AccessLock, AccessRequest, AccessTemplate, Asked, ExecAccessRequest,
    ExecAccessTemplate, GrantSummary, LockTarget, PodAccessRequest, PodAccessTemplate, PodAction,
    Route, SessionMode, SessionStream, WatchedRequest, duration::parse_positive_duration, granting,
    locking,
};
use serde::de::DeserializeOwned;
use tokio::{sync::watch, task::JoinHandle};
use tracing::warn;

use crate::Identity;

/// What the broker reads of one request: what the grant rule reads ([`GrantSummary`]), and
/// where the request is.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestView {
    /// Its namespace.
    pub namespace: String,
    /// Its uid.
    pub uid: String,
    /// Its kind, name, template, requester, phase, pod, session mode, end and approvers.
    pub summary: GrantSummary,
}

impl RequestView {
    /// The view of `request`.
    pub fn of<R: AccessRequest>(request: &R) -> Self {
        Self {
            namespace: request.namespace().unwrap_or_default(),
            uid: request.uid().unwrap_or_default(),
            summary: GrantSummary::of(request),
        }
    }
}

/// What the broker reads of one template.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateView {
    /// `spec.accessConfig`.
    pub config: AccessConfig,
    /// Whether it is being deleted (`metadata.deletionTimestamp`): its grants are ending.
    pub deleting: bool,
}

impl TemplateView {
    /// The view of `template`.
    pub fn of<T: AccessTemplate>(template: &T) -> Self {
        Self {
            config: template.access_config().clone(),
            deleting: template.meta().deletion_timestamp.is_some(),
        }
    }

    /// `sessionIdleTimeout`, if set and valid.
    pub fn idle_timeout(&self) -> Option<Duration> {
        let text = self.config.session_idle_timeout.as_deref()?;
        parse_positive_duration(text).ok()?.to_std().ok()
    }
}

/// The grant a session opens under: its request, and what its template says of sessions.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The request.
    pub request: RequestView,
    /// `recordInput`.
    pub record_input: bool,
    /// `sessionIdleTimeout`.
    pub idle_timeout: Option<Duration>,
}

/// The grant under which `identity` may open `stream` into `pod`, from `requests` (those of
/// the pod's namespace) and their templates (`template(kind, name)`): the one grant rule
/// ([`oz_api::granting`]) for the Brokered route, so a Ready Brokered grant for the pod, not
/// past `expiresAt`, whose kind grants the stream (attach: a PodAccessRequest only), which
/// is the user's own or their group's, and which none of `locks` holds over.
pub fn choose_grant(
    requests: &[RequestView],
    template: impl Fn(AccessKind, &str) -> Option<TemplateView>,
    identity: &Identity,
    (namespace, pod): (&str, &str),
    stream: SessionStream,
    (now, locks): (DateTime<Utc>, &[Arc<AccessLock>]),
) -> Option<Grant> {
    let asked = Asked {
        user: &identity.user,
        groups: &identity.groups,
        namespace,
        locks,
        pod,
        action: match stream {
            SessionStream::Exec => PodAction::Exec,
            SessionStream::Attach => PodAction::Attach,
        },
        route: Route::Brokered,
        now,
    };
    let chosen = granting(
        requests.iter().map(|r| &r.summary),
        |kind, name| template(kind, name).map(|t| t.config),
        &asked,
    )?;
    let request = requests.iter().find(|r| std::ptr::eq(&r.summary, chosen))?;
    let template = template(chosen.kind, &chosen.template);
    Some(Grant {
        request: request.clone(),
        record_input: template.as_ref().is_none_or(|t| t.config.record_input()),
        idle_timeout: template.as_ref().and_then(TemplateView::idle_timeout),
    })
}

/// The requests and templates this replica has seen, kept current by watches. A request is
/// kept only as the [`RequestView`] the broker reads, never whole (a cached request is most of
/// the heap of a grant, and this replica may hold tens of thousands), and only if it is
/// Brokered, or has been since the watch first saw it: the broker opens sessions under
/// Brokered grants only.
#[derive(Clone)]
pub struct RequestTemplateCache {
    exec_requests: Vec<RequestViews>,
    pod_requests: Vec<RequestViews>,
    exec_templates: Vec<Store<ExecAccessTemplate>>,
    pod_templates: Vec<Store<PodAccessTemplate>>,
    /// The AccessLocks, cluster-wide: a new one closes the sessions it matches.
    locks: Store<AccessLock>,
    changes: watch::Receiver<u64>,
}

impl RequestTemplateCache {
    /// Starts the watches: in each of `namespaces`, or in all of them when it is empty. The
    /// tasks run until aborted.
    pub fn start(client: &Client, namespaces: &[String]) -> (Self, Vec<JoinHandle<()>>) {
        let (changed, changes) = watch::channel(0);
        let changed = Arc::new(changed);
        let mut tasks = Vec::new();
        let scopes: Vec<Option<&str>> = if namespaces.is_empty() {
            vec![None]
        } else {
            namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        let locks = watch_into(Api::all(client.clone()), &changed, &mut tasks);
        let mut cache = Self {
            exec_requests: Vec::new(),
            pod_requests: Vec::new(),
            exec_templates: Vec::new(),
            pod_templates: Vec::new(),
            locks,
            changes,
        };
        for scope in scopes {
            cache.exec_requests.push(watch_views::<ExecAccessRequest>(
                api(client, scope),
                &changed,
                &mut tasks,
            ));
            cache.pod_requests.push(watch_views::<PodAccessRequest>(
                api(client, scope),
                &changed,
                &mut tasks,
            ));
            cache
                .exec_templates
                .push(watch_into(api(client, scope), &changed, &mut tasks));
            cache
                .pod_templates
                .push(watch_into(api(client, scope), &changed, &mut tasks));
        }
        (cache, tasks)
    }

    /// Waits until every watch has listed once.
    pub async fn ready(&self) {
        for views in self.exec_requests.iter().chain(&self.pod_requests) {
            views.wait_until_listed().await;
        }
        for store in &self.exec_templates {
            let _ = store.wait_until_ready().await;
        }
        for store in &self.pod_templates {
            let _ = store.wait_until_ready().await;
        }
        // Not the locks: a session is judged again on every change, a lock's first LIST
        // included, and an install without the right to read locks must still open sessions.
    }

    /// The AccessLocks.
    pub fn locks(&self) -> Vec<Arc<AccessLock>> {
        self.locks.state()
    }

    /// Whether a lock holds now over `user` (in `groups`) using template `kind`/`template` in
    /// `namespace`: their open session under it closes.
    pub fn locked(
        &self,
        (user, groups): (&str, &[String]),
        namespace: &str,
        (kind, template): (AccessKind, &str),
    ) -> bool {
        let target = LockTarget {
            user,
            groups,
            namespace,
            template: Some((kind, template)),
        };
        let locks = self.locks.state();
        locking(
            locks.iter().map(|l| &**l),
            &target,
            k8s_openapi::jiff::Timestamp::now(),
        )
        .is_some()
    }

    /// A receiver that changes whenever any watched object does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// The requests of both kinds in `namespace`.
    pub fn requests(&self, namespace: &str) -> Vec<RequestView> {
        let mut views: Vec<RequestView> = Vec::new();
        for store in self.exec_requests.iter().chain(&self.pod_requests) {
            views.extend(store.in_namespace(namespace));
        }
        views
    }

    /// The request `kind`/`namespace`/`name`, if it exists.
    pub fn request(&self, kind: AccessKind, namespace: &str, name: &str) -> Option<RequestView> {
        match kind {
            AccessKind::Exec => self
                .exec_requests
                .iter()
                .find_map(|views| views.get(namespace, name)),
            AccessKind::Pod => self
                .pod_requests
                .iter()
                .find_map(|views| views.get(namespace, name)),
        }
    }

    /// The template of `kind` named `name` in `namespace`, if it exists.
    pub fn template(&self, kind: AccessKind, namespace: &str, name: &str) -> Option<TemplateView> {
        match kind {
            AccessKind::Exec => {
                find(&self.exec_templates, namespace, name).map(|t| TemplateView::of(&*t))
            }
            AccessKind::Pod => {
                find(&self.pod_templates, namespace, name).map(|t| TemplateView::of(&*t))
            }
        }
    }
}

fn find<K>(stores: &[Store<K>], namespace: &str, name: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let key = ObjectRef::new(name).within(namespace);
    stores.iter().find_map(|s| s.get(&key))
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The views of the requests one watch has seen, by namespace and name. A re-list is gathered
/// aside and replaces them once complete, as kube's reflector does with whole objects.
#[derive(Clone)]
struct RequestViews {
    kept: Arc<RwLock<KeptViews>>,
    listed: watch::Receiver<bool>,
}

/// The views kept: only of the requests that are Brokered, or have been since this watch
/// first saw them. The broker opens sessions under Brokered grants only (the grant rule's
/// Brokered route), so the Direct grants, most of them, cost it nothing; a request once kept
/// is kept, however its status changes, so that a session under it sees it as before.
#[derive(Default)]
struct KeptViews {
    current: ViewsByNamespace,
    relisting: Option<ViewsByNamespace>,
}

type ViewsByNamespace = HashMap<String, HashMap<String, RequestView>>;

impl KeptViews {
    fn apply<R: AccessRequest>(&mut self, event: watcher::Event<WatchedRequest<R>>) -> bool {
        fn insert(into: &mut ViewsByNamespace, view: RequestView) {
            into.entry(view.namespace.clone())
                .or_default()
                .insert(view.summary.name.clone(), view);
        }
        match event {
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(WatchedRequest(request)) => {
                let view = RequestView::of(&request);
                if self.keeps(&view) {
                    insert(self.relisting.get_or_insert_default(), view);
                }
            }
            watcher::Event::InitDone => {
                self.current = self.relisting.take().unwrap_or_default();
                return true;
            }
            watcher::Event::Apply(WatchedRequest(request)) => {
                let view = RequestView::of(&request);
                if self.keeps(&view) {
                    insert(&mut self.current, view);
                }
            }
            watcher::Event::Delete(WatchedRequest(request)) => {
                let view = RequestView::of(&request);
                if let Some(names) = self.current.get_mut(&view.namespace) {
                    names.remove(&view.summary.name);
                    if names.is_empty() {
                        self.current.remove(&view.namespace);
                    }
                }
            }
        }
        false
    }

    /// Whether `view` is kept: Brokered, or kept already.
    fn keeps(&self, view: &RequestView) -> bool {
        view.summary.session_mode == Some(SessionMode::Brokered)
            || self
                .current
                .get(&view.namespace)
                .is_some_and(|names| names.contains_key(&view.summary.name))
    }
}

impl RequestViews {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, KeptViews> {
        self.kept.read().unwrap_or_else(|e| e.into_inner())
    }

    fn in_namespace(&self, namespace: &str) -> Vec<RequestView> {
        self.read()
            .current
            .get(namespace)
            .map(|names| names.values().cloned().collect())
            .unwrap_or_default()
    }

    fn get(&self, namespace: &str, name: &str) -> Option<RequestView> {
        self.read().current.get(namespace)?.get(name).cloned()
    }

    /// Waits until the watch has listed once (for good if its task is gone).
    async fn wait_until_listed(&self) {
        let _ = self.listed.clone().wait_for(|listed| *listed).await;
    }
}

/// Watches the requests of kind `R` in `api`'s scope into a new [`RequestViews`], bumping
/// `changed` after each event is in it. Requests are parsed as [`WatchedRequest`]s, without
/// the metadata no part of oz reads.
fn watch_views<R: AccessRequest>(
    api: Api<WatchedRequest<R>>,
    changed: &Arc<watch::Sender<u64>>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> RequestViews {
    let (listed_once, listed) = watch::channel(false);
    let views = RequestViews {
        kept: Arc::default(),
        listed,
    };
    let (kept, changed) = (views.kept.clone(), changed.clone());
    tasks.push(tokio::spawn(async move {
        let events = watcher(api, watcher::Config::default()).default_backoff();
        let mut events = pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    let done = kept.write().unwrap_or_else(|e| e.into_inner()).apply(event);
                    if done {
                        listed_once.send_replace(true);
                    }
                    changed.send_modify(|generation| *generation += 1);
                }
                Err(e) => warn!(error = %e, kind = %R::kind(&()), "the sessions' grant watch failed; retrying"),
            }
        }
    }));
    views
}

/// Watches `api` into a new store, bumping `changed` after each event is in it. Objects are
/// kept without the metadata no part of oz reads ([`oz_api::strip_unread_metadata`]).
fn watch_into<K>(
    api: Api<K>,
    changed: &Arc<watch::Sender<u64>>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let changed = changed.clone();
    tasks.push(tokio::spawn(async move {
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|object| oz_api::strip_unread_metadata(object.meta_mut()))
            .reflect(writer);
        let mut events = pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(_) => changed.send_modify(|generation| *generation += 1),
                Err(e) => warn!(error = %e, kind = %K::kind(&()), "the sessions' grant watch failed; retrying"),
            }
        }
    }));
    store
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use oz_api::{RequestPhase, SessionMode};
    use serde_json::json;

    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-23T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn request(kind: AccessKind, name: &str, user: &str, minutes: i64) -> RequestView {
        RequestView {
            namespace: "shop".into(),
            uid: format!("uid-{name}"),
            summary: GrantSummary {
                kind,
                name: name.into(),
                template: "web".into(),
                requested_by: Some(user.into()),
                phase: Some(RequestPhase::Ready),
                pod_name: Some("web-0".into()),
                session_mode: Some(SessionMode::Brokered),
                expires_at: Some(now() + TimeDelta::minutes(minutes)),
                approvers: Vec::new(),
                extensions: Vec::new(),
            },
        }
    }

    fn template(grant_to: &str, mode: &str) -> TemplateView {
        TemplateView {
            config: serde_json::from_value(json!({
                "allowedGroups": ["devs"], "grantTo": grant_to, "sessionMode": mode,
                "recordInput": false, "sessionIdleTimeout": "90s",
            }))
            .unwrap(),
            deleting: false,
        }
    }

    fn alice() -> Identity {
        Identity {
            user: "alice".into(),
            groups: vec!["devs".into()],
            ..Default::default()
        }
    }

    fn choose(
        requests: &[RequestView],
        t: TemplateView,
        who: &Identity,
        stream: SessionStream,
    ) -> Option<String> {
        choose_grant(
            requests,
            |_, _| Some(t.clone()),
            who,
            ("shop", "web-0"),
            stream,
            (now(), &[]),
        )
        .map(|g| g.request.summary.name)
    }

    #[test]
    fn the_users_ready_brokered_grant_for_the_pod_expiring_last_is_chosen() {
        let mut pending = request(AccessKind::Exec, "pending", "alice", 90);
        pending.summary.phase = Some(RequestPhase::Pending);
        let mut other_pod = request(AccessKind::Exec, "other-pod", "alice", 90);
        other_pod.summary.pod_name = Some("web-1".into());
        let expired = request(AccessKind::Exec, "expired", "alice", -1);
        let requests = [
            request(AccessKind::Exec, "short", "alice", 5),
            request(AccessKind::Exec, "long", "alice", 30),
            request(AccessKind::Exec, "bobs", "bob", 60),
            pending,
            other_pod,
            expired,
        ];
        let t = template("Requester", "Brokered");
        assert_eq!(
            choose(&requests, t.clone(), &alice(), SessionStream::Exec).as_deref(),
            Some("long")
        );
        let grant = choose_grant(
            &requests,
            |_, _| Some(t.clone()),
            &alice(),
            ("shop", "web-0"),
            SessionStream::Exec,
            (now(), &[]),
        )
        .unwrap();
        assert!(!grant.record_input);
        assert_eq!(grant.idle_timeout, Some(Duration::from_secs(90)));
        let mallory = Identity {
            user: "mallory".into(),
            groups: vec!["devs".into()],
            ..Default::default()
        };
        assert_eq!(choose(&requests, t, &mallory, SessionStream::Exec), None);
    }

    #[test]
    fn a_group_grant_admits_members_only_when_the_template_grants_to_groups() {
        let requests = [request(AccessKind::Exec, "bobs", "bob", 30)];
        assert_eq!(
            choose(
                &requests,
                template("AllowedGroups", "Brokered"),
                &alice(),
                SessionStream::Exec
            )
            .as_deref(),
            Some("bobs")
        );
        assert_eq!(
            choose(
                &requests,
                template("Requester", "Brokered"),
                &alice(),
                SessionStream::Exec
            ),
            None
        );
        let outsider = Identity {
            user: "carol".into(),
            groups: vec!["qa".into()],
            ..Default::default()
        };
        assert_eq!(
            choose(
                &requests,
                template("AllowedGroups", "Brokered"),
                &outsider,
                SessionStream::Exec
            ),
            None
        );
    }

    #[test]
    fn only_brokered_grants_count_and_attach_needs_a_pod_grant() {
        let mut direct = request(AccessKind::Exec, "direct", "alice", 30);
        direct.summary.session_mode = None;
        // The grant's own mode decides (its RBAC is what was granted), not its template's now.
        for mode in ["Direct", "Brokered"] {
            assert_eq!(
                choose(
                    std::slice::from_ref(&direct),
                    template("Requester", mode),
                    &alice(),
                    SessionStream::Exec
                ),
                None
            );
        }
        let exec = [request(AccessKind::Exec, "exec", "alice", 30)];
        assert_eq!(
            choose(
                &exec,
                template("Requester", "Brokered"),
                &alice(),
                SessionStream::Attach
            ),
            None
        );
        let pod = [request(AccessKind::Pod, "pod", "alice", 30)];
        assert_eq!(
            choose(
                &pod,
                template("Requester", "Brokered"),
                &alice(),
                SessionStream::Attach
            )
            .as_deref(),
            Some("pod")
        );
    }

    fn event_of(name: &str, mode: Option<&str>) -> WatchedRequest<ExecAccessRequest> {
        let mut status = json!({"phase": "Ready", "podName": "web-0"});
        if let Some(mode) = mode {
            status["sessionMode"] = json!(mode);
        }
        WatchedRequest(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
                "spec": {"templateName": "web"},
                "status": status,
            }))
            .unwrap(),
        )
    }

    #[test]
    fn only_brokered_requests_are_kept_and_one_kept_stays_kept_whatever_its_status() {
        use watcher::Event::*;
        let kept = |views: &KeptViews| -> Vec<(String, Option<SessionMode>)> {
            let mut names: Vec<_> = (views.current.values().flat_map(|names| names.values()))
                .map(|v| (v.summary.name.clone(), v.summary.session_mode))
                .collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            names
        };
        let brokered = Some(SessionMode::Brokered);
        let mut views = KeptViews::default();
        for event in [
            Init,
            InitApply(event_of("direct", None)),
            InitApply(event_of("broker", Some("Brokered"))),
            InitDone,
        ] {
            views.apply(event);
        }
        assert_eq!(kept(&views), [("broker".into(), brokered)]);
        views.apply(Apply(event_of("direct-2", Some("Direct"))));
        views.apply(Apply(event_of("broker-2", Some("Brokered"))));
        assert_eq!(
            kept(&views),
            [("broker".into(), brokered), ("broker-2".into(), brokered)]
        );
        // Its status edited, a kept request is still seen, as it now is; so after a re-list.
        views.apply(Apply(event_of("broker", None)));
        views.apply::<ExecAccessRequest>(Init);
        views.apply(InitApply(event_of("broker", None)));
        views.apply(InitApply(event_of("direct", None)));
        views.apply::<ExecAccessRequest>(InitDone);
        assert_eq!(kept(&views), [("broker".into(), None)]);
        views.apply(Delete(event_of("broker", None)));
        assert!(views.current.is_empty());
    }
}
