//! [`WebhookMetrics`]: what the webhook server counts. oz-manager registers them with its own
//! metrics ([`WebhookMetrics::register`]), so they are served on its `/metrics` endpoint.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

/// Why a caller of a webhook path was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// `no_certificate`, `untrusted_certificate` or `name_not_allowed`.
    pub reason: &'static str,
}

/// The webhook server's counters. Cloning shares them.
#[derive(Clone, Debug, Default)]
pub struct WebhookMetrics {
    /// Callers refused because they are not the apiserver (with `--webhook-client-ca-file`).
    pub refused_callers: Family<RefusedLabels, Counter>,
    /// Audit records appended to the audit file.
    pub audit_records_written: Counter,
    /// Audit records that could not be appended to the audit file; each is in the JSON log.
    pub audit_records_unwritten: Counter,
}

impl WebhookMetrics {
    /// Registers every counter in `registry` (under its prefix, `oz_` in oz-manager).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "webhook_refused_callers",
            "Webhook calls refused because the caller is not the apiserver",
            self.refused_callers.clone(),
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
    }

    /// Counts a refused caller.
    pub fn refuse(&self, reason: &'static str) {
        self.refused_callers
            .get_or_create(&RefusedLabels { reason })
            .inc();
    }
}
