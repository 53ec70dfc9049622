//! Workloads whose pods the real controllers make: the helpers create a Deployment, StatefulSet,
//! DaemonSet or Argo Rollout, and the control plane's controllers, binder and kwok nodes do the
//! rest, as in a cluster. The helpers return once the pods are Ready.
//!
//! Argo's controller does not run here: [`rollout`] installs its CRD and creates the Rollout's
//! ReplicaSet as that controller would, and the ReplicaSet controller makes the pods.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::{
        apps::v1::{
            DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec,
            StatefulSet, StatefulSetSpec,
        },
        core::v1::{Node, Pod, PodSpec, PodTemplateSpec},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, ListParams, ObjectMeta, PostParams},
    core::GroupVersionKind,
    discovery::ApiResource,
};
use serde_json::json;

use crate::{Error, Result, pods};

/// How long a workload's pods may take to be created, bound and made Ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// A workload controller and its Ready pods.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `Deployment`, `StatefulSet`, `DaemonSet` or `Rollout`.
    pub kind: &'static str,
    /// The controller's name.
    pub name: String,
    /// The controller's selector labels, which its pods carry.
    pub selector: BTreeMap<String, String>,
    /// The pods, Running and Ready, by name.
    pub pods: Vec<Pod>,
}

impl Workload {
    /// The names of the workload's pods.
    pub fn pod_names(&self) -> Vec<String> {
        self.pods.iter().map(|p| p.name_any()).collect()
    }
}

/// What the helpers put in a workload's pod template: the selector label `app: NAME`, plus
/// whatever the caller adds.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// The controller's name.
    pub name: String,
    /// How many pods it runs. A DaemonSet ignores it: it runs one pod per node.
    pub replicas: usize,
    /// The pod template's spec.
    pub pod_spec: PodSpec,
    /// Labels added to the pod template besides `app`.
    pub extra_labels: BTreeMap<String, String>,
    /// Annotations on the pod template.
    pub annotations: BTreeMap<String, String>,
}

impl WorkloadSpec {
    /// `replicas` pods of [`pods::test_pod_spec`], labelled `app: NAME`.
    pub fn new(name: &str, replicas: usize) -> Self {
        Self {
            name: name.into(),
            replicas,
            pod_spec: pods::test_pod_spec(),
            extra_labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        }
    }

    fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), self.name.clone())])
    }

    fn template(&self, extra: &BTreeMap<String, String>) -> PodTemplateSpec {
        let mut labels = self.selector();
        labels.extend(self.extra_labels.clone());
        labels.extend(extra.clone());
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                ..Default::default()
            }),
            spec: Some(self.pod_spec.clone()),
        }
    }

    fn label_selector(&self) -> LabelSelector {
        LabelSelector {
            match_labels: Some(self.selector()),
            ..Default::default()
        }
    }

    fn workload(&self, kind: &'static str, pods: Vec<Pod>) -> Workload {
        Workload {
            kind,
            name: self.name.clone(),
            selector: self.selector(),
            pods,
        }
    }
}

/// Creates a Deployment and waits until its ReplicaSet's pods are Ready.
pub async fn deployment(client: &Client, namespace: &str, spec: WorkloadSpec) -> Result<Workload> {
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &Deployment {
                metadata: named(&spec.name),
                spec: Some(DeploymentSpec {
                    replicas: Some(spec.replicas as i32),
                    selector: spec.label_selector(),
                    template: spec.template(&BTreeMap::new()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await?;
    let pods = ready_pods(client, namespace, &spec, spec.replicas).await?;
    Ok(spec.workload("Deployment", pods))
}

/// Creates a StatefulSet and waits until its pods `NAME-0`, `NAME-1`, ... are Ready.
pub async fn stateful_set(
    client: &Client,
    namespace: &str,
    spec: WorkloadSpec,
) -> Result<Workload> {
    Api::<StatefulSet>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &StatefulSet {
                metadata: named(&spec.name),
                spec: Some(StatefulSetSpec {
                    replicas: Some(spec.replicas as i32),
                    selector: spec.label_selector(),
                    template: spec.template(&BTreeMap::new()),
                    service_name: Some(spec.name.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await?;
    let pods = ready_pods(client, namespace, &spec, spec.replicas).await?;
    Ok(spec.workload("StatefulSet", pods))
}

/// Creates a DaemonSet and waits until it has a Ready pod on every node.
pub async fn daemon_set(client: &Client, namespace: &str, spec: WorkloadSpec) -> Result<Workload> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .len();
    Api::<DaemonSet>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &DaemonSet {
                metadata: named(&spec.name),
                spec: Some(DaemonSetSpec {
                    selector: spec.label_selector(),
                    template: spec.template(&BTreeMap::new()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await?;
    let pods = ready_pods(client, namespace, &spec, nodes).await?;
    Ok(spec.workload("DaemonSet", pods))
}

/// The Argo Rollouts CRD, trimmed to what oz reads (it keeps every field it is given).
const ROLLOUT_CRD: &str = "rollouts.argoproj.io";

/// Creates an Argo Rollout and, as Argo's controller would, its ReplicaSet (owned by the
/// Rollout, labelled `rollouts-pod-template-hash`), then waits until the pods the ReplicaSet
/// controller makes are Ready. Installs the Rollout CRD first if it is missing.
pub async fn rollout(client: &Client, namespace: &str, spec: WorkloadSpec) -> Result<Workload> {
    install_rollout_crd(client).await?;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Rollout"),
        "rollouts",
    );
    let rollouts: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let object = DynamicObject::new(&spec.name, &resource).data(json!({
        "spec": {
            "replicas": spec.replicas,
            "selector": spec.label_selector(),
            "template": spec.template(&BTreeMap::new()),
            "strategy": {"canary": {}},
        }
    }));
    let rollout = rollouts.create(&PostParams::default(), &object).await?;

    let hash = format!("{:08x}", fnv(&spec.name));
    let hash_label = BTreeMap::from([("rollouts-pod-template-hash".to_string(), hash.clone())]);
    let mut selector = spec.label_selector();
    selector
        .match_labels
        .get_or_insert_default()
        .extend(hash_label.clone());
    let mut meta = named(&format!("{}-{hash}", spec.name));
    meta.owner_references = Some(vec![OwnerReference {
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Rollout".into(),
        name: spec.name.clone(),
        uid: rollout
            .metadata
            .uid
            .clone()
            .expect("the apiserver gives every object a uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &ReplicaSet {
                metadata: meta,
                spec: Some(ReplicaSetSpec {
                    replicas: Some(spec.replicas as i32),
                    selector,
                    template: Some(spec.template(&hash_label)),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await?;
    let pods = ready_pods(client, namespace, &spec, spec.replicas).await?;
    Ok(spec.workload("Rollout", pods))
}

async fn install_rollout_crd(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": ROLLOUT_CRD},
        "spec": {
            "group": "argoproj.io",
            "names": {"kind": "Rollout", "plural": "rollouts", "singular": "rollout", "listKind": "RolloutList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
            }],
        }
    }))
    .expect("a well-formed CRD");
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let established = kube::runtime::wait::conditions::is_crd_established();
    tokio::time::timeout(
        READY_TIMEOUT,
        kube::runtime::wait::await_condition(crds, ROLLOUT_CRD, established),
    )
    .await
    .map_err(|_| Error::Timeout(format!("CRD {ROLLOUT_CRD} not established")))?
    .map_err(|e| Error::Timeout(format!("watching CRD {ROLLOUT_CRD}: {e}")))?;
    Ok(())
}

/// Waits until exactly `count` pods of the workload exist and are Ready (none being deleted),
/// and returns them sorted by name.
async fn ready_pods(
    client: &Client,
    namespace: &str,
    spec: &WorkloadSpec,
    count: usize,
) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("app={}", spec.name);
    let params = ListParams::default().labels(&selector);
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let mut listed: Vec<Pod> = pods
            .list(&params)
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if listed.len() == count && listed.iter().all(pods::is_ready) {
            listed.sort_by_key(|p| p.name_any());
            return Ok(listed);
        }
        if Instant::now() > deadline {
            let states: Vec<_> = listed
                .iter()
                .map(|p| {
                    let phase = p.status.as_ref().and_then(|s| s.phase.clone());
                    (p.name_any(), phase, pods::is_ready(p))
                })
                .collect();
            return Err(Error::Timeout(format!(
                "{namespace}: wanted {count} Ready pods labelled {selector} within {READY_TIMEOUT:?}; have {states:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

// A stable hash for the Rollout's pod-template-hash label.
fn fnv(text: &str) -> u32 {
    text.bytes()
        .fold(0x811c_9dc5, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}
