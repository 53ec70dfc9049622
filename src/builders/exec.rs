//! ExecAccessBuilder: a Role and RoleBinding that let the grantee exec into one running pod of
//! the template's workload, and nothing else.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::{GetParams, ListParams},
};
use oz_api::{
    AccessTemplate, ControllerKind, CrossVersionObjectReference, ExecAccessRequest,
    ExecAccessTemplate, Requester, SessionMode, grant_hint::PodWorkload,
};

use super::{
    AccessBuilder, BuildError, Built, GrantIdentity, is_running, rbac, revoke_grant, selector,
    workload::{self, Lookup, Workload},
};
use crate::{Context, Error, cache::BuildCaches};

/// Builds exec access: see the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecAccessBuilder;

impl AccessBuilder for ExecAccessBuilder {
    type Request = ExecAccessRequest;
    const CACHES_WORKLOADS: bool = true;

    async fn build(
        &self,
        ctx: &Context,
        cache: &BuildCaches,
        request: &ExecAccessRequest,
        template: &ExecAccessTemplate,
        grant: &GrantIdentity,
        requester: &Requester,
        recorded_pod: Option<&str>,
    ) -> Result<Built, BuildError> {
        let target = &template.spec.controller_target_ref;
        let cached = cache
            .workloads
            .as_ref()
            .and_then(|w| w.lookup(&grant.namespace, target));
        let lookup = match cached {
            Some(found) => found,
            None => workload::lookup(&ctx.client, &grant.namespace, target).await?,
        };
        let workload = match lookup {
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

        // A pod chosen earlier stays chosen: the grant is for that pod only. The Role oz wrote
        // is the record (status.podName is read only when the Role is gone), and the pod must
        // still be one of the workload's, so an edit of the status or the Role cannot move the
        // grant to a pod the template does not cover. The Role also records the session mode.
        let existing = cache.role(ctx, grant).await?;
        let session_mode =
            rbac::granted_session_mode(template.access_config().session_mode(), existing.as_ref());
        let earlier = existing
            .as_ref()
            .and_then(|role| role.pod.as_deref())
            .or(recorded_pod)
            .map(str::to_string);
        let pod = if let Some(name) = earlier {
            let still_granted = match granted_pod(&pods, &name).await? {
                Some(pod) if pod.metadata.deletion_timestamp.is_none() => {
                    check_member(&pod, target, &workload, &target_name).map(|()| pod)
                }
                _ => Err(BuildError::Invalid(format!(
                    "pod {name:?}, which this request was granted, no longer exists; the grant was for that pod only: create a new request"
                ))),
            };
            match still_granted {
                Ok(pod) => pod,
                Err(why) => {
                    // Nothing may keep granting a pod that is gone or not the workload's.
                    self.revoke(ctx, grant).await?;
                    return Err(why);
                }
            }
        } else if let Some(wanted) = request.spec.target_pod.as_deref() {
            let pod = pods.get_opt(wanted).await?.ok_or_else(|| {
                BuildError::Invalid(format!(
                    "pod named {wanted} not found in namespace {:?}: set spec.targetPod to a running pod of {target_name}, or leave it empty for a random one",
                    grant.namespace
                ))
            })?;
            check_belongs(&pod, target, &workload, &target_name)?;
            pod
        } else {
            pick_running_pod(&pods, target, &workload, &target_name, &grant.name).await?
        };

        let pod_name = pod.name_any();
        let permissions = match session_mode {
            SessionMode::Direct => rbac::EXEC_PERMISSIONS,
            SessionMode::Brokered => rbac::BROKERED_EXEC_PERMISSIONS,
        };
        let role = existing.as_ref();
        let subjects = rbac::subjects_for(template.access_config(), requester);
        rbac::apply_grant(ctx, cache, grant, role, &pod_name, permissions, subjects).await?;
        Ok(Built {
            pod,
            created_message: format!("Success. Role {0}, RoleBinding {0} created", grant.name),
            ready: true,
            session_mode,
        })
    }

    async fn revoke(&self, ctx: &Context, grant: &GrantIdentity) -> Result<bool, Error> {
        revoke_grant(ctx, grant).await
    }
}

/// The pod a grant was made for, if it still exists. Asked of the apiserver's watch cache first
/// (`resourceVersion=0`): every reconcile of an exec grant checks its pod, a restart reconciles
/// every grant, and a consistent GET is a read of etcd each (docs/benchmarks.md). A pod the cache does not show is asked for again, consistently, before the grant is
/// revoked for it: a cache a moment behind must not end a grant to a pod created a moment ago.
async fn granted_pod(pods: &Api<Pod>, name: &str) -> kube::Result<Option<Pod>> {
    match pods.get_with(name, &GetParams::any()).await {
        Ok(pod) => Ok(Some(pod)),
        Err(kube::Error::Api(status)) if status.is_not_found() => pods.get_opt(name).await,
        Err(other) => Err(other),
    }
}

/// A pod a request may be granted: one of the workload's, and running.
fn check_belongs(
    pod: &Pod,
    target: &CrossVersionObjectReference,
    workload: &Workload,
    target_name: &str,
) -> Result<(), BuildError> {
    check_member(pod, target, workload, target_name)?;
    if !is_running(pod) {
        return Err(BuildError::Invalid(format!(
            "pod {:?} is not running (or is terminating); pick a running pod of {target_name} or leave spec.targetPod empty",
            pod.name_any()
        )));
    }
    Ok(())
}

/// That `pod` is one of the workload's: it matches the selector and the workload controls it.
fn check_member(
    pod: &Pod,
    target: &CrossVersionObjectReference,
    workload: &Workload,
    target_name: &str,
) -> Result<(), BuildError> {
    let name = pod.name_any();
    if !selector::matches(&workload.selector, pod.labels()) {
        return Err(BuildError::Invalid(format!(
            "pod {name:?} is not part of {target_name}: its labels do not match the selector {}; pick one of its pods or leave spec.targetPod empty",
            selector::describe(&workload.selector)
        )));
    }
    if !controlled_by(pod, target, workload) {
        return Err(BuildError::Invalid(format!(
            "pod {name:?} is not part of {target_name}: it has the selector's labels, but {target_name} does not control it (no controller owner reference from it{}); pick one of its pods or leave spec.targetPod empty",
            match target.kind {
                ControllerKind::Deployment | ControllerKind::Rollout => " or its ReplicaSet",
                _ => "",
            }
        )));
    }
    Ok(())
}

/// Whether the workload controls `pod`, as its controller owner reference says: a StatefulSet
/// or DaemonSet directly (by uid); a Deployment or Rollout through the ReplicaSet it names
/// `<workload>-<hash>`, where the pod carries the hash as its `pod-template-hash` (Rollout:
/// `rollouts-pod-template-hash`) label. A pod that merely has the selector's labels is not the
/// workload's.
fn controlled_by(pod: &Pod, target: &CrossVersionObjectReference, workload: &Workload) -> bool {
    // The same reading of the owner reference as the enforced webhook's hint, which names the
    // templates that could grant a pod (`oz_api::grant_hint`).
    if PodWorkload::of_pod(&pod.metadata) != Some(PodWorkload::of_target(target)) {
        return false;
    }
    match target.kind {
        ControllerKind::StatefulSet | ControllerKind::DaemonSet => pod
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .is_some_and(|owner| workload.uid.as_deref() == Some(owner.uid.as_str())),
        ControllerKind::Deployment | ControllerKind::Rollout => true,
    }
}

/// A running pod of the workload. The choice is a hash of the grant name, so it is spread over
/// the pods yet stable across reconciles of the same request.
///
/// The pods are listed from the apiserver's watch cache (`resourceVersion=0`): a consistent
/// LIST waits for that cache to catch up with etcd after any write, which was most of the time
/// to access (docs/benchmarks.md). That cache is milliseconds behind etcd: a
/// pod it still shows but that has just gone is no different from one that goes a moment after
/// it is granted (the grant names it; exec finds nothing), so the pick is not confirmed with a
/// GET of its own (a call in every grant). Only when the cache shows no running
/// pod is the LIST repeated consistently, so a pod that has just started is not missed.
async fn pick_running_pod(
    pods: &Api<Pod>,
    target: &CrossVersionObjectReference,
    workload: &Workload,
    target_name: &str,
    seed: &str,
) -> Result<Pod, BuildError> {
    let query = selector::to_query(&workload.selector);
    let eligible = |pod: &Pod| {
        is_running(pod)
            && selector::matches(&workload.selector, pod.labels())
            && controlled_by(pod, target, workload)
    };
    let cached = pods
        .list(&ListParams::default().labels(&query).match_any())
        .await?
        .items;
    if let Some(picked) = pick(cached.into_iter().filter(|p| eligible(p)).collect(), seed) {
        return Ok(picked);
    }
    let current = pods
        .list(&ListParams::default().labels(&query))
        .await?
        .items;
    pick(current.into_iter().filter(|p| eligible(p)).collect(), seed).ok_or_else(|| {
        BuildError::Invalid(format!(
            "no running pods of {target_name}; exec access needs a running pod: start the workload, then the request proceeds"
        ))
    })
}

/// One of `running`, chosen by a hash of `seed`; `None` if there are none.
fn pick(mut running: Vec<Pod>, seed: &str) -> Option<Pod> {
    if running.is_empty() {
        return None;
    }
    running.sort_by_key(|p| p.name_any());
    let mut hasher = DefaultHasher::new();
    seed.hash(&mut hasher);
    let index = (hasher.finish() % running.len() as u64) as usize;
    Some(running.swap_remove(index))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
    use kube::api::ObjectMeta;
    use oz_api::ControllerApiVersion;

    use super::*;

    fn target(kind: ControllerKind) -> CrossVersionObjectReference {
        CrossVersionObjectReference {
            api_version: ControllerApiVersion::AppsV1,
            kind,
            name: "web".into(),
        }
    }

    fn workload() -> Workload {
        Workload {
            uid: Some("web-uid".into()),
            selector: LabelSelector::default(),
            pod_template: Default::default(),
        }
    }

    fn pod(labels: &[(&str, &str)], owner: Option<(&str, &str, &str, bool)>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                owner_references: owner.map(|(kind, name, uid, controller)| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: kind.into(),
                        name: name.into(),
                        uid: uid.into(),
                        controller: Some(controller),
                        block_owner_deletion: None,
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_deployment_controls_the_pods_of_its_replica_sets_only() {
        let deployment = target(ControllerKind::Deployment);
        let hash = [("app", "web"), ("pod-template-hash", "5d4f8")];
        let ours = pod(&hash, Some(("ReplicaSet", "web-5d4f8", "rs-uid", true)));
        assert!(controlled_by(&ours, &deployment, &workload()));
        // A bare pod with the selector's labels, one owned by another Deployment's ReplicaSet,
        // one whose hash does not match its ReplicaSet, and a non-controller owner: not web's.
        for stranger in [
            pod(&hash, None),
            pod(&hash, Some(("ReplicaSet", "api-5d4f8", "rs-uid", true))),
            pod(
                &[("app", "web"), ("pod-template-hash", "other")],
                Some(("ReplicaSet", "web-5d4f8", "rs-uid", true)),
            ),
            pod(&hash, Some(("ReplicaSet", "web-5d4f8", "rs-uid", false))),
            pod(&hash, Some(("StatefulSet", "web", "web-uid", true))),
        ] {
            assert!(!controlled_by(&stranger, &deployment, &workload()));
        }
    }

    #[test]
    fn a_stateful_set_or_daemon_set_controls_its_pods_by_uid() {
        for kind in [ControllerKind::StatefulSet, ControllerKind::DaemonSet] {
            let owner_kind = format!("{kind:?}");
            let ours = pod(
                &[("app", "web")],
                Some((&owner_kind, "web", "web-uid", true)),
            );
            assert!(controlled_by(&ours, &target(kind), &workload()));
            // Same kind and name, but another object (deleted and re-created, or elsewhere).
            let other = pod(
                &[("app", "web")],
                Some((&owner_kind, "web", "old-uid", true)),
            );
            assert!(!controlled_by(&other, &target(kind), &workload()));
        }
    }

    #[test]
    fn a_rollout_controls_the_pods_of_its_replica_sets_by_their_rollouts_hash() {
        let rollout = target(ControllerKind::Rollout);
        let ours = pod(
            &[("app", "web"), ("rollouts-pod-template-hash", "abc")],
            Some(("ReplicaSet", "web-abc", "rs-uid", true)),
        );
        assert!(controlled_by(&ours, &rollout, &workload()));
        let deployment_style = pod(
            &[("app", "web"), ("pod-template-hash", "abc")],
            Some(("ReplicaSet", "web-abc", "rs-uid", true)),
        );
        assert!(!controlled_by(&deployment_style, &rollout, &workload()));
    }

    fn named(name: &str) -> Pod {
        let mut pod = pod(&[], None);
        pod.metadata.name = Some(name.into());
        pod
    }

    #[test]
    fn the_pick_is_stable_for_a_grant_whatever_order_the_pods_are_listed_in() {
        let names = ["web-a", "web-b", "web-c", "web-d"];
        let listed = |order: &[&str]| order.iter().map(|n| named(n)).collect::<Vec<_>>();
        let first = pick(listed(&names), "req-1a2b3c4d").map(|p| p.name_any());
        let reversed: Vec<_> = names.iter().rev().copied().collect();
        assert_eq!(
            pick(listed(&reversed), "req-1a2b3c4d").map(|p| p.name_any()),
            first
        );
        assert!(first.is_some());
        assert!(pick(Vec::new(), "req-1a2b3c4d").is_none());
    }

    #[test]
    fn the_pick_spreads_grants_over_the_pods() {
        let names = ["web-a", "web-b", "web-c", "web-d"];
        let chosen: std::collections::BTreeSet<_> = (0..64)
            .filter_map(|i| {
                let pods = names.iter().map(|n| named(n)).collect();
                pick(pods, &format!("req-{i}")).map(|p| p.name_any())
            })
            .collect();
        assert!(chosen.len() > 1, "every grant got {chosen:?}");
    }
}
