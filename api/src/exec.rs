//! ExecAccessTemplate and ExecAccessRequest: `kubectl exec` into a live pod of a workload.
// clippy reads the repeated `type_ = "string"` of kube-derive's printcolumn entries as duplicated
// attributes; each belongs to a different column.
#![allow(clippy::duplicated_attributes)]

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::{
    AccessConfig, CrossVersionObjectReference, RequestStatus, Requester, TemplateStatus,
    rules::{
        DURATION_MAX_LENGTH, GO_DURATION_HINT, OBJECT_NAME_HINT, object_name_rule,
        request_duration_rule,
    },
};

/// Which workload's pods may be exec'd into, by whom and for how long.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "crds.wizardofoz.co",
    version = "v1alpha1",
    kind = "ExecAccessTemplate",
    namespaced,
    status = "TemplateStatus",
    shortname = "exectpl",
    category = "oz",
    printcolumn(
        name = "Ready",
        type_ = "boolean",
        json_path = ".status.ready",
        description = "Is template ready?"
    ),
    printcolumn(
        name = "Kind",
        type_ = "string",
        json_path = ".spec.controllerTargetRef.kind",
        description = "Target controller kind"
    ),
    printcolumn(
        name = "Target",
        type_ = "string",
        json_path = ".spec.controllerTargetRef.name",
        description = "Target controller name"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExecAccessTemplateSpec {
    /// Who may request access, for how long, and the access command they are shown.
    pub access_config: AccessConfig,
    /// The Deployment, DaemonSet, StatefulSet or Rollout whose pods may be exec'd into.
    pub controller_target_ref: CrossVersionObjectReference,
}

/// A request for time-boxed `kubectl exec` into one pod of a template's workload.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "crds.wizardofoz.co",
    version = "v1alpha1",
    kind = "ExecAccessRequest",
    namespaced,
    status = "RequestStatus",
    shortname = "execreq",
    category = "oz",
    printcolumn(name = "Template", type_ = "string", json_path = ".spec.templateName"),
    printcolumn(name = "Pod", type_ = "string", json_path = ".status.podName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
    printcolumn(
        name = "Expires",
        type_ = "string",
        json_path = ".status.expiresAt",
        description = "When the access ends"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.targetPod) == has(oldSelf.targetPod) && (!has(self.targetPod) || self.targetPod == oldSelf.targetPod)")
    .message("error - Spec.TargetPod is an immutable field, create a new ExecAccessRequest instead").field_path(".targetPod"))]
#[x_kube(validation = Rule::new("self == oldSelf")
    .message("spec is immutable: a request cannot be changed after it is created; delete it and create a new one"))]
pub struct ExecAccessRequestSpec {
    /// The ExecAccessTemplate, in this namespace, to request access through.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(object_name_rule()).message(format!("spec.templateName must be {OBJECT_NAME_HINT}").as_str()))]
    pub template_name: String,

    /// A specific pod of the template's workload; a random running pod if unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(object_name_rule()).message(format!("spec.targetPod must be {OBJECT_NAME_HINT}").as_str()))]
    pub target_pod: Option<String>,

    /// How long access should last, counted from creation: a Go duration such as `30m`. Unset,
    /// empty or `0` means the template's default; longer than its maximum is clamped to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = DURATION_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(request_duration_rule()).message(format!("spec.duration must be {GO_DURATION_HINT}; empty or 0 means the template's default").as_str()))]
    pub duration: Option<String>,

    /// Who created the request, recorded by oz's admission webhook; not set by users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<Requester>,
}
