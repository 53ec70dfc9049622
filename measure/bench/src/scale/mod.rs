//! Scale: many active grants across many namespaces, oz-manager's memory and CPU while they are
//! created and once they are idle, and a restart at that scale.
//! The restart and its figures are in `restart.rs`.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::{Api, Resource, api::ListParams};
use oz_api::{ExecAccessRequest, RequestPhase};
use serde::Serialize;

use crate::{
    Bench, Result,
    cluster::{self, RequestSpec},
    procstat::Window,
    stats::{Latencies, Summary},
    watch::{self, BindingWatch, RequestWatch},
};

mod restart;

use restart::restart;
mod setup;
pub use restart::{RestartResults, expiries_in_force, timers_armed};
use setup::{CANARY_WAIT, TEMPLATE, namespace};

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
