//! Pods on the simulated nodes: the helpers create them and wait until kwok, playing their
//! kubelet, reports them Running and Ready. [`mark_failed`] writes a status by hand, for
//! tests about status itself.

use k8s_openapi::{
    api::core::v1::{Container, Pod, PodSpec},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
    jiff::Timestamp,
};
use std::time::Duration;

use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    runtime::wait::await_condition,
};
use serde_json::json;

use crate::{Error, Result};

/// The container every test workload runs.
pub fn test_container() -> Container {
    Container {
        name: "app".into(),
        image: Some("registry.k8s.io/pause:3.10".into()),
        ..Default::default()
    }
}

/// A pod spec with one container, [`test_container`].
pub fn test_pod_spec() -> PodSpec {
    PodSpec {
        containers: vec![test_container()],
        ..Default::default()
    }
}

/// How long a pod may take to be bound and made Ready by its node. kwok needs ~0.4 s; the rest
/// is room for a busy 2-core machine.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Creates a pod with the labels and annotations of `template` and the given owner, and waits
/// until it runs on a simulated node and is Ready.
pub async fn create_ready_pod(
    client: &Client,
    namespace: &str,
    name: &str,
    template: &ObjectMeta,
    owner: Option<OwnerReference>,
    spec: PodSpec,
) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: template.labels.clone(),
            annotations: template.annotations.clone(),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(spec),
        ..Default::default()
    };
    pods.create(&PostParams::default(), &pod).await?;
    wait_ready(client, namespace, name).await
}

/// Waits until the pod is Ready (up to [`READY_TIMEOUT`]) and returns it.
pub async fn wait_ready(client: &Client, namespace: &str, name: &str) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let ready = tokio::time::timeout(
        READY_TIMEOUT,
        await_condition(pods.clone(), name, |pod: Option<&Pod>| {
            pod.is_some_and(is_ready)
        }),
    )
    .await;
    match ready {
        Ok(Ok(Some(pod))) => Ok(pod),
        Ok(Ok(None)) => Err(Error::Timeout(format!(
            "pod {namespace}/{name} was deleted while waiting for it to be Ready"
        ))),
        Ok(Err(e)) => Err(Error::Timeout(format!(
            "watching pod {namespace}/{name}: {e}"
        ))),
        Err(_) => {
            let status = pods.get_opt(name).await?.and_then(|p| p.status);
            Err(Error::Timeout(format!(
                "pod {namespace}/{name} not Ready within {READY_TIMEOUT:?}; status: {status:?}"
            )))
        }
    }
}

/// Whether a pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Sets a pod's phase to Failed with its containers terminated, as a kubelet does when the pod's
/// process exits with an error and nothing restarts it.
pub async fn mark_failed(client: &Client, namespace: &str, name: &str) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let now = Timestamp::now().to_string();
    let status = json!({
        "status": {
            "phase": "Failed",
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
        }
    });
    Ok(pods
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?)
}
