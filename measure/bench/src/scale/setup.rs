//! What every scale point and the restart share: where the grants are made and how long the
//! canaries are waited for.

use std::time::Duration;

pub(super) const TEMPLATE: &str = "app";
/// How long after the canaries' expiry the benchmark waits for their revocation.
pub(super) const CANARY_WAIT: Duration = Duration::from_secs(240);

pub(super) fn namespace(i: usize) -> String {
    format!("bench-scale-{i:03}")
}
