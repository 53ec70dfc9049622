//! What the fleet part reports, per fleet.

use serde::Serialize;

use crate::{audit::Tally, procstat::Window, stats::Summary};

/// One fleet's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FleetRun {
    pub spokes: usize,
    /// The hub's oz-manager once its fleet template is on every spoke.
    pub hub_idle: Window,
    /// alice asking on a spoke itself: create → Ready there.
    pub spoke_own: Summary,
    /// alice asking on the hub: create there → the spoke's request seen Ready.
    pub through_hub: Summary,
    /// … → the hub's request seen Ready.
    pub through_hub_hub_ready: Summary,
    /// `through_hub`'s p99 over `spoke_own`'s: what the target judges.
    pub p99_over_spoke_ms: f64,
    /// Requests of steps 1 and 2 that were not Ready within a minute.
    pub failures: usize,
    /// The hub's calls over step 2's grants.
    pub hub_calls: HubCalls,
    pub held: Held,
    pub revocation: HubStopped,
}

/// The hub's calls per grant, its informers apart.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HubCalls {
    pub grants: usize,
    /// On the hub's own apiserver.
    pub on_hub: Tally,
    /// On all the spokes' apiservers together.
    pub on_spokes: Tally,
    pub per_grant_on_hub: f64,
    pub per_grant_on_spokes: f64,
    pub writes_per_grant_on_hub: f64,
    pub writes_per_grant_on_spokes: f64,
}

/// Grants asked at once and held.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Held {
    pub grants: usize,
    /// Of those, how many were Ready on the hub within the wait.
    pub ready: usize,
    /// From the first create until the last was seen Ready on the hub.
    pub seconds: f64,
    pub hub_rss_before_mib: f64,
    pub hub_rss_after_mib: f64,
    pub hub_kb_per_grant: f64,
    /// The hub's oz-manager while the grants were asked.
    pub hub: Window,
}

/// Short grants revoked by their spokes with the hub stopped.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HubStopped {
    pub grants: usize,
    pub durations_seconds: (u64, u64),
    /// From the first create until every grant was seen Ready on its spoke (the hub is
    /// stopped then, before the first expiry).
    pub all_ready_seconds: f64,
    /// expiresAt → the spoke's RoleBinding seen deleted.
    pub binding_deleted: Summary,
    /// Grants not Ready before the hub was stopped, or whose binding was never seen deleted.
    pub missing: usize,
    /// Deletions seen before expiresAt (should be none).
    pub early: usize,
}

/// Every fleet's figures, in the order of `--fleet-spokes`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FleetResults {
    pub runs: Vec<FleetRun>,
}
