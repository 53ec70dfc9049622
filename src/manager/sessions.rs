//! The sessions API in oz-manager (`--controllers` with `sessions`): on every replica, leader
//! or not, a TLS listener of its own that serves the webhook server's certificate, admits only
//! the kube-apiserver (its front-proxy certificate, from
//! `kube-system/extension-apiserver-authentication`), and routes brokered exec/attach and
//! recordings. The leader registers the APIService with the webhook configurations
//! (`oz_webhooks::Registration::sessions`) and keeps its `caBundle` current with theirs.

use std::{net::SocketAddr, time::Duration};

use kube::Client;
use oz_sessions::{
    Broker, BrokerConfig, SessionMetrics, SessionServer,
    front_proxy::FrontProxy,
    recording::{self, Recordings, limits::RecordingLimits},
};
use oz_webhooks::WebhookServer;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;

/// What the sessions API was asked to run with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionsSettings {
    /// Where it listens (`--sessions-port`).
    pub listen: SocketAddr,
    /// Where recordings are stored (`--session-recordings`): a directory, `file:///DIR` or
    /// `s3://BUCKET/PREFIX`.
    pub recordings: String,
    /// `--session-recording-max-size` and `--session-recordings-max-total-size`.
    pub recording_limits: RecordingLimits,
    /// `--watch-namespaces`: where the broker looks for grants (empty: everywhere).
    pub watch_namespaces: Vec<String>,
    /// This replica's name, in recordings and audit records (as in leader election).
    pub replica: String,
}

/// What the sessions API counts (the front door's refusals included), registered with
/// oz-manager's metrics.
#[derive(Clone, Debug, Default)]
pub struct SessionsMetrics {
    /// `oz_sessions_*` and `oz_session_*`.
    pub sessions: SessionMetrics,
}

impl SessionsMetrics {
    /// Registers every metric in `registry` (prefix `oz_`).
    pub fn register(&self, registry: &mut Registry) {
        self.sessions.register(registry);
    }
}

/// The running sessions API.
pub struct Sessions {
    server: SessionServer,
    broker: Broker,
    front_proxy_watch: JoinHandle<()>,
}

impl Sessions {
    /// Reads the front-proxy settings (an error if the apiserver's aggregation layer is not
    /// configured), then serves on `settings.listen` with `webhooks`' certificate.
    pub async fn start(
        client: Client,
        settings: &SessionsSettings,
        webhooks: &WebhookServer,
        metrics: &SessionsMetrics,
    ) -> Result<Self, String> {
        let front_proxy = FrontProxy::load(client.clone(), metrics.sessions.refused.clone())
            .await
            .map_err(|e| format!("cannot start the sessions API: {e}"))?;
        let front_proxy_watch = front_proxy.keep_current(client.clone());

        let recordings = Recordings::open(&settings.recordings)
            .map_err(|e| format!("cannot start the sessions API: {e}"))?
            .with_limits(settings.recording_limits)
            .with_error_counter(metrics.sessions.recording_errors.clone());
        tracing::info!(
            store = recordings.location(),
            used_bytes = recordings.used_bytes(),
            max_session_bytes = settings.recording_limits.max_session_bytes,
            max_total_bytes = settings.recording_limits.max_total_bytes,
            "recording sessions"
        );
        let broker = Broker::start(
            client.clone(),
            BrokerConfig {
                recordings: recordings.clone(),
                audit_log: webhooks.audit_log(),
                watch_namespaces: settings.watch_namespaces.clone(),
                replica: settings.replica.clone(),
                metrics: metrics.sessions.clone(),
            },
        );
        let routes = broker.router().merge(recording::router(recordings));

        let listener = std::net::TcpListener::bind(settings.listen)
            .map_err(|e| format!("cannot listen on {} for sessions: {e}", settings.listen))?;
        let server = SessionServer::start(listener, webhooks.certificate(), front_proxy, routes)
            .await
            .map_err(|e| format!("cannot start the sessions API: {e}"))?;
        tracing::info!(addr = %server.local_addr(), "serving the sessions API");
        Ok(Self {
            server,
            broker,
            front_proxy_watch,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Stops serving, letting open connections finish for up to `grace`.
    pub async fn shutdown(self, grace: Duration) {
        // Every session first, closed with ServerShutdown and its recording finished.
        self.broker.shutdown().await;
        let _ = self.server.shutdown(grace).await;
        self.front_proxy_watch.abort();
    }
}
