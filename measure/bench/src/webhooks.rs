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
//!   through the apiserver as it was made before.
//! - Through the apiserver: alice's request creates and exec POSTs, with oz's webhooks
//!   registered and then with them removed (and oz-manager restarted without them).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use http::{StatusCode, Uri};
use hyper::body::Bytes;
use k8s_openapi::api::{
    admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
    core::v1::{ConfigMap, Pod, Secret},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use oz_api::{AccessConfig, AccessKind, ExecAccessRequest, PodAccessRequest, RequestPhase};
use oz_webhooks::{
    admission::{
        self, AccessLookup, AdmissionState, AuditLog, CachedLookup, EnforceSettings, GrantSummary,
        KubeLookup, LookupError, audit::find_grant,
    },
    certs::secrets::CA_CRT,
    registration::{AUDIT_PATH, MUTATE_REQUESTS_PATH, VALIDATE_REQUESTS_PATH},
};
use serde::Serialize;
use serde_json::json;
use tokio::{sync::Semaphore, task::JoinSet};
use tower::ServiceExt;

use crate::{
    Bench, Result,
    cluster::{self, RequestSpec},
    http_client::{self, HttpClient},
    operator::{OZ_NAMESPACE, Parts},
    procstat::Window,
    stats::{Latencies, Summary},
    watch::{self, RequestWatch},
};

/// Namespace of the direct calls: Deployment web (1 pod), template web, alice's grant.
const DIRECT_NAMESPACE: &str = "bench-webhooks";
/// Namespace of the calls through the apiserver.
const APISERVER_NAMESPACE: &str = "bench-admission";
const TEMPLATE: &str = "web";
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

/// The audit call's parts, each alone.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AuditBreakdown {
    /// The audit handler in this process, through the same router, with an in-memory grant
    /// lookup: parsing, the record, logging (no subscriber here) and the response.
    pub handler_in_process: Summary,
    /// The grant lookup oz's handler makes per call: `find_grant` over a `CachedLookup` (the
    /// four oz kinds watched cluster-wide, here in this process), one call at a time.
    pub lookup_cached: Summary,
    /// The grant lookup as oz made it before the cache, for comparison: LIST
    /// ExecAccessRequests and LIST PodAccessRequests in the pod's namespace, through the
    /// apiserver, one call at a time.
    pub lookup_through_apiserver: Summary,
    /// The same lookup right after an unrelated write (a ConfigMap patch), as happens on a busy
    /// cluster, and after every audited exec, which writes an Event.
    pub lookup_after_a_write: Summary,
    /// The same two LISTs right after a write, but at `resourceVersion=0` (served from the
    /// apiserver's watch cache as it is, without waiting for it to catch up).
    pub lookup_any_version_after_a_write: Summary,
    /// The exec builder's LIST of the workload's pods (by label), right after a write.
    pub pod_list_after_a_write: Summary,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DirectResults {
    pub runs: Vec<DirectRun>,
    pub audit_breakdown: AuditBreakdown,
}

/// Calls through the apiserver, with oz's webhooks and without.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ApiserverResults {
    /// alice's ExecAccessRequest create call (mutating + validating webhooks).
    pub create_with_webhooks: Summary,
    pub create_without_webhooks: Summary,
    /// alice's exec POST without a stream upgrade, answered 400 after admission (audit webhook):
    /// it measures admission, not a session.
    pub exec_with_audit: Summary,
    pub exec_without_audit: Summary,
    /// Calls that did not give the expected answer.
    pub unexpected: usize,
}

/// An AdmissionReview body with a fresh uid per call.
#[derive(Clone)]
struct Body {
    before_uid: String,
    after_uid: String,
}

impl Body {
    const UID: &'static str = "UID-PLACEHOLDER";

    fn new(review: serde_json::Value) -> Self {
        let text = review.to_string();
        let (before, after) = text
            .split_once(Self::UID)
            .expect("the review carries the uid placeholder");
        Self {
            before_uid: before.into(),
            after_uid: after.into(),
        }
    }

    fn render(&self, i: usize) -> Bytes {
        Bytes::from(format!("{}bench-{i}{}", self.before_uid, self.after_uid))
    }
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

fn allowed(body: &[u8]) -> bool {
    const ALLOWED: &[u8] = b"\"allowed\":true";
    body.windows(ALLOWED.len()).any(|w| w == ALLOWED)
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

/// A lookup that always finds alice's grant for `pod`, without a cluster.
struct StaticLookup {
    pod: String,
}

impl AccessLookup for StaticLookup {
    fn template(
        &self,
        _kind: AccessKind,
        _namespace: &str,
        _name: &str,
    ) -> BoxFuture<'_, Result<Option<AccessConfig>, LookupError>> {
        Box::pin(async { Ok(None) })
    }

    fn requests(&self, _namespace: &str) -> BoxFuture<'_, Result<Vec<GrantSummary>, LookupError>> {
        let summary = GrantSummary {
            kind: AccessKind::Exec,
            name: "alice-grant".into(),
            template: TEMPLATE.into(),
            requested_by: Some(cluster::alice().username),
            phase: Some(RequestPhase::Ready),
            pod_name: Some(self.pod.clone()),
            session_mode: None,
            expires_at: Some(chrono::Utc::now() + chrono::TimeDelta::hours(1)),
            approvers: Vec::new(),
        };
        Box::pin(async move { Ok(vec![summary]) })
    }
}

async fn audit_breakdown(bench: &Bench, pod: &str, body: &Body) -> Result<AuditBreakdown> {
    let calls = bench.sizes.breakdown_calls;
    let router = admission::router(Arc::new(AdmissionState {
        lookup: Arc::new(StaticLookup { pod: pod.into() }),
        audit_log: AuditLog::log_only(),
        events: None,
        enforce: EnforceSettings::default(),
        deletes: admission::requests::DeletePolicy::new(
            ["system:masters".to_string()],
            "oz-system",
        ),
        unverified_reads: admission::approvals::UnverifiedReads::default(),
    }));
    let mut handler = Latencies::default();
    for i in 0..calls {
        let request = http::Request::post(AUDIT_PATH)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body.render(i)))?;
        let start = Instant::now();
        let response = router.clone().oneshot(request).await?;
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
        handler.record(start.elapsed());
        if !allowed(&bytes) {
            return Err("the in-process audit handler did not allow alice's exec".into());
        }
    }
    let cached = cached_lookup(bench, pod, calls).await?;
    let lookup = KubeLookup::new(bench.admin.clone());
    let mut listing = Latencies::default();
    for _ in 0..calls {
        let start = Instant::now();
        lookup.requests(DIRECT_NAMESPACE).await?;
        listing.record(start.elapsed());
    }
    let (after_write, any_version, pods) = lists_after_writes(bench, calls).await?;
    Ok(AuditBreakdown {
        handler_in_process: handler.summary(),
        lookup_cached: cached.summary(),
        lookup_through_apiserver: listing.summary(),
        lookup_after_a_write: after_write.summary(),
        lookup_any_version_after_a_write: any_version.summary(),
        pod_list_after_a_write: pods.summary(),
    })
}

/// `calls` grant lookups for alice's exec into `pod`, as oz-manager makes them: from a cache
/// of the four oz kinds, synced here from the same apiserver first.
async fn cached_lookup(bench: &Bench, pod: &str, calls: usize) -> Result<Latencies> {
    let (lookup, watches) = CachedLookup::new(bench.admin.clone(), &[], None);
    let watches = tokio::spawn(watches);
    let synced = tokio::time::timeout(Duration::from_secs(120), lookup.wait_until_ready()).await;
    if !matches!(synced, Ok(Ok(()))) {
        watches.abort();
        return Err("the grant lookup cache did not sync within 120s".into());
    }
    let groups = cluster::alice().groups;
    let mut latencies = Latencies::default();
    let mut missed = false;
    for _ in 0..calls {
        let start = Instant::now();
        let asked = oz_api::Asked {
            user: cluster::REQUESTER,
            groups: &groups,
            pod,
            action: oz_api::PodAction::Exec,
            route: oz_api::Route::Direct,
            now: chrono::Utc::now(),
        };
        let grant = find_grant(&lookup, DIRECT_NAMESPACE, &asked).await;
        latencies.record(start.elapsed());
        missed |= !matches!(grant, Ok(Some(_)));
    }
    watches.abort();
    if missed {
        return Err("the cached grant lookup did not find alice's grant".into());
    }
    Ok(latencies)
}

/// LISTs timed right after an unrelated write: (oz's grant lookup, the same at
/// resourceVersion=0, the exec builder's pod LIST).
async fn lists_after_writes(
    bench: &Bench,
    calls: usize,
) -> Result<(Latencies, Latencies, Latencies)> {
    let admin = bench.admin.clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), DIRECT_NAMESPACE);
    let name = "bench-writes";
    config_maps
        .patch(
            name,
            &PatchParams::apply(cluster::FIELD_MANAGER),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
            ),
        )
        .await?;
    let mut written = 0u64;
    let mut write = || {
        written += 1;
        let patch = json!({"data": {"n": written.to_string()}});
        let config_maps = config_maps.clone();
        async move {
            config_maps
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        }
    };
    let lookup = KubeLookup::new(admin.clone());
    let exec: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), DIRECT_NAMESPACE);
    let pod_requests: Api<PodAccessRequest> = Api::namespaced(admin.clone(), DIRECT_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(admin, DIRECT_NAMESPACE);
    let any = ListParams::default().match_any();
    let (mut after_write, mut any_version, mut pod_list) = (
        Latencies::default(),
        Latencies::default(),
        Latencies::default(),
    );
    for _ in 0..calls {
        write().await?;
        let start = Instant::now();
        lookup.requests(DIRECT_NAMESPACE).await?;
        after_write.record(start.elapsed());

        write().await?;
        let start = Instant::now();
        exec.list(&any).await?;
        pod_requests.list(&any).await?;
        any_version.record(start.elapsed());

        write().await?;
        let start = Instant::now();
        pods.list(&ListParams::default().labels(&format!("app={TEMPLATE}")))
            .await?;
        pod_list.record(start.elapsed());
    }
    Ok((after_write, any_version, pod_list))
}

/// Creates and exec POSTs as alice, with the webhooks and then without. Leaves oz-manager
/// running without webhooks and their configurations deleted.
pub async fn through_apiserver(bench: &mut Bench) -> Result<ApiserverResults> {
    let pod = namespace_with_grant(bench, APISERVER_NAMESPACE).await?;
    let calls = bench.sizes.apiserver_calls;
    let mut results = ApiserverResults::default();
    let mut unexpected = 0;

    bench.settle_down(Duration::from_secs(120)).await;
    let (creates, execs) = creates_and_execs(bench, &pod, "with", calls, &mut unexpected).await?;
    results.create_with_webhooks = creates;
    results.exec_with_audit = execs;

    bench.oz.restart(Parts::WithoutWebhooks)?;
    bench.sampler.follow(bench.oz.pid());
    let admin = bench.admin.clone();
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .delete("oz-requests", &DeleteParams::default())
        .await?;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    for name in ["oz-requests", "oz-audit"] {
        validating.delete(name, &DeleteParams::default()).await?;
    }
    bench
        .oz
        .wait_for_metrics(&bench.http, Duration::from_secs(60))
        .await?;
    wait_until_unmutated(&bench.alice).await?;
    // The new process reconciles every request once; measure after that, not during it.
    let requests = Api::<ExecAccessRequest>::all(admin)
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len();
    bench.catch_up(requests).await?;
    bench.settle_down(Duration::from_secs(300)).await;

    let (creates, execs) =
        creates_and_execs(bench, &pod, "without", calls, &mut unexpected).await?;
    results.create_without_webhooks = creates;
    results.exec_without_audit = execs;
    results.unexpected = unexpected;
    bench.progress(&format!(
        "through the apiserver: create p50 {:.1} → {:.1} ms without webhooks, exec p50 {:.1} → {:.1} ms without audit",
        results.create_with_webhooks.p50_ms,
        results.create_without_webhooks.p50_ms,
        results.exec_with_audit.p50_ms,
        results.exec_without_audit.p50_ms
    ));
    Ok(results)
}

async fn creates_and_execs(
    bench: &Bench,
    pod: &str,
    label: &str,
    calls: usize,
    unexpected: &mut usize,
) -> Result<(Summary, Summary)> {
    let mut creates = Latencies::default();
    for i in 0..calls {
        let spec = RequestSpec {
            name: format!("{label}-{i}"),
            template: TEMPLATE,
            duration: Some("10m".into()),
            target_pod: None,
            phase: "admission",
        };
        let start = Instant::now();
        match cluster::create_request(&bench.alice, APISERVER_NAMESPACE, &spec).await {
            Ok(()) => creates.record(start.elapsed()),
            Err(e) => {
                *unexpected += 1;
                eprintln!("oz-bench: create {label} webhooks: {e}");
            }
        }
    }
    let mut execs = Latencies::default();
    let path = format!(
        "/api/v1/namespaces/{APISERVER_NAMESPACE}/pods/{pod}/exec?command=cat&command=%2Fetc%2Fhostname&stdout=true&stderr=true"
    );
    for _ in 0..calls {
        let request = http::Request::post(path.as_str()).body(Vec::new())?;
        let start = Instant::now();
        let answer = bench.alice.request_text(request).await;
        let elapsed = start.elapsed();
        match answer {
            // Not upgraded to a stream: the apiserver answers 400 after admission, before it
            // would call the pod's node.
            Err(kube::Error::Api(status)) if status.code == 400 => execs.record(elapsed),
            other => {
                *unexpected += 1;
                eprintln!("oz-bench: exec {label} audit: unexpected {other:?}");
            }
        }
    }
    Ok((creates.summary(), execs.summary()))
}

/// Waits until the apiserver has dropped the mutating webhook: a dry-run create by alice
/// naming someone else as requester comes back unchanged.
async fn wait_until_unmutated(alice: &Client) -> Result<()> {
    let unmutated = crate::poll(Duration::from_secs(30), || async {
        let requester = cluster::dry_run_requester(alice, APISERVER_NAMESPACE, TEMPLATE).await?;
        (requester == cluster::FORGED_REQUESTER).then_some(())
    })
    .await;
    unmutated.ok_or("the apiserver still calls oz's mutating webhook 30s after its removal")?;
    // The audit configuration was deleted at the same moment; give its informer the same time.
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}
