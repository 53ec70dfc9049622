//! The words mutation errors are made of: the configuration's field, where a default
//! container's name came from, which privilege rule a patch broke, a patch operation's name.
//! Kept apart so that the steps and their error type ([`super::MutationError`]) can both name
//! them.

use std::fmt;

use crate::PatchOp;

/// Where the mutation configuration lives in a PodAccessTemplate, for error messages.
pub(super) const CONFIG_FIELD: &str = "spec.controllerTargetMutationConfig";

/// The pod annotation kubectl reads for the default container, which Oz also honours.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// Where the name of the default container came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultContainerOrigin {
    /// `controllerTargetMutationConfig.defaultContainerName`.
    DefaultContainerName,
    /// The pod template's `kubectl.kubernetes.io/default-container` annotation.
    Annotation,
}

impl DefaultContainerOrigin {
    pub(super) fn fix(self) -> String {
        match self {
            Self::DefaultContainerName => {
                format!("set {CONFIG_FIELD}.defaultContainerName to one of them")
            }
            Self::Annotation => format!(
                "set {CONFIG_FIELD}.defaultContainerName to one of them, or correct the \
                 annotation on the workload"
            ),
        }
    }
}

impl fmt::Display for DefaultContainerOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DefaultContainerName => write!(f, "{CONFIG_FIELD}.defaultContainerName"),
            Self::Annotation => write!(
                f,
                "the pod template's {DEFAULT_CONTAINER_ANNOTATION} annotation"
            ),
        }
    }
}

/// What a patch may not do to the access pod (see the [module documentation](super)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivilegeRule {
    /// `metadata.namespace` changed.
    Namespace,
    /// `spec.serviceAccountName` or `spec.serviceAccount` changed.
    ServiceAccount,
    /// `spec.automountServiceAccountToken` turned on.
    AutomountToken,
    /// `hostNetwork`, `hostPID`, `hostIPC` turned on, or `hostUsers: false` lifted.
    HostNamespaces,
    /// A `hostPath` volume added or changed.
    HostPathVolume,
    /// A container made `privileged`.
    Privileged,
    /// A container's `allowPrivilegeEscalation: false` lifted.
    PrivilegeEscalation,
    /// A capability added to a container, or no longer dropped.
    Capabilities,
    /// A container, init container or ephemeral container added.
    AddedContainer,
}

impl fmt::Display for PrivilegeRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Namespace => "patches may not change the pod's namespace",
            Self::ServiceAccount => "patches may not change the pod's service account",
            Self::AutomountToken => "patches may not turn on automountServiceAccountToken",
            Self::HostNamespaces => {
                "patches may not turn on hostNetwork, hostPID or hostIPC, nor lift hostUsers: false"
            }
            Self::HostPathVolume => "patches may not add or change hostPath volumes",
            Self::Privileged => "patches may not make a container privileged",
            Self::PrivilegeEscalation => {
                "patches may not lift a container's allowPrivilegeEscalation: false"
            }
            Self::Capabilities => {
                "patches may not add Linux capabilities to a container, nor stop dropping them"
            }
            Self::AddedContainer => {
                "patches may not add containers, init containers or ephemeral containers"
            }
        })
    }
}

pub(super) fn op_name(op: &PatchOp) -> &'static str {
    match op {
        PatchOp::Add => "add",
        PatchOp::Remove => "remove",
        PatchOp::Replace => "replace",
        PatchOp::Move => "move",
        PatchOp::Copy => "copy",
        PatchOp::Test => "test",
    }
}
