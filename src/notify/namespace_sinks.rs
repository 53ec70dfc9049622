//! The namespaces' own sink Secrets (`oz-notifications`), watched by name, so that a notice
//! costs no GET: a lookup per namespace and cache TTL was a request of its own beside a grant's
//! few (counted by the bench's `calls` part).
//!
//! The watch asks for `metadata.name=oz-notifications` only. The apiserver authorizes a list or
//! watch whose field selector names one object as a request for that object, so oz's RBAC rule
//! on the Secrets of that one name covers it: oz still cannot list, watch nor read any other
//! Secret. Only that name is cached, without its managedFields and last-applied copy.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Client, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use oz_api::notifications::NAMESPACE_SINK_SECRET;

use crate::scope::Scope;

/// What the watch knows of a namespace's `oz-notifications`.
#[derive(Debug)]
pub enum Watched {
    Found(Arc<Secret>),
    Missing,
    /// No watch covers the namespace, or it failed before its first list (oz's RBAC lacks
    /// `list` and `watch` on the name, say): ask the apiserver.
    Unknown,
}

/// One scope's watch: its cache, and whether it has failed before its first list.
struct ScopeWatch {
    scope: Scope,
    store: Store<Secret>,
    failed: tokio::sync::watch::Receiver<bool>,
}

/// The watched `oz-notifications` Secrets of each scope oz works in.
pub struct NamespaceSinks {
    scopes: Vec<ScopeWatch>,
}

impl NamespaceSinks {
    /// Starts a watch in each of `scopes`; they run as long as the runtime does. Needs a Tokio
    /// runtime.
    pub fn watch(client: &Client, scopes: &[Scope]) -> Self {
        let scopes = scopes
            .iter()
            .map(|scope| {
                let (store, writer) = reflector::store();
                let (failing, failed) = tokio::sync::watch::channel(false);
                let config = watcher::Config::default()
                    .fields(&format!("metadata.name={NAMESPACE_SINK_SECRET}"));
                let watch = watcher::watcher(scope.api::<Secret>(client), config)
                    .default_backoff()
                    .modify(|secret| oz_api::strip_unread_metadata(secret.meta_mut()))
                    .reflect(writer)
                    .for_each(move |event| {
                        if let Err(error) = event {
                            failing.send_replace(true);
                            tracing::warn!(target: "oz::notify", %error, "the watch of the namespaces' oz-notifications Secrets \
                                 failed; they are read by GET until it has listed them");
                        }
                        futures::future::ready(())
                    });
                tokio::spawn(watch);
                ScopeWatch {
                    scope: scope.clone(),
                    store,
                    failed,
                }
            })
            .collect();
        Self { scopes }
    }

    /// `namespace`'s `oz-notifications`, from the watch that covers it, once that has listed;
    /// until then this waits, unless the watch has failed.
    pub async fn get(&self, namespace: &str) -> Watched {
        let covering = self.scopes.iter().find(|watch| match &watch.scope {
            Scope::Cluster => true,
            Scope::Namespace(ns) => ns == namespace,
        });
        let Some(ScopeWatch { store, failed, .. }) = covering else {
            return Watched::Unknown;
        };
        let mut failed = failed.clone();
        let listed = tokio::select! {
            biased;
            ready = store.wait_until_ready() => ready.is_ok(),
            _ = failed.wait_for(|failed| *failed) => false,
        };
        if !listed {
            return Watched::Unknown;
        }
        match store.get(&ObjectRef::new(NAMESPACE_SINK_SECRET).within(namespace)) {
            Some(secret) => Watched::Found(secret),
            None => Watched::Missing,
        }
    }
}
