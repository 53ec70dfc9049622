//! A restart at scale: oz-manager killed with every grant in place, and how long the new
//! process takes to take over.
//!
//! After a restart:
//!
//! - `timers_armed_seconds`: from the new process's spawn until its expiry timers
//!   (`oz_expiry_timers{kind="ExecAccessRequest"}`) cover every grant in force, those already
//!   past their expiry counted as covered (a fired timer is disarmed): "all timers armed". oz
//!   arms them as its first LIST brings the requests in, before any reconcile.
//! - `reconciled_all_seconds`: until its request reconcile counter
//!   (`oz_reconciles_total{controller="request"}`) reaches the number of requests in the
//!   cluster: every request has been looked at once.
//! - `quiet_seconds`: until that counter last moved before standing still for a few seconds;
//!   later reconciles come from the initial lists of owned Roles and RoleBindings.
//! - `busy_seconds`: until oz-manager's CPU use fell back to idle. The counter counts reconciles
//!   as they start; a timer is armed when its reconcile returns, and the CPU shows when they did.
//!
//! And as a check that matters to users: canary grants made just before the kill, expiring a few
//! seconds after the restart, and their revocation lag.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::{Api, api::ListParams};
use oz_api::{ExecAccessRequest, RequestPhase};
use serde::Serialize;

use super::setup::{CANARY_WAIT, TEMPLATE, namespace};
use crate::{
    Bench, Result,
    cluster::{self, RequestSpec},
    operator::Parts,
    procstat::Window,
    stats::{Latencies, Summary},
    watch::{self, BindingWatch, RequestWatch},
};

/// CPU use above this (percent of a core) counts as busy.
const BUSY_PERCENT: f64 = 10.0;
/// The same for the control plane, whose idle floor is higher (its own controllers).
const APISERVER_BUSY_PERCENT: f64 = 25.0;

#[derive(Clone, Debug, Default, Serialize)]
pub struct RestartResults {
    /// ExecAccessRequests in the cluster at the restart (any phase).
    pub requests: usize,
    /// From spawn until `/metrics` answered.
    pub metrics_up_seconds: f64,
    /// Grants in force (Ready, with an expiresAt) at the restart.
    pub in_force: usize,
    /// From spawn until oz's expiry timers covered `in_force`.
    pub timers_armed_seconds: Option<f64>,
    /// From spawn until the request reconcile counter reached `requests`.
    pub reconciled_all_seconds: Option<f64>,
    /// From spawn until the counter last moved before standing still.
    pub quiet_seconds: Option<f64>,
    /// Request reconciles counted by then.
    pub reconciles: f64,
    /// From spawn until the end of the last 200 ms in which oz-manager used more than
    /// [`BUSY_PERCENT`] of a core: roughly when the reconciles it started had finished.
    pub busy_seconds: Option<f64>,
    /// From spawn until the end of the last 200 ms in which the control plane used more than
    /// [`APISERVER_BUSY_PERCENT`] of a core: when the apiserver had answered oz's catch-up.
    pub apiserver_busy_seconds: Option<f64>,
    /// oz-manager from spawn until quiet.
    pub during: Window,
    /// The control plane from spawn until the canaries were revoked.
    pub apiserver_during: Window,
    /// oz-manager after the restart, idle.
    pub idle_after: Window,
    pub canaries: usize,
    /// How long after the spawn the canaries expired (earliest).
    pub canary_expiry_after_spawn_seconds: f64,
    /// expiresAt → RoleBinding deletion seen, for the canaries.
    pub canary_lag: Summary,
    /// expiresAt → the canary seen `phase: Expired` (after its RoleBinding and Role are gone).
    pub canary_expired_lag: Summary,
    /// Canaries whose RoleBinding deletion was not seen within [`CANARY_WAIT`] after expiry.
    pub canary_missing: usize,
}

pub(super) async fn restart(
    bench: &mut Bench,
    requests: &RequestWatch,
    bindings: &BindingWatch,
    point: usize,
    namespaces: usize,
) -> Result<RestartResults> {
    let sizes = bench.sizes.clone();
    let canaries = sizes.canaries.min(namespaces);
    let canary_keys: Vec<String> = (0..canaries)
        .map(|i| {
            watch::key(
                &namespace(i * namespaces / canaries),
                &format!("canary-{point}-{i}"),
            )
        })
        .collect();
    for (i, key) in canary_keys.iter().enumerate() {
        let (namespace, name) = key.split_once('/').expect("namespace/name");
        let spec = RequestSpec {
            name: name.into(),
            template: TEMPLATE,
            duration: Some(format!("{}s", sizes.canary_seconds)),
            target_pod: None,
            phase: "canary",
        };
        cluster::create_request(&bench.alice, namespace, &spec)
            .await
            .map_err(|e| format!("canary {i}: {e}"))?;
    }
    for key in &canary_keys {
        requests
            .wait_for(key, RequestPhase::Ready, Duration::from_secs(60))
            .await
            .ok_or_else(|| format!("canary {key} was not Ready within 60s"))?;
    }
    let all = Api::<ExecAccessRequest>::all(bench.admin.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let in_cluster = all.len();
    let expiries = expiries_in_force(&all);
    let in_force = expiries.len();
    drop(all);

    bench.oz.restart(Parts::WithWebhooks)?;
    let spawned = bench.oz.started;
    let spawned_at = Timestamp::now();
    bench.sampler.follow(bench.oz.pid());
    let mark = bench.mark();
    let mut results = RestartResults {
        requests: in_cluster,
        in_force,
        canaries,
        ..Default::default()
    };
    bench
        .oz
        .wait_for_metrics(&bench.http, Duration::from_secs(120))
        .await?;
    results.metrics_up_seconds = spawned.elapsed().as_secs_f64();

    results.timers_armed_seconds = timers_armed(bench, &expiries)
        .await?
        .map(|at| at.duration_since(spawned).as_secs_f64());
    let caught_up = bench.catch_up(in_cluster).await?;
    let seconds = |at: Option<Instant>| at.map(|t| t.duration_since(spawned).as_secs_f64());
    results.reconciled_all_seconds = seconds(caught_up.reconciled_all);
    results.quiet_seconds = seconds(caught_up.quiet);
    results.reconciles = caught_up.reconciles;
    results.busy_seconds = seconds(bench.sampler.busy_until(mark, BUSY_PERCENT));
    results.during = bench.sampler.window(mark);

    // The canaries: wait until past their expiry, then read their lags.
    let latest = canary_keys
        .iter()
        .filter_map(|k| requests.seen(k).and_then(|s| s.expires_at))
        .max();
    if let Some(latest) = latest {
        let wait =
            latest.duration_since(Timestamp::now()).as_secs_f64() + CANARY_WAIT.as_secs_f64();
        let deadline = Instant::now() + Duration::from_secs_f64(wait.max(0.0));
        let done = |k: &String| {
            bindings.deleted(k).is_some()
                && requests
                    .seen(k)
                    .is_some_and(|s| s.first(RequestPhase::Expired).is_some())
        };
        while Instant::now() < deadline && !canary_keys.iter().all(done) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut expired_lags = Latencies::default();
    let mut lags = Latencies::default();
    let mut earliest: Option<f64> = None;
    for key in &canary_keys {
        let Some(expires_at) = requests.seen(key).and_then(|s| s.expires_at) else {
            results.canary_missing += 1;
            continue;
        };
        let after_spawn = expires_at.duration_since(spawned_at).as_secs_f64();
        earliest = Some(earliest.map_or(after_spawn, |e: f64| e.min(after_spawn)));
        match bindings.deleted(key) {
            Some(deleted) => lags.record_seconds(deleted.duration_since(expires_at).as_secs_f64()),
            None => results.canary_missing += 1,
        }
        if let Some(expired) = requests
            .seen(key)
            .and_then(|s| s.first_wall(RequestPhase::Expired))
        {
            expired_lags.record_seconds(expired.duration_since(expires_at).as_secs_f64());
        }
    }
    results.canary_lag = lags.summary();
    results.canary_expired_lag = expired_lags.summary();
    // By now the canaries are revoked and the apiserver has long finished the catch-up.
    results.apiserver_busy_seconds =
        seconds(bench.apiserver.busy_until(mark, APISERVER_BUSY_PERCENT));
    results.apiserver_during = bench.apiserver.window(mark);
    results.canary_expiry_after_spawn_seconds = earliest.unwrap_or_default();

    bench.settle_down(Duration::from_secs(120)).await;
    results.idle_after = bench.idle_window().await;
    bench.progress(&format!(
        "restart at {in_cluster} requests: metrics after {:.1} s, {in_cluster} reconciles after {}, quiet after {}, busy until {}; canary lag max {:.0} ms",
        results.metrics_up_seconds,
        results
            .reconciled_all_seconds
            .map_or("never".into(), |s| format!("{s:.1} s")),
        results
            .quiet_seconds
            .map_or("never".into(), |s| format!("{s:.1} s")),
        results
            .busy_seconds
            .map_or("never".into(), |s| format!("{s:.1} s")),
        results.canary_lag.max_ms
    ));
    Ok(results)
}

/// The `expiresAt` of each grant in force (Ready) among `requests`: what [`timers_armed`]
/// waits for.
pub fn expiries_in_force(requests: &[ExecAccessRequest]) -> Vec<Timestamp> {
    requests
        .iter()
        .filter_map(|r| r.status.as_ref())
        .filter(|s| s.phase == Some(RequestPhase::Ready))
        .filter_map(|s| s.expires_at.as_ref().map(|t| t.0))
        .collect()
}

/// When oz-manager's expiry timers first covered the grants in force, whose `expiresAt` are
/// `expiries` (polled every 20 ms), or `None` if they did not within a minute. A timer that has
/// fired is disarmed once it has revoked its grant, so the grants already past their expiry
/// count as covered: a canary expiring during the restart must not leave the count one short.
pub async fn timers_armed(bench: &Bench, expiries: &[Timestamp]) -> crate::Result<Option<Instant>> {
    let give_up = Instant::now() + Duration::from_secs(60);
    while Instant::now() < give_up {
        let scrape = bench.oz.scrape(&bench.http).await?;
        let armed = scrape.sum("oz_expiry_timers", &[("kind", "ExecAccessRequest")]);
        let now = Timestamp::now();
        let past = expiries.iter().filter(|at| **at <= now).count();
        if armed + past as f64 >= expiries.len() as f64 {
            return Ok(Some(Instant::now()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(None)
}
