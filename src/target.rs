//! Resolving a template's `controllerTargetRef` to the workload it names: its selector and its
//! pod template. Rollouts are read through the dynamic API, so oz needs no Argo dependency and
//! works whether or not their CRD is installed.

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        core::v1::PodTemplateSpec,
    },
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use oz_api::{ControllerKind, CrossVersionObjectReference};

use crate::Result;

/// What oz needs of a workload controller.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Which pods belong to it.
    pub selector: LabelSelector,
    /// The pods it creates look like this.
    pub pod_template: PodTemplateSpec,
}

/// The outcome of looking a target up.
#[derive(Clone, Debug)]
pub enum Lookup {
    Found(Box<Workload>),
    /// It does not exist (or cannot exist, for a Rollout without its CRD); the text says so in
    /// words fit for a condition message.
    Missing(String),
}

/// The Argo Rollout resource, read dynamically.
pub fn rollout_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Rollout"),
        "rollouts",
    )
}

/// Looks up `target` in `namespace`.
pub async fn lookup(
    client: &Client,
    namespace: &str,
    target: &CrossVersionObjectReference,
) -> Result<Lookup> {
    let name = target.name.as_str();
    let missing = || {
        Lookup::Missing(format!(
            "{:?} {name:?} not found in namespace {namespace:?}",
            target.kind
        ))
    };
    let found = |selector: Option<LabelSelector>, template: Option<PodTemplateSpec>| match (
        selector, template,
    ) {
        (Some(selector), Some(pod_template)) => Lookup::Found(Box::new(Workload {
            selector,
            pod_template,
        })),
        _ => Lookup::Missing(format!(
            "{:?} {name:?} has no selector or pod template",
            target.kind
        )),
    };
    Ok(match target.kind {
        ControllerKind::Deployment => {
            match Api::<Deployment>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await?
            {
                Some(d) => d
                    .spec
                    .map_or_else(missing, |s| found(Some(s.selector), Some(s.template))),
                None => missing(),
            }
        }
        ControllerKind::StatefulSet => {
            match Api::<StatefulSet>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await?
            {
                Some(d) => d
                    .spec
                    .map_or_else(missing, |s| found(Some(s.selector), Some(s.template))),
                None => missing(),
            }
        }
        ControllerKind::DaemonSet => {
            match Api::<DaemonSet>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await?
            {
                Some(d) => d
                    .spec
                    .map_or_else(missing, |s| found(Some(s.selector), Some(s.template))),
                None => missing(),
            }
        }
        ControllerKind::Rollout => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &rollout_resource());
            match api.get(name).await {
                Ok(rollout) => {
                    let spec = &rollout.data["spec"];
                    found(
                        serde_json::from_value(spec["selector"].clone()).ok(),
                        serde_json::from_value(spec["template"].clone()).ok(),
                    )
                }
                // A missing object's 404 names it; a 404 without details means the resource
                // type itself is unknown.
                Err(kube::Error::Api(status))
                    if status.code == 404
                        && status.details.as_ref().is_some_and(|d| !d.name.is_empty()) =>
                {
                    missing()
                }
                Err(kube::Error::Api(status)) if status.code == 404 => Lookup::Missing(format!(
                    "Rollout {name:?} cannot exist: the Argo Rollouts CRD (rollouts.argoproj.io) is not installed"
                )),
                Err(e) => return Err(e.into()),
            }
        }
    })
}
