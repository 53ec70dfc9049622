//! Approvals: a template's `accessConfig.approval` says who must decide before a request is
//! granted, and an [`AccessApproval`] is one person's decision on one request.
//!
//! A decision is an object of its own rather than an annotation on the request: creating one
//! is an RBAC verb an approver can be given alone, oz's admission webhook stamps who made it
//! (as it stamps a request's requester), and its spec can never change afterwards.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AccessKind, Requester,
    rules::{
        DURATION_MAX_LENGTH, GO_DURATION_HINT, OBJECT_NAME_HINT, object_name_rule,
        positive_duration_rule,
    },
};

mod tally;

pub use tally::{Outcome, TalliedRequest, Tally, tally};

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

/// A decision on a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Decision {
    /// Grant it (once enough approvers have).
    Approve,
    /// Do not grant it: the request ends Denied.
    Deny,
}

/// Which kind of request an approval decides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ApprovedKind {
    ExecAccessRequest,
    PodAccessRequest,
}

impl From<ApprovedKind> for AccessKind {
    fn from(kind: ApprovedKind) -> Self {
        match kind {
            ApprovedKind::ExecAccessRequest => AccessKind::Exec,
            ApprovedKind::PodAccessRequest => AccessKind::Pod,
        }
    }
}

impl From<AccessKind> for ApprovedKind {
    fn from(kind: AccessKind) -> Self {
        match kind {
            AccessKind::Exec => ApprovedKind::ExecAccessRequest,
            AccessKind::Pod => ApprovedKind::PodAccessRequest,
        }
    }
}

/// The request an approval decides on, in the approval's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequestRef {
    /// ExecAccessRequest or PodAccessRequest.
    pub kind: ApprovedKind,
    /// The request's name.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(object_name_rule()).message(format!("spec.requestRef.name must be {OBJECT_NAME_HINT}").as_str()))]
    pub name: String,
}

oz_kind_spec! {
    status = "AccessApprovalStatus",
    columns = {
        printcolumn(name = "Kind", type_ = "string", json_path = ".spec.requestRef.kind"),
        printcolumn(name = "Request", type_ = "string", json_path = ".spec.requestRef.name"),
        printcolumn(name = "Decision", type_ = "string", json_path = ".spec.decision"),
        printcolumn(name = "Approver", type_ = "string", json_path = ".spec.approver.username"),
        printcolumn(name = "BreakGlass", type_ = "boolean", json_path = ".spec.breakGlass", priority = 1),
        printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
    },
    last = {
        #[x_kube(validation = Rule::new("self == oldSelf")
            .message("spec is immutable: a decision cannot be changed after it is made; delete it and make a new one"))]
    },
    kind = "AccessApproval",
    shortname = "approval",
    /// One person's decision on one ExecAccessRequest or PodAccessRequest in this namespace.
    /// oz's admission webhook records who decided and refuses a decision its template does not
    /// allow; the spec never changes afterwards.
    pub struct AccessApprovalSpec {
        /// The request decided on.
        pub request_ref: ApprovalRequestRef,

        /// Approve or Deny.
        pub decision: Decision,

        /// Why: free text for the requester and the audit trail. Required for a Deny and for a
        /// break-glass self-approval.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = MAX_REASON_LENGTH))]
        pub comment: Option<String>,

        /// Who decided, recorded by oz's admission webhook from the authenticated user; not
        /// set by users (whatever is written here is replaced).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub approver: Option<Requester>,

        /// The uid of the request decided on, recorded by oz's admission webhook, so that a
        /// decision never carries over to a new request created under the same name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub request_uid: Option<String>,

        /// Recorded by oz's admission webhook: the requester approved their own request under
        /// the template's `breakGlass`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub break_glass: bool,
    }
}

impl AccessApprovalSpec {
    /// Whether the decision says why: a comment that is not only whitespace (what a Deny and a
    /// break-glass approval need).
    pub fn has_comment(&self) -> bool {
        self.comment
            .as_deref()
            .is_some_and(|c| !c.trim().is_empty())
    }
}

/// An AccessApproval has no status yet; the request's status says what its decisions did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AccessApprovalStatus {}

/// One approval counted towards a request's grant, as `status.approvals` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    /// The approver's user name.
    pub approver: String,
    /// When the approval was made (its AccessApproval's creationTimestamp).
    pub at: Time,
    /// The approver's comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The AccessApproval object.
    pub name: String,
    /// A break-glass self-approval.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub break_glass: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_config_defaults_to_one_approval_within_an_hour() {
        let config: ApprovalConfig =
            serde_json::from_value(serde_json::json!({"approverGroups": ["leads"]})).unwrap();
        assert_eq!(config.required, 1);
        assert!(!config.allow_self_approval && !config.reason_required && !config.break_glass);
        assert_eq!(config.pending_timeout(), "1h");
        let groups = ["devs".to_string(), "leads".to_string()];
        assert_eq!(config.approving_group(&groups), Some("leads"));
        assert_eq!(config.approving_group(&groups[..1]), None);
    }

    #[test]
    fn approved_kinds_are_the_request_kinds() {
        for kind in AccessKind::ALL {
            let approved = ApprovedKind::from(kind);
            assert_eq!(AccessKind::from(approved), kind);
            assert_eq!(
                serde_json::to_value(approved).unwrap(),
                serde_json::json!(kind.request_kind())
            );
        }
    }
}
