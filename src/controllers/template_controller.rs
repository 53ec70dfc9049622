//! The template controller's wiring: a template is reconciled when it changes or when the
//! workload it targets does.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::{
    Api, Client, ResourceExt,
    api::DynamicObject,
    runtime::{
        Controller, WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher::{self, watcher},
    },
};
use oz_api::{AccessTemplate, ControllerKind};

use super::{
    runner::{WatchBackoff, drain, error_policy, until_stopped},
    template,
};
use crate::{Context, builders::workload::rollout_resource, scope::Scope};

/// Runs the template controller of kind `T` in `scope` until `shutdown` resolves.
pub async fn template_controller<T: AccessTemplate>(
    ctx: Context,
    scope: Scope,
    rollouts_installed: bool,
    shutdown: impl std::future::Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    // As `Controller::new` watches, but keeping each template without the metadata no part of
    // oz reads (its managedFields were most of a cached template).
    let (store, writer) = reflector::store();
    let templates = watcher(scope.api::<T>(&client), watcher::Config::default())
        .default_backoff()
        .modify(|template| oz_api::strip_unread_metadata(template.meta_mut()))
        .reflect(writer)
        .applied_objects();
    let mut controller = Controller::for_stream(templates, store.clone())
        .watches(
            scope.api::<Deployment>(&client),
            watcher::Config::default(),
            templates_targeting(&store, ControllerKind::Deployment),
        )
        .watches(
            scope.api::<StatefulSet>(&client),
            watcher::Config::default(),
            templates_targeting(&store, ControllerKind::StatefulSet),
        )
        .watches(
            scope.api::<DaemonSet>(&client),
            watcher::Config::default(),
            templates_targeting(&store, ControllerKind::DaemonSet),
        );
    if rollouts_installed {
        controller = controller.watches_with(
            rollouts_api(&client, &scope),
            rollout_resource(),
            watcher::Config::default(),
            templates_targeting(&store, ControllerKind::Rollout),
        );
    }
    let label = T::kind(&()).to_string();
    let run = drain(
        controller
            .trigger_backoff(WatchBackoff::default())
            .graceful_shutdown_on(shutdown.clone())
            .run(
                template::reconcile::<T>,
                error_policy::<T, _>("template"),
                Arc::new(ctx),
            ),
        &label,
    );
    until_stopped(run, shutdown, store).await;
}

/// Maps a changed workload to the templates that target it.
fn templates_targeting<T: AccessTemplate, W: ResourceExt>(
    store: &Store<T>,
    kind: ControllerKind,
) -> impl Fn(W) -> Vec<ObjectRef<T>> + Send + Sync + 'static {
    let store = store.clone();
    move |workload: W| {
        let (name, namespace) = (workload.name_any(), workload.namespace());
        store
            .state()
            .iter()
            .filter(|t| t.namespace() == namespace)
            .filter(|t| {
                t.target_ref()
                    .is_some_and(|r| r.kind == kind && r.name == name)
            })
            .map(|t| ObjectRef::from_obj(&**t))
            .collect()
    }
}

/// Whether Rollouts can be watched in `scope`: their CRD is installed and oz may list them
/// there (a scoped install may not list them cluster-wide).
pub async fn rollouts_installed(client: &Client, scope: &Scope) -> bool {
    rollouts_api(client, scope)
        .list(&kube::api::ListParams::default().limit(1))
        .await
        .is_ok()
}

fn rollouts_api(client: &Client, scope: &Scope) -> Api<DynamicObject> {
    match scope {
        Scope::Cluster => Api::all_with(client.clone(), &rollout_resource()),
        Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, &rollout_resource()),
    }
}
