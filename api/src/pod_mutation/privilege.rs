//! Step 8 of the mutation: a patch may not give the access pod more privilege than the pod it
//! copies.

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, SecurityContext};

use super::{apply_patch, vocabulary::PrivilegeRule};
use crate::{JsonPatchOperation, PatchOp};

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

/// The first way `patched` has more privilege than `source`, as the rule broken and what
/// exactly was raised; `None` if it has no more. Step 8 of [`mutate_pod_template`](super::mutate_pod_template).
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
pub(super) fn first_raising_operation(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_mutation::{MutationError, fixtures::*, mutate_pod_template};
    use serde_json::{Value, json};

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
}
