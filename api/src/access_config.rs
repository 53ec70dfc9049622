//! `spec.accessConfig` of both template kinds: who may ask, for how long, and what they are told.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::{
    ApprovalConfig, NotificationConfig, SessionMode,
    access_command::DEFAULT_ACCESS_COMMAND,
    rules::{
        DURATION_MAX_LENGTH, GO_DURATION_HINT, default_within_max_rule, positive_duration_rule,
    },
};

/// Who a template's grants are bound to.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum GrantTo {
    /// Only the user who created the request, as a User subject (oz's default).
    #[default]
    Requester,
    /// Every member of every group in `allowedGroups`, as Group subjects (Oz's behaviour).
    AllowedGroups,
}

/// Access settings shared by ExecAccessTemplate and PodAccessTemplate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(default_within_max_rule())
    .message("spec.accessConfig.defaultDuration must not be greater than spec.accessConfig.maxDuration: lower the default or raise the maximum")
    .field_path(".defaultDuration"))]
pub struct AccessConfig {
    /// Kubernetes RBAC group names whose members may request access through this template.
    pub allowed_groups: Vec<String>,

    /// How long access lasts when a request does not say: a Go duration such as `1h` or `90m`.
    #[serde(default = "default_duration")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(positive_duration_rule()).message(format!("spec.accessConfig.defaultDuration must be {GO_DURATION_HINT}").as_str()))]
    pub default_duration: String,

    /// The longest access a request may get; longer requests are clamped to it.
    #[serde(default = "max_duration")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(positive_duration_rule()).message(format!("spec.accessConfig.maxDuration must be {GO_DURATION_HINT}").as_str()))]
    pub max_duration: String,

    /// A Go text/template rendered against the target pod into the request's
    /// `status.accessMessage`, for example
    /// `kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -- /bin/sh`.
    #[serde(default = "default_access_command")]
    pub access_command: String,

    /// Who the grant is bound to: `Requester` (default), only the user who created the
    /// request; or `AllowedGroups`, every member of allowedGroups, as Oz does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_to: Option<GrantTo>,

    /// oz only: who must approve a request before it is granted. Without it, a member of
    /// allowedGroups is granted access alone, as in Oz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalConfig>,

    /// oz only: where news of this template's requests (pending approval, approved, denied,
    /// ready, expiring soon, expired) is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<NotificationConfig>,

    /// oz only: `Direct` (default, as in Oz): `kubectl exec` straight to the pod; or
    /// `Brokered`: only through oz (`ozctl exec`), which records each session and closes it
    /// when the grant ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_mode: Option<SessionMode>,

    /// oz only, with `sessionMode: Brokered`: whether recordings include what the user typed
    /// (default true). Output is always recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_input: Option<bool>,

    /// oz only, with `sessionMode: Brokered`: a session without input for this long is closed,
    /// a Go duration such as `15m`. Default: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(positive_duration_rule()).message(format!("spec.accessConfig.sessionIdleTimeout must be {GO_DURATION_HINT}").as_str()))]
    pub session_idle_timeout: Option<String>,

    /// oz only: how many times a grant may be extended (`ozctl extend`). Default: as many as
    /// `maxTotalDuration` leaves room for; `0` allows none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 20))]
    pub max_extensions: Option<u32>,

    /// oz only: the longest a grant may last with its extensions, counted from its start: a Go
    /// duration. Default: `maxDuration`, so an extension only gives what the first request
    /// could have asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(positive_duration_rule()).message(format!("spec.accessConfig.maxTotalDuration must be {GO_DURATION_HINT}").as_str()))]
    pub max_total_duration: Option<String>,

    /// oz only: how far ahead a request may ask access to start (`spec.startAt`): a Go
    /// duration (default `24h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(positive_duration_rule()).message(format!("spec.accessConfig.maxLeadTime must be {GO_DURATION_HINT}").as_str()))]
    pub max_lead_time: Option<String>,

    /// oz only: how many grants one user may hold through this template at once (requests
    /// waiting for approval or their start included). Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_grants_per_user: Option<u32>,

    /// oz only: how many grants this template may have in force at once, everyone's together
    /// (requests waiting for approval or their start included). Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_grants: Option<u32>,
}

impl AccessConfig {
    /// The groups its grants bind besides their requester: the allowedGroups when it grants to
    /// AllowedGroups, else none. A member of them who approves a request approves access of
    /// their own.
    pub fn shared_with(&self) -> &[String] {
        match self.grant_to() {
            GrantTo::AllowedGroups => &self.allowed_groups,
            GrantTo::Requester => &[],
        }
    }

    /// `grantTo`, with its default applied.
    pub fn grant_to(&self) -> GrantTo {
        self.grant_to.unwrap_or_default()
    }

    /// `sessionMode`, with its default applied.
    pub fn session_mode(&self) -> SessionMode {
        self.session_mode.unwrap_or_default()
    }

    /// `maxLeadTime`, with its default applied.
    pub fn max_lead_time(&self) -> &str {
        self.max_lead_time
            .as_deref()
            .unwrap_or(DEFAULT_MAX_LEAD_TIME)
    }

    /// `recordInput`, with its default (true) applied.
    pub fn record_input(&self) -> bool {
        self.record_input.unwrap_or(true)
    }

    /// Whether a user in `groups` may ask for access through this template: one of their
    /// groups is in `allowedGroups`.
    pub fn admits(&self, groups: &[String]) -> bool {
        self.admitting_group(groups).is_some()
    }

    /// The first group of `allowedGroups` that a user in `groups` belongs to, which is why
    /// they are admitted.
    pub fn admitting_group(&self, groups: &[String]) -> Option<&str> {
        self.allowed_groups
            .iter()
            .find(|allowed| groups.contains(allowed))
            .map(String::as_str)
    }
}

/// How far ahead a request may ask access to start, unless the template says.
pub const DEFAULT_MAX_LEAD_TIME: &str = "24h";

fn default_duration() -> String {
    "1h".into()
}

fn max_duration() -> String {
    "24h".into()
}

fn default_access_command() -> String {
    DEFAULT_ACCESS_COMMAND.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowing(groups: &[&str]) -> AccessConfig {
        AccessConfig {
            allowed_groups: groups.iter().map(|g| g.to_string()).collect(),
            default_duration: default_duration(),
            max_duration: max_duration(),
            access_command: default_access_command(),
            grant_to: None,
            approval: None,
            notifications: None,
            session_mode: None,
            record_input: None,
            session_idle_timeout: None,
            max_extensions: None,
            max_total_duration: None,
            max_lead_time: None,
            max_grants_per_user: None,
            max_grants: None,
        }
    }

    #[test]
    fn one_shared_group_admits_and_is_named() {
        let me = ["devs".to_string(), "system:authenticated".to_string()];
        let config = allowing(&["admins", "devs"]);
        assert!(config.admits(&me));
        assert_eq!(config.admitting_group(&me), Some("devs"));
        assert!(!allowing(&["admins"]).admits(&me));
        assert!(!allowing(&[]).admits(&me));
        assert!(!config.admits(&[]));
    }
}
