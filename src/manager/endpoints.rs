//! The health and metrics endpoints: `/healthz` (alive), `/readyz` (serving, with detail such as
//! namespaces oz cannot read) and `/metrics` (Prometheus text).

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{Router, extract::State, http::StatusCode, routing::get};

use super::shutdown::Shutdown;
use crate::metrics::Metrics;

/// What the health endpoints report.
#[derive(Debug, Default)]
pub struct Health {
    serving: AtomicBool,
    leader: AtomicBool,
    /// Namespaces oz cannot read or write as it needs, with why.
    problems: RwLock<BTreeMap<String, String>>,
}

impl Health {
    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::SeqCst);
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::SeqCst);
    }

    /// Records (or, with `None`, clears) a problem with a namespace.
    pub fn set_problem(&self, namespace: &str, problem: Option<String>) {
        let mut problems = self.problems.write().unwrap();
        match problem {
            Some(p) => problems.insert(namespace.into(), p),
            None => problems.remove(namespace),
        };
    }

    /// The readiness report: ready once serving; the detail lists any namespace problems, which
    /// do not make the replica unready (it still serves webhooks and the other namespaces).
    pub fn readiness(&self) -> (bool, String) {
        let serving = self.serving.load(Ordering::SeqCst);
        let mut text = format!(
            "{}\nleader: {}\n",
            if serving { "ok" } else { "starting" },
            self.leader.load(Ordering::SeqCst)
        );
        for (namespace, problem) in self.problems.read().unwrap().iter() {
            text.push_str(&format!("namespace {namespace}: {problem}\n"));
        }
        (serving, text)
    }
}

/// Serves `/healthz` and `/readyz` on `addr` in the background.
pub async fn serve_health(
    addr: SocketAddr,
    health: Arc<Health>,
    shutdown: Shutdown,
) -> Result<(), String> {
    let router = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(health);
    serve(addr, router, shutdown, "health probes").await
}

async fn readyz(State(health): State<Arc<Health>>) -> (StatusCode, String) {
    let (ready, text) = health.readiness();
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        text,
    )
}

/// Serves `/metrics` on `addr` in the background.
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
) -> Result<(), String> {
    let router = Router::new().route(
        "/metrics",
        get(|State(metrics): State<Arc<Metrics>>| async move {
            (
                [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                metrics.render(),
            )
        }),
    );
    serve(addr, router.with_state(metrics), shutdown, "metrics").await
}

async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: Shutdown,
    what: &str,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot serve {what} on {addr}: {e}"))?;
    tracing::info!(%addr, "serving {what}");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
    });
    Ok(())
}
