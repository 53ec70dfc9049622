//! [`SessionMetrics`]: what the broker counts. oz-manager registers them with its own registry
//! ([`SessionMetrics::register`]), so they are served on its `/metrics` endpoint.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// `stream`: `exec` or `attach`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabels {
    /// `exec` or `attach`.
    pub stream: &'static str,
}

/// `reason`: why a session ended ([`oz_api::SessionEndReason::label`]) or was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The reason, in snake case.
    pub reason: &'static str,
}

/// `direction`: `input` (the user's stdin and resizes, to the pod) or `output` (stdout,
/// stderr and status, to the user).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `input` or `output`.
    pub direction: &'static str,
}

/// The broker's metrics. Cloning shares them.
#[derive(Clone, Debug)]
pub struct SessionMetrics {
    /// Sessions open now on this replica.
    pub open: Gauge,
    /// Sessions opened, by stream.
    pub total: Family<StreamLabels, Counter>,
    /// Sessions ended, by reason.
    pub ended: Family<ReasonLabels, Counter>,
    /// For sessions closed because the grant expired: seconds from `expiresAt` to closed.
    pub close_lag: Histogram,
    /// Payload bytes piped, by direction.
    pub bytes: Family<DirectionLabels, Counter>,
    /// Recording storage errors (counted by the recording store).
    pub recording_errors: Counter,
    /// Session requests refused, by reason (`no_grant`, `no_identity`, `bad_request`,
    /// `upstream`, and the front door's `no_certificate`, `name_not_allowed`).
    pub refused: crate::front_proxy::Refusals,
}

impl Default for SessionMetrics {
    fn default() -> Self {
        Self {
            open: Gauge::default(),
            total: Family::default(),
            ended: Family::default(),
            // 10 ms .. ~41 s: a close within the 2 s oz allows itself lands in the low buckets.
            close_lag: Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.01, 2.0, 13,
            )),
            bytes: Family::default(),
            recording_errors: Counter::default(),
            refused: Family::default(),
        }
    }
}

impl SessionMetrics {
    /// Registers every metric in `registry` (under its prefix, `oz_` in oz-manager).
    pub fn register(&self, registry: &mut Registry) {
        self.export_every_label();
        registry.register(
            "sessions_open",
            "Brokered sessions open on this replica",
            self.open.clone(),
        );
        registry.register(
            "sessions",
            "Brokered sessions opened, by stream",
            self.total.clone(),
        );
        registry.register(
            "sessions_ended",
            "Brokered sessions ended, by reason",
            self.ended.clone(),
        );
        registry.register(
            "session_close_lag_seconds",
            "Seconds from a grant's expiresAt to its sessions being closed",
            self.close_lag.clone(),
        );
        registry.register(
            "session_bytes",
            "Bytes piped through brokered sessions, by direction",
            self.bytes.clone(),
        );
        registry.register(
            "session_recording_errors",
            "Errors storing session recordings, and pieces of output not recorded for a slow store",
            self.recording_errors.clone(),
        );
        registry.register(
            "sessions_refused",
            "Brokered session requests refused, by reason",
            self.refused.clone(),
        );
    }

    /// Creates every stream's, end reason's and refusal's series at 0, so each family has
    /// samples from the start (a rule's `rate` misses a series' first event, and a dashboard
    /// shows "no data" rather than 0).
    fn export_every_label(&self) {
        for stream in ["exec", "attach"] {
            let _ = self.total.get_or_create(&StreamLabels { stream });
        }
        for reason in oz_api::SessionEndReason::ALL {
            let _ = self.ended.get_or_create(&ReasonLabels {
                reason: reason.label(),
            });
        }
        for reason in [
            "no_grant",
            "no_identity",
            "bad_request",
            "upstream",
            crate::front_proxy::NO_CERTIFICATE,
            crate::front_proxy::NAME_NOT_ALLOWED,
            crate::front_proxy::UNTRUSTED_CERTIFICATE,
            crate::front_proxy::NO_USER,
        ] {
            let _ = self
                .refused
                .get_or_create(&oz_platform::metrics::RefusedLabels { reason });
        }
    }

    /// Counts a refused session request.
    pub fn refuse(&self, reason: &'static str) {
        self.refused
            .get_or_create(&oz_platform::metrics::RefusedLabels { reason })
            .inc();
    }

    /// Counts `n` bytes in `direction`.
    pub fn piped(&self, direction: &'static str, n: usize) {
        self.bytes
            .get_or_create(&DirectionLabels { direction })
            .inc_by(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_those_of_the_design() {
        let metrics = SessionMetrics::default();
        metrics.refuse("no_grant");
        metrics.piped("input", 3);
        metrics
            .total
            .get_or_create(&StreamLabels { stream: "exec" })
            .inc();
        metrics
            .ended
            .get_or_create(&ReasonLabels { reason: "expired" })
            .inc();
        metrics.close_lag.observe(0.2);
        let mut registry = Registry::with_prefix("oz");
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "oz_sessions_open ",
            "oz_sessions_total{stream=\"exec\"} 1",
            "oz_sessions_ended_total{reason=\"expired\"} 1",
            "oz_session_close_lag_seconds_count 1",
            "oz_session_bytes_total{direction=\"input\"} 3",
            "oz_session_recording_errors_total 0",
            "oz_sessions_refused_total{reason=\"no_grant\"} 1",
            "oz_sessions_total{stream=\"attach\"} 0",
            "oz_sessions_ended_total{reason=\"idle_timeout\"} 0",
            "oz_sessions_refused_total{reason=\"upstream\"} 0",
        ] {
            assert!(text.contains(name), "{name} in\n{text}");
        }
    }
}
