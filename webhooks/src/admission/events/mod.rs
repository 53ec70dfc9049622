//! The audit Events on pods: what one says ([`audit_event`], in Oz's words), and
//! [`AuditEvents`], which publishes them in the background from a bounded queue, so a burst of
//! execs can neither delay admission nor pile up work in memory.
//!
//! The audit record (log line, file and the apiserver's audit annotations) is the record of
//! truth and is always written; the Event is a convenience for `kubectl describe pod`. Events
//! are also rate-limited (`limits.rs`), as client-go's event correlator limits them: each costs
//! the apiserver a pod GET and an Event write, and a flood of execs must not turn into a flood
//! of writes that slows everything else on it (docs/benchmarks.md has the cost). Overall at most [`EVENTS_PER_SECOND`] (bursts of
//! [`EVENT_BURST`]); for one user's actions of one kind on one pod, [`ACCESS_EVENT_BURST`] and
//! then one per [`ACCESS_EVENT_PERIOD`], whose note counts those folded into it (counted in
//! `oz_audit_events_folded_total`, not as drops). When the queue is full or the overall rate is
//! exceeded the Event is dropped and counted, with at most one warning per
//! [`DROP_WARNING_INTERVAL`]; an Event the apiserver does not take is counted too
//! (`oz_audit_events_dropped_total{reason}`).

mod limits;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::{
    Api, Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tokio::sync::mpsc;
use tracing::warn;

pub use limits::{ACCESS_EVENT_BURST, ACCESS_EVENT_PERIOD, EVENT_BURST, EVENTS_PER_SECOND};

use oz_audit::AuditRecord;

use super::audit::PodAction;
use oz_audit::CallerKind;

use crate::{
    WebhookMetrics,
    metrics::{PUBLISH_FAILED, QUEUE_FULL, RATE_LIMITED},
};
use limits::AccessLimit;
pub(crate) use limits::TokenBucket;

/// The Events' reporting controller.
pub const EVENT_REPORTER: &str = "oz-webhooks";

/// How many Events may wait to be published; more are dropped.
pub const QUEUE_CAPACITY: usize = 1000;

/// How many Events are published at once, each a pod GET and an Event create.
pub const PUBLISHERS: usize = 4;

/// At most one warning about dropped Events this often.
pub const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// The queue of audit Events and its publishers. Publishing stops once this (and every clone)
/// is dropped and the queue is drained.
#[derive(Clone)]
pub struct AuditEvents {
    queue: mpsc::Sender<Queued>,
    rate: Arc<TokenBucket>,
    per_access: Arc<AccessLimit>,
    drops: Arc<Drops>,
}

/// An Event waiting to be published: the access, its record, and how many Events of the same
/// access were folded into it.
struct Queued {
    action: PodAction,
    record: AuditRecord,
    folded: u64,
}

impl AuditEvents {
    /// Publishes with `client`, [`PUBLISHERS`] at once, from a queue of [`QUEUE_CAPACITY`],
    /// counting the Events dropped in `metrics`. Needs a tokio runtime; the client needs get on
    /// pods and create/patch on events.k8s.io events.
    pub fn start(client: Client, metrics: WebhookMetrics) -> Self {
        let failures = metrics.clone();
        Self::with_publisher(
            QUEUE_CAPACITY,
            PUBLISHERS,
            metrics,
            move |action, record, folded| {
                publish_event(client.clone(), action, record, folded, failures.clone())
            },
        )
    }

    /// Publishes each queued Event with `publish`, `publishers` at once.
    fn with_publisher<F, Fut>(
        capacity: usize,
        publishers: usize,
        metrics: WebhookMetrics,
        publish: F,
    ) -> Self
    where
        F: Fn(PodAction, AuditRecord, u64) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (queue, mut queued) = mpsc::channel(capacity);
        let events = futures::stream::poll_fn(move |cx| queued.poll_recv(cx));
        tokio::spawn(
            events.for_each_concurrent(publishers, move |event: Queued| {
                publish(event.action, event.record, event.folded)
            }),
        );
        Self {
            queue,
            rate: Arc::new(TokenBucket::new(EVENTS_PER_SECOND, EVENT_BURST)),
            per_access: Arc::new(AccessLimit::new()),
            drops: Arc::new(Drops {
                capacity,
                total: AtomicU64::new(0),
                unreported: AtomicU64::new(0),
                last_warning: Mutex::new(None),
                metrics,
            }),
        }
    }

    /// Queues the Event of `record`; returns `false` if it was folded into a later Event of the
    /// same access, or dropped (the overall rate exceeded, the queue full).
    pub fn publish(&self, action: PodAction, record: AuditRecord) -> bool {
        let access = self
            .per_access
            .access(&record.namespace, &record.pod, &record.user, action);
        let Some(folded) = self.per_access.take(access) else {
            self.drops.metrics.audit_events_folded.inc();
            return false;
        };
        if !self.rate.take() {
            self.per_access.fold(access, folded + 1);
            self.drops.record(RATE_LIMITED);
            return false;
        }
        let event = Queued {
            action,
            record,
            folded,
        };
        match self.queue.try_send(event) {
            Ok(()) => true,
            Err(_) => {
                self.per_access.fold(access, folded + 1);
                self.drops.record(QUEUE_FULL);
                false
            }
        }
    }

    /// How many Events have been dropped since the start.
    pub fn dropped(&self) -> u64 {
        self.drops.total.load(Ordering::Relaxed)
    }
}

/// The dropped Events, counted, and warned about now and then.
struct Drops {
    capacity: usize,
    total: AtomicU64,
    /// Since the last warning.
    unreported: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
    /// Where each drop is counted, by reason.
    metrics: WebhookMetrics,
}

impl Drops {
    fn record(&self, reason: &'static str) {
        self.metrics.audit_event_dropped(reason);
        let total = self.total.fetch_add(1, Ordering::Relaxed) + 1;
        self.unreported.fetch_add(1, Ordering::Relaxed);
        // Whoever holds the lock is about to warn, or has just decided not to.
        let Ok(mut last) = self.last_warning.try_lock() else {
            return;
        };
        if last.is_some_and(|at| at.elapsed() < DROP_WARNING_INTERVAL) {
            return;
        }
        *last = Some(Instant::now());
        let dropped = self.unreported.swap(0, Ordering::Relaxed);
        warn!(
            dropped,
            total,
            capacity = self.capacity,
            "audit Events dropped: over the rate limit or the queue full (their audit records were written)"
        );
    }
}

async fn publish_event(
    client: Client,
    action: PodAction,
    record: AuditRecord,
    folded: u64,
    metrics: WebhookMetrics,
) {
    // The uid lets `kubectl describe pod` find the Event; the CONNECT review does not carry it.
    let uid = Api::<Pod>::namespaced(client.clone(), &record.namespace)
        .get_opt(&record.pod)
        .await
        .ok()
        .flatten()
        .and_then(|pod| pod.metadata.uid);
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(record.pod.clone()),
        namespace: Some(record.namespace.clone()),
        uid,
        ..Default::default()
    };
    // A Recorder per Event: a shared one folds Events with the same reason and object into one
    // series while keeping the first note, so a second user's exec would read as the first's.
    let recorder = Recorder::new(client, Reporter::from(EVENT_REPORTER));
    if let Err(e) = recorder
        .publish(&audit_event(action, &record, folded), &reference)
        .await
    {
        metrics.audit_event_dropped(PUBLISH_FAILED);
        warn!(
            namespace = %record.namespace, pod = %record.pod, error = %e,
            "could not publish the audit Event"
        );
    }
}

/// What an Event's note adds when the review came from an unverified caller.
pub const UNVERIFIED_NOTE: &str = " [reported by an unverified caller: oz cannot tell the \
     apiserver from anyone who reaches its webhook port; see --webhook-client-ca-file]";

/// The note of the Event, in Oz's words:
/// `CONNECT/exec operation on Pod web-0 (container: app) by alice (interactive: true)`; when
/// the review's caller was not verified, or `folded` Events of the same access were not
/// published since its last one, it says so.
pub fn event_note(record: &AuditRecord, folded: u64) -> String {
    let mut note = format!(
        "{}/{} operation on Pod {} (container: {}) by {} (interactive: {})",
        record.operation,
        record.subresource,
        record.pod,
        record.container.as_deref().unwrap_or_default(),
        record.user,
        record.tty
    );
    if record.caller == CallerKind::Unverified {
        // Anyone who reaches the webhook port can send a review: say so where people read it.
        note.push_str(UNVERIFIED_NOTE);
    }
    if folded > 0 {
        let (s, were) = if folded == 1 {
            ("", "was")
        } else {
            ("s", "were")
        };
        note.push_str(&format!(
            "; {folded} more {}{s} by {} since this pod's last such Event {were} recorded in oz's audit log only",
            record.subresource, record.user
        ));
    }
    note
}

/// The Event for a record, `folded` the Events of the same access folded into it; its
/// `related` object is the granting request, if any.
pub fn audit_event(action: PodAction, record: &AuditRecord, folded: u64) -> Event {
    Event {
        type_: if record.allowed {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: action.reason().into(),
        note: Some(event_note(record, folded)),
        action: action.event_action().into(),
        secondary: record.grant.as_ref().map(|grant| ObjectReference {
            api_version: Some(format!("{}/{}", oz_api::GROUP, oz_api::VERSION)),
            kind: Some(grant.kind.clone()),
            name: Some(grant.name.clone()),
            namespace: Some(record.namespace.clone()),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::{Notify, Semaphore};

    use super::*;

    fn record(pod: &str) -> AuditRecord {
        serde_json::from_value(serde_json::json!({
            "time": "2026-11-21T00:00:00Z", "event": "PodExec", "requestUid": "r", "user": "alice",
            "groups": [], "namespace": "team-a", "pod": pod, "operation": "CONNECT",
            "subresource": "exec", "container": null, "command": [], "tty": false,
            "stdin": false, "grant": null, "dryRun": false, "allowed": true,
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_while_the_publishers_are_busy() {
        let gate = Arc::new(Semaphore::new(0));
        let published = Arc::new(AtomicU64::new(0));
        let started = Arc::new(Notify::new());
        let metrics = WebhookMetrics::default();
        let events = {
            let (gate, published, started) = (gate.clone(), published.clone(), started.clone());
            AuditEvents::with_publisher(3, 2, metrics.clone(), move |_, _, _| {
                let (gate, published, started) = (gate.clone(), published.clone(), started.clone());
                async move {
                    started.notify_one();
                    gate.acquire().await.unwrap().forget();
                    published.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        // Two publishers take one Event each and block; three more fill the queue.
        assert!(events.publish(PodAction::Exec, record("p0")));
        started.notified().await;
        assert!(events.publish(PodAction::Exec, record("p1")));
        started.notified().await;
        for i in 2..5 {
            assert!(events.publish(PodAction::Exec, record(&format!("p{i}"))));
        }
        assert!(!events.publish(PodAction::Exec, record("p5")));
        assert!(!events.publish(PodAction::Exec, record("p6")));
        assert_eq!(events.dropped(), 2);
        let dropped = |reason| {
            metrics
                .audit_events_dropped
                .get_or_create(&crate::metrics::DroppedLabels { reason })
                .get()
        };
        assert_eq!(dropped(QUEUE_FULL), 2, "counted by why");
        assert_eq!(dropped(RATE_LIMITED), 0);

        // Released, the publishers drain the queue: every queued Event is published once.
        gate.add_permits(5);
        tokio::time::timeout(Duration::from_secs(5), async {
            while published.load(Ordering::SeqCst) < 5 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        assert!(events.publish(PodAction::Exec, record("p7")));
        assert_eq!(events.dropped(), 2);
    }

    #[tokio::test]
    async fn one_users_repeated_execs_into_a_pod_are_limited_without_holding_back_others() {
        let metrics = WebhookMetrics::default();
        let events = AuditEvents::with_publisher(1000, 1, metrics.clone(), |_, _, _| async {});
        let burst = ACCESS_EVENT_BURST as usize;
        for _ in 0..burst {
            assert!(events.publish(PodAction::Exec, record("web-0")));
        }
        assert!(!events.publish(PodAction::Exec, record("web-0")), "folded");
        assert_eq!(metrics.audit_events_folded.get(), 1);
        assert_eq!(events.dropped(), 0, "counted as folded, not as dropped");
        assert!(
            events.publish(PodAction::Exec, record("web-1")),
            "another pod"
        );
        assert!(
            events.publish(PodAction::Attach, record("web-0")),
            "another action"
        );
        let mut bobs = record("web-0");
        bobs.user = "bob".into();
        assert!(events.publish(PodAction::Exec, bobs), "another user");
    }

    #[test]
    fn drops_warn_at_most_once_per_interval() {
        let drops = Drops {
            capacity: 1,
            total: AtomicU64::new(0),
            unreported: AtomicU64::new(0),
            last_warning: Mutex::new(None),
            metrics: WebhookMetrics::default(),
        };
        drops.record(RATE_LIMITED);
        // The first drop warned and reset the unreported count; the next ones wait.
        assert_eq!(drops.unreported.load(Ordering::SeqCst), 0);
        drops.record(RATE_LIMITED);
        drops.record(RATE_LIMITED);
        assert_eq!(drops.unreported.load(Ordering::SeqCst), 2);
        assert_eq!(drops.total.load(Ordering::SeqCst), 3);
        // Once the interval has passed, the next drop reports all of them.
        *drops.last_warning.lock().unwrap() = Instant::now().checked_sub(DROP_WARNING_INTERVAL);
        drops.record(QUEUE_FULL);
        assert_eq!(drops.unreported.load(Ordering::SeqCst), 0);
        assert_eq!(drops.total.load(Ordering::SeqCst), 4);
    }
}
