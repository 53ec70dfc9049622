//! oz's webhook server run in the test process. Its configurations are cluster-scoped, so
//! each test's carry a name and a scope of their own: its namespace's.

use std::{collections::BTreeMap, net::TcpListener};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use oz_platform::WebhookEndpoint;
use oz_webhooks::WebhookConfig;

/// A listener on a free loopback port, bound before the server starts so the configuration
/// can name its port, and the configuration of a server on it for namespace `ns` alone: its
/// webhook configurations named `ns`, its request webhooks called for requests in `ns` only.
pub fn scoped_config(ns: &str) -> (TcpListener, WebhookConfig) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let mut config = WebhookConfig::new(ns, WebhookEndpoint::url(&base).unwrap());
    config.registration.name = ns.into();
    config.registration.request_namespace_selector = Some(only(ns));
    (listener, config)
}

/// The selector of namespace `ns` alone.
pub fn only(ns: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            ns.to_string(),
        )])),
        ..Default::default()
    }
}
