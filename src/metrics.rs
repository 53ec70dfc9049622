//! oz's Prometheus metrics, and the one way each is recorded: the reconcilers and timers call
//! the methods below rather than building label sets by hand.

use std::time::Instant;

use oz_api::AccessKind;

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// `template` or `request`.
    pub controller: &'static str,
    /// The kind reconciled, e.g. `ExecAccessRequest`.
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: &'static str,
    pub kind: String,
    /// A short error class, see `Error::metric_label`.
    pub error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    pub namespace: String,
}

/// Every metric oz exports, registered in one registry.
pub struct Metrics {
    registry: Registry,
    /// Reconciles started, by controller and kind.
    pub reconciles: Family<ControllerLabels, Counter>,
    /// Reconciles that failed, by controller, kind and error class.
    pub errors: Family<ErrorLabels, Counter>,
    /// Seconds each reconcile took, by controller and kind.
    pub reconcile_duration: Family<ControllerLabels, Histogram>,
    /// Grants currently in force, by request kind.
    pub active_grants: Family<KindLabels, Gauge>,
    /// Seconds from a request's creation until it first became Ready.
    pub time_to_ready: Family<KindLabels, Histogram>,
    /// Seconds from a grant's expiresAt until its RoleBinding was deleted.
    pub revocation_lag: Family<KindLabels, Histogram>,
    /// Grants whose revocation is armed on a timer of its own, by request kind.
    pub expiry_timers: Family<KindLabels, Gauge>,
    /// Requests granted on a break-glass self-approval, by request kind.
    pub break_glass: Family<KindLabels, Counter>,
    /// 1 while oz lacks the permissions it needs in a watched namespace.
    pub namespace_access_denied: Family<NamespaceLabels, Gauge>,
    /// 1 while this replica leads (runs the controllers); always 1 without `--leader-elect`.
    pub leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("oz");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let reconcile_duration =
            Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
                Histogram::new([
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0, 60.0,
                ])
            });
        let active_grants = Family::<KindLabels, Gauge>::default();
        let expiry_timers = Family::<KindLabels, Gauge>::default();
        let time_to_ready = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0])
        });
        let revocation_lag = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 300.0,
            ])
        });
        registry.register("reconciles", "Reconciles started", reconciles.clone());
        registry.register("reconcile_errors", "Reconciles that failed", errors.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Seconds a reconcile took",
            reconcile_duration.clone(),
        );
        registry.register(
            "active_grants",
            "Grants currently in force",
            active_grants.clone(),
        );
        registry.register(
            "expiry_timers",
            "Grants whose revocation is armed on a timer of its own",
            expiry_timers.clone(),
        );
        registry.register(
            "time_to_ready_seconds",
            "Seconds from a request's creation until it became Ready",
            time_to_ready.clone(),
        );
        registry.register(
            "revocation_lag_seconds",
            "Seconds from a grant's expiresAt until its access was revoked",
            revocation_lag.clone(),
        );
        let break_glass = Family::<KindLabels, Counter>::default();
        registry.register(
            "break_glass",
            "Requests granted on a break-glass self-approval",
            break_glass.clone(),
        );
        let namespace_access_denied = Family::<NamespaceLabels, Gauge>::default();
        registry.register(
            "namespace_access_denied",
            "1 while oz lacks the permissions it needs in a watched namespace",
            namespace_access_denied.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica leads and runs the controllers",
            leader.clone(),
        );
        let metrics = Self {
            registry,
            leader,
            reconciles,
            errors,
            reconcile_duration,
            active_grants,
            expiry_timers,
            time_to_ready,
            revocation_lag,
            break_glass,
            namespace_access_denied,
        };
        metrics.export_every_kind();
        metrics
    }
}

impl Metrics {
    /// Creates the series of both kinds at zero, so each family has samples from the start: a
    /// rule over a series that appears only with its first event misses that event (`rate`
    /// and `increase` need two samples), and a dashboard shows "no data" rather than 0.
    fn export_every_kind(&self) {
        for kind in AccessKind::ALL {
            let request = kind_labels(kind.request_kind());
            let _ = self.active_grants.get_or_create(&request);
            let _ = self.expiry_timers.get_or_create(&request);
            let _ = self.time_to_ready.get_or_create(&request);
            let _ = self.revocation_lag.get_or_create(&request);
            let _ = self.break_glass.get_or_create(&request);
            for (controller, kind) in [
                ("template", kind.template_kind()),
                ("request", kind.request_kind()),
            ] {
                let labels = ControllerLabels {
                    controller,
                    kind: kind.into(),
                };
                let _ = self.reconciles.get_or_create(&labels);
                let _ = self.reconcile_duration.get_or_create(&labels);
                for error in crate::Error::METRIC_LABELS {
                    let _ = self.errors.get_or_create(&ErrorLabels {
                        controller,
                        kind: kind.into(),
                        error,
                    });
                }
            }
        }
    }

    /// The metrics in Prometheus' text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    /// The registry, for components that register metrics of their own.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Counts a reconcile of `kind` by `controller` as started, and measures it until the
    /// returned guard is dropped: hold it for the whole reconcile.
    pub fn count_and_measure(&self, controller: &'static str, kind: &str) -> ReconcileMeasurer {
        let labels = ControllerLabels {
            controller,
            kind: kind.into(),
        };
        self.reconciles.get_or_create(&labels).inc();
        ReconcileMeasurer {
            histogram: self.reconcile_duration.get_or_create(&labels).clone(),
            start: Instant::now(),
        }
    }

    /// Counts a failed reconcile of `kind` by `controller`, by its error class.
    pub fn reconcile_failed(&self, controller: &'static str, kind: &str, error: &'static str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller,
                kind: kind.into(),
                error,
            })
            .inc();
    }

    /// Records how long a request of `kind` took from creation to Ready.
    pub fn observe_time_to_ready(&self, kind: &str, seconds: f64) {
        self.time_to_ready
            .get_or_create(&kind_labels(kind))
            .observe(seconds);
    }

    /// Records how late past its `expiresAt` a grant of `kind` was revoked.
    pub fn observe_revocation_lag(&self, kind: &str, seconds: f64) {
        self.revocation_lag
            .get_or_create(&kind_labels(kind))
            .observe(seconds);
    }

    /// Counts a request of `kind` granted on a break-glass self-approval.
    pub fn count_break_glass(&self, kind: &str) {
        self.break_glass.get_or_create(&kind_labels(kind)).inc();
    }

    /// The gauge of the expiry timers armed for `kind`.
    pub fn expiry_timers_of(&self, kind: &str) -> Gauge {
        self.expiry_timers.get_or_create(&kind_labels(kind)).clone()
    }

    /// The gauge of the grants of `kind` in force.
    pub fn active_grants_of(&self, kind: &str) -> Gauge {
        self.active_grants.get_or_create(&kind_labels(kind)).clone()
    }
}

fn kind_labels(kind: &str) -> KindLabels {
    KindLabels { kind: kind.into() }
}

/// Observes how long a reconcile took when dropped, however it ends (returned, failed, or
/// cancelled at shutdown). Made by [`Metrics::count_and_measure`].
pub struct ReconcileMeasurer {
    histogram: Histogram,
    start: Instant,
}

impl Drop for ReconcileMeasurer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_revocation_lag_histogram_under_its_documented_name() {
        let metrics = Metrics::default();
        metrics
            .revocation_lag
            .get_or_create(&KindLabels {
                kind: "ExecAccessRequest".into(),
            })
            .observe(0.02);
        let text = metrics.render();
        assert!(
            text.contains("oz_revocation_lag_seconds_count{kind=\"ExecAccessRequest\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn a_measured_reconcile_is_counted_at_once_and_timed_when_it_ends() {
        let metrics = Metrics::default();
        let guard = metrics.count_and_measure("request", "PodAccessRequest");
        let text = metrics.render();
        assert!(
            text.contains(
                "oz_reconciles_total{controller=\"request\",kind=\"PodAccessRequest\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "oz_reconcile_duration_seconds_count{controller=\"request\",kind=\"PodAccessRequest\"} 0"
            ),
            "{text}"
        );
        drop(guard);
        let text = metrics.render();
        assert!(
            text.contains(
                "oz_reconcile_duration_seconds_count{controller=\"request\",kind=\"PodAccessRequest\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn every_kinds_series_is_exported_at_zero_from_the_start() {
        let text = Metrics::default().render();
        for sample in [
            "oz_active_grants{kind=\"ExecAccessRequest\"} 0",
            "oz_active_grants{kind=\"PodAccessRequest\"} 0",
            "oz_revocation_lag_seconds_count{kind=\"PodAccessRequest\"} 0",
            "oz_time_to_ready_seconds_count{kind=\"ExecAccessRequest\"} 0",
            "oz_reconciles_total{controller=\"template\",kind=\"PodAccessTemplate\"} 0",
            "oz_reconcile_errors_total{controller=\"request\",kind=\"ExecAccessRequest\",error=\"api\"} 0",
            "oz_leader 0",
        ] {
            assert!(text.contains(sample), "{sample} in\n{text}");
        }
    }

    #[test]
    fn failures_are_counted_by_controller_kind_and_error_class() {
        let metrics = Metrics::default();
        metrics.reconcile_failed("template", "ExecAccessTemplate", "api");
        metrics.reconcile_failed("template", "ExecAccessTemplate", "api");
        let text = metrics.render();
        assert!(
            text.contains(
                "oz_reconcile_errors_total{controller=\"template\",kind=\"ExecAccessTemplate\",error=\"api\"} 2"
            ),
            "{text}"
        );
    }
}
