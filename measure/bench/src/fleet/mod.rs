//! The fleet part: for each spoke count, a fleet of its own ([`planes::Fleet`]: a hub and that
//! many spokes, each a control plane with its own oz-manager), measured in four steps:
//!
//! 1. **The spokes' own time to access**: alice asks on a spoke itself, one request at a time,
//!    the spokes taken in turn; create → Ready there.
//! 2. **Time to access through the hub**: the same, asked on the hub naming the spoke (the
//!    fleet template needs no approval): hub create → the spoke's request seen Ready by a
//!    watch on the spoke (the grant is in force), and → the hub's request seen Ready (the
//!    spoke's status followed back). The target is on the first, over step 1's.
//!    The hub's API calls over these grants, from the audit logs: on its own apiserver (its
//!    client's user agent, in [`planes::NAMESPACE`]) and on every spoke (the hub's
//!    ServiceAccount), its informers' watches and lists apart, divided by the grants.
//! 3. **The hub's memory per fleet grant**: many grants asked at once and held; the hub's RSS
//!    once quiet before and after, over the grants.
//! 4. **Revocation lag with the hub stopped**: short grants through the hub; once all are
//!    Ready on their spokes the hub's oz-manager is killed, and each spoke's RoleBinding
//!    deletion, seen by a watch on that spoke, is compared with the spoke request's
//!    `expiresAt`.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use crate::{
    Result,
    procstat::{Sampler, Window},
    sizes::Sizes,
};

mod planes;
mod results;
mod steps;

pub use planes::Fleet;
pub use results::{FleetResults, FleetRun, Held};

/// Measures one fleet per spoke count; `progress` prints a line stamped with the run's time.
pub async fn run(
    oz_manager: &Path,
    log_dir: &Path,
    sizes: &Sizes,
    progress: &dyn Fn(&str),
) -> Result<FleetResults> {
    let mut results = FleetResults::default();
    for &spokes in &sizes.fleet_spokes {
        progress(&format!(
            "fleet of {spokes} spokes: starting a hub and {spokes} spokes"
        ));
        let dir = log_dir.join(format!("fleet-{spokes}"));
        let mut fleet = Fleet::start(oz_manager, spokes, &dir).await?;
        let run = measure(&mut fleet, sizes, progress).await;
        drop(fleet);
        results.runs.push(run?);
    }
    Ok(results)
}

async fn measure(fleet: &mut Fleet, sizes: &Sizes, progress: &dyn Fn(&str)) -> Result<FleetRun> {
    let hub = Sampler::start(fleet.hub.oz.pid());
    let watches = steps::Watches::start(fleet).await?;
    let mut run = FleetRun {
        spokes: fleet.spokes.len(),
        hub_idle: quiet_window(&hub).await,
        ..Default::default()
    };
    let own = steps::spoke_own(fleet, &watches, sizes.fleet_sequential).await?;
    run.spoke_own = own.spoke_ready;
    run.failures += own.failures;
    let through = steps::through_hub(fleet, &watches, sizes.fleet_sequential).await?;
    run.through_hub = through.spoke_ready;
    run.through_hub_hub_ready = through.hub_ready;
    run.failures += through.failures;
    run.p99_over_spoke_ms = run.through_hub.p99_ms - run.spoke_own.p99_ms;
    run.hub_calls = steps::hub_calls(fleet, through.window, sizes.fleet_sequential)?;
    progress(&format!(
        "fleet of {} spokes: time to access p99 {:.0} ms through the hub, {:.0} ms on a spoke itself; {:.1} hub calls per grant on the hub, {:.1} on spokes",
        run.spokes,
        run.through_hub.p99_ms,
        run.spoke_own.p99_ms,
        run.hub_calls.per_grant_on_hub,
        run.hub_calls.per_grant_on_spokes
    ));

    let before = quiet_window(&hub).await;
    let mark = hub.mark();
    let started = Instant::now();
    let ready = steps::hold(fleet, &watches, sizes.fleet_held).await?;
    let seconds = started.elapsed().as_secs_f64();
    let during = hub.window(mark);
    let after = quiet_window(&hub).await;
    run.held = Held {
        grants: sizes.fleet_held,
        ready,
        seconds,
        hub_rss_before_mib: before.rss_end_mib,
        hub_rss_after_mib: after.rss_end_mib,
        hub_kb_per_grant: (after.rss_end_mib - before.rss_end_mib) * 1024.0
            / sizes.fleet_held.max(1) as f64,
        hub: during,
    };
    progress(&format!(
        "fleet of {} spokes: {} grants held, hub RSS {:.1} → {:.1} MiB ({:.2} KB a grant)",
        run.spokes, ready, before.rss_end_mib, after.rss_end_mib, run.held.hub_kb_per_grant
    ));

    run.revocation = steps::with_the_hub_stopped(
        fleet,
        &watches,
        sizes.fleet_revocations,
        sizes.fleet_revocation_durations,
    )
    .await?;
    progress(&format!(
        "fleet of {} spokes: revocation lag with the hub stopped p99 {:.0} ms ({} grants, {} missing)",
        run.spokes,
        run.revocation.binding_deleted.p99_ms,
        run.revocation.binding_deleted.count,
        run.revocation.missing
    ));
    Ok(run)
}

/// The hub's oz-manager over 3 s once it has gone quiet (below 10% of a core for 2 s, or after
/// a minute regardless).
async fn quiet_window(hub: &Sampler) -> Window {
    const QUIET: Duration = Duration::from_secs(2);
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let mark = hub.mark();
        tokio::time::sleep(QUIET).await;
        if hub.window(mark).cpu_percent < 10.0 || Instant::now() > give_up {
            break;
        }
    }
    let mark = hub.mark();
    tokio::time::sleep(Duration::from_secs(3)).await;
    hub.window(mark)
}
