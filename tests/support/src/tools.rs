//! helm (the chart's tests) and promtool (the alert rules' checks): built together from the Go
//! module `hack/tools` by `hack/testenv.sh build-tools` and cached like the control plane.

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

fn tool(name: &str) -> Result<PathBuf> {
    Ok(crate::control_plane::built("OZ_TOOLS_DIR", "build-tools")?.join(name))
}
