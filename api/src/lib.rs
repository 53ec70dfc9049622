//! oz's API: the six `crds.wizardofoz.co/v1alpha1` kinds (four Oz kinds, oz's AccessApproval and AccessLock), wire-compatible with Oz, the
//! vocabulary every part of oz shares about them ([`AccessKind`], [`AccessRequest`],
//! [`AccessTemplate`], [`AccessConfig::admits`], [`conditions`]), and the pure logic around them
//! (durations, the duration decision, access-command rendering, pod mutation).
//!
//! Every Oz field keeps its JSON name and default, so Oz manifests apply unchanged. oz's
//! additions are optional fields, schema validation that rejects at apply time what Oz only
//! failed on at reconcile time, printer columns, short names and the `oz` category.
#![forbid(unsafe_code)]

pub mod access_command;
mod access_config;
mod brokered_pod;
mod condition_names;
pub mod conditions;
mod crds;
#[macro_use]
mod crd_shape;
pub mod approval;
pub mod build_info;
pub mod duration;
mod exec;
pub mod expiry_table;
pub mod extension;
pub mod fleet;
pub mod grant_hint;
pub mod grant_rule;
pub mod kinds;
pub mod label_selector;
pub mod limits;
pub mod lock;
mod metadata;
mod mutation;
pub mod notifications;
mod pod;
pub mod pod_mutation;
mod requester;
pub mod rules;
pub mod schedule;
pub mod session;
mod status;
mod target_ref;
mod watched;

pub use access_config::{AccessConfig, GrantTo};
pub use approval::{
    AccessApproval, AccessApprovalSpec, AccessApprovalStatus, ApprovalConfig, ApprovalRecord,
    ApprovalRequestRef, ApprovedKind, Decision,
};
pub use brokered_pod::BrokeredPod;
pub use condition_names::{condition_reason, condition_type};
pub use conditions::Condition;
pub use crds::{all_crds, crds_yaml};
pub use exec::{
    ExecAccessRequest, ExecAccessRequestSpec, ExecAccessTemplate, ExecAccessTemplateSpec,
};
pub use extension::{EXTEND_ANNOTATION, ExtensionPhase, ExtensionRecord};
pub use fleet::{
    ClusterSync, FleetClusters, Forwarded, ForwardedApproval, HUB_MANAGED_LABEL,
    names::{FleetNames, PrefixMap},
};
pub use grant_rule::{Asked, GrantSummary, PodAction, Route, granting};
pub use kinds::{AccessKind, AccessRequest, AccessTemplate, OzResource};
pub use lock::{AccessLock, AccessLockSpec, LockTarget, LockedKind, LockedTemplate, locking};
pub use metadata::{
    LAST_APPLIED_ANNOTATION, REVOKE_ANNOTATION, revoke_asked_by, strip_unread_metadata,
};
pub use mutation::{
    JsonPatchOperation, MAX_JSON_POINTER_LENGTH, MAX_PATCH_OPERATIONS, PatchOp,
    PodTemplateSpecMutationConfig,
};
pub use notifications::{NotificationConfig, SecretRef, SinkFormat};
pub use pod::{PodAccessRequest, PodAccessRequestSpec, PodAccessTemplate, PodAccessTemplateSpec};
pub use requester::Requester;
pub use session::{
    SESSIONS_API_SERVICE, SESSIONS_GROUP, SESSIONS_VERSION, SessionCounts, SessionEndReason,
    SessionMode, SessionRecord, SessionStream,
};
pub use status::{RequestPhase, RequestStatus, TemplateStatus};
pub use target_ref::{ControllerApiVersion, ControllerKind, CrossVersionObjectReference};
pub use watched::WatchedRequest;

/// The API group of every oz kind, the same as Oz's.
pub const GROUP: &str = "crds.wizardofoz.co";
/// The only API version, the same as Oz's.
pub const VERSION: &str = "v1alpha1";
