//! The requests a LIST brings in, handed to the controller a window at a time.
//!
//! Every request a LIST of requests brings in is reconciled once the list is complete: at
//! start-up, that is every request there is. kube's controller keeps each request it has been
//! asked to reconcile in three hash tables (its scheduler's queue and index, and the set it holds
//! while reconciles run), and a hash table keeps its size once grown. Handed 10,000 requests at
//! once, they held 6.8 MB for as long as oz-manager ran (heaptrack, oz-bench's restart at
//! 10,000 grants), 6 MiB of oz-manager's 89 MiB. Here the listed requests wait in a queue of
//! their own, dropped once it is drained, and go to the controller [`WINDOW`] at a time: each
//! reconcile that starts makes room for the next.
//!
//! The controller's other triggers are not held here: a watch event, an expiry timer's revocation
//! and a requeue go to it at once, as before.

use std::{
    collections::{HashSet, VecDeque},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::Stream;
use kube::{Resource, runtime::reflector::ObjectRef};
use tokio::sync::Notify;

/// How many listed requests may wait in kube's scheduler at once: enough that its reconciles
/// never wait for the next (a reconcile that starts makes room at once), few enough that its
/// tables stay small.
pub const WINDOW: usize = 64;

/// How long a full window may go without a reconcile starting before it is taken as empty. A
/// request handed over but never reconciled (deleted meanwhile, and gone from a later LIST
/// without a delete event) would otherwise hold its place for good; handing over more only
/// costs scheduler space.
const STALLED: Duration = Duration::from_secs(5);

/// The listed requests still to hand to the controller, and those handed over whose reconcile
/// has not started yet.
pub struct ListedQueue<K: Resource<DynamicType = ()>> {
    state: Mutex<Waiting<K>>,
    /// How many are handed over and not started: read without the lock by every reconcile.
    handed_over: AtomicUsize,
    /// Woken when there is room, or more to hand over.
    changed: Notify,
}

struct Waiting<K: Resource<DynamicType = ()>> {
    queued: VecDeque<ObjectRef<K>>,
    handed_over: HashSet<ObjectRef<K>>,
}

impl<K: Resource<DynamicType = ()>> Default for ListedQueue<K> {
    fn default() -> Self {
        Self {
            state: Mutex::new(Waiting {
                queued: VecDeque::new(),
                handed_over: HashSet::new(),
            }),
            handed_over: AtomicUsize::new(0),
            changed: Notify::new(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> ListedQueue<K> {
    /// Queues the requests a complete LIST brought in, in place of any an earlier list left
    /// queued: the newer list has every request there is.
    pub fn list_done(&self, listed: impl IntoIterator<Item = ObjectRef<K>>) {
        self.lock().queued = listed.into_iter().collect();
        self.changed.notify_one();
    }

    /// A reconcile of `request` has started (or it was deleted): room for the next.
    pub fn started(&self, request: &K) {
        // Every reconcile comes here; while nothing listed is waiting, it takes no lock and
        // allocates nothing.
        if self.handed_over.load(Ordering::Acquire) == 0 {
            return;
        }
        let request = ObjectRef::from_obj(request);
        let mut waiting = self.lock();
        if waiting.handed_over.remove(&request) {
            self.handed_over
                .store(waiting.handed_over.len(), Ordering::Release);
            self.changed.notify_one();
        }
    }

    /// The queued requests, handed over while fewer than [`WINDOW`] wait to start; never ends.
    pub fn stream(self: Arc<Self>) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
    where
        K: Send + Sync + 'static,
    {
        futures::stream::unfold(self, |queue| async move {
            let next = queue.next().await;
            Some((next, queue))
        })
    }

    async fn next(&self) -> ObjectRef<K> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let full = {
                let mut waiting = self.lock();
                if waiting.handed_over.len() < WINDOW
                    && let Some(request) = waiting.queued.pop_front()
                {
                    if waiting.queued.is_empty() {
                        // A drained queue gives its room back.
                        waiting.queued = VecDeque::new();
                    }
                    waiting.handed_over.insert(request.clone());
                    self.handed_over
                        .store(waiting.handed_over.len(), Ordering::Release);
                    return request;
                }
                waiting.handed_over.len() >= WINDOW
            };
            if full {
                if tokio::time::timeout(STALLED, changed).await.is_err() {
                    tracing::debug!(
                        "no listed request started for {STALLED:?}: taking the window as empty"
                    );
                    let mut waiting = self.lock();
                    waiting.handed_over = HashSet::new();
                    self.handed_over.store(0, Ordering::Release);
                }
            } else {
                changed.await;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting<K>> {
        // Nothing panics while holding it; a poisoned lock still holds a usable queue.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use futures::{FutureExt, StreamExt};
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn refs(n: usize) -> Vec<ObjectRef<ConfigMap>> {
        (0..n)
            .map(|i| ObjectRef::new(&format!("r{i}")).within("ns"))
            .collect()
    }

    fn object(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// What the stream hands over without waiting.
    fn ready(stream: &mut (impl Stream<Item = ObjectRef<ConfigMap>> + Unpin)) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(Some(r)) = stream.next().now_or_never() {
            out.push(r.name);
        }
        out
    }

    #[tokio::test]
    async fn a_window_at_a_time_and_one_more_per_reconcile_started() {
        let queue = Arc::new(ListedQueue::default());
        let mut stream = Box::pin(queue.clone().stream());
        assert!(ready(&mut stream).is_empty(), "nothing listed yet");
        queue.list_done(refs(WINDOW + 10));
        let first = ready(&mut stream);
        assert_eq!(first.len(), WINDOW);
        assert_eq!(first[0], "r0", "in the order listed");
        queue.started(&object("r3"));
        queue.started(&object("r3"));
        queue.started(&object("elsewhere"));
        assert_eq!(
            ready(&mut stream),
            vec![format!("r{WINDOW}")],
            "one started, one more handed over; a second start of the same or of one not \
             handed over makes no room"
        );
        for i in 0..WINDOW + 10 {
            queue.started(&object(&format!("r{i}")));
        }
        assert_eq!(ready(&mut stream).len(), 9);
        let waiting = queue.lock();
        assert_eq!(waiting.queued.capacity(), 0, "a drained queue is dropped");
    }

    #[tokio::test]
    async fn a_newer_list_replaces_what_is_still_queued() {
        let queue = Arc::new(ListedQueue::default());
        let mut stream = Box::pin(queue.clone().stream());
        queue.list_done(refs(WINDOW + 5));
        assert_eq!(ready(&mut stream).len(), WINDOW);
        queue.list_done([ObjectRef::new("newer").within("ns")]);
        queue.started(&object("r0"));
        assert_eq!(ready(&mut stream), vec!["newer".to_string()]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_that_never_starts_is_taken_as_empty_after_a_while() {
        let queue = Arc::new(ListedQueue::default());
        let mut stream = Box::pin(queue.clone().stream());
        queue.list_done(refs(WINDOW + 1));
        assert_eq!(ready(&mut stream).len(), WINDOW);
        let last = tokio::time::timeout(STALLED * 2, stream.next()).await;
        assert_eq!(last.unwrap().unwrap().name, format!("r{WINDOW}"));
    }
}
