//! Scale: many active grants across many namespaces, oz-manager's memory and CPU while they are
//! created and once they are idle, and a restart at that scale.
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

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use k8s_openapi::{
    api::rbac::v1::{Role, RoleBinding},
    jiff::Timestamp,
};
use kube::{Api, Resource, api::ListParams};
use oz_api::{ExecAccessRequest, RequestPhase};
use serde::Serialize;

use crate::{
    Bench, Result,
    cluster::{self, RequestSpec},
    operator::Parts,
    procstat::Window,
    stats::{Latencies, Summary},
    watch::{self, BindingWatch, RequestWatch},
};

const TEMPLATE: &str = "app";
/// How long after the canaries' expiry the benchmark waits for their revocation.
const CANARY_WAIT: Duration = Duration::from_secs(240);
/// CPU use above this (percent of a core) counts as busy.
const BUSY_PERCENT: f64 = 10.0;
/// The same for the control plane, whose idle floor is higher (its own controllers).
const APISERVER_BUSY_PERCENT: f64 = 25.0;

#[derive(Clone, Debug, Default, Serialize)]
pub struct ScaleResults {
    pub namespaces: usize,
    pub grants: usize,
    /// Creating the grants (as alice, through the webhooks) until all are seen Ready.
    pub fill_seconds: f64,
    pub fill_rate_per_second: f64,
    pub create_failures: usize,
    pub not_ready: usize,
    /// oz-manager while the grants were created.
    pub during_fill: Window,
    /// The control plane meanwhile.
    pub apiserver_during_fill: Window,
    /// oz-manager with every grant active and nothing happening.
    pub idle_at_scale: Window,
    /// JSON sizes of one grant's objects, as oz's caches hold them.
    pub object_bytes: ObjectBytes,
    /// ExecAccessRequests in the cluster once idle: this point's grants and every earlier
    /// part's requests, all of which oz holds.
    pub requests_in_cluster: usize,
    /// oz-manager's RSS idle before any grant, and
    /// `(idle_at_scale.rss_end_mib − rss_idle_before_mib) / requests_in_cluster`, in KB.
    pub rss_idle_before_mib: f64,
    pub kb_per_grant: f64,
    /// Short grants created after the fill, expiring over ~20 s while the rest are in force:
    /// expiresAt → RoleBinding seen deleted, and those never seen deleted.
    pub in_force_canaries: usize,
    pub in_force_lag: Summary,
    pub in_force_missing: usize,
    pub restart: RestartResults,
}

impl ScaleResults {
    /// The most oz-manager held in any state with the grants: filling, idle, and restarted.
    pub fn rss_peak_mib(&self) -> f64 {
        [
            self.during_fill.rss_max_mib,
            self.idle_at_scale.rss_max_mib,
            self.restart.during.rss_max_mib,
            self.restart.idle_after.rss_max_mib,
        ]
        .into_iter()
        .fold(0.0, f64::max)
    }
}

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

/// Serialised sizes of one grant's objects, with and without `metadata.managedFields` (which
/// server-side apply fills in, and which oz's watches keep in memory).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ObjectBytes {
    pub request: usize,
    pub request_without_managed_fields: usize,
    pub role: usize,
    pub role_without_managed_fields: usize,
    pub role_binding: usize,
    pub role_binding_without_managed_fields: usize,
}

/// The sizes of grant `name`'s request, Role and RoleBinding in `namespace`.
async fn object_bytes(admin: &kube::Client, namespace: &str, name: &str) -> Result<ObjectBytes> {
    fn sizes<K: Resource + Serialize>(mut object: K) -> Result<(usize, usize)> {
        let with = serde_json::to_vec(&object)?.len();
        object.meta_mut().managed_fields = None;
        Ok((with, serde_json::to_vec(&object)?.len()))
    }
    let labels = ListParams::default().labels(&format!("oz.wizardofoz.co/request={name}"));
    let request = Api::<ExecAccessRequest>::namespaced(admin.clone(), namespace)
        .get(name)
        .await?;
    let role = Api::<Role>::namespaced(admin.clone(), namespace)
        .list(&labels)
        .await?
        .items
        .pop()
        .ok_or("the grant has no Role")?;
    let binding = Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .list(&labels)
        .await?
        .items
        .pop()
        .ok_or("the grant has no RoleBinding")?;
    let (request, request_without_managed_fields) = sizes(request)?;
    let (role, role_without_managed_fields) = sizes(role)?;
    let (role_binding, role_binding_without_managed_fields) = sizes(binding)?;
    Ok(ObjectBytes {
        request,
        request_without_managed_fields,
        role,
        role_without_managed_fields,
        role_binding,
        role_binding_without_managed_fields,
    })
}

fn namespace(i: usize) -> String {
    format!("bench-scale-{i:03}")
}

/// Runs every scale point of the sizes in turn, each adding grants (and namespaces) to what
/// the previous left, so that the second point's fill starts where the first one's ended.
/// `idle_before_mib`: oz-manager's RSS before any grant, for the memory per grant.
pub async fn run(bench: &mut Bench, idle_before_mib: f64) -> Result<Vec<ScaleResults>> {
    let admin = bench.admin.clone();
    let requests = Arc::new(
        RequestWatch::start(
            Api::<ExecAccessRequest>::all(admin.clone()),
            "oz-bench/phase in (scale,canary)",
        )
        .await?,
    );
    let bindings = BindingWatch::start(Api::<RoleBinding>::all(admin.clone())).await?;
    let mut points = Vec::new();
    let (mut grants_before, mut namespaces_before) = (0, 0);
    for (grants, namespaces) in bench.sizes.scale_points.clone() {
        if grants <= grants_before {
            return Err(format!(
                "scale point {grants}x{namespaces}: each point must have more grants than the one before ({grants_before})"
            )
            .into());
        }
        let namespaces = namespaces.max(namespaces_before);
        let results = point(
            bench,
            &requests,
            &bindings,
            (grants_before, grants),
            (namespaces_before, namespaces),
            idle_before_mib,
        )
        .await?;
        points.push(results);
        (grants_before, namespaces_before) = (grants, namespaces);
    }
    Ok(points)
}

/// Fills the cluster from `grants.0` to `grants.1` grants spread over `namespaces.1`
/// namespaces (creating those past `namespaces.0`), then measures it idle, its revocation lag
/// with everything in force, and a restart.
async fn point(
    bench: &mut Bench,
    requests: &Arc<RequestWatch>,
    bindings: &BindingWatch,
    (grants_before, total): (usize, usize),
    (namespaces_before, namespaces): (usize, usize),
    idle_before_mib: f64,
) -> Result<ScaleResults> {
    let sizes = bench.sizes.clone();
    let admin = bench.admin.clone();
    let prepared: Vec<Result<()>> = stream::iter(namespaces_before..namespaces)
        .map(|i| {
            let admin = admin.clone();
            async move {
                cluster::create_namespace(&admin, &namespace(i)).await?;
                cluster::workload_with_template(&admin, &namespace(i), TEMPLATE, 2).await?;
                Ok(())
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    prepared.into_iter().collect::<Result<Vec<()>>>()?;

    let mut results = ScaleResults {
        namespaces,
        grants: total,
        ..Default::default()
    };
    let ready_before = requests.count(RequestPhase::Ready);
    let mark = bench.mark();
    let start = Instant::now();
    let alice = bench.alice.clone();
    let created: Vec<Result<()>> = stream::iter(grants_before..total)
        .map(|i| {
            let alice = alice.clone();
            async move {
                let spec = RequestSpec {
                    name: format!("grant-{i}"),
                    template: TEMPLATE,
                    duration: None,
                    target_pod: None,
                    phase: "scale",
                };
                create_with_retries(&alice, &namespace(i % namespaces), &spec).await
            }
        })
        .buffer_unordered(sizes.create_concurrency)
        .collect()
        .await;
    results.create_failures = created.iter().filter(|r| r.is_err()).count();
    if let Some(Err(e)) = created.iter().find(|r| r.is_err()) {
        eprintln!(
            "oz-bench: scale create failed ({} failures), e.g.: {e}",
            results.create_failures
        );
    }
    let expected = total - grants_before - results.create_failures;
    let ready = || requests.count(RequestPhase::Ready) - ready_before;
    let deadline = Instant::now()
        + Duration::from_secs(120)
        + Duration::from_millis(50 * (total - grants_before) as u64);
    while ready() < expected && Instant::now() < deadline {
        bench.oz.check_running()?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    results.fill_seconds = start.elapsed().as_secs_f64();
    results.not_ready = expected - ready().min(expected);
    results.fill_rate_per_second = (expected - results.not_ready) as f64 / results.fill_seconds;
    results.during_fill = bench.sampler.window(mark);
    results.apiserver_during_fill = bench.apiserver.window(mark);
    bench.progress(&format!(
        "scale: {} more grants ({total} in all) in {namespaces} namespaces Ready in {:.1} s ({:.0}/s); RSS max {:.1} MiB, CPU {:.0}%; control plane RSS max {:.0} MiB, CPU {:.0}%",
        expected - results.not_ready,
        results.fill_seconds,
        results.fill_rate_per_second,
        results.during_fill.rss_max_mib,
        results.during_fill.cpu_percent,
        results.apiserver_during_fill.rss_max_mib,
        results.apiserver_during_fill.cpu_percent
    ));

    results.object_bytes = object_bytes(&admin, &namespace(0), "grant-0").await?;
    bench.settle_down(Duration::from_secs(120)).await;
    results.idle_at_scale = bench.idle_window().await;
    results.requests_in_cluster = Api::<ExecAccessRequest>::all(admin.clone())
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len();
    results.rss_idle_before_mib = idle_before_mib;
    results.kb_per_grant = (results.idle_at_scale.rss_end_mib - idle_before_mib) * 1024.0
        / results.requests_in_cluster.max(1) as f64;
    bench.progress(&format!(
        "scale: idle at {} requests: RSS {:.1} MiB ({:.1} KB per request), CPU {:.1}%",
        results.requests_in_cluster,
        results.idle_at_scale.rss_end_mib,
        results.kb_per_grant,
        results.idle_at_scale.cpu_percent
    ));

    (results.in_force_lag, results.in_force_missing) =
        revocation_in_force(bench, requests, bindings, total, namespaces).await?;
    results.in_force_canaries = sizes.in_force_canaries;
    bench.progress(&format!(
        "scale: revocation with {total} in force: p99 {:.0} ms over {}, {} missing",
        results.in_force_lag.p99_ms, results.in_force_lag.count, results.in_force_missing
    ));

    results.restart = restart(bench, requests, bindings, total, namespaces).await?;
    Ok(results)
}

/// Revocation lag while the grants are in force:
/// [`in_force_canaries`](crate::sizes::Sizes::in_force_canaries) short grants, created together
/// after the fill with durations spread over 10–30 s (3–8 s with `--quick`), so that they expire
/// one after another; expiresAt → their RoleBinding seen deleted.
async fn revocation_in_force(
    bench: &Bench,
    requests: &RequestWatch,
    bindings: &BindingWatch,
    point: usize,
    namespaces: usize,
) -> Result<(Summary, usize)> {
    let n = bench.sizes.in_force_canaries;
    let (min, max) = bench.sizes.in_force_durations;
    let durations = crate::revocation::durations(n, min, max);
    let keys: Vec<String> = (0..n)
        .map(|i| watch::key(&namespace(i % namespaces), &format!("live-{point}-{i}")))
        .collect();
    let created: Vec<Result<()>> = stream::iter(keys.iter().zip(&durations))
        .map(|(key, seconds)| {
            let alice = bench.alice.clone();
            async move {
                let (namespace, name) = key.split_once('/').expect("namespace/name");
                let spec = RequestSpec {
                    name: name.into(),
                    template: TEMPLATE,
                    duration: Some(format!("{seconds}s")),
                    target_pod: None,
                    phase: "canary",
                };
                create_with_retries(&alice, namespace, &spec).await
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    created.into_iter().collect::<Result<Vec<()>>>()?;
    let longest = durations.iter().max().copied().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(longest) + CANARY_WAIT;
    while Instant::now() < deadline && !keys.iter().all(|k| bindings.deleted(k).is_some()) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut lags = Latencies::default();
    let mut missing = 0;
    for key in &keys {
        let expires_at = requests.seen(key).and_then(|s| s.expires_at);
        match (expires_at, bindings.deleted(key)) {
            (Some(expires_at), Some(deleted)) => {
                lags.record_seconds(deleted.duration_since(expires_at).as_secs_f64())
            }
            _ => missing += 1,
        }
    }
    Ok((lags.summary(), missing))
}

/// Creates a request, retrying a few times on errors (throttling, a webhook timeout).
async fn create_with_retries(
    alice: &kube::Client,
    namespace: &str,
    spec: &RequestSpec<'_>,
) -> Result<()> {
    let mut attempt = 0;
    loop {
        match cluster::create_request(alice, namespace, spec).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt < 5 => {
                if e.to_string().contains("AlreadyExists")
                    || e.to_string().contains("already exists")
                {
                    return Ok(());
                }
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn restart(
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
