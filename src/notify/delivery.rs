//! Delivery: one ordered lane per sink, each a task that POSTs its notices one after another,
//! retrying with exponential backoff until a deadline, then writing one dead-letter line. A
//! slow or dead sink holds up only its own lane.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex},
    time::Duration,
};

use http::{Request, Uri, header};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};

use super::sink_addresses::{CheckedResolver, RefusedAddress, SinkNetworks};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use oz_api::SinkFormat;
use tokio::{sync::mpsc, time::Instant};

use super::{NoticeKind, metrics::NotifyMetrics, payload::Payload, sinks::Sink};

/// How long the pause before retry number `attempt` (from 0) is: `initial` doubled each time,
/// at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    pub fn delay(&self, attempt: u32) -> Duration {
        self.initial
            .checked_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(self.max)
            .min(self.max)
    }
}

/// How notices are delivered.
#[derive(Clone, Debug)]
pub struct DeliveryConfig {
    /// How long one POST may take.
    pub post_timeout: Duration,
    /// The networks a sink may be in besides public addresses ([`SinkNetworks`]).
    pub sink_networks: SinkNetworks,
    /// How long a notice is retried, from its first attempt, before it is dead-lettered.
    pub retry_for: Duration,
    pub backoff: Backoff,
    /// Notices waiting in one sink's lane; past that, new ones are dead-lettered.
    pub lane_capacity: usize,
    /// A lane idle this long stops (and is started again by its next notice).
    pub lane_idle: Duration,
}

/// One notice for one sink.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub kind: NoticeKind,
    /// `namespace/name` of the request.
    pub request: String,
    pub uid: String,
    /// `namespace/name` of the sink's Secret.
    pub secret: String,
    pub payload: Payload,
}

/// Why a POST failed. Its Display never contains the URL: hyper's errors can, so only their
/// class is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PostError {
    /// No connection (refused, DNS, TLS).
    Connect,
    /// No answer within the per-POST timeout.
    Timeout(Duration),
    /// Answered with a non-2xx status.
    Status(u16),
    /// Failed otherwise (connection reset mid-way...).
    Failed,
    /// The sink's address is of a kind oz does not post to (see [`SinkNetworks`]).
    AddressRefused(RefusedAddress),
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::Connect => write!(f, "could not connect to the sink"),
            PostError::Timeout(after) => write!(f, "the sink did not answer within {after:?}"),
            PostError::Status(code) => write!(f, "the sink answered HTTP {code}"),
            PostError::Failed => write!(f, "the POST failed"),
            PostError::AddressRefused(refused) => refused.fmt(f),
        }
    }
}

impl PostError {
    /// Whether a later attempt may succeed: a 4xx other than 408 and 429 will not.
    pub fn retryable(&self) -> bool {
        match self {
            PostError::Status(code) => matches!(code, 408 | 429 | 500..),
            PostError::AddressRefused(_) => false,
            _ => true,
        }
    }
}

type HttpClient = Client<HttpsConnector<HttpConnector<CheckedResolver>>, Full<Bytes>>;

/// A lane's identity: the sink's URL, and whether it takes Slack's format.
type LaneKey = (Uri, bool);

/// The HTTP client: https with the OS's root certificates, and plain http (sinks inside the
/// cluster, tests), connecting only to the addresses `networks` allows.
fn http_client(networks: SinkNetworks) -> HttpClient {
    let mut http = HttpConnector::new_with_resolver(CheckedResolver::new(networks));
    // https is the https connector's to say, not this one's.
    http.enforce_http(false);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let connector = match HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider.clone())
    {
        Ok(builder) => builder
            .https_or_http()
            .enable_http1()
            .wrap_connector(http.clone()),
        Err(error) => {
            tracing::warn!(target: "oz::notify", %error, "no OS root certificates: notification sinks over https will fail");
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            HttpsConnectorBuilder::new()
                .with_tls_config(config)
                .https_or_http()
                .enable_http1()
                .wrap_connector(http)
        }
    };
    Client::builder(TokioExecutor::new()).build(connector)
}

/// The lanes, one per sink (URL and format), started on demand.
#[derive(Clone)]
pub struct Lanes {
    config: DeliveryConfig,
    client: HttpClient,
    metrics: NotifyMetrics,
    lanes: Arc<Mutex<HashMap<LaneKey, mpsc::Sender<Delivery>>>>,
}

impl Lanes {
    pub fn new(config: DeliveryConfig, metrics: NotifyMetrics) -> Self {
        Self {
            client: http_client(config.sink_networks),
            config,
            metrics,
            lanes: Arc::default(),
        }
    }

    /// How many lanes are running.
    pub fn running(&self) -> usize {
        let lanes = self.lanes.lock().expect("not poisoned");
        lanes.values().filter(|lane| !lane.is_closed()).count()
    }

    /// Queues `delivery` on `sink`'s lane, without waiting.
    pub fn push(&self, sink: &Sink, delivery: Delivery) {
        let key: LaneKey = (sink.url.clone(), sink.format == SinkFormat::Slack);
        let mut lanes = self.lanes.lock().expect("not poisoned");
        let lane = match lanes.get(&key) {
            Some(lane) if !lane.is_closed() => lane.clone(),
            _ => {
                // Lanes that stopped for idleness are forgotten here.
                lanes.retain(|_, lane| !lane.is_closed());
                let (tx, rx) = mpsc::channel(self.config.lane_capacity.max(1));
                tokio::spawn(self.clone().run_lane(sink.url.clone(), rx));
                lanes.insert(key, tx.clone());
                tx
            }
        };
        drop(lanes);
        if let Err(error) = lane.try_send(delivery) {
            let delivery = match error {
                mpsc::error::TrySendError::Full(d) | mpsc::error::TrySendError::Closed(d) => d,
            };
            self.dead_letter(
                &delivery,
                "lane_full",
                "the sink's queue is full (it is slow or down)",
            );
        }
    }

    async fn run_lane(self, url: Uri, mut rx: mpsc::Receiver<Delivery>) {
        loop {
            match tokio::time::timeout(self.config.lane_idle, rx.recv()).await {
                Ok(Some(delivery)) => self.deliver(&url, delivery).await,
                Ok(None) => return,
                Err(_idle) => {
                    // Whatever was queued before the close is still delivered.
                    rx.close();
                    while let Some(delivery) = rx.recv().await {
                        self.deliver(&url, delivery).await;
                    }
                    return;
                }
            }
        }
    }

    /// POSTs until the sink takes it, it refuses it for good, or `retry_for` has passed.
    async fn deliver(&self, url: &Uri, delivery: Delivery) {
        let deadline = Instant::now() + self.config.retry_for;
        let mut attempt = 0;
        loop {
            let error = match self.post(url, &delivery.payload).await {
                Ok(()) => {
                    self.metrics.sent(delivery.kind);
                    tracing::debug!(target: "oz::notify", request = delivery.request, notice = delivery.kind.suffix(), sink = delivery.secret, attempts = attempt + 1, "notification delivered");
                    return;
                }
                Err(error) => error,
            };
            if !error.retryable() {
                return self.dead_letter(&delivery, "rejected", &error.to_string());
            }
            let pause = self.config.backoff.delay(attempt);
            if Instant::now() + pause > deadline {
                let why = format!(
                    "{error}, still after {} attempts over {:?}",
                    attempt + 1,
                    self.config.retry_for
                );
                return self.dead_letter(&delivery, "gave_up", &why);
            }
            tracing::debug!(target: "oz::notify", request = delivery.request, notice = delivery.kind.suffix(), sink = delivery.secret, %error, ?pause, "notification not delivered yet: retrying");
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    async fn post(&self, url: &Uri, payload: &Payload) -> Result<(), PostError> {
        // A literal address never reaches the resolver, which checks names.
        let literal = url
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']'));
        if let Some(kind) = literal
            .and_then(|h| h.parse::<std::net::IpAddr>().ok())
            .and_then(|ip| self.config.sink_networks.refuses(ip))
        {
            return Err(PostError::AddressRefused(RefusedAddress(kind)));
        }
        let request = Request::post(url.clone())
            .header(header::CONTENT_TYPE, payload.content_type)
            .header(header::USER_AGENT, "oz-notifier")
            .body(Full::new(Bytes::from(payload.body.clone())))
            .map_err(|_| PostError::Failed)?;
        let timeout = self.config.post_timeout;
        match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => Err(PostError::Timeout(timeout)),
            Ok(Err(error)) if error.is_connect() => Err(RefusedAddress::behind(&error)
                .map_or(PostError::Connect, PostError::AddressRefused)),
            Ok(Err(_)) => Err(PostError::Failed),
            Ok(Ok(response)) if response.status().is_success() => Ok(()),
            Ok(Ok(response)) => Err(PostError::Status(response.status().as_u16())),
        }
    }

    fn dead_letter(&self, delivery: &Delivery, reason: &'static str, why: &str) {
        self.metrics.dead_lettered(reason);
        dead_letter_line(
            &delivery.request,
            &delivery.uid,
            delivery.kind,
            Some(&delivery.secret),
            reason,
            why,
        );
    }
}

/// The one line that says a notice was given up on: which request, which notice, which sink
/// (by its Secret), why; never the sink's URL.
pub fn dead_letter_line(
    request: &str,
    uid: &str,
    kind: NoticeKind,
    secret: Option<&str>,
    reason: &'static str,
    why: &str,
) {
    tracing::warn!(
        target: "oz::notify",
        request,
        uid,
        notice = kind.suffix(),
        sink = secret.unwrap_or("-"),
        reason,
        "notification dead-lettered: {why}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_its_start_up_to_its_cap() {
        let backoff = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
        };
        let delays: Vec<u64> = (0..9).map(|a| backoff.delay(a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(60));
        assert_eq!(backoff.delay(40), Duration::from_secs(60));
    }

    #[test]
    fn the_default_schedule_keeps_retrying_for_at_least_five_minutes() {
        let config = super::super::NotifierConfig::default();
        assert!(config.delivery.retry_for >= Duration::from_secs(300));
        // The sum of the pauses that fit in retry_for: the last attempt is within one max
        // pause of the deadline.
        let (mut waited, mut attempt) = (Duration::ZERO, 0);
        while waited + config.delivery.backoff.delay(attempt) <= config.delivery.retry_for {
            waited += config.delivery.backoff.delay(attempt);
            attempt += 1;
        }
        assert!(waited + config.delivery.backoff.max >= config.delivery.retry_for);
        assert!(attempt >= 10, "{attempt} attempts");
    }

    #[test]
    fn only_lasting_refusals_are_not_retried() {
        for code in [400, 401, 403, 404, 410, 422] {
            assert!(!PostError::Status(code).retryable(), "{code}");
        }
        for code in [408, 429, 500, 502, 503, 504] {
            assert!(PostError::Status(code).retryable(), "{code}");
        }
        assert!(PostError::Connect.retryable());
        assert!(PostError::Timeout(Duration::from_secs(1)).retryable());
    }
}
