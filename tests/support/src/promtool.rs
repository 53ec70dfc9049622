//! promtool (Prometheus' rule checker), built from `hack/tools` and cached by
//! `hack/testenv.sh build-tools`, for the tests of oz's alert rules.

use std::path::PathBuf;

use crate::Result;

/// The promtool binary: in `$OZ_TOOLS_DIR`, or in the directory `hack/testenv.sh build-tools`
/// prints (built once per machine).
pub fn promtool() -> Result<PathBuf> {
    Ok(crate::control_plane::built("OZ_TOOLS_DIR", "build-tools")?.join("promtool"))
}
