//! What every reconcile shares.

use std::sync::Arc;

use kube::{
    Client,
    runtime::events::{Recorder, Reporter},
};

use crate::{metrics::Metrics, notify::Notifier, own_writes::OwnWrites};

/// Operator-wide settings the reconcilers follow.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long an expired request is kept (phase Expired, access revoked) before it is deleted;
    /// zero deletes it at expiry, as Oz does.
    pub history_retention: std::time::Duration,
    /// How many requests of one kind are reconciled at once. Bounded so that a start-up with
    /// thousands of grants neither floods the apiserver nor holds thousands of responses in
    /// memory; revocation does not wait on it (see `controllers::request::timers`).
    pub max_concurrent_reconciles: u16,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            history_retention: std::time::Duration::from_secs(7 * 24 * 3600),
            max_concurrent_reconciles: 16,
        }
    }
}

/// Shared by every reconcile.
#[derive(Clone)]
pub struct Context {
    /// The client reconciles read and write with.
    pub client: Client,
    /// Publishes Kubernetes Events about the objects oz acts on.
    pub recorder: Recorder,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Operator-wide settings.
    pub settings: Settings,
    /// Sends news of requests to their sinks.
    pub notifier: Notifier,
    /// oz's writes to grants' objects whose watch events have not come back yet.
    pub own_writes: OwnWrites,
}

impl Context {
    pub fn new(client: Client, metrics: Arc<Metrics>, settings: Settings) -> Self {
        let reporter = Reporter {
            controller: "oz".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            settings,
            notifier: Notifier::disabled(),
            own_writes: OwnWrites::default(),
        }
    }
}
