//! What a request's status keeps of each approval that counted towards its grant.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

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
