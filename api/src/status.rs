//! Status of templates and requests: Oz's conditions, types and reasons, plus oz's additions
//! (phase and expiresAt on requests).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use crate::{
    ApprovalRecord, ClusterSync, ExtensionRecord, SessionCounts, SessionMode, SessionRecord,
    conditions::{self, Condition},
};

/// Status of ExecAccessTemplate and PodAccessTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateStatus {
    /// Oz's conditions: TargetRefExists and TemplateDurationsValid.
    #[serde(default, deserialize_with = "conditions::read_exactly")]
    pub conditions: Vec<Condition>,
    /// True when every condition is True.
    #[serde(default)]
    pub ready: bool,
    /// oz only, a fleet hub's template: how it stands on each spoke it covers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterSync>,
}

/// Status of ExecAccessRequest and PodAccessRequest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestStatus {
    /// Oz's conditions: TargetTemplateExists, AccessDurationsValid, AccessStillValid,
    /// AccessResourcesCreated and AccessResourcesReady.
    #[serde(default, deserialize_with = "conditions::read_exactly")]
    pub conditions: Vec<Condition>,
    /// True when every condition is True; recomputed on every reconcile.
    #[serde(default)]
    pub ready: bool,
    /// The access command rendered for the granted pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_message: Option<String>,
    /// The pod the access is for. Chosen once and never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    /// Where the request stands, for humans: PendingApproval, Scheduled, Pending, Ready,
    /// Expired, Revoked, Denied or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<RequestPhase>,
    /// When the access ends: creationTimestamp (or, for a template that requires approval,
    /// approvedAt; or `spec.startAt` when later) plus the decided duration and any granted
    /// extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    /// oz only: when the final approval was made; the access window starts here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<Time>,
    /// oz only: the approvals counted towards this grant, oldest first. Recomputed by oz from
    /// the AccessApprovals on every reconcile: writing it changes nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalRecord>,
    /// oz only: approvals counted of those required, as `1/2`, for `kubectl get`.
    // A boxed string, 8 bytes shorter than a `String`, for each request a reconcile unpacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_progress: Option<Box<str>>,
    /// oz only: `Brokered` when the grant is used through oz (`ozctl exec`), so clients know
    /// without reading the template; absent for Direct.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_mode: Option<SessionMode>,
    /// oz only, Brokered: the grant's newest sessions (at most 20), in the order they started.
    /// Written by the oz replica that serves each session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub sessions: Vec<SessionRecord>,
    /// oz only, Brokered: how many sessions the grant has had, and how many are open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_counts: Option<SessionCounts>,
    /// oz only: the asks to extend the grant (`ozctl extend`), oldest first, and where each
    /// stands. Recomputed by oz on every reconcile: writing it changes nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub extensions: Vec<ExtensionRecord>,
}

/// Where a request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum RequestPhase {
    /// oz only: waiting for the approvals its template requires; nothing is granted yet.
    PendingApproval,
    /// oz only: admitted (and approved, if its template requires it), waiting for its
    /// `spec.startAt`; nothing is granted yet.
    Scheduled,
    /// Accepted; access is being set up.
    Pending,
    /// Access is granted and usable.
    Ready,
    /// The access window has ended and the grant is revoked.
    Expired,
    /// oz only: revoked before its window ended (`ozctl revoke`, the annotation
    /// `crds.wizardofoz.co/revoked-by`); like Expired, kept for access reviews.
    Revoked,
    /// The requester may not use the template, or an approver denied the request; nothing
    /// was granted.
    Denied,
    /// Access could not be set up; the conditions say why.
    Failed,
}

impl RequestPhase {
    /// Expired, Revoked or Denied: the request holds no grant and never will again (Failed
    /// may still hold resources, e.g. an access command that cannot be rendered).
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            RequestPhase::Expired | RequestPhase::Revoked | RequestPhase::Denied
        )
    }

    /// Expired or Revoked: the grant ended, and the request is kept as its record for the
    /// history retention.
    pub fn is_ended(self) -> bool {
        matches!(self, RequestPhase::Expired | RequestPhase::Revoked)
    }
}
