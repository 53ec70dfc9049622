//! What can go wrong while building the access pod's template, each message naming the field
//! at fault and the fix.

use super::vocabulary::{CONFIG_FIELD, DefaultContainerOrigin, PrivilegeRule, op_name};
use crate::PatchOp;

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

fn culprit(operation: &Option<(usize, PatchOp, String)>) -> String {
    match operation {
        Some((index, op, path)) => format!("[{index}] ({} {path})", op_name(op)),
        None => String::new(),
    }
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
