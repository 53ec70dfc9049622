//! helm (the chart's tests), promtool (the alert rules' checks), and the sig-multicluster
//! secretreader credential plugin with the ClusterProfile CRD (the fleet tests): built together
//! from the Go module `hack/tools` by `hack/testenv.sh build-tools` and cached like the control
//! plane.

use std::path::PathBuf;

use crate::Result;

/// The `helm` binary: `$OZ_HELM_BIN`, or `helm` in the directory `hack/testenv.sh build-tools`
/// prints (or `$OZ_TOOLS_DIR`).
pub fn helm() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("OZ_HELM_BIN") {
        return Ok(PathBuf::from(path));
    }
    tool("helm")
}

/// The `promtool` binary, beside helm.
pub fn promtool() -> Result<PathBuf> {
    tool("promtool")
}

/// The secretreader exec credential plugin of `sigs.k8s.io/cluster-inventory-api`, beside helm:
/// given a cluster whose `client.authentication.k8s.io/exec` extension names `clusterName`, it
/// prints the `data.token` of Secret `<namespace>/<clusterName>` as an ExecCredential, reading
/// that Secret through `$KUBECONFIG` in the namespace of its current context.
pub fn secretreader_plugin() -> Result<PathBuf> {
    tool("secretreader-plugin")
}

/// The ClusterProfile CRD (`multicluster.x-k8s.io/v1alpha1`) YAML, from the same pinned module
/// as [`secretreader_plugin`].
pub fn cluster_profile_crd() -> Result<PathBuf> {
    tool("clusterprofiles-crd.yaml")
}

fn tool(name: &str) -> Result<PathBuf> {
    Ok(crate::control_plane::built("OZ_TOOLS_DIR", "build-tools")?.join(name))
}
