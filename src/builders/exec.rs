//! ExecAccessBuilder: a Role and RoleBinding that let the grantee exec into one running pod of
//! the template's workload, and nothing else.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::{
    core::v1::Pod,
    rbac::v1::{Role, RoleBinding, Subject},
};
use kube::{Api, ResourceExt, api::ListParams};
use oz_api::{ExecAccessRequest, ExecAccessTemplate};

use super::{AccessBuilder, BuildError, Built, GrantIdentity, is_running, rbac, selector};
use crate::{
    Context, Error,
    apply::delete_if_present,
    target::{self, Lookup, Workload},
};

/// Builds exec access: see the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecAccessBuilder;

impl AccessBuilder for ExecAccessBuilder {
    type Request = ExecAccessRequest;

    async fn build(
        &self,
        ctx: &Context,
        request: &ExecAccessRequest,
        template: &ExecAccessTemplate,
        grant: &GrantIdentity,
        subjects: Vec<Subject>,
        recorded_pod: Option<&str>,
    ) -> Result<Built, BuildError> {
        let target = &template.spec.controller_target_ref;
        let workload = match target::lookup(&ctx.client, &grant.namespace, target).await? {
            Lookup::Found(workload) => workload,
            Lookup::Missing(why) => {
                return Err(BuildError::Invalid(format!(
                    "the template's target is missing: {why}; fix controllerTargetRef of ExecAccessTemplate {:?}",
                    template.name_any()
                )));
            }
        };
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        let target_name = format!("{:?} {:?}", target.kind, target.name);

        // A pod chosen earlier (in status, or in an existing Role if the status write was lost)
        // stays chosen: the grant is for that pod only.
        let earlier = match recorded_pod {
            Some(pod) => Some(pod.to_string()),
            None => existing_role_pod(ctx, grant).await?,
        };
        let pod = if let Some(name) = earlier {
            match pods.get_opt(&name).await? {
                Some(pod) if pod.metadata.deletion_timestamp.is_none() => pod,
                _ => {
                    return Err(BuildError::Invalid(format!(
                        "pod {name:?}, which this request was granted, no longer exists; the grant was for that pod only: create a new request"
                    )));
                }
            }
        } else if let Some(wanted) = request.spec.target_pod.as_deref() {
            let pod = pods.get_opt(wanted).await?.ok_or_else(|| {
                BuildError::Invalid(format!(
                    "pod named {wanted} not found in namespace {:?}: set spec.targetPod to a running pod of {target_name}, or leave it empty for a random one",
                    grant.namespace
                ))
            })?;
            check_belongs(&pod, &workload, &target_name)?;
            pod
        } else {
            pick_running_pod(&pods, &workload, &target_name, &grant.name).await?
        };

        let pod_name = pod.name_any();
        rbac::apply_grant(ctx, grant, &pod_name, rbac::EXEC_PERMISSIONS, subjects).await?;
        Ok(Built {
            pod,
            created_message: format!("Success. Role {0}, RoleBinding {0} created", grant.name),
            ready: true,
        })
    }

    async fn revoke(&self, ctx: &Context, grant: &GrantIdentity) -> Result<bool, Error> {
        // The binding first: it is what lets anyone in.
        let bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        let roles: Api<Role> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        let binding = delete_if_present(&bindings, &grant.name).await?;
        let role = delete_if_present(&roles, &grant.name).await?;
        Ok(binding || role)
    }
}

/// The pod named in the grant's existing Role, if there is one.
async fn existing_role_pod(ctx: &Context, grant: &GrantIdentity) -> Result<Option<String>, Error> {
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), &grant.namespace);
    Ok(roles.get_opt(&grant.name).await?.and_then(|role| {
        role.rules?
            .into_iter()
            .find_map(|rule| rule.resource_names?.into_iter().next())
    }))
}

fn check_belongs(pod: &Pod, workload: &Workload, target_name: &str) -> Result<(), BuildError> {
    let name = pod.name_any();
    if !selector::matches(&workload.selector, pod.labels()) {
        return Err(BuildError::Invalid(format!(
            "pod {name:?} is not part of {target_name}: its labels do not match the selector {}; pick one of its pods or leave spec.targetPod empty",
            selector::describe(&workload.selector)
        )));
    }
    if !is_running(pod) {
        return Err(BuildError::Invalid(format!(
            "pod {name:?} is not running (or is terminating); pick a running pod of {target_name} or leave spec.targetPod empty"
        )));
    }
    Ok(())
}

/// A running pod of the workload. The choice is a hash of the grant name, so it is spread over
/// the pods yet stable across reconciles of the same request.
async fn pick_running_pod(
    pods: &Api<Pod>,
    workload: &Workload,
    target_name: &str,
    seed: &str,
) -> Result<Pod, BuildError> {
    let query = selector::to_query(&workload.selector);
    let mut running: Vec<Pod> = pods
        .list(&ListParams::default().labels(&query))
        .await?
        .items
        .into_iter()
        .filter(|pod| is_running(pod) && selector::matches(&workload.selector, pod.labels()))
        .collect();
    if running.is_empty() {
        return Err(BuildError::Invalid(format!(
            "no running pods of {target_name}; exec access needs a running pod: start the workload, then the request proceeds"
        )));
    }
    running.sort_by_key(|p| p.name_any());
    let mut hasher = DefaultHasher::new();
    seed.hash(&mut hasher);
    let index = (hasher.finish() % running.len() as u64) as usize;
    Ok(running.swap_remove(index))
}
