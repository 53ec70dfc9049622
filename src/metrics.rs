//! oz's Prometheus metrics.

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
    /// Grants currently in force, by request kind.
    pub active_grants: Family<KindLabels, Gauge>,
    /// Seconds from a request's creation until it first became Ready.
    pub time_to_ready: Family<KindLabels, Histogram>,
    /// Seconds from a grant's expiresAt until its RoleBinding was deleted.
    pub revocation_lag: Family<KindLabels, Histogram>,
    /// Grants whose revocation is armed on a timer of its own, by request kind.
    pub expiry_timers: Family<KindLabels, Gauge>,
    /// 1 while oz lacks the permissions it needs in a watched namespace.
    pub namespace_access_denied: Family<NamespaceLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("oz");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
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
        let namespace_access_denied = Family::<NamespaceLabels, Gauge>::default();
        registry.register(
            "namespace_access_denied",
            "1 while oz lacks the permissions it needs in a watched namespace",
            namespace_access_denied.clone(),
        );
        Self {
            registry,
            reconciles,
            errors,
            active_grants,
            expiry_timers,
            time_to_ready,
            revocation_lag,
            namespace_access_denied,
        }
    }
}

impl Metrics {
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
}
