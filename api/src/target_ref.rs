//! `spec.controllerTargetRef`: the workload whose pods a template grants access to.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::rules::{OBJECT_NAME_HINT, TARGET_PAIR_RULE, object_name_rule};

/// The workload controllers a template may target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ControllerKind {
    Deployment,
    DaemonSet,
    StatefulSet,
    /// An Argo Rollout (`argoproj.io/v1alpha1`); needs the Argo Rollouts CRD.
    Rollout,
}

impl ControllerKind {
    /// The apiVersion that goes with this kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::Deployment | Self::DaemonSet | Self::StatefulSet => "apps/v1",
            Self::Rollout => "argoproj.io/v1alpha1",
        }
    }
}

/// The supported controller apiVersions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ControllerApiVersion {
    #[serde(rename = "apps/v1")]
    AppsV1,
    #[serde(rename = "argoproj.io/v1alpha1")]
    ArgoprojV1alpha1,
}

/// A reference to a workload controller in the template's namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(TARGET_PAIR_RULE).message(
    "controllerTargetRef: apiVersion and kind do not go together: use apps/v1 with Deployment, DaemonSet or StatefulSet, or argoproj.io/v1alpha1 with Rollout"
).field_path(".kind"))]
pub struct CrossVersionObjectReference {
    /// `apps/v1`, or `argoproj.io/v1alpha1` for a Rollout.
    pub api_version: ControllerApiVersion,
    /// `Deployment`, `DaemonSet`, `StatefulSet` or `Rollout`.
    pub kind: ControllerKind,
    /// The controller's name, in the template's namespace.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(object_name_rule()).message(format!("controllerTargetRef.name must be {OBJECT_NAME_HINT}").as_str()))]
    pub name: String,
}
