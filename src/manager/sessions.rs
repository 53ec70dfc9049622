//! The sessions API in oz-manager (`--controllers` with `sessions`): on every replica, leader
//! or not, a TLS listener of its own that serves the webhook server's certificate, admits only
//! the kube-apiserver (its front-proxy certificate, from
//! `kube-system/extension-apiserver-authentication`), and routes brokered exec/attach and
//! recordings. The leader registers the APIService with the webhook configurations
//! (`oz_webhooks::Registration::sessions`) and keeps its `caBundle` current with theirs.

use std::{net::SocketAddr, time::Duration};

use axum::{Router, http::StatusCode};
use kube::Client;
use oz_sessions::{
    SessionServer,
    front_proxy::{FrontProxy, Refusals, status_response},
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
}

/// What the sessions API counts, registered with oz-manager's metrics.
#[derive(Clone, Debug, Default)]
pub struct SessionsMetrics {
    /// `oz_sessions_refused_total{reason}`.
    pub refused: Refusals,
}

impl SessionsMetrics {
    /// Registers every metric in `registry` (prefix `oz_`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "sessions_refused",
            "Calls to the sessions API refused, by reason",
            self.refused.clone(),
        );
    }
}

/// The running sessions API.
pub struct Sessions {
    server: SessionServer,
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
        let front_proxy = FrontProxy::load(client.clone(), metrics.refused.clone())
            .await
            .map_err(|e| format!("cannot start the sessions API: {e}"))?;
        let front_proxy_watch = front_proxy.keep_current(client.clone());

        // ---- LEAD: construct the broker and the recordings here ----
        // let recordings = Recordings::open(&settings.recordings)?;
        // let broker = Broker::start(client, BrokerConfig { recordings: recordings.clone(),
        //     audit_log: webhooks.audit_log(), .. });
        // let routes = broker.router().merge(recording::router(recordings));
        // (and keep `broker` in `Sessions`, for `Broker::shutdown` in `Sessions::shutdown`).
        let _ = (&settings.recordings, webhooks.audit_log());
        let routes = unavailable_routes();
        // ---- end LEAD ----

        let listener = std::net::TcpListener::bind(settings.listen)
            .map_err(|e| format!("cannot listen on {} for sessions: {e}", settings.listen))?;
        let server = SessionServer::start(listener, webhooks.certificate(), front_proxy, routes)
            .await
            .map_err(|e| format!("cannot start the sessions API: {e}"))?;
        tracing::info!(addr = %server.local_addr(), "serving the sessions API");
        Ok(Self {
            server,
            front_proxy_watch,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Stops serving, letting open connections finish for up to `grace`.
    pub async fn shutdown(self, grace: Duration) {
        // LEAD: `broker.shutdown()` first, so every session is closed with ServerShutdown.
        let _ = self.server.shutdown(grace).await;
        self.front_proxy_watch.abort();
    }
}

/// Until the broker is wired in: every session route answers 503.
fn unavailable_routes() -> Router {
    Router::new().fallback(|| async {
        status_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "oz's session broker is not running in this build",
        )
    })
}
