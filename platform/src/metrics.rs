//! [`ServerMetrics`]: what the server layer counts, for both servers. oz-manager registers
//! them with its own metrics (oz-webhooks' `WebhookMetrics::register` does), so they are
//! served on its `/metrics` endpoint.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
};

use crate::certs::{self, PemPair};

/// Why a caller was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// `no_certificate`, `untrusted_certificate` or `name_not_allowed` (the sessions API adds
    /// its own reasons).
    pub reason: &'static str,
}

/// The server layer's metrics. Cloning shares them.
#[derive(Clone, Debug, Default)]
pub struct ServerMetrics {
    /// Callers refused because they are not the apiserver (with a client CA).
    pub refused_callers: Family<RefusedLabels, Counter>,
    /// When the serving certificate being served expires, in seconds since the Unix epoch; 0
    /// until one is served.
    pub certificate_expiry: Gauge,
}

impl ServerMetrics {
    /// Counts a refused caller.
    pub fn refuse(&self, reason: &'static str) {
        self.refused_callers
            .get_or_create(&RefusedLabels { reason })
            .inc();
    }

    /// Records the expiry of the serving certificate now served, `pair`'s. A certificate that
    /// cannot be read is never served (the TLS server refuses it first), so it changes nothing.
    pub fn serving_certificate(&self, pair: &PemPair) {
        if let Ok(info) = certs::inspect(pair) {
            self.certificate_expiry.set(info.not_after.unix_timestamp());
        }
    }
}

#[cfg(test)]
mod tests {
    use time::OffsetDateTime;

    use super::*;
    use crate::certs::{CertSettings, generate_ca, issue_serving_cert};

    #[test]
    fn the_served_certificates_expiry_is_its_not_after() {
        let settings = CertSettings::default();
        let now = OffsetDateTime::now_utc();
        let ca = generate_ca(&settings, now).unwrap();
        let names = ["oz.oz-system.svc".to_string()];
        let leaf = issue_serving_cert(&ca, &names, settings.cert_validity, now).unwrap();
        let metrics = ServerMetrics::default();
        metrics.serving_certificate(&leaf);
        let not_after = certs::inspect(&leaf).unwrap().not_after;
        assert_eq!(metrics.certificate_expiry.get(), not_after.unix_timestamp());
        assert!(not_after > now + time::Duration::days(300));
    }
}
