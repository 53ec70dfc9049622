//! `spec.controllerTargetMutationConfig` of a PodAccessTemplate: how the copied pod template is
//! changed before the access pod is created. Every Oz field, with Oz's meaning.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements};
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::rules::JSON_POINTER_RE;

/// At most this many patch operations per template, which bounds the cost of their CEL rules.
pub const MAX_PATCH_OPERATIONS: u32 = 64;
/// The longest patch path accepted.
pub const MAX_JSON_POINTER_LENGTH: u32 = 256;

/// Mutations applied, in Oz's order, to the PodTemplateSpec copied from the target controller.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateSpecMutationConfig {
    /// The container the container-level mutations apply to. Default: the pod's
    /// `kubectl.kubernetes.io/default-container` annotation, else the first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_container_name: Option<String>,

    /// Replaces the default container's command, and clears its args.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,

    /// Replaces the default container's args (applied after `command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,

    /// Appended to the default container's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,

    /// If set, replaces the whole resources block of the default container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Merged into the pod's annotations, overwriting existing keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_annotations: Option<BTreeMap<String, String>>,

    /// The access pod's labels. The workload's labels are always removed first, so the pod never
    /// matches the workload's selectors or Services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_labels: Option<BTreeMap<String, String>>,

    /// Clears the pod's annotations before `podAnnotations` is merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_annotations: Option<bool>,

    /// RFC 6902 operations applied last, to the whole PodTemplateSpec as JSON (paths like
    /// `/spec/containers/0/name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_PATCH_OPERATIONS))]
    pub patch_spec_operations: Option<Vec<JsonPatchOperation>>,

    /// Keeps terminationGracePeriodSeconds instead of removing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_termination_grace_period: Option<bool>,

    /// Keeps the default container's livenessProbe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_liveness_probe: Option<bool>,

    /// Keeps the default container's readinessProbe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_readiness_probe: Option<bool>,

    /// Keeps the default container's startupProbe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_startup_probe: Option<bool>,

    /// Keeps the pod's topologySpreadConstraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_topology_spread_constraints: Option<bool>,

    /// Merged into the pod's nodeSelector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// Lets `patchSpecOperations` give the access pod more privilege than the pod it copies:
    /// hostPath volumes, host namespaces, privileged containers, privilege escalation, added
    /// capabilities, another service account, a mounted token, more containers. Off by default
    /// (an oz addition; Oz applied any patch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_privileged_patches: Option<bool>,
}

/// An RFC 6902 operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PatchOp {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

/// One RFC 6902 JSON patch operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(self.op in ['move', 'copy']) || has(self.from)")
    .message("patchSpecOperations: move and copy need a from path").field_path(".from"))]
pub struct JsonPatchOperation {
    /// add, remove, replace, move, copy or test.
    pub op: PatchOp,

    /// A JSON pointer into the PodTemplateSpec, such as `/spec/containers/0/name`.
    #[x_kube(validation = Rule::new(format!("self.matches('{JSON_POINTER_RE}')"))
        .message("patchSpecOperations: path must be a JSON pointer such as /spec/containers/0/name (escape ~ as ~0 and / as ~1)"))]
    #[schemars(length(max = MAX_JSON_POINTER_LENGTH))]
    pub path: String,

    /// The source path, for move and copy (an addition to Oz, which could not express them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(format!("self.matches('{JSON_POINTER_RE}')"))
        .message("patchSpecOperations: from must be a JSON pointer such as /spec/containers/0/name"))]
    #[schemars(length(max = MAX_JSON_POINTER_LENGTH))]
    pub from: Option<String>,

    /// The value for add, replace and test: a string or an integer as in Oz, or any JSON value.
    /// (Its presence is checked when the patch is applied: the apiserver's CEL cannot see
    /// an untyped field.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json_value")]
    pub value: Option<serde_json::Value>,
}

fn any_json_value(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}
