//! What the broker and each of its sessions share: the client that opens the pods' streams,
//! the configuration, the grant cache, and the count of open sessions. The broker's routes are
//! in `mod.rs`, a session's life in `session.rs`; both read this.

use std::sync::{Arc, Mutex};

use kube::Client;
use oz_audit::AuditLog;
use tokio::{sync::watch, task::JoinHandle};

use crate::{grants::RequestTemplateCache, metrics::SessionMetrics, recording::Recordings};

/// What the broker needs.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Where sessions are recorded.
    pub recordings: Recordings,
    /// Where `session-start` and `session-end` records go (the webhooks' audit log).
    pub audit_log: AuditLog,
    /// The namespaces whose grants are watched; empty: all.
    pub watch_namespaces: Vec<String>,
    /// This replica's name (its pod name, else its host name), in each session's records.
    pub replica: String,
    /// What the broker counts.
    pub metrics: SessionMetrics,
}

/// The broker. Cloning shares it.
#[derive(Clone)]
pub struct Broker {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) config: BrokerConfig,
    pub(super) grants: RequestTemplateCache,
    pub(super) watches: Mutex<Vec<JoinHandle<()>>>,
    /// Set once, by `Broker::shutdown`.
    pub(super) shutdown: watch::Sender<bool>,
    /// Sessions open now.
    pub(super) open: watch::Sender<usize>,
}
