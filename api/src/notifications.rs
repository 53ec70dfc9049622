//! `spec.accessConfig.notifications` of a template: where news of its requests is POSTed.
//!
//! A sink's URL is a credential (a Slack incoming-webhook URL is all it takes to post), so a
//! template names Secrets, never URLs. Besides the template's own, every request in a namespace
//! is announced to the sink in that namespace's Secret [`NAMESPACE_SINK_SECRET`], if it exists.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::rules::{
    DURATION_MAX_LENGTH, GO_DURATION_HINT, OBJECT_NAME_HINT, object_name_rule,
    positive_duration_rule,
};

/// The Secret, in a request's namespace, whose sink hears about every request there.
pub const NAMESPACE_SINK_SECRET: &str = "oz-notifications";
/// The label a Secret must carry (value `"true"`) for oz to use it as a sink: without it, a
/// template author could have oz read and POST to any Secret's value.
pub const SINK_LABEL: &str = "oz.wizardofoz.co/notification-sink";
/// The Secret key holding the sink's URL.
pub const SINK_URL_KEY: &str = "url";
/// The Secret key holding the payload format, `CloudEvents` (default) or `Slack`.
pub const SINK_FORMAT_KEY: &str = "format";
/// How long before `expiresAt` an ExpiringSoon notification is sent, unless the template says.
pub const DEFAULT_EXPIRING_SOON_BEFORE: &str = "5m";

/// Where a template's requests are announced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationConfig {
    /// Secrets in the template's namespace, each holding a sink's `url` (and optionally its
    /// `format`: `CloudEvents` or `Slack`) and labelled `oz.wizardofoz.co/notification-sink:
    /// "true"`.
    #[serde(default)]
    #[schemars(length(max = 8))]
    pub secret_refs: Vec<SecretRef>,

    /// How long before `expiresAt` the ExpiringSoon notification is sent: a Go duration
    /// (default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(positive_duration_rule()).message(format!("spec.accessConfig.notifications.expiringSoonBefore must be {GO_DURATION_HINT}").as_str()))]
    pub expiring_soon_before: Option<String>,
}

impl NotificationConfig {
    /// `expiringSoonBefore`, with its default applied.
    pub fn expiring_soon_before(&self) -> &str {
        self.expiring_soon_before
            .as_deref()
            .unwrap_or(DEFAULT_EXPIRING_SOON_BEFORE)
    }
}

/// A Secret in the template's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
pub struct SecretRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(object_name_rule()).message(format!("spec.accessConfig.notifications.secretRefs[].name must be {OBJECT_NAME_HINT}").as_str()))]
    pub name: String,
}

/// How a sink wants its payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SinkFormat {
    /// A CloudEvents 1.0 event in structured mode (`application/cloudevents+json`).
    #[default]
    CloudEvents,
    /// `{"text": "..."}`, as a Slack incoming webhook accepts.
    Slack,
}
