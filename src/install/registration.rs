//! What oz registers with the apiserver, derived in one place for the install and for
//! oz-manager, so that what oz-manager applies at run time agrees with what was installed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use oz_platform::{Registration, WebhookEndpoint, registration::NAMESPACE_NAME_LABEL};

/// The namespaceSelector of a scoped install's webhooks: exactly the watched namespaces, by the
/// name label the apiserver sets on every Namespace.
pub fn watched_namespaces_selector(namespaces: &[String]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.into(),
            operator: "In".into(),
            values: Some(namespaces.to_vec()),
        }]),
        match_labels: None,
    }
}

/// What oz registers with the apiserver: the configurations named `name` (`<name>-requests`,
/// `<name>-audit`), reached through `endpoint`, and, when `watched` is not empty, limited to
/// those namespaces. The install ([`InstallOptions::webhook_registration`](super::InstallOptions::webhook_registration)) and oz-manager (from
/// its flags) both derive their registration here, so what oz-manager applies agrees with what
/// was installed.
pub fn webhook_registration(
    endpoint: WebhookEndpoint,
    name: &str,
    watched: &[String],
) -> Registration {
    let mut registration = Registration::new(endpoint);
    registration.name = name.to_string();
    if !watched.is_empty() {
        let selector = watched_namespaces_selector(watched);
        registration.request_namespace_selector = Some(selector.clone());
        registration.audit_namespace_selector = Some(selector);
    }
    registration
}
