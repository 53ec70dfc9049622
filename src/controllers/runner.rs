//! What running any of oz's controllers takes: how its stream is drained, how a failed watch
//! or reconcile is retried, and how it stops.

use std::{sync::Arc, time::Duration};

use futures::{FutureExt, Stream, StreamExt};
use kube::{
    Resource, ResourceExt,
    runtime::{controller::Action, reflector::Store},
};

use crate::{Context, Error};

/// Runs a controller (`run`, its stream drained) until it ends, or at once when `stop` comes
/// before its `store` was filled by the first LIST. kube's runner starts no reconcile before
/// that LIST, and even once stopping waits for it, while the stop has cut the watch that would
/// make it: a controller whose LIST had not come (just started, or refused by RBAC or a missing
/// CRD) never stopped. Then nothing can be in flight, so ending it loses nothing; once the
/// store is filled, the graceful stop lets the reconciles in flight finish.
pub async fn until_stopped<K>(
    run: impl std::future::Future<Output = ()>,
    stop: impl std::future::Future<Output = ()>,
    store: Store<K>,
) where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let stopped_unlisted = async move {
        stop.await;
        if matches!(store.wait_until_ready().now_or_never(), Some(Ok(()))) {
            futures::future::pending::<()>().await;
        }
    };
    futures::future::select(std::pin::pin!(run), std::pin::pin!(stopped_unlisted)).await;
}

/// How a failed reconcile is retried: logged, counted, and tried again soon.
pub fn error_policy<K: Resource<DynamicType = ()>, C: HasContext>(
    controller: &'static str,
) -> impl Fn(Arc<K>, &Error, Arc<C>) -> Action {
    move |object, error, this| {
        tracing::warn!(%error, kind = %K::kind(&()), name = %object.name_any(), "reconcile failed; retrying");
        this.context()
            .metrics
            .reconcile_failed(controller, &K::kind(&()), error.metric_label());
        // Short: these are API failures (an apiserver restart, a conflict), and a grant's
        // revocation may be waiting on this retry.
        Action::requeue(Duration::from_secs(1))
    }
}

/// How soon a failed watch is retried: 250 ms, doubling to at most 2 s, so watches resume within
/// moments of the apiserver (or a lost permission) coming back. kube's default waits up to 30 s.
#[derive(Clone, Copy, Debug)]
pub struct WatchBackoff {
    next: Duration,
}

impl WatchBackoff {
    const FIRST: Duration = Duration::from_millis(250);
    const MAX: Duration = Duration::from_secs(2);
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let current = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(current)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// Both reconcilers' contexts lead to the shared [`Context`].
pub trait HasContext {
    fn context(&self) -> &Context;
}

impl HasContext for Context {
    fn context(&self) -> &Context {
        self
    }
}

/// Drains a running controller's stream, logging what went wrong at debug level (the
/// reconcile errors are logged by the error policy).
pub async fn drain<T: std::fmt::Debug, E: std::fmt::Display>(
    stream: impl Stream<Item = Result<T, E>>,
    kind: &str,
) {
    stream
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                Err(e) => tracing::debug!(kind, error = %e, "controller event"),
            }
        })
        .await;
}
