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
//!
//! Where each part lives: steps 2 to 6 in this file, step 1 in `default_container.rs`, step 7 in
//! `patch.rs`, step 8 in `privilege.rs`, the caps in `caps.rs` with the quantity parser in
//! `quantity.rs`, and the errors of steps 1 to 8 in `error.rs`.

mod caps;
mod default_container;
mod error;
#[cfg(test)]
mod fixtures;
mod patch;
mod privilege;
mod quantity;
#[cfg(test)]
mod tests;
mod vocabulary;

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::PodTemplateSpecMutationConfig;

pub use caps::{
    CapProblem, CapViolation, CappedResource, ContainerList, ContainerRef, ResourceCapError,
    apply_resource_caps,
};

pub use error::MutationError;
pub use privilege::privilege_raised;
pub use quantity::{QuantityError, QuantityValue, parse_quantity};
pub use vocabulary::{DEFAULT_CONTAINER_ANNOTATION, DefaultContainerOrigin, PrivilegeRule};

use default_container::default_container_index;
use patch::apply_patch;
use privilege::first_raising_operation;

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
    let index = default_container_index(&pod, config)?; // step 1
    let metadata = pod.metadata.get_or_insert_default();
    // default_container_index has checked that there is a spec with this container.
    let Some(spec) = pod.spec.as_mut() else {
        return Err(MutationError::NoContainers);
    };

    // The steps of the module documentation, in Oz's order.
    drop_workload_only_fields(spec, index, config); // 2
    set_annotations(metadata, config); // 3
    if let Some(extra) = &config.node_selector {
        merge_into(&mut spec.node_selector, extra); // 4
    }
    set_labels(metadata, config); // 5
    mutate_container(&mut spec.containers[index], config); // 6
    patch_within_privilege(pod, config) // 7 and 8
}

/// Step 2: what only makes sense for a workload's pods, unless its `keep*` flag is true.
fn drop_workload_only_fields(
    spec: &mut PodSpec,
    index: usize,
    config: &PodTemplateSpecMutationConfig,
) {
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
}

/// Step 3: annotations purged if asked, then `podAnnotations` merged.
fn set_annotations(metadata: &mut ObjectMeta, config: &PodTemplateSpecMutationConfig) {
    if config.purge_annotations.unwrap_or(false) {
        metadata.annotations = None;
    }
    if let Some(extra) = &config.pod_annotations {
        merge_into(&mut metadata.annotations, extra);
    }
}

/// Step 5: the workload's labels never reach the access pod; `podLabels` are the whole set.
fn set_labels(metadata: &mut ObjectMeta, config: &PodTemplateSpecMutationConfig) {
    metadata.labels = None;
    if let Some(labels) = &config.pod_labels {
        merge_into(&mut metadata.labels, labels);
    }
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

/// Steps 7 and 8: the patch, last, within the privilege of the pod it patches.
fn patch_within_privilege(
    pod: PodTemplateSpec,
    config: &PodTemplateSpecMutationConfig,
) -> Result<PodTemplateSpec, MutationError> {
    let operations = match config.patch_spec_operations.as_deref() {
        Some(operations) if !operations.is_empty() => operations,
        _ => return Ok(pod),
    };
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

/// Merges `extra` into `map`, overwriting existing keys; a map left empty is unset.
fn merge_into(map: &mut Option<BTreeMap<String, String>>, extra: &BTreeMap<String, String>) {
    let merged = map.get_or_insert_default();
    merged.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    if merged.is_empty() {
        *map = None;
    }
}
