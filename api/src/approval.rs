//! Approvals: a template's `accessConfig.approval` says who must decide before a request is
//! granted, and an [`AccessApproval`] is one person's decision on one request.
//!
//! A decision is an object of its own rather than an annotation on the request: creating one
//! is an RBAC verb an approver can be given alone, oz's admission webhook stamps who made it
//! (as it stamps a request's requester), and its spec can never change afterwards.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AccessKind, Requester,
    rules::{OBJECT_NAME_HINT, object_name_rule},
};

mod config;
mod record;
mod tally;

pub use config::{
    ApprovalConfig, DEFAULT_PENDING_TIMEOUT, MAX_REASON_LENGTH, MAX_REQUIRED_APPROVALS,
    MAX_TICKET_LENGTH,
};
pub use record::ApprovalRecord;
pub use tally::{Outcome, TalliedRequest, Tally, tally};

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

        /// oz only: the number of the request's extension ask this decides (`status.extensions`),
        /// rather than the request itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 1, max = 20))]
        pub extension: Option<u32>,
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
