//! [`SessionServer`]: the TLS listener of the aggregated sessions API. It serves oz's webhook
//! certificate (kept current by the webhook server), verifies the apiserver's front-proxy
//! certificate in the handshake, and routes:
//!
//! - discovery ([`crate::discovery`]), to the apiserver alone (a verified front-proxy
//!   certificate), with or without a user;
//! - under `/apis/sessions.wizardofoz.co/v1alpha1`, the session routes it is given, only with
//!   an [`Identity`](crate::Identity) in the request's extensions;
//! - anything else: a 404 Status.

use std::{io, net::SocketAddr, sync::Arc, time::Duration};

use axum::{Router, http::StatusCode, middleware};
use oz_platform::tls::{SwappableCert, TlsServer};
use tracing::info;

use crate::{
    discovery,
    front_proxy::{self, FrontProxy},
    kube_status,
};

/// The running sessions API server; dropping it leaves it running, [`SessionServer::shutdown`]
/// stops it.
#[derive(Debug)]
pub struct SessionServer {
    tls: TlsServer,
}

/// The whole application: discovery and the guarded `routes`, all behind the front-proxy
/// check. What [`SessionServer::start`] serves; a test may drive it with `oneshot`.
pub fn app(front_proxy: Arc<FrontProxy>, routes: Router) -> Router {
    let guarded = routes.layer(middleware::from_fn_with_state(
        front_proxy.clone(),
        front_proxy::require_identity,
    ));
    discovery::router()
        .nest(&discovery::group_version_path(), guarded)
        .fallback(|| async {
            kube_status::failure(
                StatusCode::NOT_FOUND,
                "the server could not find the requested resource",
            )
        })
        .layer(middleware::from_fn_with_state(
            front_proxy,
            front_proxy::guard,
        ))
}

impl SessionServer {
    /// Serves [`app`] over TLS on `listener` with `certificate`, verifying client certificates
    /// against `front_proxy`'s CA (another CA's certificate fails the handshake).
    pub async fn start(
        listener: std::net::TcpListener,
        certificate: Arc<SwappableCert>,
        front_proxy: Arc<FrontProxy>,
        routes: Router,
    ) -> io::Result<Self> {
        let verifier = front_proxy.verifier();
        let tls = TlsServer::start_verifying(
            listener,
            app(front_proxy, routes),
            certificate,
            Some(verifier),
        )
        .await?;
        info!(address = %tls.local_addr, "sessions API listening");
        Ok(Self { tls })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.tls.local_addr
    }

    /// Stops accepting connections, lets open ones finish for up to `grace`, then stops. Open
    /// sessions are the broker's to close first (`Broker::shutdown`).
    pub async fn shutdown(self, grace: Duration) -> io::Result<()> {
        self.tls.shutdown(grace).await
    }
}
