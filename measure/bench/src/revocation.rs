//! Revocation lag: many short grants whose expiries are spread over time, and for each, how long
//! after `status.expiresAt`
//!
//! - a watch saw its RoleBinding deleted (every grant), and
//! - a SubjectAccessReview for alice first came back denied (a sample, polled back to back from
//!   shortly before expiry; each sampled grant is for a pod of its own, so no other grant of
//!   alice's keeps the answer `allowed`).
//!
//! Both are wall-clock times on this machine, which the apiserver and oz-manager share, compared
//! with `expiresAt` (whole seconds, as the API stores it).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::join_all;
use k8s_openapi::{
    api::{
        authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
        rbac::v1::RoleBinding,
    },
    jiff::Timestamp,
};
use kube::{Api, Client, api::PostParams};
use oz_api::{ExecAccessRequest, RequestPhase};
use serde::Serialize;

use crate::{
    Bench, Result,
    cluster::{self, RequestSpec},
    prometheus::HistogramSummary,
    stats::{Latencies, Summary},
    watch::{self, BindingWatch, RequestWatch},
};

const NAMESPACE: &str = "bench-revoke";
/// Grants not sampled by SubjectAccessReview share this Deployment's 2 pods.
const FLEET: &str = "fleet";
/// Each sampled grant is for its own pod of this Deployment.
const SOLO: &str = "solo";
/// How long before expiry the SubjectAccessReview loop starts.
const SAR_LEAD: Duration = Duration::from_millis(300);
/// How long after expiry the SubjectAccessReview loop gives up.
const SAR_GIVE_UP: Duration = Duration::from_secs(15);

#[derive(Clone, Debug, Default, Serialize)]
pub struct RevocationResults {
    pub grants: usize,
    pub durations_seconds: (u64, u64),
    /// expiresAt → RoleBinding deletion seen by a watch.
    pub binding_deleted: Summary,
    /// Grants whose binding was never seen deleted (within the wait).
    pub binding_missing: usize,
    /// Deletions seen before expiresAt (should be none).
    pub binding_early: usize,
    /// expiresAt → the request seen `phase: Expired` (oz writes it after deleting the grant).
    pub expired_seen: Summary,
    /// expiresAt → first denied SubjectAccessReview, for the sampled grants.
    pub sar_denied: Summary,
    pub sar_samples: usize,
    /// Sampled grants whose first review was already denied (the loop started too late), or
    /// that never turned denied.
    pub sar_invalid: usize,
    /// Largest gap between the last allowed and the first denied review: the resolution.
    pub sar_resolution_max_ms: f64,
    /// oz's own `oz_revocation_lag_seconds` over the same grants (expiresAt → its delete call
    /// returned).
    pub oz_revocation_lag: HistogramSummary,
    /// Requests that did not become Ready.
    pub not_ready: usize,
}

/// A deterministic spread of durations in [min, max] seconds.
pub fn durations(n: usize, min: u64, max: u64) -> Vec<u64> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            min + (state >> 33) % (max - min + 1)
        })
        .collect()
}

pub async fn run(bench: &mut Bench) -> Result<RevocationResults> {
    let sizes = bench.sizes.clone();
    let samples = sizes.sar_samples.min(sizes.revocations);
    cluster::create_namespace(&bench.admin, NAMESPACE).await?;
    cluster::workload_with_template(&bench.admin, NAMESPACE, FLEET, 2).await?;
    let solo = cluster::workload_with_template(&bench.admin, NAMESPACE, SOLO, samples).await?;
    let requests = Arc::new(
        RequestWatch::start(
            Api::<ExecAccessRequest>::namespaced(bench.admin.clone(), NAMESPACE),
            "oz-bench/phase=revocation",
        )
        .await?,
    );
    let bindings = BindingWatch::start(Api::<RoleBinding>::namespaced(
        bench.admin.clone(),
        NAMESPACE,
    ))
    .await?;
    let before = bench.oz_histogram("oz_revocation_lag_seconds").await?;

    let (min, max) = sizes.revocation_durations;
    let durations = durations(sizes.revocations, min, max);
    let pods = solo.pod_names();
    let every = (sizes.revocations / samples.max(1)).max(1);
    let start = Instant::now();
    let spread = sizes.revocation_spread.as_secs_f64();
    let mut tasks = Vec::new();
    for (i, seconds) in durations.iter().enumerate() {
        let due = start + Duration::from_secs_f64(spread * i as f64 / sizes.revocations as f64);
        tokio::time::sleep_until(due.into()).await;
        // Every `every`-th grant is sampled, so the samples span the whole creation period.
        let sampled = samples > 0 && i % every == 0 && i / every < samples;
        let spec = RequestSpec {
            name: format!("short-{i}"),
            template: if sampled { SOLO } else { FLEET },
            duration: Some(format!("{seconds}s")),
            target_pod: sampled.then(|| pods[i / every].clone()),
            phase: "revocation",
        };
        let (alice, admin, requests) = (bench.alice.clone(), bench.admin.clone(), requests.clone());
        tasks.push(tokio::spawn(async move {
            grant_and_watch(&alice, &admin, &requests, spec, sampled).await
        }));
    }
    let outcomes = join_all(tasks).await;

    // Every binding is deleted by the latest expiry plus a margin.
    let deadline = Instant::now() + Duration::from_secs(max + 20);
    let mut results = RevocationResults {
        grants: sizes.revocations,
        durations_seconds: (min, max),
        sar_samples: samples,
        ..Default::default()
    };
    let keys: Vec<String> = (0..sizes.revocations)
        .map(|i| watch::key(NAMESPACE, &format!("short-{i}")))
        .collect();
    loop {
        let pending = keys
            .iter()
            .filter(|k| {
                requests.seen(k).and_then(|s| s.expires_at).is_some()
                    && bindings.deleted(k).is_none()
            })
            .count();
        if pending == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let (mut binding_lags, mut expired_lags) = (Latencies::default(), Latencies::default());
    for key in &keys {
        let Some(expires_at) = requests.seen(key).and_then(|s| s.expires_at) else {
            results.not_ready += 1;
            continue;
        };
        if let Some(expired) = requests
            .seen(key)
            .and_then(|s| s.first_wall(RequestPhase::Expired))
        {
            expired_lags.record_seconds(expired.duration_since(expires_at).as_secs_f64());
        }
        match bindings.deleted(key) {
            Some(deleted) => {
                let lag = deleted.duration_since(expires_at).as_secs_f64();
                if lag < 0.0 {
                    results.binding_early += 1;
                }
                binding_lags.record_seconds(lag);
            }
            None => results.binding_missing += 1,
        }
    }
    results.binding_deleted = binding_lags.summary();
    results.expired_seen = expired_lags.summary();

    let mut sar_lags = Latencies::default();
    for outcome in outcomes {
        match outcome.map_err(|e| e.to_string()) {
            Ok(Ok(Some(probe))) => match probe {
                Probe::Denied { lag, resolution } => {
                    sar_lags.record_seconds(lag);
                    results.sar_resolution_max_ms =
                        results.sar_resolution_max_ms.max(resolution * 1000.0);
                }
                Probe::Invalid(why) => {
                    results.sar_invalid += 1;
                    eprintln!("oz-bench: SubjectAccessReview sample: {why}");
                }
            },
            Ok(Ok(None)) => {}
            Ok(Err(e)) => eprintln!("oz-bench: revocation request: {e}"),
            Err(e) => eprintln!("oz-bench: revocation task: {e}"),
        }
    }
    results.sar_denied = sar_lags.summary();
    results.oz_revocation_lag = bench
        .oz_histogram("oz_revocation_lag_seconds")
        .await?
        .since(&before)
        .summary();
    bench.progress(&format!(
        "revocation lag: binding deleted p99 {:.0} ms, access denied p99 {:.0} ms ({} samples)",
        results.binding_deleted.p99_ms, results.sar_denied.p99_ms, results.sar_denied.count
    ));
    // Expired and measured: the scale points count every request in the cluster.
    cluster::clear_requests(&bench.admin, NAMESPACE, cluster::PHASE_LABEL).await?;
    Ok(results)
}

/// What the SubjectAccessReview loop found.
enum Probe {
    /// Seconds from expiry to the first denied review, and since the last allowed one.
    Denied {
        lag: f64,
        resolution: f64,
    },
    Invalid(String),
}

/// Creates the request, waits for Ready and, if sampled, probes access around expiry.
async fn grant_and_watch(
    alice: &Client,
    admin: &Client,
    requests: &RequestWatch,
    spec: RequestSpec<'static>,
    sampled: bool,
) -> Result<Option<Probe>> {
    cluster::create_request(alice, NAMESPACE, &spec).await?;
    let seen = requests
        .wait_for(
            &watch::key(NAMESPACE, &spec.name),
            RequestPhase::Ready,
            Duration::from_secs(60),
        )
        .await
        .ok_or_else(|| format!("{} was not Ready within 60s", spec.name))?;
    if !sampled {
        return Ok(None);
    }
    let (Some(expires_at), Some(pod)) = (seen.expires_at, seen.pod) else {
        return Ok(Some(Probe::Invalid(format!(
            "{} is Ready without expiresAt or podName",
            spec.name
        ))));
    };
    Ok(Some(probe(admin, &pod, expires_at).await?))
}

/// Asks, back to back from [`SAR_LEAD`] before `expires_at`, whether alice may exec into `pod`,
/// until the answer is no.
async fn probe(admin: &Client, pod: &str, expires_at: Timestamp) -> Result<Probe> {
    let lead = expires_at.duration_since(Timestamp::now()).as_secs_f64() - SAR_LEAD.as_secs_f64();
    if lead > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(lead)).await;
    }
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    let review = review_for(pod);
    let mut last_allowed: Option<Timestamp> = None;
    loop {
        let answer = reviews.create(&PostParams::default(), &review).await?;
        let now = Timestamp::now();
        let allowed = answer.status.is_some_and(|s| s.allowed);
        if allowed {
            last_allowed = Some(now);
        } else {
            let Some(allowed_at) = last_allowed else {
                return Ok(Probe::Invalid(format!(
                    "access to {pod} was already denied {:.3}s after expiry, when probing began",
                    now.duration_since(expires_at).as_secs_f64()
                )));
            };
            return Ok(Probe::Denied {
                lag: now.duration_since(expires_at).as_secs_f64(),
                resolution: now.duration_since(allowed_at).as_secs_f64(),
            });
        }
        if now.duration_since(expires_at).as_secs_f64() > SAR_GIVE_UP.as_secs_f64() {
            return Ok(Probe::Invalid(format!(
                "access to {pod} still allowed {SAR_GIVE_UP:?} after expiry"
            )));
        }
    }
}

/// May alice (in devs) exec into `pod`? Asked as admin on her behalf.
fn review_for(pod: &str) -> SubjectAccessReview {
    let alice = cluster::alice();
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(alice.username),
            groups: Some(alice.groups),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(NAMESPACE.into()),
                verb: Some("create".into()),
                resource: Some("pods".into()),
                subresource: Some("exec".into()),
                name: Some(pod.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_spread_over_the_whole_range_and_repeatable() {
        let spread = durations(500, 3, 30);
        assert_eq!(spread, durations(500, 3, 30));
        assert!(spread.iter().all(|d| (3..=30).contains(d)));
        assert!(spread.contains(&3) && spread.contains(&30));
    }
}
