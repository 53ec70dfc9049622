//! The notifier's metrics: `oz_notifications_sent_total{type}` and
//! `oz_notifications_dead_lettered_total{reason}`.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

use super::NoticeKind;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    /// The notice's kind: `approved`, `expiringsoon`...
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// `queue_full`, `lane_full`, `rejected`, `gave_up`, `invalid_sink` or `stopped`.
    pub reason: &'static str,
}

/// Cheap to clone; clones count into the same families.
#[derive(Clone, Debug, Default)]
pub struct NotifyMetrics {
    /// Notices a sink took (2xx), by kind.
    pub sent: Family<TypeLabels, Counter>,
    /// Notices given up on, by reason.
    pub dead_lettered: Family<ReasonLabels, Counter>,
    /// GETs of sink Secrets sent to the apiserver (the cache answers the rest).
    pub sink_lookups: Counter,
}

impl NotifyMetrics {
    /// Registers both families in `registry` (oz-manager's, prefixed `oz`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "notifications_sent",
            "Notifications a sink accepted, by notice type",
            self.sent.clone(),
        );
        registry.register(
            "notifications_dead_lettered",
            "Notifications given up on, by reason",
            self.dead_lettered.clone(),
        );
        registry.register(
            "notification_sink_lookups",
            "GETs of notification sink Secrets sent to the apiserver",
            self.sink_lookups.clone(),
        );
    }

    pub(crate) fn sent(&self, kind: NoticeKind) {
        self.sent
            .get_or_create(&TypeLabels {
                r#type: kind.suffix(),
            })
            .inc();
    }

    pub(crate) fn dead_lettered(&self, reason: &'static str) {
        self.dead_lettered
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// How many notices were dead-lettered for `reason` so far.
    pub fn dead_lettered_count(&self, reason: &'static str) -> u64 {
        self.dead_lettered
            .get_or_create(&ReasonLabels { reason })
            .get()
    }

    /// How many notices of `kind` sinks accepted so far.
    pub fn sent_count(&self, kind: NoticeKind) -> u64 {
        self.sent
            .get_or_create(&TypeLabels {
                r#type: kind.suffix(),
            })
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_under_the_documented_names() {
        let metrics = NotifyMetrics::default();
        let mut registry = Registry::with_prefix("oz");
        metrics.register(&mut registry);
        metrics.sent(NoticeKind::BreakGlass);
        metrics.dead_lettered("gave_up");
        metrics.sink_lookups.inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "oz_notifications_sent_total{type=\"breakglass\"} 1",
            "oz_notifications_dead_lettered_total{reason=\"gave_up\"} 1",
            "oz_notification_sink_lookups_total 1",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
