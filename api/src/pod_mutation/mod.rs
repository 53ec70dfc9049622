//! The access pod's template: the workload's `PodTemplateSpec` changed as a PodAccessTemplate's
//! `controllerTargetMutationConfig` says, and the enforcement of the template's `maxCpu`,
//! `maxMemory` and `maxStorage` on the pod.
//!
//! [`mutate_pod_template`] applies Oz's `PatchPodTemplateSpec` steps in Oz's order:
//!
//! 1. pick the default container: `defaultContainerName`, else the pod template's
//!    `kubectl.kubernetes.io/default-container` annotation, else the first container. A name
//!    that matches no container is an error;
//! 2. remove `terminationGracePeriodSeconds`, then the default container's liveness, readiness
//!    and startup probes, then the pod's `topologySpreadConstraints`, each unless its `keep*`
//!    flag is true;
//! 3. clear the annotations if `purgeAnnotations`, then merge `podAnnotations`;
//! 4. merge `nodeSelector`;
//! 5. clear **all** labels, then apply `podLabels`;
//! 6. on the default container: `command` (which also empties `args`), then `args`, then
//!    `resources` (the whole block), then append `env`;
//! 7. apply `patchSpecOperations` (RFC 6902) to the JSON of the whole result, so paths look like
//!    `/spec/containers/0/name`; they see the template as steps 1–6 left it;
//! 8. refuse the result if the patch gave the pod more privilege than it had before
//!    ([`privilege_raised`]), unless `allowPrivilegedPatches` is true.
//!
//! Where oz differs from Oz:
//!
//! * **No configuration still means the defaults.** Oz ran no mutation at all when
//!   `controllerTargetMutationConfig` was omitted, so the access pod kept the workload's
//!   selector labels (and so received its Service traffic and counted towards its
//!   ReplicaSet), its probes and its grace period. oz treats an omitted configuration as an
//!   empty one: labels are cleared, and the probes, grace period and topology spread
//!   constraints are dropped. The access pod never inherits the workload's labels; it only
//!   carries labels the template author wrote, in `podLabels` or a patch.
//! * `podAnnotations` on a template without annotations works; Oz wrote into a nil map and
//!   panicked.
//! * A template without containers is an error instead of an index-out-of-range panic.
//! * Patch values may be any JSON value (Oz's schema only allowed integers and strings), and
//!   `move` and `copy` can say where from. An `add`, `replace` or `test` without a value, a
//!   `move` or `copy` without `from`, a failing operation, a result that is no longer a
//!   `PodTemplateSpec`, and a patch that adds a field a `PodTemplateSpec` does not have (a
//!   misspelt path that Oz silently dropped) are errors naming the operation and the fix.
//! * Maps the steps leave empty (annotations, labels, nodeSelector) are unset, which is how Go
//!   serialised Oz's empty maps.
//!
//! * **Patches may not raise privilege** (step 8, an oz addition; Oz applied any patch). The
//!   access pod is a debugging copy of a workload's pod, and the person debugging gets exec
//!   into it, so by default it may not have more privilege than the pod it copies. A patch is
//!   refused, with an error naming the operation and the rule, if it: changes the namespace or
//!   the service account (`serviceAccountName`, `serviceAccount`); turns on
//!   `automountServiceAccountToken`; turns on `hostNetwork`, `hostPID`, `hostIPC` or
//!   `hostUsers`; adds or changes a `hostPath` volume; makes a container `privileged`; lifts a
//!   container's `allowPrivilegeEscalation: false`; adds a capability to a container or stops
//!   dropping one; or adds a container, init container or ephemeral container. Containers are
//!   compared position by position in their list, so renaming or replacing one is allowed (Oz's
//!   own example renames the container). Everything else is allowed: command, args, env,
//!   image, resources, probes, labels, annotations, node placement, other volume kinds,
//!   `runAsUser`.
//!   A template meant to build privileged pods says so with `allowPrivilegedPatches: true`.
//!
//! Nothing else is changed: service account, volumes, restart policy and the other containers
//! are inherited, as in Oz.
//!
//! [`apply_resource_caps`] enforces `maxCpu`, `maxMemory` and `maxStorage`, which Oz declared
//! but never read. It looks at every container, init container and sidecar, for each cap that is
//! set:
//!
//! * **A request or limit above the cap is rejected**, with a message naming each container,
//!   resource, value and cap, rather than silently lowered: lowering a limit the template author
//!   chose can OOM-kill or starve a debug session in ways that are hard to trace back to the
//!   template, while a clear message lets the author fix it. All violations are reported
//!   together, and the pod spec is left unchanged.
//! * **A missing limit is set to the cap**, as a LimitRange's default limit would be, so the cap
//!   always holds: a container without a limit could otherwise use any amount. This is not an
//!   error, because Oz's own example template sets requests only (and caps of 1 CPU, 1Gi memory
//!   and 1Gi storage), and it must keep working.
//!
//! Quantities are compared exactly, in Kubernetes' own precision ([`parse_quantity`]).

use std::{collections::BTreeMap, fmt};

use json_patch::{
    AddOperation, CopyOperation, MoveOperation, PatchErrorKind, PatchOperation, RemoveOperation,
    ReplaceOperation, TestOperation, jsonptr::PointerBuf,
};
use k8s_openapi::{
    api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements, SecurityContext},
    apimachinery::pkg::api::resource::Quantity,
};
use serde_json::Value;

use crate::{JsonPatchOperation, PatchOp, PodTemplateSpecMutationConfig};

/// The pod annotation kubectl reads for the default container, which Oz also honours.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// Where the mutation configuration lives in a PodAccessTemplate, for error messages.
const CONFIG_FIELD: &str = "spec.controllerTargetMutationConfig";

// ---------------------------------------------------------------------------------------------
// Mutation
// ---------------------------------------------------------------------------------------------

/// Why the workload's pod template could not be turned into the access pod's.
///
/// Every message names the field of the PodAccessTemplate (or the part of the pod template) at
/// fault and says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum MutationError {
    /// The pod template has no containers, so there is no default container to mutate.
    #[error(
        "the target's pod template has no containers, so there is no default container to apply \
         {CONFIG_FIELD} to; point spec.controllerTargetRef at a workload that runs containers"
    )]
    NoContainers,

    /// The default container was named, but no container has that name.
    #[error(
        "{origin} names the default container {name:?}, but the pod template has no such \
         container (its containers are {}); {}",
        quoted_list(.containers),
        .origin.fix()
    )]
    DefaultContainerNotFound {
        /// The name that was looked for.
        name: String,
        /// Where the name came from.
        origin: DefaultContainerOrigin,
        /// The names of the pod template's containers, in order.
        containers: Vec<String>,
    },

    /// An `add`, `replace` or `test` operation has no value.
    #[error(
        "{CONFIG_FIELD}.patchSpecOperations[{index}]: a {} operation needs a value; add \
         `value:` with the JSON value for {path} (a null value counts as missing: to unset a \
         field, use `op: remove`)",
        op_name(.op)
    )]
    PatchValueMissing {
        /// The operation's position in `patchSpecOperations`, from 0.
        index: usize,
        /// The operation.
        op: PatchOp,
        /// Its path.
        path: String,
    },

    /// A `move` or `copy` operation has no `from`.
    #[error(
        "{CONFIG_FIELD}.patchSpecOperations[{index}]: a {} operation needs a source; add \
         `from:` with the JSON pointer to {} from, such as /spec/containers/0/env",
        op_name(.op),
        op_name(.op)
    )]
    PatchFromMissing {
        /// The operation's position in `patchSpecOperations`, from 0.
        index: usize,
        /// The operation.
        op: PatchOp,
    },

    /// The `path` or `from` of an operation is not a JSON pointer.
    #[error(
        "{CONFIG_FIELD}.patchSpecOperations[{index}].{field}: {pointer:?} is not a JSON pointer \
         ({reason}); write it like /spec/containers/0/name, escaping ~ as ~0 and / as ~1"
    )]
    PatchPointerInvalid {
        /// The operation's position in `patchSpecOperations`, from 0.
        index: usize,
        /// `path` or `from`.
        field: &'static str,
        /// The pointer as given.
        pointer: String,
        /// What the JSON pointer parser said.
        reason: String,
    },

    /// An operation could not be applied (a path that does not exist, a failed `test`, ...).
    #[error(
        "{CONFIG_FIELD}.patchSpecOperations[{index}] ({} {path}) failed: {reason}",
        op_name(.op)
    )]
    PatchFailed {
        /// The operation's position in `patchSpecOperations`, from 0.
        index: usize,
        /// The operation.
        op: PatchOp,
        /// Its path.
        path: String,
        /// Why it failed, and how to fix it.
        reason: String,
    },

    /// The patched template adds a field that a PodTemplateSpec does not have.
    #[error(
        "{CONFIG_FIELD}.patchSpecOperations: the patched pod template has a field that a \
         PodTemplateSpec does not have, at {pointer}; check the spelling of the patch paths \
         (field names are camelCase, as `kubectl explain pod.spec` shows them)"
    )]
    PatchUnknownField {
        /// The JSON pointer of the unknown field.
        pointer: String,
    },

    /// The patched JSON is no longer a PodTemplateSpec.
    #[error(
        "{CONFIG_FIELD}.patchSpecOperations: the patched pod template is no longer a valid \
         PodTemplateSpec ({source}); check the types of the values the operations set (for \
         example /spec/containers/0/command takes a list of strings)"
    )]
    PatchedTemplateInvalid {
        /// The deserialisation error.
        source: serde_json::Error,
    },

    /// The patch gives the access pod more privilege than the pod it copies.
    #[error(
        "{CONFIG_FIELD}.patchSpecOperations{} raises the access pod's privilege above the pod it \
         copies: {detail}; {rule}. Remove the operation, or set \
         {CONFIG_FIELD}.allowPrivilegedPatches: true if this template is meant to build \
         privileged pods",
        culprit(.operation)
    )]
    PatchRaisesPrivilege {
        /// The first operation after which the pod breaks the rule, as its index, op and path
        /// (`None` if no prefix of the patch alone shows it).
        operation: Option<(usize, PatchOp, String)>,
        /// The rule broken.
        rule: PrivilegeRule,
        /// What exactly was raised, such as `adds hostPath volume "host" (path "/")`.
        detail: String,
    },

    /// The pod template could not be turned into JSON to patch it (not expected to happen).
    #[error(
        "could not convert the pod template to JSON to apply {CONFIG_FIELD}.patchSpecOperations: {source}"
    )]
    TemplateToJson {
        /// The serialisation error.
        source: serde_json::Error,
    },
}

/// Where the name of the default container came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultContainerOrigin {
    /// `controllerTargetMutationConfig.defaultContainerName`.
    DefaultContainerName,
    /// The pod template's `kubectl.kubernetes.io/default-container` annotation.
    Annotation,
}

impl DefaultContainerOrigin {
    fn fix(self) -> String {
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

/// Builds the access pod's template from the workload's, as described in the
/// [module documentation](self).
///
/// `config` is the PodAccessTemplate's `controllerTargetMutationConfig`; `None` applies the
/// defaults (labels cleared; probes, grace period and topology spread constraints dropped),
/// unlike Oz, which then changed nothing. `template` itself is not changed.
pub fn mutate_pod_template(
    template: &PodTemplateSpec,
    config: Option<&PodTemplateSpecMutationConfig>,
) -> Result<PodTemplateSpec, MutationError> {
    let defaults = PodTemplateSpecMutationConfig::default();
    let config = config.unwrap_or(&defaults);

    let mut pod = template.clone();
    let index = default_container_index(&pod, config)?;
    let metadata = pod.metadata.get_or_insert_default();
    // default_container_index has checked that there is a spec with this container.
    let Some(spec) = pod.spec.as_mut() else {
        return Err(MutationError::NoContainers);
    };

    // Step 2: what only makes sense for a workload's pods.
    if !config.keep_termination_grace_period.unwrap_or(false) {
        spec.termination_grace_period_seconds = None;
    }
    let container = &mut spec.containers[index];
    if !config.keep_liveness_probe.unwrap_or(false) {
        container.liveness_probe = None;
    }
    if !config.keep_readiness_probe.unwrap_or(false) {
        container.readiness_probe = None;
    }
    if !config.keep_startup_probe.unwrap_or(false) {
        container.startup_probe = None;
    }
    if !config.keep_topology_spread_constraints.unwrap_or(false) {
        spec.topology_spread_constraints = None;
    }

    // Step 3: annotations.
    if config.purge_annotations.unwrap_or(false) {
        metadata.annotations = None;
    }
    if let Some(extra) = &config.pod_annotations {
        merge_into(&mut metadata.annotations, extra);
    }

    // Step 4: node selector.
    if let Some(extra) = &config.node_selector {
        merge_into(&mut spec.node_selector, extra);
    }

    // Step 5: the workload's labels never reach the access pod.
    metadata.labels = None;
    if let Some(labels) = &config.pod_labels {
        merge_into(&mut metadata.labels, labels);
    }

    // Step 6: the default container.
    mutate_container(&mut spec.containers[index], config);

    // Steps 7 and 8: the patch, last, within the privilege of the pod it patches.
    match config.patch_spec_operations.as_deref() {
        Some(operations) if !operations.is_empty() => {
            let patched = apply_patch(&pod, operations)?;
            if !config.allow_privileged_patches.unwrap_or(false)
                && let Some((rule, detail)) = privilege_raised(&pod, &patched)
            {
                return Err(MutationError::PatchRaisesPrivilege {
                    operation: first_raising_operation(&pod, operations),
                    rule,
                    detail,
                });
            }
            Ok(patched)
        }
        _ => Ok(pod),
    }
}

/// Oz's `getDefaultContainerID`: the index of the container the container-level mutations
/// apply to. An empty name counts as no name, as in Oz.
fn default_container_index(
    pod: &PodTemplateSpec,
    config: &PodTemplateSpecMutationConfig,
) -> Result<usize, MutationError> {
    let containers = pod
        .spec
        .as_ref()
        .map(|spec| spec.containers.as_slice())
        .unwrap_or_default();
    if containers.is_empty() {
        return Err(MutationError::NoContainers);
    }

    let annotation = pod
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.annotations.as_ref())
        .and_then(|annotations| annotations.get(DEFAULT_CONTAINER_ANNOTATION));
    let wanted = match config.default_container_name.as_deref() {
        Some(name) if !name.is_empty() => {
            Some((name, DefaultContainerOrigin::DefaultContainerName))
        }
        _ => annotation
            .filter(|name| !name.is_empty())
            .map(|name| (name.as_str(), DefaultContainerOrigin::Annotation)),
    };
    let Some((name, origin)) = wanted else {
        return Ok(0);
    };

    containers
        .iter()
        .position(|container| container.name == name)
        .ok_or_else(|| MutationError::DefaultContainerNotFound {
            name: name.to_owned(),
            origin,
            containers: containers.iter().map(|c| c.name.clone()).collect(),
        })
}

/// Step 6: `command` (emptying `args`), then `args`, then `resources`, then `env`.
fn mutate_container(container: &mut Container, config: &PodTemplateSpecMutationConfig) {
    if let Some(command) = &config.command {
        container.command = Some(command.clone());
        container.args = Some(Vec::new());
    }
    if let Some(args) = &config.args {
        container.args = Some(args.clone());
    }
    // Oz replaced the block unless the configured one was the zero value; `resources: {}` and
    // no `resources` both leave the container's own.
    if let Some(resources) = &config.resources
        && *resources != ResourceRequirements::default()
    {
        container.resources = Some(resources.clone());
    }
    if let Some(env) = config.env.as_ref().filter(|env| !env.is_empty()) {
        container
            .env
            .get_or_insert_default()
            .extend(env.iter().cloned());
    }
}

/// Merges `extra` into `map`, overwriting existing keys; a map left empty is unset.
fn merge_into(map: &mut Option<BTreeMap<String, String>>, extra: &BTreeMap<String, String>) {
    let merged = map.get_or_insert_default();
    merged.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    if merged.is_empty() {
        *map = None;
    }
}

/// Step 7: applies the RFC 6902 operations to the JSON of the whole template.
fn apply_patch(
    pod: &PodTemplateSpec,
    operations: &[JsonPatchOperation],
) -> Result<PodTemplateSpec, MutationError> {
    let operations: Vec<PatchOperation> = operations
        .iter()
        .enumerate()
        .map(|(index, operation)| to_patch_operation(index, operation))
        .collect::<Result<_, _>>()?;

    let mut document =
        serde_json::to_value(pod).map_err(|source| MutationError::TemplateToJson { source })?;
    // Not `json_patch::patch`: on a failure it undoes the operations already applied, and an
    // undo that fails (a `move` whose target is invalid has already removed its source, so
    // undoing an earlier `add` under that source fails) panics. The document is thrown away on
    // any error, so there is nothing to undo. Found by fuzzing (`fuzz/`, pod_mutation).
    json_patch::patch_unsafe(&mut document, &operations).map_err(|error| {
        let index = error.operation;
        let (op, path, from) = describe(&operations[index]);
        MutationError::PatchFailed {
            index,
            op,
            path: path.clone(),
            reason: failure_reason(&error.kind, op, &path, from.as_deref()),
        }
    })?;

    let patched: PodTemplateSpec = serde_json::from_value(document.clone())
        .map_err(|source| MutationError::PatchedTemplateInvalid { source })?;
    // k8s-openapi ignores fields it does not know, so a misspelt path would vanish silently.
    let round_trip = serde_json::to_value(&patched)
        .map_err(|source| MutationError::TemplateToJson { source })?;
    if let Some(pointer) = first_dropped_field(&document, &round_trip, String::new()) {
        return Err(MutationError::PatchUnknownField { pointer });
    }
    Ok(patched)
}

/// Checks what the CRD schema cannot (a value's presence) and converts one operation.
fn to_patch_operation(
    index: usize,
    operation: &JsonPatchOperation,
) -> Result<PatchOperation, MutationError> {
    let pointer = |field: &'static str, text: &str| {
        PointerBuf::parse(text).map_err(|error| MutationError::PatchPointerInvalid {
            index,
            field,
            pointer: text.to_owned(),
            reason: error.to_string(),
        })
    };
    let path = pointer("path", &operation.path)?;
    let value = || {
        operation
            .value
            .clone()
            .ok_or_else(|| MutationError::PatchValueMissing {
                index,
                op: operation.op,
                path: operation.path.clone(),
            })
    };
    let from = || match operation.from.as_deref() {
        Some(from) => pointer("from", from),
        None => Err(MutationError::PatchFromMissing {
            index,
            op: operation.op,
        }),
    };
    Ok(match operation.op {
        PatchOp::Add => PatchOperation::Add(AddOperation {
            path,
            value: value()?,
        }),
        PatchOp::Remove => PatchOperation::Remove(RemoveOperation { path }),
        PatchOp::Replace => PatchOperation::Replace(ReplaceOperation {
            path,
            value: value()?,
        }),
        PatchOp::Move => PatchOperation::Move(MoveOperation {
            from: from()?,
            path,
        }),
        PatchOp::Copy => PatchOperation::Copy(CopyOperation {
            from: from()?,
            path,
        }),
        PatchOp::Test => PatchOperation::Test(TestOperation {
            path,
            value: value()?,
        }),
    })
}

/// The op, path and from of a converted operation, for error messages.
fn describe(operation: &PatchOperation) -> (PatchOp, String, Option<String>) {
    match operation {
        PatchOperation::Add(op) => (PatchOp::Add, op.path.to_string(), None),
        PatchOperation::Remove(op) => (PatchOp::Remove, op.path.to_string(), None),
        PatchOperation::Replace(op) => (PatchOp::Replace, op.path.to_string(), None),
        PatchOperation::Move(op) => (
            PatchOp::Move,
            op.path.to_string(),
            Some(op.from.to_string()),
        ),
        PatchOperation::Copy(op) => (
            PatchOp::Copy,
            op.path.to_string(),
            Some(op.from.to_string()),
        ),
        PatchOperation::Test(op) => (PatchOp::Test, op.path.to_string(), None),
    }
}

/// Why an operation failed, in terms of the pod template, with the fix.
fn failure_reason(kind: &PatchErrorKind, op: PatchOp, path: &str, from: Option<&str>) -> String {
    const PATH_HINT: &str = "paths refer to the pod template after the other mutations (labels \
        cleared, probes dropped, ...), unset fields are absent, and array indexes count from 0";
    match kind {
        PatchErrorKind::TestFailed => format!(
            "the value at {path} is not equal to the operation's value; correct the value, or \
             remove the test if the template may differ"
        ),
        PatchErrorKind::InvalidFromPointer => format!(
            "from {} does not exist in the pod template; {PATH_HINT}",
            from.unwrap_or_default()
        ),
        PatchErrorKind::InvalidPointer if op == PatchOp::Add => format!(
            "the parent of {path} does not exist in the pod template, or the array index is past \
             the end (use /- to append); add the parent object first; {PATH_HINT}"
        ),
        PatchErrorKind::InvalidPointer => {
            format!("{path} does not exist in the pod template; {PATH_HINT}")
        }
        PatchErrorKind::CannotMoveInsideItself => format!(
            "cannot move {} into its own child {path}; choose a path outside it",
            from.unwrap_or_default()
        ),
        other => other.to_string(),
    }
}

/// The JSON pointer of the first non-null field of `patched` that is missing from `typed`
/// (the same document after a round trip through [`PodTemplateSpec`]).
fn first_dropped_field(patched: &Value, typed: &Value, pointer: String) -> Option<String> {
    match (patched, typed) {
        (Value::Object(patched), Value::Object(typed)) => {
            patched.iter().find_map(|(key, value)| {
                if value.is_null() {
                    return None;
                }
                let pointer = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match typed.get(key) {
                    None => Some(pointer),
                    Some(typed) => first_dropped_field(value, typed, pointer),
                }
            })
        }
        (Value::Array(patched), Value::Array(typed)) => patched
            .iter()
            .zip(typed)
            .enumerate()
            .find_map(|(i, (patched, typed))| {
                first_dropped_field(patched, typed, format!("{pointer}/{i}"))
            }),
        _ => None,
    }
}

fn op_name(op: &PatchOp) -> &'static str {
    match op {
        PatchOp::Add => "add",
        PatchOp::Remove => "remove",
        PatchOp::Replace => "replace",
        PatchOp::Move => "move",
        PatchOp::Copy => "copy",
        PatchOp::Test => "test",
    }
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Privilege
// ---------------------------------------------------------------------------------------------

/// What a patch may not do to the access pod (see the [module documentation](self)).
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

/// Which list of a pod spec a container is in, for the privilege check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ContainerKind {
    Container,
    InitContainer,
    EphemeralContainer,
}

impl ContainerKind {
    fn singular(self) -> &'static str {
        match self {
            Self::Container => "container",
            Self::InitContainer => "init container",
            Self::EphemeralContainer => "ephemeral container",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Self::Container => "containers",
            Self::InitContainer => "initContainers",
            Self::EphemeralContainer => "ephemeralContainers",
        }
    }
}

fn culprit(operation: &Option<(usize, PatchOp, String)>) -> String {
    match operation {
        Some((index, op, path)) => format!("[{index}] ({} {path})", op_name(op)),
        None => String::new(),
    }
}

/// The first way `patched` has more privilege than `source`, as the rule broken and what
/// exactly was raised; `None` if it has no more. Step 8 of [`mutate_pod_template`].
pub fn privilege_raised(
    source: &PodTemplateSpec,
    patched: &PodTemplateSpec,
) -> Option<(PrivilegeRule, String)> {
    let namespace = |t: &PodTemplateSpec| t.metadata.as_ref().and_then(|m| m.namespace.clone());
    if namespace(source) != namespace(patched) {
        return Some((
            PrivilegeRule::Namespace,
            format!(
                "sets metadata.namespace to {:?}",
                namespace(patched).unwrap_or_default()
            ),
        ));
    }
    let empty = PodSpec::default();
    let before = source.spec.as_ref().unwrap_or(&empty);
    let after = patched.spec.as_ref().unwrap_or(&empty);

    for (field, old, new) in [
        (
            "serviceAccountName",
            &before.service_account_name,
            &after.service_account_name,
        ),
        (
            "serviceAccount",
            &before.service_account,
            &after.service_account,
        ),
    ] {
        if old != new {
            return Some((
                PrivilegeRule::ServiceAccount,
                format!(
                    "changes spec.{field} from {:?} to {:?}",
                    old.as_deref().unwrap_or_default(),
                    new.as_deref().unwrap_or_default()
                ),
            ));
        }
    }
    if turned_on(
        before.automount_service_account_token,
        after.automount_service_account_token,
    ) {
        return Some((
            PrivilegeRule::AutomountToken,
            format!(
                "changes spec.automountServiceAccountToken from {} to {}",
                shown(before.automount_service_account_token),
                shown(after.automount_service_account_token)
            ),
        ));
    }
    for (field, old, new) in [
        ("hostNetwork", before.host_network, after.host_network),
        ("hostPID", before.host_pid, after.host_pid),
        ("hostIPC", before.host_ipc, after.host_ipc),
    ] {
        if new == Some(true) && old != Some(true) {
            return Some((
                PrivilegeRule::HostNamespaces,
                format!("sets spec.{field}: true"),
            ));
        }
    }
    if before.host_users == Some(false) && after.host_users != Some(false) {
        return Some((
            PrivilegeRule::HostNamespaces,
            format!(
                "changes spec.hostUsers from false to {}",
                shown(after.host_users)
            ),
        ));
    }

    let old_volumes = before.volumes.as_deref().unwrap_or_default();
    for volume in after.volumes.iter().flatten() {
        let Some(host_path) = &volume.host_path else {
            continue;
        };
        let unchanged = old_volumes
            .iter()
            .any(|old| old.name == volume.name && old.host_path.as_ref() == Some(host_path));
        if !unchanged {
            return Some((
                PrivilegeRule::HostPathVolume,
                format!(
                    "adds hostPath volume {:?} (path {:?})",
                    volume.name, host_path.path
                ),
            ));
        }
    }

    // Containers are compared position by position in each list, so a patch may rename or
    // replace a container (Oz's own example renames one) but not add one.
    let old_containers: Vec<(ContainerKind, usize, Option<&SecurityContext>)> =
        security_contexts(before)
            .map(|(kind, index, _, context)| (kind, index, context))
            .collect();
    for (kind, index, name, context) in security_contexts(after) {
        let Some(&(_, _, old)) = old_containers
            .iter()
            .find(|(old_kind, old_index, _)| *old_kind == kind && *old_index == index)
        else {
            return Some((
                PrivilegeRule::AddedContainer,
                format!(
                    "adds {} {name:?} at spec.{}[{index}]",
                    kind.singular(),
                    kind.field()
                ),
            ));
        };
        let (old, new) = (
            old.cloned().unwrap_or_default(),
            context.cloned().unwrap_or_default(),
        );
        let container = format!("{} {name:?}", kind.singular());
        if new.privileged == Some(true) && old.privileged != Some(true) {
            return Some((
                PrivilegeRule::Privileged,
                format!("sets securityContext.privileged: true on {container}"),
            ));
        }
        if old.allow_privilege_escalation == Some(false)
            && new.allow_privilege_escalation != Some(false)
        {
            return Some((
                PrivilegeRule::PrivilegeEscalation,
                format!(
                    "changes securityContext.allowPrivilegeEscalation of {container} from false to {}",
                    shown(new.allow_privilege_escalation)
                ),
            ));
        }
        let capabilities = |c: &SecurityContext, added: bool| -> Vec<String> {
            let caps = c.capabilities.as_ref();
            let list = if added {
                caps.and_then(|c| c.add.clone())
            } else {
                caps.and_then(|c| c.drop.clone())
            };
            list.unwrap_or_default()
        };
        let old_added = capabilities(&old, true);
        if let Some(capability) = capabilities(&new, true)
            .into_iter()
            .find(|c| !old_added.contains(c))
        {
            return Some((
                PrivilegeRule::Capabilities,
                format!("adds capability {capability} to {container}"),
            ));
        }
        let new_dropped = capabilities(&new, false);
        if let Some(capability) = capabilities(&old, false)
            .into_iter()
            .find(|c| !new_dropped.contains(c))
        {
            return Some((
                PrivilegeRule::Capabilities,
                format!("no longer drops capability {capability} from {container}"),
            ));
        }
    }
    None
}

/// Whether an optional flag whose absence defers to a default went from "not forced on" to
/// forced on, or from forced off to anything else.
fn turned_on(before: Option<bool>, after: Option<bool>) -> bool {
    (after == Some(true) && before != Some(true)) || (before == Some(false) && after != Some(false))
}

fn shown(value: Option<bool>) -> String {
    value.map_or_else(|| "unset".to_owned(), |v| v.to_string())
}

/// Every container of every list: its list, position, name and security context.
fn security_contexts(
    spec: &PodSpec,
) -> impl Iterator<Item = (ContainerKind, usize, &str, Option<&SecurityContext>)> {
    let containers = spec.containers.iter().enumerate().map(|(i, c)| {
        let context = c.security_context.as_ref();
        (ContainerKind::Container, i, c.name.as_str(), context)
    });
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let context = c.security_context.as_ref();
            (ContainerKind::InitContainer, i, c.name.as_str(), context)
        });
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let context = c.security_context.as_ref();
            (
                ContainerKind::EphemeralContainer,
                i,
                c.name.as_str(),
                context,
            )
        });
    containers.chain(init).chain(ephemeral)
}

/// The first operation after which the patched template (when it is one) has more privilege
/// than `source`, for the error message.
fn first_raising_operation(
    source: &PodTemplateSpec,
    operations: &[JsonPatchOperation],
) -> Option<(usize, PatchOp, String)> {
    (1..=operations.len()).find_map(|applied| {
        let patched = apply_patch(source, &operations[..applied]).ok()?;
        privilege_raised(source, &patched)?;
        let operation = &operations[applied - 1];
        Some((applied - 1, operation.op, operation.path.clone()))
    })
}

// ---------------------------------------------------------------------------------------------
// Quantities
// ---------------------------------------------------------------------------------------------

/// Nano-units per unit: Kubernetes keeps quantities to nine decimal places.
const NANOS_PER_UNIT: u128 = 1_000_000_000;
/// Kubernetes caps every quantity at 2^63-1 units.
const MAX_NANOS: u128 = i64::MAX as u128 * NANOS_PER_UNIT;
/// Exponents beyond this saturate to the cap or to one nano-unit all the same.
const EXPONENT_LIMIT: i64 = 1_000_000;
/// A value with more digits (in nano-units) than this is far above the cap.
const MAX_NANO_DIGITS: usize = 30;

/// The exact value of a Kubernetes quantity, in nano-units (`1` is 10^9, `100m` is 10^8,
/// `1Ki` is 1024 × 10^9).
///
/// It is what the apiserver makes of the string: values more precise than a nano-unit are
/// rounded up (away from zero), and magnitudes above 2^63-1 units are capped there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuantityValue {
    nanos: i128,
}

impl QuantityValue {
    /// The value in nano-units.
    pub fn nanos(self) -> i128 {
        self.nanos
    }
}

/// Why a quantity string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("the quantity is empty: {QUANTITY_HINT}")]
    Empty,

    /// The string does not start with a number.
    #[error("invalid quantity {input:?}: it must start with a number; {QUANTITY_HINT}")]
    InvalidNumber {
        /// The string as given.
        input: String,
    },

    /// The number is followed by something that is not a suffix or an exponent.
    #[error("invalid quantity {input:?}: unknown suffix {suffix:?}; {QUANTITY_HINT}")]
    UnknownSuffix {
        /// The string as given.
        input: String,
        /// Everything after the number.
        suffix: String,
    },
}

const QUANTITY_HINT: &str = "write a number with an optional suffix (n, u, m, k, M, G, T, P, E, \
    Ki, Mi, Gi, Ti, Pi, Ei) or an integer exponent, such as 100m, 0.5, 2, 128Mi, 1Gi or 1e3";

/// Parses a Kubernetes quantity exactly as the apiserver does (`resource.ParseQuantity`).
///
/// The grammar is an optional sign, a decimal number (`1`, `1.5`, `1.`, `.5`), and an optional
/// suffix: decimal SI `n u m k M G T P E`, binary SI `Ki Mi Gi Ti Pi Ei`, or an exponent `e3`,
/// `E-2`. No floating point is involved.
///
/// ```
/// use oz_api::pod_mutation::parse_quantity;
///
/// assert_eq!(parse_quantity("100m").unwrap().nanos(), 100_000_000);
/// assert_eq!(parse_quantity("1Ki").unwrap().nanos(), 1024 * 1_000_000_000);
/// assert!(parse_quantity("1Gi").unwrap() > parse_quantity("1G").unwrap());
/// assert_eq!(parse_quantity("0.5").unwrap(), parse_quantity("500m").unwrap());
/// assert!(parse_quantity("1 Gi").is_err());
/// ```
pub fn parse_quantity(input: &str) -> Result<QuantityValue, QuantityError> {
    if input.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid_number = || QuantityError::InvalidNumber {
        input: input.to_owned(),
    };

    let (negative, rest) = match input.as_bytes()[0] {
        b'-' => (true, &input[1..]),
        b'+' => (false, &input[1..]),
        _ => (false, input),
    };
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (int_digits, rest) = rest.split_at(int_len);
    let (frac_digits, suffix) = match rest.strip_prefix('.') {
        Some(after_dot) => {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            after_dot.split_at(frac_len)
        }
        None => ("", rest),
    };
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(invalid_number());
    }

    let (pow10, pow2) = parse_suffix(suffix).ok_or_else(|| QuantityError::UnknownSuffix {
        input: input.to_owned(),
        suffix: suffix.to_owned(),
    })?;
    let nanos = to_nanos(int_digits, frac_digits, pow10, pow2);
    // to_nanos saturates at MAX_NANOS, which fits an i128.
    let nanos = i128::try_from(nanos).unwrap_or(i128::MAX);
    Ok(QuantityValue {
        nanos: if negative { -nanos } else { nanos },
    })
}

/// The power of ten and the power of two a suffix stands for.
fn parse_suffix(suffix: &str) -> Option<(i64, u32)> {
    let decimal = |pow10| Some((pow10, 0));
    let binary = |pow2| Some((0, pow2));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            let (negative, digits) = match exponent.as_bytes().first()? {
                b'-' => (true, &exponent[1..]),
                b'+' => (false, &exponent[1..]),
                _ => (false, exponent),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let magnitude = digits
                .parse::<i64>()
                .unwrap_or(i64::MAX)
                .min(EXPONENT_LIMIT);
            decimal(if negative { -magnitude } else { magnitude })
        }
    }
}

/// ⌈(int.frac) × 10^pow10 × 2^pow2 × 10^9⌉, capped at [`MAX_NANOS`], computed on decimal digits
/// so that any input is exact.
fn to_nanos(int_digits: &str, frac_digits: &str, pow10: i64, pow2: u32) -> u128 {
    let mut digits: Vec<u8> = int_digits
        .bytes()
        .chain(frac_digits.bytes())
        .map(|b| b - b'0')
        .skip_while(|&d| d == 0)
        .collect();
    if digits.is_empty() {
        return 0;
    }
    // The value in nano-units is `digits × 10^exponent`.
    let frac_len = i64::try_from(frac_digits.len()).unwrap_or(i64::MAX);
    let mut exponent = pow10.saturating_sub(frac_len).saturating_add(9);
    while digits.last() == Some(&0) {
        digits.pop();
        exponent += 1;
    }
    for _ in 0..pow2 {
        double(&mut digits);
    }

    let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    if exponent >= 0 {
        if len.saturating_add(exponent) > MAX_NANO_DIGITS as i64 {
            return MAX_NANOS;
        }
        let scale = 10u128.pow(u32::try_from(exponent).unwrap_or(0));
        return (digits_value(&digits) * scale).min(MAX_NANOS);
    }
    // Below the nano-unit: keep the integer part, and round any remainder up.
    let shift = usize::try_from(exponent.unsigned_abs()).unwrap_or(usize::MAX);
    if digits.len() <= shift {
        return 1;
    }
    let (whole, fraction) = digits.split_at(digits.len() - shift);
    if whole.len() > MAX_NANO_DIGITS {
        return MAX_NANOS;
    }
    let round_up = u128::from(fraction.iter().any(|&d| d != 0));
    (digits_value(whole) + round_up).min(MAX_NANOS)
}

/// Doubles a big-endian decimal digit string in place.
fn double(digits: &mut Vec<u8>) {
    let mut carry = 0;
    for digit in digits.iter_mut().rev() {
        let doubled = *digit * 2 + carry;
        *digit = doubled % 10;
        carry = doubled / 10;
    }
    if carry > 0 {
        digits.insert(0, carry);
    }
}

/// The value of at most [`MAX_NANO_DIGITS`] decimal digits.
fn digits_value(digits: &[u8]) -> u128 {
    digits
        .iter()
        .fold(0, |value, &digit| value * 10 + u128::from(digit))
}

// ---------------------------------------------------------------------------------------------
// Resource caps
// ---------------------------------------------------------------------------------------------

/// A resource a PodAccessTemplate can cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CappedResource {
    /// `cpu`, capped by `maxCpu`.
    Cpu,
    /// `memory`, capped by `maxMemory`.
    Memory,
    /// `ephemeral-storage`, capped by `maxStorage`.
    EphemeralStorage,
}

impl CappedResource {
    /// The resource's name in `requests` and `limits`.
    pub fn resource_name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Memory => "memory",
            Self::EphemeralStorage => "ephemeral-storage",
        }
    }

    /// The PodAccessTemplate field that caps it.
    pub fn cap_field(self) -> &'static str {
        match self {
            Self::Cpu => "spec.maxCpu",
            Self::Memory => "spec.maxMemory",
            Self::EphemeralStorage => "spec.maxStorage",
        }
    }
}

/// Which list of the pod spec a container is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerList {
    /// `spec.containers`.
    Containers,
    /// `spec.initContainers`, sidecars included.
    InitContainers,
}

/// A container of the access pod, as error messages name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerRef {
    /// The list it is in.
    pub list: ContainerList,
    /// Its position in that list, from 0.
    pub index: usize,
    /// Its name.
    pub name: String,
}

impl fmt::Display for ContainerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, field) = match self.list {
            ContainerList::Containers => ("container", "containers"),
            ContainerList::InitContainers => ("init container", "initContainers"),
        };
        write!(f, "{kind} {:?} (spec.{field}[{}])", self.name, self.index)
    }
}

/// How a container breaks a cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapProblem {
    /// Its request is above the cap.
    RequestAboveCap {
        /// The request as written.
        value: String,
    },
    /// Its limit is above the cap.
    LimitAboveCap {
        /// The limit as written.
        value: String,
    },
}

/// One way the access pod breaks one of the template's caps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapViolation {
    /// The container.
    pub container: ContainerRef,
    /// The resource.
    pub resource: CappedResource,
    /// What is wrong.
    pub problem: CapProblem,
    /// The cap as written in the template.
    pub cap: String,
}

impl fmt::Display for CapViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = self.resource.resource_name();
        let field = self.resource.cap_field();
        let cap = &self.cap;
        let container = &self.container;
        match &self.problem {
            CapProblem::RequestAboveCap { value } => write!(
                f,
                "{container}: requests.{resource} {value} is above {field} {cap}"
            ),
            CapProblem::LimitAboveCap { value } => write!(
                f,
                "{container}: limits.{resource} {value} is above {field} {cap}"
            ),
        }
    }
}

/// Why the access pod breaks the PodAccessTemplate's `maxCpu`, `maxMemory` or `maxStorage`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourceCapError {
    /// A cap in the template is not a quantity.
    #[error("{field}: {source}; fix it in the PodAccessTemplate")]
    InvalidCap {
        /// `spec.maxCpu`, `spec.maxMemory` or `spec.maxStorage`.
        field: &'static str,
        /// Why it was refused (it holds the value as written).
        source: QuantityError,
    },

    /// A container's request or limit is not a quantity.
    #[error(
        "{container}: {kind}.{resource}: {source}; fix it in the workload or in \
         spec.controllerTargetMutationConfig"
    )]
    InvalidQuantity {
        /// The container.
        container: ContainerRef,
        /// `requests` or `limits`.
        kind: &'static str,
        /// The resource name.
        resource: &'static str,
        /// Why it was refused (it holds the value as written).
        source: QuantityError,
    },

    /// Containers have requests or limits above a cap.
    #[error("{}", OverCapMessage(.violations))]
    OverCap {
        /// Every violation, container by container.
        violations: Vec<CapViolation>,
    },
}

struct OverCapMessage<'a>(&'a [CapViolation]);

impl fmt::Display for OverCapMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the access pod exceeds the PodAccessTemplate's resource caps: "
        )?;
        for (i, violation) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{violation}")?;
        }
        let mut fields: Vec<&str> = self.0.iter().map(|v| v.resource.cap_field()).collect();
        fields.sort_unstable();
        fields.dedup();
        write!(
            f,
            ". To fix the PodAccessTemplate, give every container requests and limits within the \
             caps (the default container's in spec.controllerTargetMutationConfig.resources, \
             other containers' with spec.controllerTargetMutationConfig.patchSpecOperations such \
             as replace /spec/containers/1/resources, or in spec.podSpec), or raise {}",
            fields.join(" / ")
        )
    }
}

/// Enforces the template's caps on every container, init container and sidecar of `spec`;
/// `None` means no cap.
///
/// A request or limit above a set cap is a violation: all of them are reported together in
/// [`ResourceCapError::OverCap`], and `spec` is left unchanged. Otherwise every container without
/// a limit for a capped resource gets the cap as its limit, so the cap always holds.
///
/// Call it on the final spec, after [`mutate_pod_template`].
pub fn apply_resource_caps(
    spec: &mut PodSpec,
    max_cpu: Option<&Quantity>,
    max_memory: Option<&Quantity>,
    max_storage: Option<&Quantity>,
) -> Result<(), ResourceCapError> {
    let mut caps = Vec::new();
    for (resource, cap) in [
        (CappedResource::Cpu, max_cpu),
        (CappedResource::Memory, max_memory),
        (CappedResource::EphemeralStorage, max_storage),
    ] {
        if let Some(cap) = cap {
            let value = parse_quantity(&cap.0).map_err(|source| ResourceCapError::InvalidCap {
                field: resource.cap_field(),
                source,
            })?;
            caps.push((resource, cap, value));
        }
    }
    if caps.is_empty() {
        return Ok(());
    }

    // Check everything first, so that an error leaves the spec as it was.
    let mut violations = Vec::new();
    // (list, index, resource, cap) of every limit to fill in.
    let mut missing_limits = Vec::new();
    for (list, index, container) in all_containers(spec) {
        let container_ref = ContainerRef {
            list,
            index,
            name: container.name.clone(),
        };
        let resources = container.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        for &(resource, cap_quantity, cap) in &caps {
            let name = resource.resource_name();
            let parse = |kind: &'static str, quantity: &Quantity| {
                parse_quantity(&quantity.0).map_err(|source| ResourceCapError::InvalidQuantity {
                    container: container_ref.clone(),
                    kind,
                    resource: name,
                    source,
                })
            };
            let mut violation = |problem| {
                violations.push(CapViolation {
                    container: container_ref.clone(),
                    resource,
                    problem,
                    cap: cap_quantity.0.clone(),
                });
            };
            if let Some(request) = requests.and_then(|r| r.get(name))
                && parse("requests", request)? > cap
            {
                violation(CapProblem::RequestAboveCap {
                    value: request.0.clone(),
                });
            }
            match limits.and_then(|l| l.get(name)) {
                None => missing_limits.push((list, index, name, cap_quantity)),
                Some(limit) if parse("limits", limit)? > cap => {
                    violation(CapProblem::LimitAboveCap {
                        value: limit.0.clone(),
                    });
                }
                Some(_) => {}
            }
        }
    }
    if !violations.is_empty() {
        return Err(ResourceCapError::OverCap { violations });
    }

    for (list, index, name, cap) in missing_limits {
        let container = match list {
            ContainerList::Containers => &mut spec.containers[index],
            ContainerList::InitContainers => &mut spec
                .init_containers
                .as_mut()
                .expect("init containers were just listed")[index],
        };
        container
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .limits
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_owned(), cap.clone());
    }
    Ok(())
}

/// Every container of `spec`, then every init container (sidecars included), with its list and
/// position.
fn all_containers(spec: &PodSpec) -> impl Iterator<Item = (ContainerList, usize, &Container)> {
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(index, c)| (ContainerList::Containers, index, c));
    let init_containers = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(index, c)| (ContainerList::InitContainers, index, c));
    containers.chain(init_containers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::EnvVar;
    use serde_json::json;

    // ----- fixtures ---------------------------------------------------------------------------

    fn template(value: Value) -> PodTemplateSpec {
        serde_json::from_value(value).expect("test template is a PodTemplateSpec")
    }

    fn config(value: Value) -> PodTemplateSpecMutationConfig {
        serde_json::from_value(value).expect("test config is a PodTemplateSpecMutationConfig")
    }

    fn mutate(template: &PodTemplateSpec, config: &PodTemplateSpecMutationConfig) -> Value {
        let mutated = mutate_pod_template(template, Some(config))
            .unwrap_or_else(|error| panic!("mutation failed: {error}"));
        serde_json::to_value(mutated).unwrap()
    }

    fn mutate_err(template: &PodTemplateSpec, config: &PodTemplateSpecMutationConfig) -> String {
        mutate_pod_template(template, Some(config))
            .expect_err("mutation should fail")
            .to_string()
    }

    fn probe() -> Value {
        json!({"httpGet": {"path": "/healthz", "port": 80}})
    }

    /// The pod template of Oz's examples/deployment.yaml (plus the grace period oz.md §8 lists).
    fn oz_example_deployment_template() -> PodTemplateSpec {
        template(json!({
            "metadata": {"labels": {"oz-examples": "example"}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{
                    "name": "nginx",
                    "image": "nginx:latest",
                    "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
                    "env": [
                        {"name": "FOO", "value": "foo"},
                        {"name": "FOOBAR", "value": "foobar"}
                    ],
                    "resources": {
                        "limits": {"cpu": "1", "memory": "128Mi"},
                        "requests": {"cpu": "10m", "memory": "10Mi"}
                    }
                }]
            }
        }))
    }

    /// The controllerTargetMutationConfig of Oz's examples/pod_access_template.yaml.
    fn oz_example_config() -> PodTemplateSpecMutationConfig {
        config(json!({
            "command": ["/bin/sleep", "999999"],
            "env": [{"name": "FOO", "value": "bar"}],
            "resources": {"requests": {"memory": "42Mi", "cpu": "100m"}},
            "patchSpecOperations": [
                {"op": "replace", "path": "/spec/containers/0/name", "value": "dennis"}
            ]
        }))
    }

    /// A workload template with everything the default mutations remove, two containers and an
    /// init container.
    fn busy_template() -> PodTemplateSpec {
        template(json!({
            "metadata": {
                "labels": {"app": "shop", "pod-template-hash": "5d4f8"},
                "annotations": {"team": "payments", "prometheus.io/scrape": "true"}
            },
            "spec": {
                "terminationGracePeriodSeconds": 60,
                "nodeSelector": {"disk": "ssd"},
                "topologySpreadConstraints": [{
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "shop"}}
                }],
                "initContainers": [{"name": "migrate", "image": "shop:1", "command": ["migrate"]}],
                "containers": [
                    {
                        "name": "app",
                        "image": "shop:1",
                        "command": ["shop"],
                        "args": ["--serve"],
                        "env": [{"name": "MODE", "value": "prod"}],
                        "resources": {"limits": {"cpu": "2"}},
                        "livenessProbe": probe(),
                        "readinessProbe": probe(),
                        "startupProbe": probe()
                    },
                    {
                        "name": "proxy",
                        "image": "envoy:1",
                        "args": ["--config", "/etc/envoy.yaml"],
                        "livenessProbe": probe(),
                        "readinessProbe": probe(),
                        "startupProbe": probe()
                    }
                ]
            }
        }))
    }

    fn with_annotation(mut template: PodTemplateSpec, key: &str, value: &str) -> PodTemplateSpec {
        template
            .metadata
            .get_or_insert_default()
            .annotations
            .get_or_insert_default()
            .insert(key.into(), value.into());
        template
    }

    fn has_probes(container: &Value) -> [bool; 3] {
        ["livenessProbe", "readinessProbe", "startupProbe"].map(|p| container.get(p).is_some())
    }

    // ----- Oz scenario 10 -----------------------------------------------------------------------

    #[test]
    fn oz_scenario_10_example_template() {
        let pod = mutate(&oz_example_deployment_template(), &oz_example_config());
        let container = &pod["spec"]["containers"][0];

        assert_eq!(container["name"], "dennis");
        assert_eq!(container["command"], json!(["/bin/sleep", "999999"]));
        assert_eq!(container["args"], json!([]));
        assert_eq!(
            container["env"],
            json!([
                {"name": "FOO", "value": "foo"},
                {"name": "FOOBAR", "value": "foobar"},
                {"name": "FOO", "value": "bar"}
            ])
        );
        // `resources` replaces the whole block: the Deployment's limits are gone.
        assert_eq!(
            container["resources"],
            json!({"requests": {"memory": "42Mi", "cpu": "100m"}})
        );
        assert_eq!(has_probes(container), [false; 3]);
        assert!(pod["metadata"].get("labels").is_none(), "{pod}");
        assert!(pod["spec"].get("terminationGracePeriodSeconds").is_none());
        // Everything else is inherited.
        assert_eq!(container["image"], "nginx:latest");
        assert_eq!(container["ports"][0]["containerPort"], 80);
    }

    // ----- no configuration ---------------------------------------------------------------------

    #[test]
    fn no_config_still_strips_labels_probes_grace_period_and_spread_constraints() {
        let source = busy_template();
        let pod = serde_json::to_value(mutate_pod_template(&source, None).unwrap()).unwrap();

        assert!(pod["metadata"].get("labels").is_none(), "{pod}");
        assert!(pod["spec"].get("terminationGracePeriodSeconds").is_none());
        assert!(pod["spec"].get("topologySpreadConstraints").is_none());
        assert_eq!(has_probes(&pod["spec"]["containers"][0]), [false; 3]);

        // Only the default container loses its probes; nothing else changes.
        assert_eq!(has_probes(&pod["spec"]["containers"][1]), [true; 3]);
        assert_eq!(
            pod["metadata"]["annotations"],
            json!({"team": "payments", "prometheus.io/scrape": "true"})
        );
        assert_eq!(pod["spec"]["nodeSelector"], json!({"disk": "ssd"}));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["shop"]));
        assert_eq!(pod["spec"]["containers"][0]["args"], json!(["--serve"]));
        assert_eq!(pod["spec"]["initContainers"][0]["name"], "migrate");
    }

    #[test]
    fn no_config_and_an_empty_config_are_the_same() {
        let source = busy_template();
        assert_eq!(
            mutate_pod_template(&source, None).unwrap(),
            mutate_pod_template(&source, Some(&PodTemplateSpecMutationConfig::default())).unwrap()
        );
    }

    #[test]
    fn the_source_template_is_left_unchanged() {
        let source = busy_template();
        let before = source.clone();
        mutate_pod_template(&source, Some(&oz_example_config())).unwrap();
        assert_eq!(source, before);
    }

    // ----- default container --------------------------------------------------------------------

    #[test]
    fn default_container_is_the_first_without_name_or_annotation() {
        let pod = mutate(&busy_template(), &config(json!({"command": ["sleep"]})));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["sleep"]));
        assert_eq!(pod["spec"]["containers"][1].get("command"), None);
    }

    #[test]
    fn default_container_name_selects_the_container_for_every_container_mutation() {
        let pod = mutate(
            &busy_template(),
            &config(json!({
                "defaultContainerName": "proxy",
                "command": ["sleep"],
                "env": [{"name": "DEBUG", "value": "1"}],
                "resources": {"limits": {"memory": "1Gi"}}
            })),
        );
        let [app, proxy] = [&pod["spec"]["containers"][0], &pod["spec"]["containers"][1]];
        assert_eq!(proxy["command"], json!(["sleep"]));
        assert_eq!(proxy["args"], json!([]));
        assert_eq!(proxy["env"], json!([{"name": "DEBUG", "value": "1"}]));
        assert_eq!(proxy["resources"], json!({"limits": {"memory": "1Gi"}}));
        assert_eq!(has_probes(proxy), [false; 3]);

        assert_eq!(app["command"], json!(["shop"]));
        assert_eq!(app["args"], json!(["--serve"]));
        assert_eq!(app["env"], json!([{"name": "MODE", "value": "prod"}]));
        assert_eq!(app["resources"], json!({"limits": {"cpu": "2"}}));
        assert_eq!(has_probes(app), [true; 3]);
    }

    #[test]
    fn default_container_annotation_is_used_without_a_name() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(&source, &config(json!({"command": ["sleep"]})));
        assert_eq!(pod["spec"]["containers"][1]["command"], json!(["sleep"]));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["shop"]));
    }

    #[test]
    fn default_container_name_wins_over_the_annotation() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(
            &source,
            &config(json!({"defaultContainerName": "app", "command": ["sleep"]})),
        );
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["sleep"]));
        assert_eq!(pod["spec"]["containers"][1].get("command"), None);
    }

    #[test]
    fn empty_default_container_name_falls_back_to_the_annotation() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(
            &source,
            &config(json!({"defaultContainerName": "", "command": ["sleep"]})),
        );
        assert_eq!(pod["spec"]["containers"][1]["command"], json!(["sleep"]));
    }

    #[test]
    fn empty_annotation_means_the_first_container() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "");
        let pod = mutate(&source, &config(json!({"command": ["sleep"]})));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["sleep"]));
    }

    #[test]
    fn annotation_is_read_before_annotations_are_purged() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(
            &source,
            &config(json!({"purgeAnnotations": true, "command": ["sleep"]})),
        );
        assert_eq!(pod["spec"]["containers"][1]["command"], json!(["sleep"]));
        assert!(pod["metadata"].get("annotations").is_none());
    }

    #[test]
    fn unknown_default_container_name_is_an_error_listing_the_containers() {
        let error = mutate_pod_template(
            &busy_template(),
            Some(&config(json!({"defaultContainerName": "ngnix"}))),
        )
        .unwrap_err();
        assert!(matches!(
            &error,
            MutationError::DefaultContainerNotFound {
                origin: DefaultContainerOrigin::DefaultContainerName,
                ..
            }
        ));
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.defaultContainerName names the default container \
             \"ngnix\", but the pod template has no such container (its containers are \"app\", \
             \"proxy\"); set spec.controllerTargetMutationConfig.defaultContainerName to one of \
             them"
        );
    }

    #[test]
    fn annotation_naming_a_missing_container_is_an_error() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "gone");
        let message = mutate_err(&source, &PodTemplateSpecMutationConfig::default());
        assert!(
            message.starts_with(
                "the pod template's kubectl.kubernetes.io/default-container annotation names \
                 the default container \"gone\""
            ),
            "{message}"
        );
        assert!(message.contains("\"app\", \"proxy\""), "{message}");
        assert!(
            message.contains("or correct the annotation on the workload"),
            "{message}"
        );
        // With no configuration at all, the same holds.
        assert!(mutate_pod_template(&source, None).is_err());
    }

    #[test]
    fn a_template_without_containers_is_an_error() {
        for source in [
            template(json!({"metadata": {}})),
            template(json!({"spec": {"containers": []}})),
        ] {
            let error = mutate_pod_template(&source, None).unwrap_err();
            assert!(matches!(error, MutationError::NoContainers), "{error}");
            assert!(error.to_string().contains("no containers"));
        }
    }

    // ----- keep flags ---------------------------------------------------------------------------

    #[test]
    fn keep_termination_grace_period() {
        let pod = mutate(
            &busy_template(),
            &config(json!({"keepTerminationGracePeriod": true})),
        );
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 60);
        let pod = mutate(
            &busy_template(),
            &config(json!({"keepTerminationGracePeriod": false})),
        );
        assert!(pod["spec"].get("terminationGracePeriodSeconds").is_none());
    }

    #[test]
    fn keep_each_probe_independently() {
        for (flag, expected) in [
            ("keepLivenessProbe", [true, false, false]),
            ("keepReadinessProbe", [false, true, false]),
            ("keepStartupProbe", [false, false, true]),
        ] {
            let pod = mutate(&busy_template(), &config(json!({ flag: true })));
            assert_eq!(
                has_probes(&pod["spec"]["containers"][0]),
                expected,
                "{flag}"
            );
        }
        let pod = mutate(
            &busy_template(),
            &config(json!({
                "keepLivenessProbe": true, "keepReadinessProbe": true, "keepStartupProbe": true
            })),
        );
        assert_eq!(has_probes(&pod["spec"]["containers"][0]), [true; 3]);
    }

    #[test]
    fn keep_topology_spread_constraints() {
        let pod = mutate(
            &busy_template(),
            &config(json!({"keepTopologySpreadConstraints": true})),
        );
        assert_eq!(
            pod["spec"]["topologySpreadConstraints"][0]["topologyKey"],
            "topology.kubernetes.io/zone"
        );
    }

    // ----- annotations, node selector, labels ---------------------------------------------------

    #[test]
    fn pod_annotations_merge_over_existing_ones() {
        let pod = mutate(
            &busy_template(),
            &config(json!({"podAnnotations": {"team": "sre", "oz/reason": "debug"}})),
        );
        assert_eq!(
            pod["metadata"]["annotations"],
            json!({"team": "sre", "oz/reason": "debug", "prometheus.io/scrape": "true"})
        );
    }

    #[test]
    fn purge_annotations_clears_them_before_pod_annotations_are_merged() {
        let pod = mutate(
            &busy_template(),
            &config(json!({"purgeAnnotations": true, "podAnnotations": {"oz/reason": "debug"}})),
        );
        assert_eq!(
            pod["metadata"]["annotations"],
            json!({"oz/reason": "debug"})
        );

        let pod = mutate(&busy_template(), &config(json!({"purgeAnnotations": true})));
        assert!(pod["metadata"].get("annotations").is_none(), "{pod}");

        let pod = mutate(
            &busy_template(),
            &config(json!({"purgeAnnotations": false})),
        );
        assert_eq!(pod["metadata"]["annotations"]["team"], "payments");
    }

    #[test]
    fn pod_annotations_on_a_template_without_annotations() {
        // Oz wrote into a nil map here and panicked.
        for source in [
            oz_example_deployment_template(),
            template(json!({"spec": {"containers": [{"name": "c"}]}})),
        ] {
            let pod = mutate(&source, &config(json!({"podAnnotations": {"a": "b"}})));
            assert_eq!(pod["metadata"]["annotations"], json!({"a": "b"}));
        }
    }

    #[test]
    fn empty_pod_annotations_and_labels_leave_nothing_behind() {
        let pod = mutate(
            &oz_example_deployment_template(),
            &config(json!({"podAnnotations": {}, "podLabels": {}, "nodeSelector": {}})),
        );
        assert!(pod["metadata"].get("annotations").is_none(), "{pod}");
        assert!(pod["metadata"].get("labels").is_none(), "{pod}");
        assert!(pod["spec"].get("nodeSelector").is_none(), "{pod}");
    }

    #[test]
    fn node_selector_is_merged_and_created_if_absent() {
        let pod = mutate(
            &busy_template(),
            &config(json!({"nodeSelector": {"disk": "hdd", "pool": "debug"}})),
        );
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"disk": "hdd", "pool": "debug"})
        );

        let pod = mutate(
            &oz_example_deployment_template(),
            &config(json!({"nodeSelector": {"pool": "debug"}})),
        );
        assert_eq!(pod["spec"]["nodeSelector"], json!({"pool": "debug"}));
    }

    #[test]
    fn labels_are_always_cleared_and_pod_labels_are_the_whole_set() {
        let pod = mutate(&busy_template(), &config(json!({"command": ["sleep"]})));
        assert!(pod["metadata"].get("labels").is_none(), "{pod}");

        let pod = mutate(
            &busy_template(),
            &config(json!({"podLabels": {"oz/access": "true"}})),
        );
        assert_eq!(pod["metadata"]["labels"], json!({"oz/access": "true"}));
    }

    // ----- container mutations ------------------------------------------------------------------

    #[test]
    fn command_empties_args() {
        let pod = mutate(&busy_template(), &config(json!({"command": ["/bin/sh"]})));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["/bin/sh"]));
        assert_eq!(pod["spec"]["containers"][0]["args"], json!([]));
    }

    #[test]
    fn args_are_applied_after_command() {
        let pod = mutate(
            &busy_template(),
            &config(json!({"command": ["/bin/sh"], "args": ["-c", "sleep 1d"]})),
        );
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["/bin/sh"]));
        assert_eq!(
            pod["spec"]["containers"][0]["args"],
            json!(["-c", "sleep 1d"])
        );
    }

    #[test]
    fn args_alone_keep_the_command() {
        let pod = mutate(&busy_template(), &config(json!({"args": ["--debug"]})));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["shop"]));
        assert_eq!(pod["spec"]["containers"][0]["args"], json!(["--debug"]));
    }

    #[test]
    fn resources_replace_the_whole_block() {
        let pod = mutate(
            &busy_template(),
            &config(json!({"resources": {"requests": {"memory": "1Gi"}}})),
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"requests": {"memory": "1Gi"}})
        );
    }

    #[test]
    fn empty_resources_leave_the_container_s_own() {
        // Oz compared with the zero value, so `resources: {}` changed nothing.
        let pod = mutate(&busy_template(), &config(json!({"resources": {}})));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "2"}})
        );
        // An explicitly empty map is not the zero value in Go either: it clears the block.
        let pod = mutate(
            &busy_template(),
            &config(json!({"resources": {"limits": {}}})),
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {}})
        );
    }

    #[test]
    fn env_is_appended_to_the_container_s_env() {
        let pod = mutate(
            &busy_template(),
            &config(
                json!({"env": [{"name": "MODE", "value": "debug"}, {"name": "X", "value": "1"}]}),
            ),
        );
        assert_eq!(
            pod["spec"]["containers"][0]["env"],
            json!([
                {"name": "MODE", "value": "prod"},
                {"name": "MODE", "value": "debug"},
                {"name": "X", "value": "1"}
            ])
        );

        let empty_env = PodTemplateSpecMutationConfig {
            env: Some(Vec::<EnvVar>::new()),
            ..PodTemplateSpecMutationConfig::default()
        };
        let pod = mutate(&busy_template(), &empty_env);
        assert_eq!(
            pod["spec"]["containers"][0]["env"],
            json!([{"name": "MODE", "value": "prod"}])
        );

        let pod = mutate(
            &busy_template(),
            &config(json!({"defaultContainerName": "proxy", "env": [{"name": "X", "value": "1"}]})),
        );
        assert_eq!(
            pod["spec"]["containers"][1]["env"],
            json!([{"name": "X", "value": "1"}])
        );
    }

    // ----- patchSpecOperations ------------------------------------------------------------------

    fn patched(operations: Value) -> Value {
        mutate(
            &busy_template(),
            &config(json!({ "patchSpecOperations": operations })),
        )
    }

    fn patch_err(operations: Value) -> MutationError {
        mutate_pod_template(
            &busy_template(),
            Some(&config(json!({ "patchSpecOperations": operations }))),
        )
        .expect_err("patch should fail")
    }

    #[test]
    fn patch_add_replace_remove_move_copy_and_test() {
        let pod = patched(json!([
            {"op": "test", "path": "/spec/containers/1/name", "value": "proxy"},
            {"op": "add", "path": "/metadata/annotations/oz~1patched", "value": "yes"},
            {"op": "replace", "path": "/spec/containers/1/image", "value": "envoy:debug"},
            {"op": "remove", "path": "/spec/initContainers"},
            {"op": "copy", "from": "/spec/containers/0/env", "path": "/spec/containers/1/env"},
            {"op": "move", "from": "/spec/nodeSelector/disk", "path": "/spec/nodeSelector/storage"},
            {"op": "add", "path": "/spec/containers/0/args/-", "value": "--verbose"},
            {"op": "add", "path": "/spec/tolerations", "value": [{"operator": "Exists"}]},
            // The default mutations removed the grace period; a patch can set one again.
            {"op": "add", "path": "/spec/terminationGracePeriodSeconds", "value": 5}
        ]));
        assert_eq!(pod["metadata"]["annotations"]["oz/patched"], "yes");
        assert_eq!(pod["spec"]["containers"][1]["image"], "envoy:debug");
        assert!(pod["spec"].get("initContainers").is_none());
        assert_eq!(
            pod["spec"]["containers"][1]["env"],
            json!([{"name": "MODE", "value": "prod"}])
        );
        assert_eq!(pod["spec"]["nodeSelector"], json!({"storage": "ssd"}));
        assert_eq!(
            pod["spec"]["containers"][0]["args"],
            json!(["--serve", "--verbose"])
        );
        assert_eq!(pod["spec"]["tolerations"], json!([{"operator": "Exists"}]));
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 5);
    }

    #[test]
    fn patch_runs_last_and_sees_the_mutated_template() {
        let pod = mutate(
            &busy_template(),
            &config(json!({
                "command": ["sleep"],
                "podLabels": {"oz": "access"},
                "patchSpecOperations": [
                    // The configured command is already in place, and args were emptied.
                    {"op": "test", "path": "/spec/containers/0/command", "value": ["sleep"]},
                    {"op": "test", "path": "/spec/containers/0/args", "value": []},
                    {"op": "add", "path": "/spec/containers/0/args/-", "value": "infinity"},
                    // The workload's labels are already gone.
                    {"op": "test", "path": "/metadata/labels", "value": {"oz": "access"}},
                    {"op": "replace", "path": "/spec/containers/0/name", "value": "debug"}
                ]
            })),
        );
        assert_eq!(pod["spec"]["containers"][0]["name"], "debug");
        assert_eq!(pod["spec"]["containers"][0]["args"], json!(["infinity"]));
    }

    #[test]
    fn patch_can_add_metadata_to_a_template_without_metadata() {
        let source = template(json!({"spec": {"containers": [{"name": "c"}]}}));
        let pod = mutate(
            &source,
            &config(json!({"patchSpecOperations": [
                {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}
            ]})),
        );
        assert_eq!(pod["metadata"]["annotations"], json!({"a": "b"}));
    }

    #[test]
    fn empty_patch_list_changes_nothing() {
        assert_eq!(
            patched(json!([])),
            mutate(&busy_template(), &PodTemplateSpecMutationConfig::default())
        );
    }

    #[test]
    fn patch_value_missing_names_the_operation_and_the_fix() {
        for op in ["add", "replace", "test"] {
            let error = patch_err(json!([
                {"op": "remove", "path": "/spec/nodeSelector"},
                {"op": op, "path": "/spec/containers/0/name"}
            ]));
            assert_eq!(
                error.to_string(),
                format!(
                    "spec.controllerTargetMutationConfig.patchSpecOperations[1]: a {op} \
                     operation needs a value; add `value:` with the JSON value for \
                     /spec/containers/0/name (a null value counts as missing: to unset a field, \
                     use `op: remove`)"
                )
            );
        }
    }

    #[test]
    fn patch_from_missing_names_the_operation_and_the_fix() {
        for op in ["move", "copy"] {
            let error = patch_err(json!([{"op": op, "path": "/spec/containers/0/name"}]));
            assert!(
                matches!(error, MutationError::PatchFromMissing { index: 0, .. }),
                "{error}"
            );
            let message = error.to_string();
            assert!(
                message.starts_with(&format!(
                    "spec.controllerTargetMutationConfig.patchSpecOperations[0]: a {op} \
                     operation needs a source; add `from:`"
                )),
                "{message}"
            );
        }
    }

    #[test]
    fn patch_pointer_that_is_not_a_json_pointer() {
        let error = patch_err(json!([{"op": "remove", "path": "spec/containers"}]));
        let message = error.to_string();
        assert!(
            message.starts_with(
                "spec.controllerTargetMutationConfig.patchSpecOperations[0].path: \
                 \"spec/containers\" is not a JSON pointer"
            ),
            "{message}"
        );
        let error = patch_err(json!([
            {"op": "copy", "from": "/bad~2escape", "path": "/spec/nodeSelector/x"}
        ]));
        assert!(
            matches!(
                &error,
                MutationError::PatchPointerInvalid { field: "from", .. }
            ),
            "{error}"
        );
    }

    #[test]
    fn patch_on_a_missing_path_names_the_operation_path_and_why() {
        let error = patch_err(json!([
            {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
            {"op": "replace", "path": "/spec/containers/5/name", "value": "x"}
        ]));
        assert!(
            matches!(
                &error,
                MutationError::PatchFailed {
                    index: 1,
                    op: PatchOp::Replace,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.patchSpecOperations[1] (replace \
             /spec/containers/5/name) failed: /spec/containers/5/name does not exist in the pod \
             template; paths refer to the pod template after the other mutations (labels \
             cleared, probes dropped, ...), unset fields are absent, and array indexes count \
             from 0"
        );

        let message = patch_err(json!([
            {"op": "add", "path": "/metadata/labels/team", "value": "x"}
        ]))
        .to_string();
        assert!(
            message.contains("(add /metadata/labels/team) failed: the parent of /metadata/labels/team does not exist"),
            "{message}"
        );
        assert!(message.contains("labels cleared"), "{message}");

        let message = patch_err(json!([
            {"op": "move", "from": "/spec/hostname", "path": "/spec/subdomain"}
        ]))
        .to_string();
        assert!(
            message.contains("failed: from /spec/hostname does not exist"),
            "{message}"
        );

        let message = patch_err(json!([
            {"op": "move", "from": "/spec", "path": "/spec/inner"}
        ]))
        .to_string();
        assert!(
            message.contains("cannot move /spec into its own child"),
            "{message}"
        );
    }

    #[test]
    fn a_failing_move_after_an_add_under_its_source_is_an_error_not_a_panic() {
        // json_patch::patch undid the add after the move had removed /metadata, could not, and
        // panicked (found by fuzzing): a PodAccessTemplate could crash oz-manager.
        let error = patch_err(json!([
            {"op": "add", "path": "/metadata/automountServiceAccountToken", "value": ".5"},
            {"op": "move", "from": "/metadata", "path": "/~1/~1/"},
        ]));
        assert!(
            matches!(
                error,
                MutationError::PatchFailed {
                    index: 1,
                    op: PatchOp::Move,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn patch_failing_test_names_the_operation() {
        let error = patch_err(json!([
            {"op": "test", "path": "/spec/containers/0/name", "value": "nginx"},
            {"op": "replace", "path": "/spec/containers/0/name", "value": "x"}
        ]));
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.patchSpecOperations[0] (test \
             /spec/containers/0/name) failed: the value at /spec/containers/0/name is not equal \
             to the operation's value; correct the value, or remove the test if the template \
             may differ"
        );
    }

    #[test]
    fn patch_result_that_is_not_a_pod_template_is_an_error() {
        let error = patch_err(json!([
            {"op": "replace", "path": "/spec/containers/0/name", "value": 5}
        ]));
        assert!(
            matches!(error, MutationError::PatchedTemplateInvalid { .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with(
                "spec.controllerTargetMutationConfig.patchSpecOperations: the patched pod \
                 template is no longer a valid PodTemplateSpec"
            ),
            "{message}"
        );

        let error = patch_err(json!([{"op": "replace", "path": "", "value": "pod"}]));
        assert!(matches!(
            error,
            MutationError::PatchedTemplateInvalid { .. }
        ));
    }

    #[test]
    fn patch_adding_an_unknown_field_is_an_error_naming_it() {
        let error = patch_err(json!([
            {"op": "add", "path": "/spec/containers/1/comand", "value": ["sleep"]}
        ]));
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.patchSpecOperations: the patched pod template \
             has a field that a PodTemplateSpec does not have, at /spec/containers/1/comand; \
             check the spelling of the patch paths (field names are camelCase, as `kubectl \
             explain pod.spec` shows them)"
        );
    }

    #[test]
    fn patch_values_of_other_json_types_are_accepted_where_they_fit() {
        // A number where the API has a quantity or an int-or-string is fine.
        let pod = patched(json!([
            {"op": "add", "path": "/spec/containers/1/resources", "value": {"limits": {"cpu": 1}}},
            {"op": "add", "path": "/spec/containers/1/ports",
             "value": [{"containerPort": 9901}]},
            {"op": "replace", "path": "/spec/containers/1/livenessProbe/httpGet/port", "value": "admin"}
        ]));
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["limits"]["cpu"],
            "1"
        );
        assert_eq!(
            pod["spec"]["containers"][1]["livenessProbe"]["httpGet"]["port"],
            "admin"
        );
    }

    // ----- privilege ----------------------------------------------------------------------------

    /// A workload pod that already has some privilege: a hostPath volume, a service account
    /// without a mounted token, a sidecar dropping every capability and barred from escalating.
    fn guarded_template() -> PodTemplateSpec {
        template(json!({
            "metadata": {"labels": {"app": "shop"}},
            "spec": {
                "serviceAccountName": "shop",
                "automountServiceAccountToken": false,
                "hostUsers": false,
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "logs", "hostPath": {"path": "/var/log/shop"}}
                ],
                "initContainers": [{"name": "migrate", "image": "shop:1"}],
                "containers": [
                    {"name": "app", "image": "shop:1", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}},
                    {"name": "proxy", "image": "envoy:1", "securityContext": {
                        "allowPrivilegeEscalation": false,
                        "capabilities": {"drop": ["ALL"]}
                    }}
                ]
            }
        }))
    }

    fn guarded_patch(operations: Value) -> Result<PodTemplateSpec, MutationError> {
        mutate_pod_template(
            &guarded_template(),
            Some(&config(json!({ "patchSpecOperations": operations }))),
        )
    }

    #[test]
    fn patches_that_raise_privilege_are_refused_naming_the_operation_and_the_rule() {
        use PrivilegeRule::*;
        let cases: Vec<(Value, PrivilegeRule, &str)> = vec![
            (
                json!({"op": "add", "path": "/metadata/namespace", "value": "kube-system"}),
                Namespace,
                "sets metadata.namespace to \"kube-system\"",
            ),
            (
                json!({"op": "replace", "path": "/spec/serviceAccountName", "value": "admin"}),
                ServiceAccount,
                "changes spec.serviceAccountName from \"shop\" to \"admin\"",
            ),
            (
                json!({"op": "remove", "path": "/spec/serviceAccountName"}),
                ServiceAccount,
                "to \"\"",
            ),
            (
                json!({"op": "add", "path": "/spec/serviceAccount", "value": "admin"}),
                ServiceAccount,
                "spec.serviceAccount from",
            ),
            (
                json!({"op": "replace", "path": "/spec/automountServiceAccountToken", "value": true}),
                AutomountToken,
                "from false to true",
            ),
            (
                json!({"op": "remove", "path": "/spec/automountServiceAccountToken"}),
                AutomountToken,
                "from false to unset",
            ),
            (
                json!({"op": "add", "path": "/spec/hostNetwork", "value": true}),
                HostNamespaces,
                "sets spec.hostNetwork: true",
            ),
            (
                json!({"op": "add", "path": "/spec/hostPID", "value": true}),
                HostNamespaces,
                "sets spec.hostPID: true",
            ),
            (
                json!({"op": "add", "path": "/spec/hostIPC", "value": true}),
                HostNamespaces,
                "sets spec.hostIPC: true",
            ),
            (
                json!({"op": "replace", "path": "/spec/hostUsers", "value": true}),
                HostNamespaces,
                "spec.hostUsers from false to true",
            ),
            (
                json!({"op": "add", "path": "/spec/volumes/-", "value": {"name": "root", "hostPath": {"path": "/"}}}),
                HostPathVolume,
                "adds hostPath volume \"root\" (path \"/\")",
            ),
            (
                json!({"op": "replace", "path": "/spec/volumes/1/hostPath/path", "value": "/etc"}),
                HostPathVolume,
                "(path \"/etc\")",
            ),
            (
                json!({"op": "replace", "path": "/spec/volumes/0", "value": {"name": "scratch", "hostPath": {"path": "/var/run/docker.sock"}}}),
                HostPathVolume,
                "docker.sock",
            ),
            (
                json!({"op": "add", "path": "/spec/containers/0/securityContext/privileged", "value": true}),
                Privileged,
                "privileged: true on container \"app\"",
            ),
            (
                json!({"op": "add", "path": "/spec/initContainers/0/securityContext", "value": {"privileged": true}}),
                Privileged,
                "on init container \"migrate\"",
            ),
            (
                json!({"op": "replace", "path": "/spec/containers/1/securityContext/allowPrivilegeEscalation", "value": true}),
                PrivilegeEscalation,
                "container \"proxy\" from false to true",
            ),
            (
                json!({"op": "remove", "path": "/spec/containers/1/securityContext/allowPrivilegeEscalation"}),
                PrivilegeEscalation,
                "from false to unset",
            ),
            (
                json!({"op": "add", "path": "/spec/containers/0/securityContext/capabilities/add/-", "value": "SYS_ADMIN"}),
                Capabilities,
                "adds capability SYS_ADMIN to container \"app\"",
            ),
            (
                json!({"op": "remove", "path": "/spec/containers/1/securityContext/capabilities/drop"}),
                Capabilities,
                "no longer drops capability ALL from container \"proxy\"",
            ),
            (
                json!({"op": "add", "path": "/spec/containers/-", "value": {"name": "shell", "image": "busybox"}}),
                AddedContainer,
                "adds container \"shell\" at spec.containers[2]",
            ),
            (
                json!({"op": "add", "path": "/spec/initContainers/-", "value": {"name": "setup", "image": "busybox"}}),
                AddedContainer,
                "init container \"setup\" at spec.initContainers[1]",
            ),
            (
                json!({"op": "add", "path": "/spec/ephemeralContainers", "value": [{"name": "dbg", "image": "busybox"}]}),
                AddedContainer,
                "ephemeral container \"dbg\"",
            ),
            (
                json!({"op": "copy", "from": "/spec/containers/0", "path": "/spec/containers/-"}),
                AddedContainer,
                "adds container \"app\" at spec.containers[2]",
            ),
        ];
        assert!(cases.len() >= 20);
        for (operation, rule, detail) in cases {
            let path = operation["path"].as_str().unwrap().to_string();
            let error = guarded_patch(json!([operation.clone()]))
                .expect_err(&format!("{operation} must be refused"));
            let MutationError::PatchRaisesPrivilege {
                operation: culprit,
                rule: broken,
                detail: said,
            } = &error
            else {
                panic!("{operation}: unexpected error {error}");
            };
            assert_eq!(*broken, rule, "{operation}: {error}");
            assert!(
                said.contains(detail),
                "{operation}: {said:?} should contain {detail:?}"
            );
            assert_eq!(
                culprit.as_ref().map(|c| (c.0, c.2.as_str())),
                Some((0, path.as_str()))
            );
            let message = error.to_string();
            assert!(
                message.starts_with(&format!(
                    "spec.controllerTargetMutationConfig.patchSpecOperations[0] ({} {path})",
                    operation["op"].as_str().unwrap()
                )),
                "{message}"
            );
            assert!(message.contains(&rule.to_string()), "{message}");
            assert!(
                message.contains("allowPrivilegedPatches: true"),
                "{message}"
            );
        }
    }

    #[test]
    fn the_error_names_the_operation_that_raised_privilege_not_the_ones_before_it() {
        let error = guarded_patch(json!([
            {"op": "replace", "path": "/spec/containers/0/image", "value": "busybox"},
            {"op": "add", "path": "/spec/containers/0/command", "value": ["sh"]},
            {"op": "add", "path": "/spec/hostNetwork", "value": true},
            {"op": "add", "path": "/spec/containers/0/args", "value": ["-c", "sleep 1d"]},
        ]))
        .unwrap_err();
        assert!(
            error.to_string().starts_with(
                "spec.controllerTargetMutationConfig.patchSpecOperations[2] (add /spec/hostNetwork) raises"
            ),
            "{error}"
        );
    }

    #[test]
    fn patches_that_keep_or_lower_privilege_are_allowed() {
        let pod = guarded_patch(json!([
            // Oz's own example renames the container; replacing image, command and env is the
            // point of a debug copy.
            {"op": "replace", "path": "/spec/containers/0/name", "value": "debug"},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:1.36"},
            {"op": "add", "path": "/spec/containers/0/command", "value": ["sleep", "1d"]},
            {"op": "add", "path": "/spec/containers/0/env", "value": [{"name": "DEBUG", "value": "1"}]},
            {"op": "add", "path": "/spec/containers/0/securityContext/runAsUser", "value": 0},
            {"op": "add", "path": "/spec/volumes/-", "value": {"name": "tmp", "emptyDir": {}}},
            {"op": "add", "path": "/spec/tolerations", "value": [{"operator": "Exists"}]},
            // Lowering privilege is always fine.
            {"op": "remove", "path": "/spec/volumes/1"},
            {"op": "remove", "path": "/spec/containers/0/securityContext/capabilities"},
            {"op": "add", "path": "/spec/containers/1/securityContext/readOnlyRootFilesystem", "value": true},
            {"op": "remove", "path": "/spec/initContainers"},
            {"op": "add", "path": "/spec/hostNetwork", "value": false},
            // The unchanged hostPath volume of the workload is its own, not a new one.
            {"op": "test", "path": "/spec/serviceAccountName", "value": "shop"},
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.containers[0].name, "debug");
        assert_eq!(spec.service_account_name.as_deref(), Some("shop"));
        assert!(spec.volumes.unwrap().iter().all(|v| v.host_path.is_none()));

        // The workload's own hostPath volume, untouched, stays allowed.
        guarded_patch(json!([{"op": "add", "path": "/spec/containers/0/args", "value": ["-v"]}]))
            .unwrap();
    }

    #[test]
    fn allow_privileged_patches_lets_a_template_raise_privilege_on_purpose() {
        let privileged = json!([
            {"op": "add", "path": "/spec/hostPID", "value": true},
            {"op": "add", "path": "/spec/containers/0/securityContext/capabilities/add/-", "value": "SYS_PTRACE"},
            {"op": "add", "path": "/spec/containers/-", "value": {"name": "shell", "image": "busybox"}},
        ]);
        let allowed = mutate_pod_template(
            &guarded_template(),
            Some(&config(
                json!({"patchSpecOperations": privileged, "allowPrivilegedPatches": true}),
            )),
        )
        .unwrap();
        let spec = allowed.spec.unwrap();
        assert_eq!(spec.host_pid, Some(true));
        assert_eq!(spec.containers.len(), 3);
        let refused = mutate_pod_template(
            &guarded_template(),
            Some(&config(
                json!({"patchSpecOperations": privileged, "allowPrivilegedPatches": false}),
            )),
        );
        assert!(matches!(
            refused,
            Err(MutationError::PatchRaisesPrivilege { .. })
        ));
    }

    #[test]
    fn privilege_is_compared_with_the_pod_the_patch_sees() {
        // No patch: nothing to check, whatever the workload runs with.
        let mut source = guarded_template();
        source.spec.as_mut().unwrap().host_network = Some(true);
        mutate_pod_template(&source, None).unwrap();
        // And an already-privileged workload may be patched without tripping on its own privilege.
        mutate_pod_template(
            &source,
            Some(&config(json!({"patchSpecOperations": [
                {"op": "add", "path": "/spec/containers/0/args", "value": ["-v"]}
            ]}))),
        )
        .unwrap();
        assert_eq!(privilege_raised(&source, &source), None);
    }

    // ----- quantities ---------------------------------------------------------------------------

    const GI: i128 = 1 << 30;
    const UNIT: i128 = 1_000_000_000;

    fn nanos(quantity: &str) -> i128 {
        parse_quantity(quantity)
            .unwrap_or_else(|error| panic!("{quantity}: {error}"))
            .nanos()
    }

    #[test]
    fn quantities_in_every_form() {
        for (quantity, expected) in [
            ("100m", UNIT / 10),
            ("0.5", UNIT / 2),
            ("1", UNIT),
            ("2", 2 * UNIT),
            ("1Gi", GI * UNIT),
            ("1G", 1_000_000_000 * UNIT),
            ("128Mi", 128 * (1 << 20) * UNIT),
            ("1e3", 1000 * UNIT),
            ("1E3", 1000 * UNIT),
            ("1e+3", 1000 * UNIT),
            ("15e-1", 1_500_000_000),
            ("500M", 500_000_000 * UNIT),
            ("1.5Gi", 3 * (GI / 2) * UNIT),
            ("1k", 1000 * UNIT),
            ("1Ki", 1024 * UNIT),
            ("1Ti", (1 << 40) * UNIT),
            ("1P", 1_000_000_000_000_000 * UNIT),
            ("1Pi", (1 << 50) * UNIT),
            ("1E", 1_000_000_000_000_000_000 * UNIT),
            ("1Ei", (1 << 60) * UNIT),
            ("250u", 250_000),
            ("7n", 7),
            ("0", 0),
            ("0.0Gi", 0),
            ("000100m", UNIT / 10),
            ("1.", UNIT),
            (".5", UNIT / 2),
            ("+2", 2 * UNIT),
            ("-2", -2 * UNIT),
            ("-100m", -UNIT / 10),
            ("0.000000001", 1),
            ("1.000000000000000000000000000000000000000001", UNIT + 1),
        ] {
            assert_eq!(nanos(quantity), expected, "{quantity}");
        }
    }

    #[test]
    fn quantities_are_rounded_up_to_a_nano_unit_as_kubernetes_does() {
        assert_eq!(nanos("0.1n"), 1);
        assert_eq!(nanos("1e-100"), 1);
        assert_eq!(nanos("1e-99999999999999999999"), 1);
        assert_eq!(nanos("-0.1n"), -1);
        assert_eq!(nanos("1.0000000001"), UNIT + 1);
        // 0.0000000001Ki is 102.4n: the binary factor is applied before rounding.
        assert_eq!(nanos("0.0000000001Ki"), 103);
        assert_eq!(nanos("0.5Ki"), 512 * UNIT);
    }

    #[test]
    fn quantities_are_capped_at_two_to_the_63_units_as_kubernetes_does() {
        let max = i128::from(i64::MAX) * UNIT;
        assert_eq!(nanos("8Ei"), max);
        assert_eq!(nanos("9223372036854775807"), max);
        assert_eq!(nanos("9223372036854775806"), max - UNIT);
        assert_eq!(nanos("1e100"), max);
        assert_eq!(nanos("1e99999999999999999999"), max);
        assert_eq!(nanos("123456789012345678901234567890123456789012345"), max);
        assert_eq!(nanos("-8Ei"), -max);
    }

    #[test]
    fn quantities_compare_exactly() {
        let q = |s: &str| parse_quantity(s).unwrap();
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("1536Mi"), q("1.5Gi"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("1001m") > q("1"));
        assert!(q("999999999n") < q("1"));
        assert!(q("128Mi") < q("1Gi"));
    }

    #[test]
    fn invalid_quantities() {
        assert_eq!(parse_quantity(""), Err(QuantityError::Empty));
        for input in ["abc", "+", "-", ".", "Mi", " 1", "-.", "e3", "++1"] {
            assert!(
                matches!(
                    parse_quantity(input),
                    Err(QuantityError::InvalidNumber { .. })
                ),
                "{input}"
            );
        }
        for (input, suffix) in [
            ("1K", "K"),
            ("1 Gi", " Gi"),
            ("1Gib", "Gib"),
            ("1gi", "gi"),
            ("1.2.3", ".3"),
            ("1e", "e"),
            ("1e+", "e+"),
            ("1e1.5", "e1.5"),
            ("1m5", "m5"),
            ("1mi", "mi"),
            ("2 ", " "),
        ] {
            assert_eq!(
                parse_quantity(input),
                Err(QuantityError::UnknownSuffix {
                    input: input.into(),
                    suffix: suffix.into()
                }),
                "{input}"
            );
        }
        assert_eq!(
            parse_quantity("1Gib").unwrap_err().to_string(),
            "invalid quantity \"1Gib\": unknown suffix \"Gib\"; write a number with an optional \
             suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or an integer exponent, \
             such as 100m, 0.5, 2, 128Mi, 1Gi or 1e3"
        );
    }

    // ----- resource caps ------------------------------------------------------------------------

    fn spec(value: Value) -> PodSpec {
        serde_json::from_value(value).expect("test spec is a PodSpec")
    }

    fn q(value: &str) -> Quantity {
        Quantity(value.into())
    }

    fn within_caps_spec() -> PodSpec {
        spec(json!({
            "initContainers": [{
                "name": "sidecar",
                "restartPolicy": "Always",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}
                }
            }],
            "containers": [{
                "name": "app",
                "resources": {
                    "requests": {"cpu": "1000m", "memory": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1024Mi", "ephemeral-storage": "500M"}
                }
            }]
        }))
    }

    fn over_caps(spec: &PodSpec, cpu: &str, memory: &str, storage: &str) -> Vec<CapViolation> {
        let mut capped = spec.clone();
        let result = apply_resource_caps(
            &mut capped,
            Some(&q(cpu)),
            Some(&q(memory)),
            Some(&q(storage)),
        );
        assert_eq!(&capped, spec, "a rejected spec must be left unchanged");
        match result {
            Err(ResourceCapError::OverCap { violations }) => violations,
            other => panic!("expected OverCap, got {other:?}"),
        }
    }

    /// Applies the caps to a copy of `spec`, expecting success, and returns the result.
    fn capped(
        spec: &PodSpec,
        cpu: Option<&str>,
        memory: Option<&str>,
        storage: Option<&str>,
    ) -> PodSpec {
        let mut capped = spec.clone();
        let (cpu, memory, storage) = (cpu.map(q), memory.map(q), storage.map(q));
        apply_resource_caps(&mut capped, cpu.as_ref(), memory.as_ref(), storage.as_ref())
            .unwrap_or_else(|error| panic!("caps rejected the spec: {error}"));
        capped
    }

    /// `spec`'s `containers[index].resources` (or `initContainers`), as JSON.
    fn resources_json(spec: &PodSpec, list: ContainerList, index: usize) -> Value {
        let container = match list {
            ContainerList::Containers => &spec.containers[index],
            ContainerList::InitContainers => &spec.init_containers.as_ref().unwrap()[index],
        };
        serde_json::to_value(&container.resources).unwrap()
    }

    fn request_error(
        spec: &mut PodSpec,
        cpu: Option<&str>,
        memory: Option<&str>,
    ) -> ResourceCapError {
        let (cpu, memory) = (cpu.map(q), memory.map(q));
        apply_resource_caps(spec, cpu.as_ref(), memory.as_ref(), None).unwrap_err()
    }

    #[test]
    fn caps_not_set_allow_anything_and_change_nothing() {
        let unlimited = spec(json!({"containers": [{"name": "app"}]}));
        assert_eq!(capped(&unlimited, None, None, None), unlimited);
        let big = spec(json!({"containers": [{"name": "app",
            "resources": {"limits": {"cpu": "64"}}}]}));
        assert_eq!(capped(&big, None, None, None), big);
    }

    #[test]
    fn values_equal_to_the_caps_are_within_them_and_left_alone() {
        let spec = within_caps_spec();
        assert_eq!(capped(&spec, Some("1"), Some("1Gi"), Some("1Gi")), spec);
    }

    #[test]
    fn only_the_capped_resources_get_limits() {
        let cpu_only = spec(json!({"containers": [{"name": "app",
            "resources": {"limits": {"cpu": "500m"}}}]}));
        assert_eq!(capped(&cpu_only, Some("1"), None, None), cpu_only);

        let bare = spec(json!({"containers": [{"name": "app"}]}));
        assert_eq!(
            resources_json(
                &capped(&bare, Some("1"), None, None),
                ContainerList::Containers,
                0
            ),
            json!({"limits": {"cpu": "1"}})
        );
    }

    #[test]
    fn a_limit_above_the_cap_is_named_with_its_container_value_and_cap() {
        let mut spec = spec(json!({"containers": [{"name": "app",
            "resources": {"limits": {"cpu": "2"}}}]}));
        let error = request_error(&mut spec, Some("1"), None);
        assert_eq!(
            error.to_string(),
            "the access pod exceeds the PodAccessTemplate's resource caps: container \"app\" \
             (spec.containers[0]): limits.cpu 2 is above spec.maxCpu 1. To fix the \
             PodAccessTemplate, give every container requests and limits within the caps (the \
             default container's in spec.controllerTargetMutationConfig.resources, other \
             containers' with spec.controllerTargetMutationConfig.patchSpecOperations such as \
             replace /spec/containers/1/resources, or in spec.podSpec), or raise spec.maxCpu"
        );
    }

    #[test]
    fn a_request_above_the_cap_is_a_violation() {
        let mut spec = spec(json!({"containers": [{"name": "app", "resources": {
            "requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}]}));
        let error = request_error(&mut spec, None, Some("1Gi"));
        assert_eq!(
            error,
            ResourceCapError::OverCap {
                violations: vec![CapViolation {
                    container: ContainerRef {
                        list: ContainerList::Containers,
                        index: 0,
                        name: "app".into()
                    },
                    resource: CappedResource::Memory,
                    problem: CapProblem::RequestAboveCap {
                        value: "2Gi".into()
                    },
                    cap: "1Gi".into(),
                }]
            }
        );
        assert!(
            error
                .to_string()
                .contains("requests.memory 2Gi is above spec.maxMemory 1Gi")
        );
    }

    #[test]
    fn a_request_of_2_cpus_is_rejected_by_a_max_cpu_of_500m() {
        let mut spec = spec(json!({"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "2"}}}]}));
        let original = spec.clone();
        let error = request_error(&mut spec, Some("500m"), None);
        let message = error.to_string();
        assert!(
            message.contains(
                "container \"app\" (spec.containers[0]): requests.cpu 2 is above spec.maxCpu 500m"
            ),
            "{message}"
        );
        assert!(message.ends_with("or raise spec.maxCpu"), "{message}");
        // The missing cpu limit was not filled in either.
        assert_eq!(spec, original);
    }

    #[test]
    fn a_missing_limit_is_filled_from_the_cap() {
        let spec = spec(json!({"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "100m"}}}]}));
        assert_eq!(
            resources_json(
                &capped(&spec, Some("1"), None, None),
                ContainerList::Containers,
                0
            ),
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}})
        );
    }

    #[test]
    fn a_missing_limit_is_filled_from_the_cap_beside_the_limits_that_are_set() {
        let spec = spec(json!({"containers": [{"name": "app", "resources": {
            "requests": {"memory": "64Mi"},
            "limits": {"cpu": "250m", "nvidia.com/gpu": "1"}}}]}));
        assert_eq!(
            resources_json(
                &capped(&spec, Some("1"), Some("1Gi"), Some("2Gi")),
                ContainerList::Containers,
                0
            ),
            json!({
                "requests": {"memory": "64Mi"},
                "limits": {
                    "cpu": "250m",
                    "ephemeral-storage": "2Gi",
                    "memory": "1Gi",
                    "nvidia.com/gpu": "1"
                }
            })
        );
    }

    #[test]
    fn missing_limits_of_init_containers_and_sidecars_are_filled_from_the_cap() {
        let spec = spec(json!({
            "initContainers": [
                {"name": "migrate"},
                {"name": "mesh", "restartPolicy": "Always",
                 "resources": {"requests": {"memory": "32Mi"}}}
            ],
            "containers": [{"name": "app", "resources": {"limits": {"memory": "512Mi"}}}]
        }));
        let capped = capped(&spec, None, Some("1Gi"), None);
        assert_eq!(
            resources_json(&capped, ContainerList::InitContainers, 0),
            json!({"limits": {"memory": "1Gi"}})
        );
        assert_eq!(
            resources_json(&capped, ContainerList::InitContainers, 1),
            json!({"requests": {"memory": "32Mi"}, "limits": {"memory": "1Gi"}})
        );
        assert_eq!(
            resources_json(&capped, ContainerList::Containers, 0),
            json!({"limits": {"memory": "512Mi"}})
        );
    }

    #[test]
    fn init_containers_and_sidecars_are_checked() {
        let mut spec = spec(json!({
            "initContainers": [
                {"name": "migrate", "resources": {"limits": {"memory": "512Mi"}}},
                {"name": "mesh", "restartPolicy": "Always",
                 "resources": {"limits": {"memory": "2Gi"}}}
            ],
            "containers": [{"name": "app", "resources": {"limits": {"memory": "1Gi"}}}]
        }));
        let error = request_error(&mut spec, None, Some("1Gi"));
        assert_eq!(
            error,
            ResourceCapError::OverCap {
                violations: vec![CapViolation {
                    container: ContainerRef {
                        list: ContainerList::InitContainers,
                        index: 1,
                        name: "mesh".into()
                    },
                    resource: CappedResource::Memory,
                    problem: CapProblem::LimitAboveCap {
                        value: "2Gi".into()
                    },
                    cap: "1Gi".into(),
                }]
            }
        );
        assert!(
            error
                .to_string()
                .contains("init container \"mesh\" (spec.initContainers[1]): limits.memory 2Gi")
        );
    }

    #[test]
    fn ephemeral_storage_is_capped_by_max_storage() {
        let spec = spec(json!({"containers": [{"name": "app", "resources": {
            "requests": {"ephemeral-storage": "2G"},
            "limits": {"ephemeral-storage": "1.5Gi"}}}]}));
        let mut rejected = spec.clone();
        let violations = match apply_resource_caps(&mut rejected, None, None, Some(&q("1Gi"))) {
            Err(ResourceCapError::OverCap { violations }) => violations,
            other => panic!("expected OverCap, got {other:?}"),
        };
        assert_eq!(rejected, spec);
        assert_eq!(
            violations
                .iter()
                .map(|v| (v.resource, v.problem.clone()))
                .collect::<Vec<_>>(),
            [
                (
                    CappedResource::EphemeralStorage,
                    CapProblem::RequestAboveCap { value: "2G".into() }
                ),
                (
                    CappedResource::EphemeralStorage,
                    CapProblem::LimitAboveCap {
                        value: "1.5Gi".into()
                    }
                ),
            ]
        );
        assert!(
            violations[1]
                .to_string()
                .contains("limits.ephemeral-storage 1.5Gi is above spec.maxStorage 1Gi")
        );
    }

    #[test]
    fn every_violation_is_reported_and_every_cap_to_raise_named() {
        let spec = spec(json!({"containers": [
            {"name": "app", "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}},
            {"name": "proxy", "resources": {"requests": {"ephemeral-storage": "2Gi"}}}
        ]}));
        let violations = over_caps(&spec, "1", "1Gi", "1Gi");
        // app: cpu and memory over; proxy: storage request over. The missing limits (app's
        // storage, all of proxy's) are not violations.
        assert_eq!(
            violations
                .iter()
                .map(|v| (v.container.name.as_str(), v.resource))
                .collect::<Vec<_>>(),
            [
                ("app", CappedResource::Cpu),
                ("app", CappedResource::Memory),
                ("proxy", CappedResource::EphemeralStorage),
            ]
        );
        let message = ResourceCapError::OverCap { violations }.to_string();
        assert!(
            message.ends_with("or raise spec.maxCpu / spec.maxMemory / spec.maxStorage"),
            "{message}"
        );
        assert!(message.contains(
            "container \"proxy\" (spec.containers[1]): requests.ephemeral-storage 2Gi is above \
             spec.maxStorage 1Gi"
        ));
    }

    #[test]
    fn on_error_the_spec_is_left_unchanged() {
        // proxy lacks every limit, which alone would be filled in, but app is over the cpu cap,
        // so nothing may be filled in.
        let original = spec(json!({
            "initContainers": [{"name": "migrate"}],
            "containers": [
                {"name": "proxy"},
                {"name": "app", "resources": {"requests": {"cpu": "100m"},
                    "limits": {"cpu": "4"}}}
            ]
        }));
        let mut spec = original.clone();
        let error = apply_resource_caps(&mut spec, Some(&q("1")), Some(&q("1Gi")), Some(&q("1Gi")))
            .unwrap_err();
        assert!(
            matches!(error, ResourceCapError::OverCap { .. }),
            "{error:?}"
        );
        assert_eq!(spec, original);
    }

    #[test]
    fn oz_example_template_passes_and_gets_limits_from_its_caps() {
        // examples/pod_access_template.yaml sets maxMemory 1Gi, maxCpu 1, maxStorage 1Gi (which
        // Oz ignored), and its `resources` leave only requests: every capped resource gets its
        // cap as the limit, and the requests stay as written.
        let mutated = mutate_pod_template(
            &oz_example_deployment_template(),
            Some(&oz_example_config()),
        )
        .unwrap();
        let mut spec = mutated.spec.unwrap();
        apply_resource_caps(&mut spec, Some(&q("1")), Some(&q("1Gi")), Some(&q("1Gi"))).unwrap();
        assert_eq!(spec.containers[0].name, "dennis");
        assert_eq!(
            resources_json(&spec, ContainerList::Containers, 0),
            json!({
                "requests": {"memory": "42Mi", "cpu": "100m"},
                "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}
            })
        );
    }

    #[test]
    fn an_invalid_cap_names_the_template_field() {
        let original = within_caps_spec();
        let mut spec = original.clone();
        let error = request_error(&mut spec, None, Some("1GB"));
        assert_eq!(
            error.to_string(),
            "spec.maxMemory: invalid quantity \"1GB\": unknown suffix \"GB\"; write a number \
             with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or an \
             integer exponent, such as 100m, 0.5, 2, 128Mi, 1Gi or 1e3; fix it in the \
             PodAccessTemplate"
        );
        assert_eq!(spec, original);
    }

    #[test]
    fn an_invalid_container_quantity_names_the_container() {
        let original = spec(json!({"containers": [
            {"name": "proxy"},
            {"name": "app", "resources": {"limits": {"cpu": "one"}}}
        ]}));
        let mut spec = original.clone();
        let error = request_error(&mut spec, Some("1"), None);
        assert!(
            matches!(
                &error,
                ResourceCapError::InvalidQuantity {
                    kind: "limits",
                    resource: "cpu",
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().starts_with(
            "container \"app\" (spec.containers[1]): limits.cpu: invalid quantity \"one\": it \
             must start with a number"
        ));
        assert_eq!(spec, original);
    }
}
