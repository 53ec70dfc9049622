//! What every reconcile shares.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, Recorder, Reporter},
};

use crate::{
    cache::echoes::Echoes, manager::start_gate::RequestLists, metrics::Metrics, notify::Notifier,
};

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
    /// Who oz's Kubernetes Events say reported them.
    reporter: Reporter,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Operator-wide settings.
    pub settings: Settings,
    /// Sends news of requests to their sinks.
    pub notifier: Notifier,
    /// oz's writes to grants' objects whose watch events have not come back yet.
    pub echoes: Echoes,
    /// How many request controllers have listed their requests: what the webhooks' request
    /// cache waits for at start-up.
    pub request_lists: RequestLists,
    /// The fleet hub, when this oz is one (`--fleet-hub`): its request controllers forward
    /// fleet templates' requests to spokes.
    pub fleet: Option<std::sync::Arc<crate::fleet::FleetHub>>,
}

impl Context {
    pub fn new(client: Client, metrics: Arc<Metrics>, settings: Settings) -> Self {
        let reporter = Reporter {
            controller: "oz".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            reporter,
            client,
            metrics,
            settings,
            notifier: Notifier::disabled(),
            echoes: Echoes::default(),
            request_lists: RequestLists::default(),
            fleet: None,
        }
    }
}

impl Context {
    /// Publishes a Kubernetes Event about `regarding`, as a new Event. A Recorder per Event, as
    /// the webhooks do: a shared one keeps every Event it published in the last 6 minutes
    /// (heap for every grant made in that time, and a scan of them all on each publish) and folds an Event with the same reason and object into a series that keeps the first
    /// note. oz's Events mark changes of state, each worth its own line.
    pub async fn publish_event(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> kube::Result<()> {
        Recorder::new(self.client.clone(), self.reporter.clone())
            .publish(event, regarding)
            .await
    }
}
