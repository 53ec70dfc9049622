//! Webhook latency and throughput.
//!
//! - Direct: AdmissionReviews POSTed over TLS (HTTP/1.1, keep-alive, trusting only oz's webhook
//!   CA) to the oz-manager process under test, open loop at fixed rates over a fixed set of
//!   connections opened before each run: request `i` is due at `start + i / rate` whether or
//!   not earlier ones have been answered, and its latency is counted from when it was due, so a
//!   server that falls behind shows it (no coordinated omission). The audit review is an exec
//!   by alice into a pod she holds a grant for, so the handler finds it, logs the record and
//!   publishes an Event, as for a real exec.
//! - A breakdown of the audit call: the handler in-process with an in-memory lookup (no TLS, no
//!   apiserver), and the grant lookup alone: from the watch-fed cache oz-manager uses, and
//!   through the apiserver as it was made before (`audit_breakdown.rs`).
//! - Through the apiserver: alice's request creates and exec POSTs, with oz's webhooks
//!   registered and then with them removed (and oz-manager restarted without them)
//!   (`apiserver.rs`).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use http::{StatusCode, Uri};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_platform::{
    certs::secrets::CA_CRT,
    registration::{AUDIT_PATH, MUTATE_REQUESTS_PATH, VALIDATE_REQUESTS_PATH},
};
use serde::Serialize;
use serde_json::json;
use tokio::{sync::Semaphore, task::JoinSet};

use crate::{
    Bench, Result,
    cluster::{self, RequestSpec},
    http_client::{self, HttpClient},
    operator::OZ_NAMESPACE,
    procstat::Window,
    stats::{Latencies, Summary},
    watch::{self, RequestWatch},
};

mod apiserver;
mod audit_breakdown;

pub use apiserver::{ApiserverResults, through_apiserver};
pub use audit_breakdown::AuditBreakdown;
use audit_breakdown::audit_breakdown;
mod reviews;
use reviews::{Body, DIRECT_NAMESPACE, TEMPLATE, allowed};

/// Namespace of the calls through the apiserver.
const APISERVER_NAMESPACE: &str = "bench-admission";
/// A direct call not answered within this counts as an error (the apiserver's audit timeout is
/// 5 s, its request webhook timeout 10 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The connections a direct run's calls share, opened just before it, as a busy apiserver
/// keeps its connections to a webhook open: at most this many calls are open at once, and a
/// call due while all are busy waits for one, its latency still counted from when it was due.
/// The first method let up to 512 calls open a connection each as they found none idle: a step
/// from a slow rate to 10,000/s, or a stall of a few milliseconds, opened hundreds at once,
/// whose TLS handshakes took both processes' CPU for ~300 ms while every call queued behind
/// them (p99 230–310 ms in runs whose other 99% took under 5 ms).
const CONNECTIONS: usize = 64;
/// A direct run is abandoned this long after its last call was due.
const DRAIN: Duration = Duration::from_secs(20);

/// The three handlers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Endpoint {
    /// `/audit`: an exec by alice.
    Audit,
    /// `/mutate-requests`: a request create (stamps the requester; no cluster reads).
    Mutate,
    /// `/validate-requests`: a request create (reads the template, from oz's cache).
    Validate,
}

impl Endpoint {
    pub const ALL: [Endpoint; 3] = [Endpoint::Audit, Endpoint::Mutate, Endpoint::Validate];

    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Audit => AUDIT_PATH,
            Endpoint::Mutate => MUTATE_REQUESTS_PATH,
            Endpoint::Validate => VALIDATE_REQUESTS_PATH,
        }
    }
}

/// One endpoint at one rate.
#[derive(Clone, Debug, Serialize)]
pub struct DirectRun {
    pub endpoint: Endpoint,
    pub target_rate: u64,
    pub requests: usize,
    /// Answered 200 with `allowed: true`.
    pub ok: usize,
    pub errors: usize,
    /// Answers per second, from the first call due to the last answer.
    pub achieved_rate: f64,
    /// From when each call was due until its answer was read; failed calls count at their
    /// time to failure, abandoned ones at the time they were abandoned.
    pub latency: Summary,
    /// From when each call was actually sent (after waiting for a free slot, if any).
    pub service_time: Summary,
    /// oz-manager meanwhile.
    pub process: Window,
    /// The control plane meanwhile.
    pub apiserver: Window,
    /// This process, the load generator, meanwhile.
    pub load_generator: Window,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DirectResults {
    pub runs: Vec<DirectRun>,
    pub audit_breakdown: AuditBreakdown,
}

fn user() -> serde_json::Value {
    json!({"username": cluster::REQUESTER, "groups": cluster::alice().groups})
}

/// alice's exec into `pod`, as the apiserver sends it to the audit webhook.
fn audit_review(namespace: &str, pod: &str) -> serde_json::Value {
    let core = |kind: &str| json!({"group": "", "version": "v1", "kind": kind});
    let pods = json!({"group": "", "version": "v1", "resource": "pods"});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": Body::UID,
            "kind": core("PodExecOptions"),
            "resource": pods,
            "subResource": "exec",
            "requestKind": core("PodExecOptions"),
            "requestResource": pods,
            "requestSubResource": "exec",
            "name": pod,
            "namespace": namespace,
            "operation": "CONNECT",
            "userInfo": user(),
            "object": {
                "kind": "PodExecOptions", "apiVersion": "v1", "stdin": false, "stdout": true,
                "stderr": true, "tty": false, "container": "app", "command": ["cat", "/etc/hostname"],
            },
            "oldObject": null,
            "dryRun": false,
            "options": null,
        }
    })
}

/// alice's create of a request, as the apiserver sends it to the request webhooks
/// (`stamped`: as the validating webhook sees it, after the mutating one).
fn create_review(namespace: &str, stamped: bool) -> serde_json::Value {
    let gvk =
        json!({"group": oz_api::GROUP, "version": oz_api::VERSION, "kind": "ExecAccessRequest"});
    let gvr = json!({"group": oz_api::GROUP, "version": oz_api::VERSION, "resource": "execaccessrequests"});
    let mut spec = json!({"templateName": TEMPLATE, "duration": "10m"});
    if stamped {
        spec["requester"] = user();
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": Body::UID,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": "",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": user(),
            "object": {
                "apiVersion": format!("{}/{}", oz_api::GROUP, oz_api::VERSION),
                "kind": "ExecAccessRequest",
                "metadata": {"generateName": "direct-", "namespace": namespace},
                "spec": spec,
            },
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        }
    })
}

/// A namespace with Deployment web (1 pod), template web, and alice's Ready grant for the pod.
async fn namespace_with_grant(bench: &Bench, namespace: &str) -> Result<String> {
    cluster::create_namespace(&bench.admin, namespace).await?;
    cluster::workload_with_template(&bench.admin, namespace, TEMPLATE, 1).await?;
    let watch = RequestWatch::start(
        Api::<ExecAccessRequest>::namespaced(bench.admin.clone(), namespace),
        "oz-bench/phase=grant",
    )
    .await?;
    let spec = RequestSpec {
        name: "alice-grant".into(),
        template: TEMPLATE,
        duration: None,
        target_pod: None,
        phase: "grant",
    };
    cluster::create_request(&bench.alice, namespace, &spec).await?;
    let seen = watch
        .wait_for(
            &watch::key(namespace, &spec.name),
            RequestPhase::Ready,
            Duration::from_secs(60),
        )
        .await
        .ok_or("alice's grant was not Ready within 60s")?;
    Ok(seen.pod.ok_or("a Ready grant names its pod")?)
}

/// The webhook CA's certificate, from oz's Secret.
async fn webhook_ca(admin: &Client) -> Result<Vec<u8>> {
    let secret = Api::<Secret>::namespaced(admin.clone(), OZ_NAMESPACE)
        .get("oz-webhook-ca")
        .await?;
    Ok(secret
        .data
        .and_then(|d| d.get(CA_CRT).map(|b| b.0.clone()))
        .ok_or("the CA Secret has no ca.crt")?)
}

pub async fn direct(bench: &mut Bench) -> Result<DirectResults> {
    let pod = namespace_with_grant(bench, DIRECT_NAMESPACE).await?;
    let tls = http_client::client(Some(&webhook_ca(&bench.admin).await?))?;
    let body_of = |endpoint: Endpoint| {
        Body::new(match endpoint {
            Endpoint::Audit => audit_review(DIRECT_NAMESPACE, &pod),
            Endpoint::Mutate => create_review(DIRECT_NAMESPACE, false),
            Endpoint::Validate => create_review(DIRECT_NAMESPACE, true),
        })
    };

    let mut results = DirectResults::default();
    let sizes = bench.sizes.clone();
    let mut next_uid = 0;
    for endpoint in Endpoint::ALL {
        let uri: Uri = bench.oz.webhook_url(endpoint.path()).parse()?;
        let body = body_of(endpoint);
        // Warm-up: connections and the server's first allocations; not recorded.
        let warm = load(&tls, &uri, &body, 200.0, 200, next_uid).await;
        next_uid += 200;
        if warm.ok == 0 {
            return Err(format!(
                "no {endpoint:?} call succeeded during warm-up; oz-manager log {}",
                bench.oz.log.display()
            )
            .into());
        }
        for &rate in &sizes.webhook_rates {
            let count =
                ((rate as f64 * sizes.webhook_seconds) as usize).min(sizes.webhook_max_requests);
            next_uid += open_connections(&tls, &uri, &body, next_uid).await?;
            let mark = bench.mark();
            let outcome = load(&tls, &uri, &body, rate as f64, count, next_uid).await;
            next_uid += count;
            let run = DirectRun {
                endpoint,
                target_rate: rate,
                requests: count,
                ok: outcome.ok,
                errors: count - outcome.ok,
                achieved_rate: outcome.achieved_rate,
                latency: outcome.latency.summary(),
                service_time: outcome.service.summary(),
                process: bench.sampler.window(mark),
                apiserver: bench.apiserver.window(mark),
                load_generator: bench.own.window(mark),
            };
            bench.progress(&format!(
                "webhook {endpoint:?} direct at {rate}/s: p50 {:.2} ms, p99 {:.2} ms, {:.0}/s achieved, {} errors",
                run.latency.p50_ms, run.latency.p99_ms, run.achieved_rate, run.errors
            ));
            results.runs.push(run);
            bench.oz.check_running()?;
            // Let queued Events and connections drain before the next run.
            bench.settle_down(Duration::from_secs(90)).await;
        }
    }
    results.audit_breakdown = audit_breakdown(bench, &pod, &body_of(Endpoint::Audit)).await?;
    Ok(results)
}

/// What one load run saw.
struct LoadOutcome {
    ok: usize,
    achieved_rate: f64,
    /// Every call, failed ones at their time to failure (or to [`DRAIN`]).
    latency: Latencies,
    /// Successful calls, from when they were sent.
    service: Latencies,
}

/// Makes sure the client holds [`CONNECTIONS`] open connections to `uri`: three rounds of that
/// many calls at once (the first opens what is missing, the others check they stay open), each
/// of which must be answered. Returns the number of uids used.
async fn open_connections(
    client: &HttpClient,
    uri: &Uri,
    body: &Body,
    first_uid: usize,
) -> Result<usize> {
    const ROUNDS: usize = 3;
    for round in 0..ROUNDS {
        let first = first_uid + round * CONNECTIONS;
        let answered = load(client, uri, body, f64::INFINITY, CONNECTIONS, first).await;
        if answered.ok < CONNECTIONS {
            return Err(format!(
                "opening {CONNECTIONS} connections to {uri}: {} calls failed",
                CONNECTIONS - answered.ok
            )
            .into());
        }
    }
    Ok(ROUNDS * CONNECTIONS)
}

/// POSTs `count` bodies at `rate` per second, open loop, numbering them from `first_uid`, at
/// most [`CONNECTIONS`] at once. Calls still open [`DRAIN`] after the last one was due are
/// abandoned and count as errors.
async fn load(
    client: &HttpClient,
    uri: &Uri,
    body: &Body,
    rate: f64,
    count: usize,
    first_uid: usize,
) -> LoadOutcome {
    let slots = Arc::new(Semaphore::new(CONNECTIONS));
    let mut calls = JoinSet::new();
    let mut due = Vec::with_capacity(count);
    let start = Instant::now();
    for i in 0..count {
        let at = start + Duration::from_secs_f64(i as f64 / rate);
        due.push(at);
        tokio::time::sleep_until(at.into()).await;
        let (client, uri, slots) = (client.clone(), uri.clone(), slots.clone());
        let payload = body.render(first_uid + i);
        calls.spawn(async move {
            let _slot = slots.acquire_owned().await;
            let sent = Instant::now();
            let answer =
                tokio::time::timeout(CALL_TIMEOUT, http_client::post_json(&client, &uri, payload))
                    .await;
            let ok = matches!(&answer, Ok(Ok((StatusCode::OK, body))) if allowed(body));
            (i, sent, Instant::now(), ok)
        });
    }
    let give_up = Instant::now() + DRAIN;
    let mut answered = vec![false; count];
    let mut outcome = LoadOutcome {
        ok: 0,
        achieved_rate: 0.0,
        latency: Latencies::default(),
        service: Latencies::default(),
    };
    let mut last = start;
    loop {
        match tokio::time::timeout_at(give_up.into(), calls.join_next()).await {
            Ok(Some(Ok((i, sent, done, ok)))) => {
                answered[i] = true;
                outcome.latency.record(done.duration_since(due[i]));
                if ok {
                    outcome.ok += 1;
                    outcome.service.record(done.duration_since(sent));
                    last = last.max(done);
                }
            }
            // A call task that panicked: an error, with no time to record.
            Ok(Some(Err(_))) => {}
            Ok(None) => break,
            Err(_) => {
                calls.abort_all();
                for (i, _) in answered.iter().enumerate().filter(|(_, a)| !**a) {
                    outcome.latency.record(give_up.duration_since(due[i]));
                }
                break;
            }
        }
    }
    let seconds = last.duration_since(start).as_secs_f64();
    outcome.achieved_rate = if seconds > 0.0 {
        outcome.ok as f64 / seconds
    } else {
        0.0
    };
    outcome
}
