//! The standard cluster inventory oz reads on a hub: sig-multicluster's ClusterProfile
//! (`multicluster.x-k8s.io/v1alpha1`, KEP-4322), produced by Open Cluster Management, GKE Fleet
//! or by hand. oz reads only what it uses: the labels (a fleet template's selector), and the
//! access providers (KEP-5339) through which it reaches the spoke's apiserver. The CRD is the
//! inventory project's, not oz's: oz never installs or changes it.

use kube::{CustomResource, config::Cluster};
use serde::{Deserialize, Serialize};

/// A ClusterProfile's spec, as far as oz reads it.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    namespaced,
    status = "ClusterProfileStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// A ClusterProfile's status, as far as oz reads it.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// How consumers reach the cluster: each names a provider (which the consumer maps to an
    /// exec plugin) and the cluster's apiserver in kubeconfig form.
    #[serde(default)]
    pub access_providers: Vec<AccessProvider>,
}

/// One way to reach a cluster (KEP-5339).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct AccessProvider {
    /// The provider's name, looked up in the hub's provider file.
    pub name: String,
    /// The apiserver: server, CA, and extensions (the plugin's per-cluster config rides in the
    /// extension `client.authentication.k8s.io/exec`).
    #[serde(default)]
    pub cluster: Cluster,
}
