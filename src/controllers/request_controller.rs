//! The request controller's wiring: what it watches (its requests, their templates and
//! approvals, the AccessLocks, its grants' Roles, RoleBindings and Pods, and for exec access
//! the workloads' selectors), how a change maps to the request to reconcile, and which watch events are only
//! echoes of oz's own writes.

use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt, TryStreamExt, future::BoxFuture};
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    core::v1::Pod,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        Controller, WatchStreamExt, controller,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use oz_api::{AccessApproval, AccessLock, AccessRequest, ApprovedKind, WatchedRequest};

use super::{
    active_grants::count_active_grants,
    request::{self, RequestReconciler, RequestStores},
    runner::{HasContext, WatchBackoff, drain, error_policy, until_stopped},
};
use crate::{
    Context,
    builders::{AccessBuilder, MANAGED_BY, grant::REQUEST_KIND_LABEL},
    cache::{
        BuildCaches,
        build_caches::{CachedWorkload, WorkloadStores},
        grant_rbac::{WatchedBinding, WatchedRole},
        grant_rbac_store::{GrantObject, GrantRbacStore, GrantRbacWriter},
        requests::CachedRequest,
    },
    scope::Scope,
};

/// Runs the request controller of `builder`'s kind in `scope` until `shutdown` resolves.
pub async fn request_controller<B: AccessBuilder>(
    ctx: Context,
    scope: Scope,
    builder: B,
    shutdown: impl std::future::Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    // Only the grants of this controller's kind: the other kind's controller watches its own.
    // Both cached every oz Role and RoleBinding before, and each consumed the other's echoes
    // ([`crate::cache::echoes`]), so one in two of oz's own writes woke a request again.
    let kind_label = <B::Request as Resource>::kind(&());
    let owned = watcher::Config::default().labels(&format!(
        "{}={},{REQUEST_KIND_LABEL}={kind_label}",
        MANAGED_BY.0, MANAGED_BY.1
    ));
    // The requests are parsed without their managedFields, labels and annotations
    // (`WatchedRequest`): oz never reads them, and parsed managedFields are most of a request's
    // memory (a tree of every field each manager set).
    let (store, writer) = reflector::store();
    let concurrency = ctx.settings.max_concurrent_reconciles;
    let kind = <B::Request as Resource>::kind(&()).to_string();
    let counting = count_active_grants(ctx.clone(), store.clone(), kind.clone());
    // The decisions on requests, cached for the reconcile's tally; a change to one (deleted
    // too: that withdraws it) wakes the request it names.
    let (approvals, approvals_writer) = reflector::store();
    let decisions = watcher::watcher(
        scope.api::<AccessApproval>(&client),
        watcher::Config::default(),
    )
    .modify(|approval| oz_api::strip_unread_metadata(approval.meta_mut()))
    .reflect(approvals_writer)
    .touched_objects();
    // The AccessLocks, cluster-wide whatever the scope (a lock reaches every namespace); a new
    // or changed one wakes the requests it matches.
    let (locks, locks_writer) = reflector::store();
    let lock_changes = watcher::watcher(
        Api::<AccessLock>::all(client.clone()),
        watcher::Config::default(),
    )
    // An install whose RBAC predates locks is refused the LIST: retried, not in a tight loop.
    .default_backoff()
    .modify(|lock| oz_api::strip_unread_metadata(lock.meta_mut()))
    .reflect(locks_writer)
    .applied_objects();
    // The templates, read by every reconcile; a change to one wakes the requests naming it.
    let (templates, templates_writer) = reflector::store();
    let template_changes = watcher::watcher(
        scope.api::<<B::Request as AccessRequest>::Template>(&client),
        watcher::Config::default(),
    )
    .modify(|template| oz_api::strip_unread_metadata(template.meta_mut()))
    .reflect(templates_writer)
    .touched_objects();
    // The grants' Roles and RoleBindings, read by the builders instead of the apiserver; a
    // change to one that oz did not make wakes its request, which puts it back. Listed once
    // the requests are, not alongside them: no reconcile runs before all three are in anyway,
    // and three pages of LISTs parsed at once set oz-manager's peak memory after a restart.
    let (requests_listed, first_list) = tokio::sync::watch::channel(false);
    let (grants, roles_writer, bindings_writer) = GrantRbacStore::new();
    let role_changes = after_first_list(
        first_list.clone(),
        changes_by_others(
            scope.api::<WatchedRole>(&client),
            owned.clone(),
            roles_writer,
            &ctx,
        ),
    );
    let binding_changes = after_first_list(
        first_list,
        changes_by_others(
            scope.api::<WatchedBinding>(&client),
            owned.clone(),
            bindings_writer,
            &ctx,
        ),
    );
    let (workloads, workload_watches) = if B::CACHES_WORKLOADS {
        let (stores, watches) = workload_stores(&client, &scope);
        (Some(stores), watches)
    } else {
        (None, Vec::new())
    };
    let cache = BuildCaches { grants, workloads };
    let stores = RequestStores {
        requests: store.clone(),
        templates,
        locks,
    };
    // The requests the expiry timers send: grants they have revoked, and reconciles asked of
    // them before an expiry. Reconciled next.
    let (to_reconcile, timed_requests) = futures::channel::mpsc::unbounded();
    let reconciler = Arc::new(RequestReconciler::new(
        ctx.clone(),
        builder,
        stores,
        approvals,
        cache,
        to_reconcile,
        shutdown.clone().boxed().shared(),
    ));
    let requests = request_events(
        &ctx,
        &scope,
        reconciler.clone(),
        store.clone(),
        writer,
        requests_listed,
    );
    let controller = Controller::for_stream(requests, store.clone());
    let mut controller = controller
        .watches_stream(role_changes, |role| {
            owning_request(&role, role.owner.as_deref())
        })
        .watches_stream(binding_changes, |binding| {
            owning_request(&binding, binding.owner.as_deref())
        })
        .watches_stream(template_changes, requests_naming(&store))
        .watches_stream(decisions, request_decided::<B::Request>)
        .watches_stream(lock_changes, requests_locked(&store))
        .reconcile_on(timed_requests);
    if let Some(hub) = &ctx.fleet {
        // A fleet hub's requests whose spoke request changed.
        let changes = hub
            .request_changes(B::Request::KIND)
            .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace));
        controller = controller.reconcile_on(changes);
    }
    if B::OWNS_PODS {
        controller = controller.owns(scope.api::<Pod>(&client), owned);
    }
    let run = drain(
        controller
            .with_config(controller::Config::default().concurrency(concurrency))
            .trigger_backoff(WatchBackoff::default())
            .graceful_shutdown_on(shutdown.clone())
            .run(
                request::reconcile::<B>,
                error_policy::<CachedRequest<B::Request>, _>("request"),
                reconciler.clone(),
            ),
        &kind,
    );
    // The workload caches are filled for as long as the controller runs (and there may be
    // none: a watch list that ends must not end the controller).
    let filling = async {
        futures::future::join_all(workload_watches).await;
        futures::future::pending::<()>().await
    };
    let run = until_stopped(run, shutdown, store.clone());
    let running = futures::future::select(Box::pin(run), Box::pin(filling));
    // The grant count ends with the controller: a controller started again (leadership
    // regained) counts from its own cache, not alongside a stale one.
    futures::future::select(Box::pin(running), Box::pin(counting)).await;
}

/// The request watch, as the controller consumes it: started once the expiry timers have
/// been armed from the Table of requests, reflected into `store`, arming and forgetting timers
/// as requests come and go, and without the echoes of oz's own status writes.
/// `requests_listed` is set once its first LIST is in.
fn request_events<B: AccessBuilder>(
    ctx: &Context,
    scope: &Scope,
    reconciler: Arc<RequestReconciler<B>>,
    store: Store<CachedRequest<B::Request>>,
    writer: reflector::store::Writer<CachedRequest<B::Request>>,
    requests_listed: tokio::sync::watch::Sender<bool>,
) -> impl Stream<Item = Result<CachedRequest<B::Request>, watcher::Error>> + Send + 'static {
    let client = ctx.client.clone();
    let (forgetting, cached, own) = (reconciler.clone(), store, ctx.echoes.clone());
    let echoes = ctx.echoes.clone();
    let lists = ctx.request_lists.clone();
    // The expiry timers are armed from the Table of requests first, and again as this first
    // LIST comes in (for the grants made since). In kube's pages of 500: larger pages listed
    // faster, which mattered while the timers waited for this LIST; now they do not, and a
    // larger page's JSON and parsing at once raised the peak after a restart.
    let request_pages = watcher::Config::default();
    request::table_timers::after_arming_from_table(
        client.clone(),
        scope.clone(),
        reconciler,
        watcher::watcher(
            scope.api::<WatchedRequest<B::Request>>(&client),
            request_pages,
        ),
    )
    .map_ok(WatchedRequest::into_request_event)
    // Kept packed ([`CachedRequest`]): the cached requests are most of oz-manager's heap.
    .try_filter_map(|event| futures::future::ready(Ok(CachedRequest::event(event))))
    .reflect(writer)
    // A request that is gone needs no timer (its access goes with it, by owner reference),
    // and the writes oz made to it and its grant will not echo.
    .inspect(move |event| match event {
        Ok(watcher::Event::Delete(request)) => {
            forgetting.timers.forget(request);
            let namespace = request.namespace().unwrap_or_default();
            own.forget(&namespace, &request.name_any());
            if let Ok(grant) = request.grant_identity() {
                own.forget(&namespace, &grant.name);
            }
        }
        Ok(watcher::Event::InitApply(request)) => forgetting.timers.arm_listed(request),
        Ok(watcher::Event::InitDone) => {
            forgetting.timers.forget_absent(&cached);
            forgetting.timers.report_listed();
            if requests_listed.send_if_modified(|listed| !std::mem::replace(listed, true)) {
                lists.listed();
            }
        }
        _ => {}
    })
    .applied_objects()
    // oz's own status writes come back here too: the pass that wrote them has already
    // decided everything they say.
    .filter(move |request| {
        let echo = matches!(request, Ok(r) if echoes.is_echo(r, false));
        futures::future::ready(!echo)
    })
}

/// The changes to a grant's objects of kind `K` that someone other than oz made, applied to
/// `writer`'s store on the way: each of oz's own applies and deletes comes back as a watch
/// event, which is dropped ([`crate::cache::echoes`]).
fn changes_by_others<K>(
    api: Api<K>,
    config: watcher::Config,
    mut writer: GrantRbacWriter<K>,
    ctx: &Context,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: GrantObject + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    K::Cached: Send + Sync,
{
    let own = ctx.echoes.clone();
    // No metadata to strip: the watched forms keep only what they read as they are parsed.
    watcher::watcher(api, config)
        .map_ok(move |event| {
            writer.apply(&event);
            event
        })
        .filter_map(move |event| {
            let change = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    (!own.is_echo(&o, false)).then_some(Ok(o))
                }
                Ok(watcher::Event::Delete(o)) => (!own.is_echo(&o, true)).then_some(Ok(o)),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(change)
        })
}

/// `stream`, started once `first_list` says the requests have been listed (or at once if the
/// request watch is gone: its controller is stopping).
fn after_first_list<S: Stream>(
    mut first_list: tokio::sync::watch::Receiver<bool>,
    stream: S,
) -> impl Stream<Item = S::Item> {
    futures::stream::once(async move {
        let _ = first_list.wait_for(|listed| *listed).await;
        stream
    })
    .flatten()
}

/// The workload caches of exec access ([`WorkloadStores`]), and the watches that fill them.
fn workload_stores(
    client: &Client,
    scope: &Scope,
) -> (WorkloadStores, Vec<BoxFuture<'static, ()>>) {
    fn cached<W: CachedWorkload>(api: Api<W>) -> (Store<W>, BoxFuture<'static, ()>) {
        let (store, writer) = reflector::store();
        let watch = watcher::watcher(api, watcher::Config::default())
            .modify(W::keep_selector_only)
            .reflect(writer)
            .backoff(WatchBackoff::default())
            .for_each(|_| futures::future::ready(()));
        (store, Box::pin(watch))
    }
    let (deployments, d) = cached(scope.api::<Deployment>(client));
    let (stateful_sets, s) = cached(scope.api::<StatefulSet>(client));
    let (daemon_sets, ds) = cached(scope.api::<DaemonSet>(client));
    let stores = WorkloadStores {
        deployments,
        stateful_sets,
        daemon_sets,
    };
    (stores, vec![d, s, ds])
}

/// Maps a changed template to the requests that name it.
fn requests_naming<R: AccessRequest>(
    store: &Store<CachedRequest<R>>,
) -> impl Fn(R::Template) -> Vec<ObjectRef<CachedRequest<R>>> + Send + Sync + 'static {
    let store = store.clone();
    move |template: R::Template| {
        let (name, namespace) = (template.name_any(), template.namespace());
        store
            .state()
            .iter()
            .filter(|r| r.namespace() == namespace && r.template_name() == name)
            .map(|r| ObjectRef::from_obj(&**r))
            .collect()
    }
}

/// Maps a new or changed lock to the requests it holds over now.
fn requests_locked<R: AccessRequest>(
    store: &Store<CachedRequest<R>>,
) -> impl Fn(AccessLock) -> Vec<ObjectRef<CachedRequest<R>>> + Send + Sync + 'static {
    let store = store.clone();
    move |lock: AccessLock| {
        let locks = [Arc::new(lock)];
        let now = k8s_openapi::jiff::Timestamp::now();
        store
            .state()
            .iter()
            .filter(|cached| {
                let ended = cached.phase().is_some_and(oz_api::RequestPhase::is_settled);
                !ended
                    && cached.request().is_ok_and(|request| {
                        request::locked::lock_over(&request, &locks, now).is_some()
                    })
            })
            .map(|r| ObjectRef::from_obj(&**r))
            .collect()
    }
}

/// The request of kind `R` named `owner` in `object`'s namespace: the controller of a grant's
/// Role or RoleBinding, which the cached forms keep by name only (the watch is of `R`'s grants
/// alone, by label).
fn owning_request<R: AccessRequest>(
    object: &impl ResourceExt,
    owner: Option<&str>,
) -> Option<ObjectRef<CachedRequest<R>>> {
    Some(ObjectRef::new(owner?).within(&object.namespace()?))
}

/// Maps a changed decision to the request of kind `R` it names, if any.
fn request_decided<R: AccessRequest>(
    approval: AccessApproval,
) -> Option<ObjectRef<CachedRequest<R>>> {
    let decided = &approval.spec.request_ref;
    (decided.kind == ApprovedKind::from(R::KIND))
        .then(|| ObjectRef::new(&decided.name).within(&approval.namespace().unwrap_or_default()))
}

impl<B: AccessBuilder> HasContext for RequestReconciler<B> {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicBool, Ordering},
        task::Poll,
    };

    use futures::FutureExt;

    use super::*;

    /// A one-item stream that records whether it was ever polled: a watch that has not been
    /// polled has not sent its LIST.
    fn watch_recording(polled: Arc<AtomicBool>) -> impl Stream<Item = u32> {
        futures::stream::poll_fn(move |_| {
            polled.store(true, Ordering::SeqCst);
            Poll::Ready(Some(1))
        })
        .take(1)
    }

    #[tokio::test]
    async fn an_owned_watch_lists_only_once_the_requests_are_listed() {
        let (listed, first_list) = tokio::sync::watch::channel(false);
        let polled = Arc::new(AtomicBool::new(false));
        let mut owned = Box::pin(after_first_list(
            first_list,
            watch_recording(polled.clone()),
        ));
        assert_eq!(
            owned.next().now_or_never(),
            None,
            "nothing before the requests"
        );
        assert!(
            !polled.load(Ordering::SeqCst),
            "the watch was started early"
        );
        listed.send_replace(true);
        assert_eq!(owned.next().await, Some(1));
        assert_eq!(owned.next().await, None);
    }

    #[tokio::test]
    async fn an_owned_watch_starts_at_once_when_the_request_watch_is_gone() {
        let (listed, first_list) = tokio::sync::watch::channel(false);
        drop(listed);
        let polled = Arc::new(AtomicBool::new(false));
        let owned = after_first_list(first_list, watch_recording(polled.clone()));
        assert_eq!(owned.collect::<Vec<_>>().await, vec![1]);
        assert!(polled.load(Ordering::SeqCst));
    }
}
