//! Helm, for the chart's tests: built from its Go module by `hack/testenv.sh build-tools` and
//! cached like the control plane (or `$OZ_HELM_BIN`).

use std::path::PathBuf;

use crate::Result;

/// The `helm` binary: `$OZ_HELM_BIN`, or `helm` in the directory `hack/testenv.sh build-tools`
/// prints (built once per machine).
pub fn helm() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("OZ_HELM_BIN") {
        return Ok(PathBuf::from(path));
    }
    Ok(crate::control_plane::built("OZ_TOOLS_DIR", "build-tools")?.join("helm"))
}
