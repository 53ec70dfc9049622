//! PodAccessBuilder: a private copy of a workload's pod (or a pod from the template's podSpec),
//! mutated as the template says, plus a Role and RoleBinding that let the grantee exec into and
//! attach to that pod only.

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ObjectMeta, PostParams, Preconditions},
};
use oz_api::{
    AccessTemplate, PodAccessRequest, PodAccessTemplate, Requester, SESSIONS_GROUP, SessionMode,
    pod_mutation::{apply_resource_caps, mutate_pod_template},
};

use super::{
    AccessBuilder, BuildError, Built, GrantIdentity, controlled_by, is_ready, rbac, revoke_grant,
    workload::{self, Lookup},
};
use crate::{Context, Error, cache::BuildCaches};

/// `kubectl exec` and `kubectl attach` into the access pod, and reading it.
pub const POD_PERMISSIONS: &[rbac::PodPermission] = &[
    rbac::READ_POD,
    rbac::PodPermission {
        api_group: "",
        resource: "pods/exec",
        verbs: &["create", "get"],
    },
    rbac::PodPermission {
        api_group: "",
        resource: "pods/attach",
        verbs: &["create", "get"],
    },
];

/// Brokered: exec and attach into the access pod through oz only (in
/// [`SESSIONS_GROUP`]), and reading it.
pub const BROKERED_POD_PERMISSIONS: &[rbac::PodPermission] = &[
    rbac::READ_POD,
    rbac::PodPermission {
        api_group: SESSIONS_GROUP,
        resource: "pods/exec",
        verbs: &["create", "get"],
    },
    rbac::PodPermission {
        api_group: SESSIONS_GROUP,
        resource: "pods/attach",
        verbs: &["create", "get"],
    },
];

/// Builds pod access: see the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct PodAccessBuilder;

impl AccessBuilder for PodAccessBuilder {
    type Request = PodAccessRequest;
    const OWNS_PODS: bool = true;

    async fn build(
        &self,
        ctx: &Context,
        cache: &BuildCaches,
        _request: &PodAccessRequest,
        template: &PodAccessTemplate,
        grant: &GrantIdentity,
        requester: &Requester,
        _recorded_pod: Option<&str>,
    ) -> Result<Built, BuildError> {
        let existing = cache.role(ctx, grant).await?;
        let session_mode =
            rbac::granted_session_mode(template.access_config().session_mode(), existing.as_ref());
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        let pod = match pods.get_opt(&grant.name).await? {
            // Being deleted (a user removed it): wait for it to go, then recreate it.
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => {
                return Ok(Built {
                    created_message: created_message(grant),
                    ready: false,
                    pod,
                    session_mode,
                });
            }
            Some(pod) => pod,
            // First build, or the pod was deleted while the grant is valid: (re)create it under
            // the same name, as Oz does.
            None => {
                let pod = access_pod(ctx, template, grant).await?;
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(created) => created,
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        pods.get(&grant.name).await?
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        // The name is predictable (`<request>-<uid8>`, and the request is readable): anyone
        // who may create pods could have made one first, from an image of their own, for the
        // grantee to exec into. Only a pod this request controls is the grant's.
        if !controlled_by(pod.owner_references(), &grant.owner.uid) {
            return Err(BuildError::Invalid(squatter_message(grant, &pod)));
        }
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
            let why = pod
                .status
                .as_ref()
                .and_then(|s| s.message.clone().or(s.reason.clone()))
                .unwrap_or_else(|| "its containers exited with an error".into());
            return Err(BuildError::Invalid(format!(
                "the access pod {:?} failed: {why}; delete this request and create a new one (check the template's command and resources)",
                grant.name
            )));
        }
        let permissions = match session_mode {
            SessionMode::Direct => POD_PERMISSIONS,
            SessionMode::Brokered => BROKERED_POD_PERMISSIONS,
        };
        let role = existing.as_ref();
        let subjects = rbac::subjects_for(template.access_config(), requester);
        rbac::apply_grant(ctx, cache, grant, role, &grant.name, permissions, subjects).await?;
        Ok(Built {
            ready: is_ready(&pod),
            created_message: created_message(grant),
            pod,
            session_mode,
        })
    }

    async fn revoke(&self, ctx: &Context, grant: &GrantIdentity) -> Result<bool, Error> {
        let granted = revoke_grant(ctx, grant).await?;
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        // Only the request's own pod: a pod someone else made under the grant's name is theirs.
        let Some(pod) = pods.get_opt(&grant.name).await? else {
            return Ok(granted);
        };
        if !controlled_by(pod.owner_references(), &grant.owner.uid) {
            return Ok(granted);
        }
        // No grace period: the window is over, and deleting the pod ends any session into it.
        // The uid precondition: never a pod that replaced it since the read.
        let delete = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default().grace_period(0)
        };
        let deleted = match pods.delete(&grant.name, &delete).await {
            Ok(_) => true,
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => false,
            Err(e) => return Err(e.into()),
        };
        Ok(granted || deleted)
    }
}

/// Why a grant cannot use the pod found under its name, which its request does not control.
fn squatter_message(grant: &GrantIdentity, pod: &Pod) -> String {
    let made_by = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map_or("nobody oz knows (it has no controller)".to_string(), |o| {
            format!("{} {}", o.kind, o.name)
        });
    format!(
        "a pod named {:?} that oz did not make is in the way (it is controlled by {made_by}, not \
         by this request), so oz will not grant access to it; a cluster admin should find out \
         who made pod {}/{} and delete it, then you create a new request",
        grant.name, grant.namespace, grant.name
    )
}

fn created_message(grant: &GrantIdentity) -> String {
    format!(
        "Success. Pod {0}, Role {0}, RoleBinding {0} created",
        grant.name
    )
}

/// The access pod: the source pod template, mutated, within the template's caps, named and
/// labelled for the grant and owned by the request.
async fn access_pod(
    ctx: &Context,
    template: &PodAccessTemplate,
    grant: &GrantIdentity,
) -> Result<Pod, BuildError> {
    let spec = &template.spec;
    let source = match (&spec.controller_target_ref, &spec.pod_spec) {
        (Some(target), _) => match workload::lookup(&ctx.client, &grant.namespace, target).await? {
            Lookup::Found(workload) => workload.pod_template,
            Lookup::Missing(why) => {
                return Err(BuildError::Invalid(format!(
                    "the template's target is missing: {why}; fix controllerTargetRef of PodAccessTemplate {:?}",
                    template.name_any()
                )));
            }
        },
        (None, Some(pod_spec)) => PodTemplateSpec {
            metadata: None,
            spec: Some(pod_spec.clone()),
        },
        (None, None) => {
            return Err(BuildError::Invalid(
                "the template has neither controllerTargetRef nor podSpec; set one of them".into(),
            ));
        }
    };
    let mutated = mutate_pod_template(&source, spec.controller_target_mutation_config.as_ref())
        .map_err(|e| BuildError::Invalid(format!("cannot build the access pod: {e}")))?;
    let mut pod_spec = mutated.spec.unwrap_or_default();
    apply_resource_caps(
        &mut pod_spec,
        spec.max_cpu.as_ref(),
        spec.max_memory.as_ref(),
        spec.max_storage.as_ref(),
    )
    .map_err(|e| {
        BuildError::Invalid(format!(
            "the access pod would break the template's resource caps: {e}"
        ))
    })?;
    let metadata = mutated.metadata.unwrap_or_default();
    let mut labels = metadata.labels.unwrap_or_default();
    labels.extend(grant.labels.clone());
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(grant.name.clone()),
            namespace: Some(grant.namespace.clone()),
            labels: Some(labels),
            annotations: metadata.annotations,
            owner_references: Some(vec![grant.owner.clone()]),
            ..Default::default()
        },
        spec: Some(pod_spec),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(permissions: &[rbac::PodPermission]) -> Vec<(&'static str, &'static str)> {
        permissions
            .iter()
            .map(|p| (p.api_group, p.resource))
            .collect()
    }

    #[test]
    fn a_direct_pod_grant_is_core_exec_and_attach_as_before() {
        assert_eq!(
            rules(POD_PERMISSIONS),
            [("", "pods"), ("", "pods/exec"), ("", "pods/attach")]
        );
    }

    #[test]
    fn a_brokered_pod_grant_is_exec_and_attach_through_oz_only() {
        assert_eq!(
            rules(BROKERED_POD_PERMISSIONS),
            [
                ("", "pods"),
                (SESSIONS_GROUP, "pods/exec"),
                (SESSIONS_GROUP, "pods/attach")
            ]
        );
        for permission in &BROKERED_POD_PERMISSIONS[1..] {
            assert_eq!(permission.verbs, ["create", "get"]);
        }
    }
}
