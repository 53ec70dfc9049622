//! Time to access: from alice's create of an ExecAccessRequest (through oz's admission webhooks)
//! until a watch sees it `status.phase: Ready`, which oz sets once the Role and RoleBinding exist.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::join_all;
use kube::Api;
use oz_api::{ExecAccessRequest, RequestPhase};
use serde::Serialize;

use crate::{
    Bench, Error, Result,
    cluster::{self, PHASE_LABEL, RequestSpec},
    procstat::Window,
    prometheus::HistogramSummary,
    stats::{Latencies, Summary},
    watch::{self, RequestWatch},
};

const NAMESPACE: &str = "bench-access";
const TEMPLATE: &str = "web";
/// How long one request may take to become Ready before it counts as failed.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Sequential requests, then a burst.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AccessResults {
    /// One request at a time: create → Ready.
    pub sequential: Summary,
    /// Of that, the create call alone (admission webhooks + storage).
    pub sequential_create_call: Summary,
    pub sequential_failures: usize,
    pub burst: BurstResults,
    /// oz's own `oz_time_to_ready_seconds` over both (counted from the request's
    /// creationTimestamp, which has whole-second precision, so it reads up to 1 s high).
    pub oz_time_to_ready: HistogramSummary,
}

/// Many requests created at once.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BurstResults {
    pub requests: usize,
    /// From the first create sent until the last request was seen Ready.
    pub total_seconds: f64,
    /// Requests Ready per second of that.
    pub rate_per_second: f64,
    /// Per request: its create sent → it was seen Ready.
    pub per_request: Summary,
    pub failures: usize,
    /// oz-manager during the burst.
    pub process: Window,
    /// The control plane during the burst.
    pub apiserver: Window,
}

/// Runs both parts in namespace `bench-access` (Deployment web, 2 pods, template web).
pub async fn run(bench: &mut Bench) -> Result<AccessResults> {
    cluster::create_namespace(&bench.admin, NAMESPACE).await?;
    cluster::workload_with_template(&bench.admin, NAMESPACE, TEMPLATE, 2).await?;
    let watch = Arc::new(
        RequestWatch::start(
            Api::<ExecAccessRequest>::namespaced(bench.admin.clone(), NAMESPACE),
            PHASE_LABEL,
        )
        .await?,
    );
    let before = bench.oz_histogram("oz_time_to_ready_seconds").await?;

    // Warm-up: connections, caches and the template's first reconciles.
    for i in 0..3 {
        one(bench, &watch, &format!("warmup-{i}"), "access-warmup").await?;
    }

    let mut results = AccessResults::default();
    let (mut total, mut create_call) = (Latencies::default(), Latencies::default());
    for i in 0..bench.sizes.sequential {
        match one(bench, &watch, &format!("seq-{i}"), "access-sequential").await {
            Ok((ready, created)) => {
                total.record(ready);
                create_call.record(created);
            }
            Err(e) => {
                results.sequential_failures += 1;
                eprintln!("oz-bench: sequential request {i}: {e}");
            }
        }
    }
    results.sequential = total.summary();
    results.sequential_create_call = create_call.summary();
    bench.progress(&format!(
        "time to access, sequential: p50 {:.1} ms, p99 {:.1} ms over {}",
        results.sequential.p50_ms, results.sequential.p99_ms, results.sequential.count
    ));

    results.burst = burst(bench, &watch).await?;
    results.oz_time_to_ready = bench
        .oz_histogram("oz_time_to_ready_seconds")
        .await?
        .since(&before)
        .summary();
    Ok(results)
}

/// One request: (create → Ready, create call alone).
async fn one(
    bench: &Bench,
    watch: &RequestWatch,
    name: &str,
    phase: &'static str,
) -> Result<(Duration, Duration)> {
    let spec = RequestSpec {
        name: name.into(),
        template: TEMPLATE,
        duration: None,
        target_pod: None,
        phase,
    };
    let start = Instant::now();
    cluster::create_request(&bench.alice, NAMESPACE, &spec).await?;
    let created = start.elapsed();
    let seen = watch
        .wait_for(
            &watch::key(NAMESPACE, name),
            RequestPhase::Ready,
            READY_TIMEOUT,
        )
        .await
        .ok_or_else(|| format!("{name} was not Ready within {READY_TIMEOUT:?}"))?;
    let ready = seen
        .first(RequestPhase::Ready)
        .expect("wait_for returns once Ready was seen");
    Ok((ready.duration_since(start), created))
}

async fn burst(bench: &Bench, watch: &Arc<RequestWatch>) -> Result<BurstResults> {
    let n = bench.sizes.burst;
    let mark = bench.mark();
    let start = Instant::now();
    let tasks = (0..n).map(|i| {
        let (alice, watch) = (bench.alice.clone(), watch.clone());
        tokio::spawn(async move {
            let name = format!("burst-{i}");
            let spec = RequestSpec {
                name: name.clone(),
                template: TEMPLATE,
                duration: None,
                target_pod: None,
                phase: "access-burst",
            };
            let sent = Instant::now();
            cluster::create_request(&alice, NAMESPACE, &spec).await?;
            let seen = watch
                .wait_for(
                    &watch::key(NAMESPACE, &name),
                    RequestPhase::Ready,
                    READY_TIMEOUT * 3,
                )
                .await
                .ok_or_else(|| format!("{name} was not Ready in time"))?;
            let ready = seen.first(RequestPhase::Ready).expect("seen Ready");
            Ok::<_, Error>((sent, ready))
        })
    });
    let outcomes = join_all(tasks).await;
    let process = bench.sampler.window(mark);
    let apiserver = bench.apiserver.window(mark);
    let mut latencies = Latencies::default();
    let mut failures = 0;
    let mut last = start;
    for outcome in outcomes {
        match outcome.map_err(|e| e.to_string()) {
            Ok(Ok((sent, ready))) => {
                latencies.record(ready.duration_since(sent));
                last = last.max(ready);
            }
            Ok(Err(e)) => {
                failures += 1;
                eprintln!("oz-bench: burst request: {e}");
            }
            Err(e) => {
                failures += 1;
                eprintln!("oz-bench: burst task: {e}");
            }
        }
    }
    let total_seconds = last.duration_since(start).as_secs_f64();
    let results = BurstResults {
        requests: n,
        total_seconds,
        rate_per_second: (n - failures) as f64 / total_seconds.max(f64::EPSILON),
        per_request: latencies.summary(),
        failures,
        process,
        apiserver,
    };
    bench.progress(&format!(
        "time to access, burst of {n}: {:.1} s in total ({:.0}/s), p99 {:.0} ms, {} failed",
        results.total_seconds, results.rate_per_second, results.per_request.p99_ms, failures
    ));
    Ok(results)
}
