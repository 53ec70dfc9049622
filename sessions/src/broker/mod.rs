//! The broker: serves `pods/exec` and `pods/attach` under `sessions.wizardofoz.co`, opens the
//! same stream to the pod with oz's own identity, pipes it both ways while recording it, and
//! closes it when the grant ends.
//!
//! - `frames.rs`: the channel protocol, as far as the tap needs it.
//! - `session.rs`: one open session: its timers and the close; `pipe.rs`: its two directions.
//! - The grant is chosen by [`crate::grants`], the close decided by [`crate::closing`],
//!   recorded by [`crate::status`] and [`crate::audit`], counted by [`crate::metrics`].

pub mod frames;
mod pipe;
mod session;
mod state;
mod streams;

use state::Inner;
pub use state::{Broker, BrokerConfig};

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Extension, Router,
    extract::{
        Path, RawQuery, State,
        ws::{WebSocketUpgrade, rejection::WebSocketUpgradeRejection},
    },
    http::{HeaderMap, StatusCode, header::SEC_WEBSOCKET_PROTOCOL},
    response::Response,
    routing::get,
};
use chrono::Utc;
use kube::Client;
use oz_api::SessionStream;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    GrantRef, Identity, SessionInfo,
    grants::{Grant, RequestTemplateCache, choose_grant},
    kube_status, new_session_id,
};

/// How long a session request waits for the grant cache to list, or to see a grant it does
/// not have yet (a request that just became Ready).
const GRANT_WAIT: Duration = Duration::from_secs(5);

/// How long [`Broker::shutdown`] waits for open sessions to finish closing.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// The largest websocket message (and frame) a client may send: kubectl sends stdin in chunks
/// far smaller. The websocket library's defaults (64 MiB a message, 16 MiB a frame) let one
/// client make a replica hold hundreds of MiB while the input is copied and recorded, enough
/// to get the pod, and with it the fail-closed webhooks and every session on it, OOM-killed.
pub const MAX_CLIENT_MESSAGE_BYTES: usize = 1 << 20;

impl Broker {
    /// Starts the broker's watches of requests and templates (in `config.watch_namespaces`),
    /// with `client` (oz's own identity, which also opens the streams to the pods).
    pub fn start(client: Client, config: BrokerConfig) -> Broker {
        let (grants, watches) = RequestTemplateCache::start(&client, &config.watch_namespaces);
        Broker {
            inner: Arc::new(Inner {
                client,
                config,
                grants,
                watches: Mutex::new(watches),
                shutdown: watch::channel(false).0,
                open: watch::channel(0).0,
            }),
        }
    }

    /// The routes `/namespaces/{namespace}/pods/{pod}/exec` and `/attach` (websocket
    /// upgrades). Each request must carry an [`Identity`] extension (the front door's, after
    /// it verified the caller): without one it is refused with 401.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/namespaces/{namespace}/pods/{pod}/{subresource}",
                get(open),
            )
            .with_state(self.clone())
    }

    /// How many sessions are open on this broker.
    pub fn open_sessions(&self) -> usize {
        *self.inner.open.borrow()
    }

    /// Closes every open session with `ServerShutdown` (each user told, each recording
    /// finished, each status and audit record written), waits for them (at most 10 s), and
    /// stops the watches. New sessions are refused from now on (503).
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
        let mut open = self.inner.open.subscribe();
        if tokio::time::timeout(SHUTDOWN_WAIT, open.wait_for(|n| *n == 0))
            .await
            .is_err()
        {
            warn!(
                open = *open.borrow(),
                "sessions still closing after {SHUTDOWN_WAIT:?}"
            );
        }
        for task in self
            .inner
            .watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }

    /// The grant for `identity`'s `stream` into `pod`: from the cache, waiting a little for a
    /// grant it has not seen yet.
    async fn grant(
        &self,
        identity: &Identity,
        namespace: &str,
        pod: &str,
        stream: SessionStream,
    ) -> Option<Grant> {
        let grants = &self.inner.grants;
        let mut changes = grants.subscribe();
        let deadline = tokio::time::Instant::now() + GRANT_WAIT;
        let _ = tokio::time::timeout_at(deadline, grants.ready()).await;
        loop {
            let found = choose_grant(
                &grants.requests(namespace),
                |kind, name| grants.template(kind, namespace, name),
                identity,
                (namespace, pod),
                stream,
                (Utc::now(), &grants.locks()),
            );
            if found.is_some() {
                return found;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                _ => return None,
            }
        }
    }
}

/// The options of a `pods/exec` or `pods/attach` request, as core Kubernetes takes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// `command`, repeated (exec).
    pub command: Vec<String>,
    /// `container`.
    pub container: Option<String>,
    /// `stdin`.
    pub stdin: bool,
    /// `stdout`.
    pub stdout: bool,
    /// `stderr`.
    pub stderr: bool,
    /// `tty`.
    pub tty: bool,
}

impl StreamOptions {
    /// Reads a query string; unknown keys are dropped.
    pub fn parse(query: &str) -> Self {
        let mut options = Self::default();
        let flag = |v: &str| matches!(v, "true" | "1" | "True" | "TRUE");
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            match key.as_ref() {
                "command" => options.command.push(value.into_owned()),
                "container" => options.container = Some(value.into_owned()),
                "stdin" => options.stdin = flag(&value),
                "stdout" => options.stdout = flag(&value),
                "stderr" => options.stderr = flag(&value),
                "tty" => options.tty = flag(&value),
                _ => {}
            }
        }
        options
    }

    /// The query string oz sends to the pod: exactly these options, so what is audited is
    /// what runs.
    pub fn query(&self) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for word in &self.command {
            query.append_pair("command", word);
        }
        if let Some(container) = &self.container {
            query.append_pair("container", container);
        }
        for (key, on) in [
            ("stdin", self.stdin),
            ("stdout", self.stdout),
            ("stderr", self.stderr),
            ("tty", self.tty),
        ] {
            if on {
                query.append_pair(key, "true");
            }
        }
        query.finish()
    }
}

/// `pods/exec` and `pods/attach` (the streams a grant may broker); any other subresource is
/// not served.
async fn open(
    State(broker): State<Broker>,
    Path((namespace, pod, subresource)): Path<(String, String, String)>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let Some(stream) = SessionStream::of_subresource(&subresource) else {
        return kube_status::failure(
            StatusCode::NOT_FOUND,
            format!("oz serves pods/exec and pods/attach, not pods/{subresource}"),
        );
    };
    let metrics = &broker.inner.config.metrics;
    let Some(Extension(identity)) = identity else {
        metrics.refuse("no_identity");
        return kube_status::failure(StatusCode::UNAUTHORIZED, "the caller is not authenticated");
    };
    if *broker.inner.shutdown.borrow() {
        metrics.refuse("shutting_down");
        return kube_status::failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "this oz replica is shutting down; retry",
        );
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            metrics.refuse("bad_request");
            return kube_status::failure(
                StatusCode::BAD_REQUEST,
                format!("a websocket upgrade is required: {e}"),
            );
        }
    };
    let offered = headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let Some(protocol) = frames::choose_protocol(offered) else {
        metrics.refuse("bad_request");
        return kube_status::failure(
            StatusCode::BAD_REQUEST,
            format!(
                "offer one of the subprotocols {}",
                frames::PROTOCOLS.join(", ")
            ),
        );
    };
    let Some(grant) = broker.grant(&identity, &namespace, &pod, stream).await else {
        metrics.refuse("no_grant");
        let what = match stream {
            SessionStream::Exec => "exec into",
            SessionStream::Attach => "attach to",
        };
        return kube_status::failure(
            StatusCode::FORBIDDEN,
            format!(
                "user {:?} has no Ready brokered access request to {what} pod {namespace}/{pod}",
                identity.user
            ),
        );
    };
    let options = StreamOptions::parse(query.as_deref().unwrap_or_default());
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{namespace}/pods/{pod}/{subresource}?{}",
        options.query()
    ))
    .body(Vec::new())
    .expect("a valid path");
    let upstream = match broker.inner.client.connect(request).await {
        Ok(connection) => connection.into_stream(),
        Err(e) => {
            metrics.refuse("upstream");
            warn!(error = %e, %namespace, %pod, "could not open the stream to the pod");
            return match e {
                kube::Error::Api(s) => kube_status::passed_on(
                    StatusCode::from_u16(s.code).unwrap_or(StatusCode::BAD_GATEWAY),
                    &s.reason,
                    s.message,
                ),
                e => kube_status::failure(
                    StatusCode::BAD_GATEWAY,
                    format!("oz could not open the stream to the pod: {e}"),
                ),
            };
        }
    };
    let now = Utc::now();
    let info = SessionInfo {
        id: new_session_id(now),
        namespace: namespace.clone(),
        grant: GrantRef {
            kind: grant.request.summary.kind,
            name: grant.request.summary.name.clone(),
            uid: grant.request.uid.clone(),
            template: grant.request.summary.template.clone(),
        },
        user: identity.user.clone(),
        groups: identity.groups.clone(),
        stream,
        pod,
        container: options.container.clone(),
        command: options.command.clone(),
        tty: options.tty,
        started_at: now,
        replica: broker.inner.config.replica.clone(),
    };
    info!(session = %info.id, user = %info.user, %namespace, pod = %info.pod, grant = %info.grant.name, "session opening");
    let session = session::Session::new(broker.clone(), info, grant, options.stdin);
    ws.protocols([protocol])
        .max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .max_frame_size(MAX_CLIENT_MESSAGE_BYTES)
        .on_upgrade(move |socket| session.run(socket, upstream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_known_options_are_passed_on() {
        let options = StreamOptions::parse(
            "command=sh&command=-c&command=echo%20a%26b&container=web&stdin=true&stdout=1&tty=false&evil=x",
        );
        assert_eq!(options.command, ["sh", "-c", "echo a&b"]);
        assert_eq!(options.container.as_deref(), Some("web"));
        assert!(options.stdin && options.stdout && !options.stderr && !options.tty);
        assert_eq!(
            options.query(),
            "command=sh&command=-c&command=echo+a%26b&container=web&stdin=true&stdout=true"
        );
        assert_eq!(StreamOptions::parse(&options.query()), options);
    }
}
