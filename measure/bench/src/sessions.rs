//! Brokered sessions (`accessConfig.sessionMode: Brokered`), through the real aggregation layer:
//! alice's exec goes to `sessions.wizardofoz.co`, the apiserver proxies it to oz-manager, and oz
//! opens the stream to the pod.
//!
//! - Close lag: many sessions, each running `cat` under a short grant of its own (its own pod,
//!   so no other grant keeps it open), expiries spread over seconds; for each, how long after
//!   `status.expiresAt` the client's stream ended (stdout reached its end), and whether oz's
//!   line said why. Wall-clock times on this machine, which the apiserver and oz-manager share,
//!   compared with `expiresAt` (whole seconds, as the API stores it). oz's own
//!   `oz_session_close_lag_seconds` is scraped over the same sessions.
//! - Throughput: `cat` of a file in the pod, through a brokered exec and through a direct
//!   `pods/exec` of the same pod (a Direct grant on a second template), runs alternating,
//!   median of each.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::join_all;
use k8s_openapi::{
    api::core::v1::{Pod, Service, ServiceSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    jiff::Timestamp,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{AttachParams, AttachedProcess, Patch, PatchParams},
};
use oz_api::{
    BrokeredPod, ExecAccessRequest, ExecAccessTemplate, RequestPhase, SESSIONS_API_SERVICE,
};
use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::{
    Bench, Result,
    cluster::{self, FIELD_MANAGER, RequestSpec},
    operator::{OZ_NAMESPACE, SESSIONS_SERVICE},
    prometheus::HistogramSummary,
    revocation,
    stats::{Latencies, Summary},
    watch::{self, RequestWatch},
};

const NAMESPACE: &str = "bench-sessions";
/// The Deployment whose pods the sessions run in: pod 0 for throughput, one per closed session.
const WORKLOAD: &str = "sessions";
/// The ExecAccessTemplates for it, `sessionMode: Brokered` and `Direct`.
const BROKERED: &str = "brokered";
const DIRECT: &str = "direct";
const PHASE: &str = "sessions";
/// What alice types first, to see the session live before waiting for its end.
const LIVE: &str = "oz-bench: live";
/// oz's line when it closes a session at expiry (`SessionEndReason::Expired.describe()`).
const CLOSED_AT_EXPIRY: &str = "oz: your access expired; session closed";
/// The file `cat` streams, in the pod's (kwok's per-pod) working directory.
const FILE: &str = "oz-bench-throughput.txt";
/// How long after expiresAt a session may stay open before the benchmark gives up on it.
const GIVE_UP: Duration = Duration::from_secs(30);
/// How long a new grant may take to reach oz's own watch, so that a brokered exec is allowed.
const OPEN_RETRIES_FOR: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, Default, Serialize)]
pub struct SessionsResults {
    pub sessions: usize,
    pub durations_seconds: (u64, u64),
    /// expiresAt → the client's stream ended, for every session that ended after expiresAt;
    /// a session still open [`GIVE_UP`] after it counts as that.
    pub close_lag: Summary,
    /// Of those, the ones whose stdout ended with oz's line.
    pub closed_with_notice: usize,
    /// Sessions that ended before expiresAt (should be none).
    pub closed_early: usize,
    /// Sessions still open [`GIVE_UP`] after expiresAt.
    pub never_closed: usize,
    /// Sessions that did not open or were not live (each is also printed).
    pub failed: usize,
    /// oz's `oz_session_close_lag_seconds` over the same sessions (expiresAt → closed).
    pub oz_close_lag: HistogramSummary,
    /// oz's `oz_sessions_ended_total` by reason, and `oz_sessions_refused_total` by reason,
    /// over the whole part.
    pub oz_ended: Vec<(String, f64)>,
    pub oz_refused: Vec<(String, f64)>,
    pub throughput: Throughput,
}

/// `cat` of one file, brokered and direct.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Throughput {
    pub bytes: u64,
    /// MiB/s of each run, in order.
    pub brokered_mib_s: Vec<f64>,
    pub direct_mib_s: Vec<f64>,
    pub brokered_median_mib_s: f64,
    pub direct_median_mib_s: f64,
    /// How much longer a brokered run takes than a direct one: direct/brokered − 1, in %.
    pub overhead_percent: f64,
    /// The size of oz's recordings directory after the part (what recording cost on disk).
    pub recordings_bytes: u64,
}

pub async fn run(bench: &mut Bench) -> Result<SessionsResults> {
    let sizes = bench.sizes.clone();
    let recordings = bench
        .oz
        .sessions
        .clone()
        .ok_or("oz-manager runs no sessions server")?
        .recordings;
    expose_sessions_api(&bench.admin, bench.oz.sessions.as_ref().map(|s| s.port)).await?;
    bench.progress("sessions: the aggregated API is Available");
    cluster::create_namespace(&bench.admin, NAMESPACE).await?;
    let workload = oz_testenv::workloads::deployment(
        &bench.admin,
        NAMESPACE,
        oz_testenv::workloads::WorkloadSpec::new(WORKLOAD, sizes.sessions + 1),
    )
    .await?;
    session_template(&bench.admin, BROKERED, "Brokered").await?;
    session_template(&bench.admin, DIRECT, "Direct").await?;
    let pods = workload.pod_names();
    let requests = Arc::new(
        RequestWatch::start(
            Api::<ExecAccessRequest>::namespaced(bench.admin.clone(), NAMESPACE),
            &format!("{}={PHASE}", cluster::PHASE_LABEL),
        )
        .await?,
    );
    let scrape = bench.oz.scrape(&bench.http).await?;
    let before = scrape.histogram("oz_session_close_lag_seconds", &[]);

    let mut results = SessionsResults {
        sessions: sizes.sessions,
        durations_seconds: sizes.session_durations,
        throughput: throughput(bench, &requests, &pods[0]).await?,
        ..Default::default()
    };
    bench.progress(&format!(
        "sessions: throughput brokered {:.0} MiB/s, direct {:.0} MiB/s ({:+.0}%)",
        results.throughput.brokered_median_mib_s,
        results.throughput.direct_median_mib_s,
        results.throughput.overhead_percent
    ));

    let (min, max) = sizes.session_durations;
    let durations = revocation::durations(sizes.sessions, min, max);
    let start = Instant::now();
    let spread = sizes.session_spread.as_secs_f64();
    let mut tasks = Vec::new();
    for (i, seconds) in durations.iter().enumerate() {
        let due = start + Duration::from_secs_f64(spread * i as f64 / sizes.sessions as f64);
        tokio::time::sleep_until(due.into()).await;
        let spec = RequestSpec {
            name: format!("session-{i}"),
            template: BROKERED,
            duration: Some(format!("{seconds}s")),
            target_pod: Some(pods[i + 1].clone()),
            phase: PHASE,
        };
        let (alice, requests) = (bench.alice.clone(), requests.clone());
        tasks.push(tokio::spawn(async move {
            session_until_closed(&alice, &requests, spec).await
        }));
    }
    let mut lags = Latencies::default();
    for outcome in join_all(tasks).await {
        match outcome
            .map_err(|e| e.to_string())
            .and_then(|o| o.map_err(|e| e.to_string()))
        {
            Ok(Ended::Closed { lag, notice }) => {
                lags.record_seconds(lag);
                results.closed_with_notice += usize::from(notice);
            }
            Ok(Ended::Early(lag)) => {
                results.closed_early += 1;
                eprintln!("oz-bench: a session ended {:.3}s before expiresAt", -lag);
            }
            Ok(Ended::Open) => {
                // Open at least this long after expiry: counted so, the p99 cannot hide it.
                results.never_closed += 1;
                lags.record(GIVE_UP);
            }
            Err(e) => {
                results.failed += 1;
                eprintln!("oz-bench: session: {e}");
            }
        }
    }
    results.close_lag = lags.summary();
    if results.close_lag.count == 0 {
        return Err(format!(
            "no session ended after its grant's expiry ({} failed, {} ended early)",
            results.failed, results.closed_early
        )
        .into());
    }
    let scrape = bench.oz.scrape(&bench.http).await?;
    results.oz_close_lag = scrape
        .histogram("oz_session_close_lag_seconds", &[])
        .since(&before)
        .summary();
    results.oz_ended = scrape.by_label("oz_sessions_ended_total", "reason");
    results.oz_refused = scrape.by_label("oz_sessions_refused_total", "reason");
    results.throughput.recordings_bytes = directory_bytes(&recordings);
    bench.progress(&format!(
        "sessions: close lag p99 {:.0} ms over {} sessions ({} with oz's line, {} never closed, {} failed)",
        results.close_lag.p99_ms,
        results.close_lag.count,
        results.closed_with_notice,
        results.never_closed,
        results.failed
    ));
    Ok(results)
}

/// Creates the ExternalName Service oz-manager's APIService points at, and waits until the
/// apiserver reports the APIService Available (oz-manager registers it once it leads).
async fn expose_sessions_api(admin: &Client, port: Option<u16>) -> Result<()> {
    let port = port.ok_or("oz-manager runs no sessions server")?;
    let service = Service {
        metadata: ObjectMeta {
            name: Some(SESSIONS_SERVICE.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ExternalName".into()),
            external_name: Some("localhost".into()),
            ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
                name: Some("sessions".into()),
                port: i32::from(port),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<Service>::namespaced(admin.clone(), OZ_NAMESPACE)
        .patch(
            SESSIONS_SERVICE,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&service),
        )
        .await?;
    let services: Api<APIService> = Api::all(admin.clone());
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = String::from("not registered");
    loop {
        match services.get_opt(SESSIONS_API_SERVICE).await {
            Ok(service) => {
                let available = service
                    .and_then(|s| s.status?.conditions)
                    .and_then(|c| c.into_iter().find(|c| c.type_ == "Available"));
                if let Some(condition) = available {
                    if condition.status == "True" {
                        return Ok(());
                    }
                    last = format!(
                        "{}: {}",
                        condition.reason.unwrap_or_default(),
                        condition.message.unwrap_or_default()
                    );
                }
            }
            Err(e) => last = e.to_string(),
        }
        if Instant::now() > deadline {
            return Err(format!(
                "APIService {SESSIONS_API_SERVICE} not Available within 90s: {last}"
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// ExecAccessTemplate `name` for the Deployment, group devs, in `mode`.
async fn session_template(admin: &Client, name: &str, mode: &str) -> Result<()> {
    let template: ExecAccessTemplate = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessTemplate",
        "metadata": {"name": name},
        "spec": {
            "accessConfig": {
                "allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h",
                "sessionMode": mode,
            },
            "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": WORKLOAD},
        },
    }))?;
    Api::<ExecAccessTemplate>::namespaced(admin.clone(), NAMESPACE)
        .create(&Default::default(), &template)
        .await?;
    Ok(())
}

/// Creates alice's request and waits until it is Ready; returns its expiresAt.
async fn granted(
    alice: &Client,
    requests: &RequestWatch,
    spec: &RequestSpec<'_>,
) -> Result<Timestamp> {
    cluster::create_request(alice, NAMESPACE, spec).await?;
    requests
        .wait_for(
            &watch::key(NAMESPACE, &spec.name),
            RequestPhase::Ready,
            Duration::from_secs(60),
        )
        .await
        .and_then(|seen| seen.expires_at)
        .ok_or_else(|| format!("{} was not Ready with an expiresAt within 60s", spec.name).into())
}

/// Opens a brokered exec, retrying while oz (whose own watch may not have seen the grant yet)
/// or the aggregation layer refuses it.
async fn open_brokered(
    alice: &Client,
    pod: &str,
    command: &[&str],
    params: &AttachParams,
) -> Result<AttachedProcess> {
    let api: Api<BrokeredPod> = Api::namespaced(alice.clone(), NAMESPACE);
    let deadline = Instant::now() + OPEN_RETRIES_FOR;
    loop {
        match api.exec(pod, command.to_vec(), params).await {
            Ok(process) => return Ok(process),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                return Err(format!("brokered exec into {pod}: {e}").into());
            }
        }
    }
}

/// How a closed-at-expiry session ended.
enum Ended {
    /// Seconds after expiresAt, and whether oz's line came first.
    Closed { lag: f64, notice: bool },
    /// Seconds after expiresAt (negative).
    Early(f64),
    /// Still open [`GIVE_UP`] after expiresAt.
    Open,
}

/// Grants alice `spec`, opens a brokered `cat` under it, sees it echo, and waits for its end.
async fn session_until_closed(
    alice: &Client,
    requests: &RequestWatch,
    spec: RequestSpec<'static>,
) -> Result<Ended> {
    let expires_at = granted(alice, requests, &spec).await?;
    let pod = spec.target_pod.as_deref().unwrap_or_default();
    let params = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(true);
    let mut process = open_brokered(alice, pod, &["cat"], &params).await?;
    let mut stdin = process.stdin().ok_or("no stdin")?;
    let mut stdout = process.stdout().ok_or("no stdout")?;
    stdin.write_all(format!("{LIVE}\n").as_bytes()).await?;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    let live = tokio::time::timeout(Duration::from_secs(20), async {
        while !String::from_utf8_lossy(&seen).contains(LIVE) {
            match stdout.read(&mut buffer).await? {
                0 => return Err("the session ended before echoing".into()),
                n => seen.extend_from_slice(&buffer[..n]),
            }
        }
        Ok::<_, crate::Error>(())
    })
    .await;
    match live {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("{}: {e}", spec.name).into()),
        Err(_) => return Err(format!("{}: cat did not echo within 20s", spec.name).into()),
    }
    let echoed = seen.len();
    let wait = expires_at.duration_since(Timestamp::now()).as_secs_f64() + GIVE_UP.as_secs_f64();
    let ended = tokio::time::timeout(
        Duration::from_secs_f64(wait.max(0.0)),
        read_to_end(&mut stdout, &mut seen),
    )
    .await;
    // Held open until here: the session must end because oz closed it, not because stdin did.
    drop(stdin);
    let Ok(ended) = ended else {
        return Ok(Ended::Open);
    };
    ended?;
    let lag = Timestamp::now().duration_since(expires_at).as_secs_f64();
    if lag < 0.0 {
        return Ok(Ended::Early(lag));
    }
    let notice = String::from_utf8_lossy(&seen[echoed..]).contains(CLOSED_AT_EXPIRY);
    Ok(Ended::Closed { lag, notice })
}

/// Reads until the end of the stream, appending to `seen`.
async fn read_to_end(stdout: &mut (impl AsyncRead + Unpin), seen: &mut Vec<u8>) -> Result<()> {
    let mut buffer = [0u8; 4096];
    loop {
        match stdout.read(&mut buffer).await? {
            0 => return Ok(()),
            n => seen.extend_from_slice(&buffer[..n]),
        }
    }
}

/// `cat` of a file in `pod`, brokered and direct (alternating), `session_runs` times each.
async fn throughput(bench: &Bench, requests: &RequestWatch, pod: &str) -> Result<Throughput> {
    let bytes = bench.sizes.session_mib * 1024 * 1024;
    for (name, template) in [
        ("throughput-brokered", BROKERED),
        ("throughput-direct", DIRECT),
    ] {
        let spec = RequestSpec {
            name: name.into(),
            template,
            duration: Some("1h".into()),
            target_pod: Some(pod.into()),
            phase: PHASE,
        };
        granted(&bench.alice, requests, &spec).await?;
    }
    let direct: Api<Pod> = Api::namespaced(bench.alice.clone(), NAMESPACE);
    // Printable text: a recording stores it nearly byte for byte (JSON escapes binary bytes).
    let create = format!(
        "yes 'oz-bench streams this line through cat, brokered and direct, to time it' | head -c {bytes} > {FILE}"
    );
    let mut created = direct
        .exec(
            pod,
            ["sh", "-c", create.as_str()],
            &AttachParams::default().stderr(true),
        )
        .await?;
    // Taken before joining: join drops the receiver, and the Status then has nowhere to go.
    let status = created.take_status().ok_or("no status")?.await;
    created.join().await?;
    if let Some(status) = status.filter(|s| s.status.as_deref() != Some("Success")) {
        return Err(format!("creating {FILE} in {pod}: {status:?}").into());
    }

    let params = AttachParams::default()
        .stdout(true)
        .stderr(false)
        .max_stdout_buf_size(1024 * 1024);
    let mut results = Throughput {
        bytes,
        ..Default::default()
    };
    for _ in 0..bench.sizes.session_runs {
        let started = Instant::now();
        let process = direct.exec(pod, ["cat", FILE], &params).await?;
        results.direct_mib_s.push(mib_per_second(
            drain(process, bytes, "direct").await?,
            started,
        ));

        let started = Instant::now();
        let process = open_brokered(&bench.alice, pod, &["cat", FILE], &params).await?;
        results.brokered_mib_s.push(mib_per_second(
            drain(process, bytes, "brokered").await?,
            started,
        ));
    }
    results.brokered_median_mib_s = median(&results.brokered_mib_s);
    results.direct_median_mib_s = median(&results.direct_mib_s);
    results.overhead_percent =
        100.0 * (results.direct_median_mib_s / results.brokered_median_mib_s - 1.0);
    Ok(results)
}

/// Reads a `cat`'s stdout to its end; an error unless it was exactly `expected` bytes.
async fn drain(mut process: AttachedProcess, expected: u64, how: &str) -> Result<u64> {
    let mut stdout = process.stdout().ok_or("no stdout")?;
    let mut buffer = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match stdout.read(&mut buffer).await? {
            0 => break,
            n => total += n as u64,
        }
    }
    if total != expected {
        return Err(format!("{how} cat streamed {total} bytes, not {expected}").into());
    }
    Ok(total)
}

fn mib_per_second(bytes: u64, started: Instant) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / started.elapsed().as_secs_f64()
}

/// The median (the mean of the middle two for an even count); 0 for none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The bytes of every file under `dir`, recursively; 0 if it cannot be read.
fn directory_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => directory_bytes(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
