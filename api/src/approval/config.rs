//! `spec.accessConfig.approval` of a template, and the limits on what a request or a decision
//! may say.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::rules::{DURATION_MAX_LENGTH, GO_DURATION_HINT, positive_duration_rule};

/// The longest `spec.reason` of a request, and `spec.comment` of an approval.
pub const MAX_REASON_LENGTH: u32 = 1024;
/// The longest `spec.ticket` of a request.
pub const MAX_TICKET_LENGTH: u32 = 256;
/// The most approvals a template may require.
pub const MAX_REQUIRED_APPROVALS: u32 = 10;
/// How long a request waits for its approvals when the template does not say.
pub const DEFAULT_PENDING_TIMEOUT: &str = "1h";

/// `spec.accessConfig.approval` of a template: requests through it are granted only once
/// enough members of `approverGroups` approve, and end Denied at the first valid Deny.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalConfig {
    /// Kubernetes groups whose members may approve or deny requests through this template.
    #[schemars(length(min = 1))]
    pub approver_groups: Vec<String>,

    /// How many distinct approvers must approve (default 1, at most 10).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1, max = MAX_REQUIRED_APPROVALS))]
    pub required: u32,

    /// Whether a requester who is also an approver may approve their own request (default
    /// false). Their approval then counts as one of `required`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_self_approval: bool,

    /// How long a request waits for its approvals before it ends Expired, unapproved: a Go
    /// duration (default `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(positive_duration_rule()).message(format!("spec.accessConfig.approval.pendingTimeout must be {GO_DURATION_HINT}").as_str()))]
    pub pending_timeout: Option<String>,

    /// Whether a request through this template must give `spec.reason` (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reason_required: bool,

    /// Whether a requester may approve their own request alone when no approver is around
    /// (default false): the approval must carry a comment saying why, grants at once whatever
    /// `required` says, and is announced as break-glass (Event, metric, notification).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub break_glass: bool,
}

impl ApprovalConfig {
    /// `pendingTimeout`, with its default applied.
    pub fn pending_timeout(&self) -> &str {
        self.pending_timeout
            .as_deref()
            .unwrap_or(DEFAULT_PENDING_TIMEOUT)
    }

    /// The first of `approverGroups` that a user in `groups` belongs to, which is why they
    /// may decide.
    pub fn approving_group(&self, groups: &[String]) -> Option<&str> {
        self.approver_groups
            .iter()
            .find(|group| groups.contains(group))
            .map(String::as_str)
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}
