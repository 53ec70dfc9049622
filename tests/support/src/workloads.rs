//! Workload controllers together with their pods. Nothing reconciles them here, so the helpers
//! create what the Deployment, StatefulSet and DaemonSet controllers and the kubelet would: the
//! ReplicaSet, the pods with matching labels and controller owner references, and Ready status.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{
            DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec,
            StatefulSet, StatefulSetSpec,
        },
        core::v1::{Pod, PodSpec, PodTemplateSpec},
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ObjectMeta, PostParams},
};

use crate::{Result, pods};

/// A workload controller and the ready pods that belong to it.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    pub kind: &'static str,
    /// The controller's name.
    pub name: String,
    /// The controller's selector labels, which its pods carry.
    pub selector: BTreeMap<String, String>,
    /// The pods, Running and Ready.
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
    /// How many pods to create.
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
}

/// Creates a Deployment, its ReplicaSet and its ready pods, owned as the controllers would own
/// them: Deployment → ReplicaSet → Pod.
pub async fn deployment(client: &Client, namespace: &str, spec: WorkloadSpec) -> Result<Workload> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployment = deployments
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

    // The Deployment controller adds pod-template-hash to the ReplicaSet's selector and pods.
    let hash = format!("{:x}", spec.name.len() * 7919 + 1_000_000_007);
    let hash_label = BTreeMap::from([("pod-template-hash".to_string(), hash.clone())]);
    let mut rs_selector = spec.label_selector();
    rs_selector
        .match_labels
        .get_or_insert_default()
        .extend(hash_label.clone());
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let rs_name = format!("{}-{hash}", spec.name);
    let mut rs_meta = named(&rs_name);
    rs_meta.owner_references = Some(vec![owner_of(&deployment)]);
    let replica_set = replica_sets
        .create(
            &PostParams::default(),
            &ReplicaSet {
                metadata: rs_meta,
                spec: Some(ReplicaSetSpec {
                    replicas: Some(spec.replicas as i32),
                    selector: rs_selector,
                    template: Some(spec.template(&hash_label)),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await?;

    let owner = owner_of(&replica_set);
    let names = (0..spec.replicas).map(|i| format!("{rs_name}-p{i}"));
    create_pods(
        client,
        namespace,
        &spec,
        "Deployment",
        owner,
        &hash_label,
        names,
    )
    .await
}

/// Creates a StatefulSet and its ready pods `NAME-0`, `NAME-1`, ...
pub async fn stateful_set(
    client: &Client,
    namespace: &str,
    spec: WorkloadSpec,
) -> Result<Workload> {
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let set = sets
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
    let names = (0..spec.replicas).map(|i| format!("{}-{i}", spec.name));
    create_pods(
        client,
        namespace,
        &spec,
        "StatefulSet",
        owner_of(&set),
        &BTreeMap::new(),
        names,
    )
    .await
}

/// Creates a DaemonSet and `replicas` ready pods, as if it ran on that many nodes.
pub async fn daemon_set(client: &Client, namespace: &str, spec: WorkloadSpec) -> Result<Workload> {
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let set = sets
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
    let names = (0..spec.replicas).map(|i| format!("{}-node{i}", spec.name));
    create_pods(
        client,
        namespace,
        &spec,
        "DaemonSet",
        owner_of(&set),
        &BTreeMap::new(),
        names,
    )
    .await
}

async fn create_pods(
    client: &Client,
    namespace: &str,
    spec: &WorkloadSpec,
    kind: &'static str,
    owner: OwnerReference,
    extra_labels: &BTreeMap<String, String>,
    names: impl Iterator<Item = String>,
) -> Result<Workload> {
    let template = spec.template(extra_labels).metadata.unwrap_or_default();
    let mut created = Vec::new();
    for name in names {
        let pod = pods::create_ready_pod(
            client,
            namespace,
            &name,
            &template,
            Some(owner.clone()),
            spec.pod_spec.clone(),
        )
        .await?;
        created.push(pod);
    }
    Ok(Workload {
        kind,
        name: spec.name.clone(),
        selector: spec.selector(),
        pods: created,
    })
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn owner_of<K: Resource<DynamicType = ()>>(object: &K) -> OwnerReference {
    object
        .controller_owner_ref(&())
        .expect("objects read back from the apiserver have a name and uid")
}
