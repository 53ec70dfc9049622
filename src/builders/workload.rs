//! Resolving a template's `controllerTargetRef` to the workload it names: its selector and its
//! pod template. Rollouts are read through the dynamic API, so oz needs no Argo dependency and
//! works whether or not their CRD is installed.

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        core::v1::PodTemplateSpec,
    },
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{
    Api, Client, Resource,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use oz_api::{ControllerKind, CrossVersionObjectReference};
use serde::de::DeserializeOwned;

use crate::Result;

/// What oz needs of a workload controller.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Its uid, which the controller owner references of its pods (or of their ReplicaSets)
    /// carry.
    pub uid: Option<String>,
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

/// A workload's uid, selector and pod template, or `None` for a workload without a spec.
type Parts = Option<(Option<String>, LabelSelector, PodTemplateSpec)>;

/// Looks up `target` in `namespace`.
pub async fn lookup(
    client: &Client,
    namespace: &str,
    target: &CrossVersionObjectReference,
) -> Result<Lookup> {
    let name = target.name.as_str();
    let parts: Option<Parts> = match target.kind {
        ControllerKind::Deployment => get::<Deployment>(client, namespace, name)
            .await?
            .map(|d| d.spec.map(|s| (d.metadata.uid, s.selector, s.template))),
        ControllerKind::StatefulSet => get::<StatefulSet>(client, namespace, name)
            .await?
            .map(|d| d.spec.map(|s| (d.metadata.uid, s.selector, s.template))),
        ControllerKind::DaemonSet => get::<DaemonSet>(client, namespace, name)
            .await?
            .map(|d| d.spec.map(|s| (d.metadata.uid, s.selector, s.template))),
        ControllerKind::Rollout => match get_rollout(client, namespace, name).await? {
            RolloutLookup::Found(parts) => Some(*parts),
            RolloutLookup::Missing => None,
            RolloutLookup::NoCrd => {
                return Ok(Lookup::Missing(format!(
                    "Rollout {name:?} cannot exist: the Argo Rollouts CRD (rollouts.argoproj.io) is not installed"
                )));
            }
        },
    };
    Ok(match parts {
        Some(Some((uid, selector, pod_template))) => Lookup::Found(Box::new(Workload {
            uid,
            selector,
            pod_template,
        })),
        Some(None) => Lookup::Missing(format!(
            "{:?} {name:?} has no selector or pod template",
            target.kind
        )),
        None => Lookup::Missing(format!(
            "{:?} {name:?} not found in namespace {namespace:?}",
            target.kind
        )),
    })
}

async fn get<K>(client: &Client, namespace: &str, name: &str) -> Result<Option<K>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Ok(Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?)
}

enum RolloutLookup {
    Found(Box<Parts>),
    Missing,
    NoCrd,
}

async fn get_rollout(client: &Client, namespace: &str, name: &str) -> Result<RolloutLookup> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &rollout_resource());
    match api.get(name).await {
        Ok(rollout) => {
            let spec = &rollout.data["spec"];
            let selector = serde_json::from_value(spec["selector"].clone()).ok();
            let template = serde_json::from_value(spec["template"].clone()).ok();
            let uid = rollout.metadata.uid.clone();
            Ok(RolloutLookup::Found(Box::new(
                selector.zip(template).map(|(s, t)| (uid, s, t)),
            )))
        }
        // A missing object's 404 names it; a 404 without details means the resource type itself
        // is unknown.
        Err(kube::Error::Api(status))
            if status.code == 404
                && status.details.as_ref().is_some_and(|d| !d.name.is_empty()) =>
        {
            Ok(RolloutLookup::Missing)
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(RolloutLookup::NoCrd),
        Err(e) => Err(e.into()),
    }
}
