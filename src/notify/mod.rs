//! Notifications: news of a request (pending approval, approved, denied, ready, expiring soon,
//! expired, break-glass) POSTed to the sinks its template and namespace name, as CloudEvents
//! 1.0 (structured mode) or as a Slack incoming-webhook message.
//!
//! [`Notifier::send`] never blocks a reconcile: notices go to a bounded queue that a
//! background task delivers with retries and backoff; what cannot be delivered ends as one
//! dead-letter log line.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::mpsc;

pub mod delivery;
pub mod metrics;
pub mod namespace_sinks;
mod notice;
pub mod payload;
mod seen;
pub mod sink_addresses;
pub mod sinks;

pub use delivery::{Backoff, DeliveryConfig};
pub use metrics::NotifyMetrics;
use namespace_sinks::NamespaceSinks;
pub use notice::{Notice, NoticeKind};
use seen::{Seen, SeenKey};
pub use sink_addresses::SinkNetworks;
use sinks::SinkResolver;

use crate::scope::Scope;

/// How the notifier queues, finds sinks and delivers.
#[derive(Clone, Debug)]
pub struct NotifierConfig {
    /// Notices waiting for their sinks to be looked up; past that, `send` dead-letters.
    pub queue_size: usize,
    /// How long a sink Secret's answer (a missing one too) is reused.
    pub sink_cache_ttl: Duration,
    pub delivery: DeliveryConfig,
}

impl Default for NotifierConfig {
    fn default() -> Self {
        Self {
            queue_size: 1024,
            sink_cache_ttl: Duration::from_secs(30),
            delivery: DeliveryConfig {
                post_timeout: Duration::from_secs(10),
                retry_for: Duration::from_secs(600),
                backoff: Backoff {
                    initial: Duration::from_secs(1),
                    max: Duration::from_secs(60),
                },
                lane_capacity: 256,
                lane_idle: Duration::from_secs(300),
                sink_networks: SinkNetworks::default(),
            },
        }
    }
}

/// A notice on its way, with the time it was sent (the CloudEvent's `time`).
struct Queued {
    notice: Notice,
    time: Timestamp,
}

/// Sends notices. Cheap to clone; every clone feeds the same queue.
#[derive(Clone, Default)]
pub struct Notifier {
    /// None: disabled.
    shared: Option<Arc<Shared>>,
}

struct Shared {
    queue: mpsc::Sender<Queued>,
    seen: Mutex<Seen>,
    metrics: NotifyMetrics,
}

impl Notifier {
    /// A notifier that sends nothing (tests of other parts, `--notifications=false`).
    pub fn disabled() -> Self {
        Self { shared: None }
    }

    /// Starts the notifier: a background task looks up each notice's sinks with `client` and
    /// hands it to their lanes; the namespaces' own sinks are watched in `scopes`. Needs a
    /// Tokio runtime.
    pub fn start(
        client: Client,
        scopes: &[Scope],
        config: NotifierConfig,
        metrics: NotifyMetrics,
    ) -> Self {
        let (notifier, queue) = Self::with_queue(config.queue_size, metrics.clone());
        let namespace_sinks = NamespaceSinks::watch(&client, scopes);
        let resolver = SinkResolver::new(
            client,
            config.sink_cache_ttl,
            metrics.clone(),
            namespace_sinks,
        );
        let lanes = delivery::Lanes::new(config.delivery, metrics.clone());
        tokio::spawn(dispatch(queue, resolver, lanes, metrics));
        notifier
    }

    fn with_queue(size: usize, metrics: NotifyMetrics) -> (Self, mpsc::Receiver<Queued>) {
        let (tx, rx) = mpsc::channel(size.max(1));
        let shared = Shared {
            queue: tx,
            seen: Mutex::new(Seen::default()),
            metrics,
        };
        (
            Self {
                shared: Some(Arc::new(shared)),
            },
            rx,
        )
    }

    /// Queues `notice` for delivery and returns at once. A notice of a kind already sent for
    /// the same request (uid) is dropped, so a caller may send on every reconcile that sees a
    /// state; a notice that finds the queue full is dead-lettered.
    pub fn send(&self, notice: Notice) {
        let Some(shared) = &self.shared else { return };
        let key = SeenKey::of(&notice.uid, notice.kind);
        // Held across the check and the enqueue, so that two reconciles sending the same
        // notice at once send it once.
        let mut seen = shared.seen.lock().expect("not poisoned");
        if seen.contains(&key) {
            return;
        }
        let queued = Queued {
            notice,
            time: Timestamp::now(),
        };
        match shared.queue.try_send(queued) {
            Ok(()) => seen.insert(key, Instant::now()),
            Err(error) => {
                let (reason, why, queued) = match error {
                    mpsc::error::TrySendError::Full(q) => (
                        "queue_full",
                        "the notification queue is full (sinks slow or down)",
                        q,
                    ),
                    mpsc::error::TrySendError::Closed(q) => {
                        ("stopped", "the notifier has stopped", q)
                    }
                };
                drop(seen);
                shared.metrics.dead_lettered(reason);
                let n = &queued.notice;
                delivery::dead_letter_line(
                    &format!("{}/{}", n.namespace, n.name),
                    &n.uid,
                    n.kind,
                    None,
                    reason,
                    why,
                );
            }
        }
    }
}

/// Looks up each notice's sinks, in the order sent, and queues it on their lanes.
async fn dispatch(
    mut queue: mpsc::Receiver<Queued>,
    resolver: SinkResolver,
    lanes: delivery::Lanes,
    metrics: NotifyMetrics,
) {
    while let Some(Queued { notice, time }) = queue.recv().await {
        let request = format!("{}/{}", notice.namespace, notice.name);
        let (sinks, refusals) = resolver.sinks_for(&notice).await;
        for refusal in refusals {
            metrics.dead_lettered("invalid_sink");
            delivery::dead_letter_line(
                &request,
                &notice.uid,
                notice.kind,
                Some(&refusal.secret),
                "invalid_sink",
                &refusal.to_string(),
            );
        }
        for sink in sinks {
            let delivery = delivery::Delivery {
                kind: notice.kind,
                request: request.clone(),
                uid: notice.uid.clone(),
                secret: sink.secret.clone(),
                payload: payload::payload(&notice, sink.format, time),
            };
            lanes.push(&sink, delivery);
        }
    }
}

#[cfg(test)]
mod tests;
