//! [`WebhookMetrics`]: what the webhook server counts. oz-manager registers them with its own
//! metrics ([`WebhookMetrics::register`]), so they are served on its `/metrics` endpoint.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request, State},
    middleware::Next,
    response::Response,
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};

use oz_audit::LogCounters;
use oz_platform::{
    ServerMetrics,
    callers::{NAME_NOT_ALLOWED, NO_CERTIFICATE, UNTRUSTED_CERTIFICATE},
    metrics::RefusedLabels,
    registration::{
        AUDIT_PATH, MUTATE_APPROVALS_PATH, MUTATE_REQUESTS_PATH, VALIDATE_APPROVALS_PATH,
        VALIDATE_REQUESTS_PATH, VALIDATE_TEMPLATES_PATH,
    },
};

/// Why an audit Event on a pod was not published.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DroppedLabels {
    /// One of [`AUDIT_EVENT_DROP_REASONS`].
    pub reason: &'static str,
}

/// The webhook path a call was made to, e.g. `/audit`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PathLabels {
    pub path: String,
}

/// Audit Events dropped because more were asked for than the Events' rate limit allows.
pub const RATE_LIMITED: &str = "rate_limited";
/// Audit Events dropped because the queue of Events waiting to be published was full.
pub const QUEUE_FULL: &str = "queue_full";
/// Audit Events the apiserver did not take (the pod GET or the Event write failed).
pub const PUBLISH_FAILED: &str = "publish_failed";
/// Every reason an audit Event is dropped, each exported from the start at 0, so the first drop
/// shows as an increase rather than as a new series.
pub const AUDIT_EVENT_DROP_REASONS: [&str; 3] = [RATE_LIMITED, QUEUE_FULL, PUBLISH_FAILED];

/// The paths the apiserver calls, each exported from the start.
const WEBHOOK_PATHS: [&str; 6] = [
    MUTATE_REQUESTS_PATH,
    VALIDATE_REQUESTS_PATH,
    MUTATE_APPROVALS_PATH,
    VALIDATE_APPROVALS_PATH,
    AUDIT_PATH,
    VALIDATE_TEMPLATES_PATH,
];

/// The webhook server's metrics. Cloning shares them.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    /// The server layer's: refused callers, the served certificate's expiry.
    pub server: ServerMetrics,
    /// Audit records appended to the audit file.
    pub audit_records_written: Counter,
    /// Audit records that could not be appended to the audit file; each is in the JSON log.
    pub audit_records_unwritten: Counter,
    /// Audit Events on pods not published, by why (their audit records were written).
    pub audit_events_dropped: Family<DroppedLabels, Counter>,
    /// Audit Events not published because the same user did the same to the same pod more
    /// often than its own limit allows: each is counted in the note of that access's next
    /// Event (not a drop: nothing to warn about).
    pub audit_events_folded: Counter,
    /// Seconds from a webhook call's arrival to its answer, by path.
    pub request_duration: Family<PathLabels, Histogram>,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        Self {
            server: ServerMetrics::default(),
            audit_records_written: Counter::default(),
            audit_records_unwritten: Counter::default(),
            audit_events_dropped: Family::default(),
            audit_events_folded: Counter::default(),
            // 0.25 ms .. ~4 s: from well under the audit webhook's usual answer
            // (docs/benchmarks.md) to near the 10 s after which the apiserver gives up.
            request_duration: Family::new_with_constructor(|| {
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.00025, 2.0, 15,
                ))
            }),
        }
    }
}

impl WebhookMetrics {
    /// Registers every metric in `registry` (under its prefix, `oz_` in oz-manager).
    pub fn register(&self, registry: &mut Registry) {
        for reason in [NO_CERTIFICATE, UNTRUSTED_CERTIFICATE, NAME_NOT_ALLOWED] {
            let _ = self
                .server
                .refused_callers
                .get_or_create(&RefusedLabels { reason });
        }
        registry.register(
            "webhook_refused_callers",
            "Webhook calls refused because the caller is not the apiserver",
            self.server.refused_callers.clone(),
        );
        registry.register(
            "audit_records_written",
            "Audit records appended to the audit file",
            self.audit_records_written.clone(),
        );
        registry.register(
            "audit_records_unwritten",
            "Audit records that could not be appended to the audit file (each is in the JSON log)",
            self.audit_records_unwritten.clone(),
        );
        for reason in AUDIT_EVENT_DROP_REASONS {
            let _ = self
                .audit_events_dropped
                .get_or_create(&DroppedLabels { reason });
        }
        registry.register(
            "audit_events_dropped",
            "Audit Events on pods not published, by reason (their audit records were written)",
            self.audit_events_dropped.clone(),
        );
        registry.register(
            "audit_events_folded",
            "Audit Events not published because one user repeated one action on one pod past its own limit; each is counted in that access's next Event",
            self.audit_events_folded.clone(),
        );
        registry.register(
            "webhook_certificate_expiry_timestamp_seconds",
            "When the webhook serving certificate being served expires (Unix time; 0 until one is served)",
            self.server.certificate_expiry.clone(),
        );
        for path in WEBHOOK_PATHS {
            let _ = self
                .request_duration
                .get_or_create(&PathLabels { path: path.into() });
        }
        registry.register(
            "webhook_request_duration_seconds",
            "Seconds from a webhook call's arrival to its answer, by path",
            self.request_duration.clone(),
        );
    }

    /// Counts an audit Event dropped for `reason` (one of [`AUDIT_EVENT_DROP_REASONS`]).
    pub fn audit_event_dropped(&self, reason: &'static str) {
        self.audit_events_dropped
            .get_or_create(&DroppedLabels { reason })
            .inc();
    }

    /// The audit log's counters (its Event on an unwritable file is added by the caller).
    pub fn audit_log_counters(&self) -> LogCounters {
        LogCounters {
            written: self.audit_records_written.clone(),
            unwritten: self.audit_records_unwritten.clone(),
            on_unwritable: None,
        }
    }
}

/// Middleware: observes how long each call to a webhook path took, refusals included.
pub async fn measure(
    State(metrics): State<WebhookMetrics>,
    path: MatchedPath,
    request: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let response = next.run(request).await;
    metrics
        .request_duration
        .get_or_create(&PathLabels {
            path: path.as_str().into(),
        })
        .observe(start.elapsed().as_secs_f64());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(metrics: &WebhookMetrics) -> String {
        let mut registry = Registry::with_prefix("oz");
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn every_drop_reason_and_webhook_path_is_exported_from_the_start() {
        let text = render(&WebhookMetrics::default());
        for reason in AUDIT_EVENT_DROP_REASONS {
            let sample = format!("oz_audit_events_dropped_total{{reason=\"{reason}\"}} 0");
            assert!(text.contains(&sample), "{sample} in\n{text}");
        }
        let sample = "oz_webhook_request_duration_seconds_count{path=\"/audit\"} 0";
        assert!(text.contains(sample), "{sample} in\n{text}");
        assert!(
            text.contains("oz_webhook_certificate_expiry_timestamp_seconds 0"),
            "{text}"
        );
    }

    #[test]
    fn drops_are_counted_by_reason() {
        let metrics = WebhookMetrics::default();
        metrics.audit_event_dropped(QUEUE_FULL);
        metrics.audit_event_dropped(QUEUE_FULL);
        metrics.audit_event_dropped(PUBLISH_FAILED);
        let text = render(&metrics);
        for sample in [
            "oz_audit_events_dropped_total{reason=\"queue_full\"} 2",
            "oz_audit_events_dropped_total{reason=\"publish_failed\"} 1",
            "oz_audit_events_dropped_total{reason=\"rate_limited\"} 0",
        ] {
            assert!(text.contains(sample), "{sample} in\n{text}");
        }
    }
}
