//! API calls per grant, counted from the apiserver's audit log ([`crate::audit`]).
//!
//! As a new user would: N exec grants, one at a time, each in a namespace of its own (a
//! Deployment with one running pod and an ExecAccessTemplate, made before counting starts and
//! left until the template is ready and oz quiet there: the template controller's calls for a
//! new template are not a grant's), so that a call's namespace says which grant it served.
//! alice creates each through oz's webhooks with a short duration. Each grant's calls are split
//! by time into three phases:
//!
//! - **grant**: from the create until the request is seen Ready and oz has then made no call in
//!   its namespace for [`QUIET`];
//! - **idle**: from there until `status.expiresAt`;
//! - **revoke**: from `expiresAt` until the request is seen Expired and oz is quiet again.
//!
//! The next grant is created once the previous one's grant phase has ended, so the phases of
//! different grants overlap in time but never in namespace.
//!
//! Then a **no-op reconcile**: with one long grant in force in each namespace, oz-manager is
//! killed and started again, and its writes are counted from the spawn until every expiry
//! timer is armed, every request has been reconciled once and oz is quiet. Nothing changed, so
//! nothing should be written.
//!
//! oz's informers (watches, and the lists that start them) are counted apart and left out of
//! the per-grant figures: they are cluster-wide and not per grant.

use std::{collections::BTreeMap, path::Path, time::Duration};

use futures::{StreamExt, stream};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{Api, api::ListParams};
use oz_api::{ExecAccessRequest, ExecAccessTemplate, RequestPhase};
use serde::Serialize;

use crate::{
    Bench, Result,
    audit::{self, OzCalls, PerGrant, Tally},
    cluster::{self, RequestSpec},
    operator::Parts,
    scale,
    watch::{self, RequestWatch},
};

const TEMPLATE: &str = "web";
const GRANT: &str = "grant";
const HELD: &str = "held";
/// oz counts as done with a phase after this long without a call in the grant's namespace.
pub const QUIET: Duration = Duration::from_secs(1);
/// A phase that is not quiet by then ends anyway (and its calls still count).
const QUIET_TIMEOUT: Duration = Duration::from_secs(30);

/// The namespaces of the part's `grants` grants (the audit policy must name them before the
/// control plane starts).
pub fn namespaces(grants: usize) -> Vec<String> {
    (0..grants).map(|i| format!("bench-calls-{i}")).collect()
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CallsResults {
    /// Grants made, and how long each lasted.
    pub grants: usize,
    pub grant_seconds: u64,
    /// oz's calls per grant while granting, idle, and revoking.
    pub grant: PerGrant,
    pub idle: PerGrant,
    pub revoke: PerGrant,
    pub restart: RestartCalls,
    /// oz's informer calls (watches and the lists that start them) over the whole part, by
    /// `verb resource`: cluster-wide, so not in the per-grant figures.
    pub informer_calls: BTreeMap<String, usize>,
}

/// oz-manager's calls after a restart that has nothing to change.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RestartCalls {
    /// ExecAccessRequests in the cluster, and grants in force, at the restart.
    pub requests: usize,
    pub in_force: usize,
    /// From the spawn until the timers were armed, everything reconciled once and oz quiet.
    pub seconds: f64,
    /// Its calls in the grants' namespaces (the no-op reconciles): the target is no writes.
    pub in_grant_namespaces: Tally,
    /// Its other calls: start-up work outside any grant (webhook registration, certificates).
    pub elsewhere: Tally,
}

/// One grant's phase boundaries.
struct Phases {
    namespace: String,
    created: Timestamp,
    granted: Timestamp,
    expires_at: Timestamp,
    revoked: Timestamp,
}

pub async fn run(bench: &mut Bench) -> Result<CallsResults> {
    let log = bench
        .audit_log
        .clone()
        .ok_or("the control plane was started without an audit log")?;
    let (grants, seconds) = (bench.sizes.calls_grants, bench.sizes.calls_grant_seconds);
    let namespaces = namespaces(grants);
    let admin = bench.admin.clone();
    let prepared: Vec<Result<()>> = stream::iter(namespaces.clone())
        .map(|namespace| {
            let admin = admin.clone();
            async move {
                cluster::create_namespace(&admin, &namespace).await?;
                cluster::workload_with_template(&admin, &namespace, TEMPLATE, 1).await?;
                Ok(())
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;
    prepared.into_iter().collect::<Result<Vec<()>>>()?;
    for namespace in &namespaces {
        template_ready(&admin, namespace).await?;
        quiet_after(&log, Some(namespace), Timestamp::now()).await?;
    }
    let watch = RequestWatch::start(
        Api::<ExecAccessRequest>::all(admin.clone()),
        "oz-bench/phase in (calls,calls-held)",
    )
    .await?;
    let started = Timestamp::now();

    let mut granted = Vec::new();
    for namespace in &namespaces {
        let created = Timestamp::now();
        let spec = request(GRANT, Some(format!("{seconds}s")), "calls");
        cluster::create_request(&bench.alice, namespace, &spec).await?;
        let ready = watch
            .wait_for(
                &watch::key(namespace, GRANT),
                RequestPhase::Ready,
                Duration::from_secs(60),
            )
            .await
            .and_then(|seen| seen.first_wall(RequestPhase::Ready))
            .ok_or_else(|| format!("{namespace}/{GRANT} was not Ready within 60s"))?;
        let granted_at = quiet_after(&log, Some(namespace), ready).await?;
        granted.push((namespace.clone(), created, granted_at));
    }
    let mut phases = Vec::new();
    for (namespace, created, granted) in granted {
        let seen = watch
            .wait_for(
                &watch::key(&namespace, GRANT),
                RequestPhase::Expired,
                Duration::from_secs(seconds + 60),
            )
            .await
            .ok_or_else(|| format!("{namespace}/{GRANT} was not Expired in time"))?;
        let (Some(expires_at), Some(expired)) =
            (seen.expires_at, seen.first_wall(RequestPhase::Expired))
        else {
            return Err(format!("{namespace}/{GRANT} expired without an expiresAt").into());
        };
        let revoked = quiet_after(&log, Some(&namespace), expired).await?;
        phases.push(Phases {
            namespace,
            created,
            granted,
            expires_at,
            revoked,
        });
    }

    let restart = restart(bench, &watch, &log, &namespaces).await?;
    let oz = OzCalls::of(&audit::read(&log)?);
    let tallies = |from: fn(&Phases) -> Timestamp, to: fn(&Phases) -> Timestamp| {
        let per_grant: Vec<Tally> = phases
            .iter()
            .map(|p| Tally::of(&oz.others, Some(&p.namespace), from(p), to(p)))
            .collect();
        PerGrant::of(&per_grant)
    };
    let mut informer_calls = BTreeMap::new();
    for call in oz
        .informers
        .iter()
        .filter(|c| c.request_received_timestamp >= started)
    {
        *informer_calls.entry(call.kind()).or_default() += 1;
    }
    let results = CallsResults {
        grants,
        grant_seconds: seconds,
        grant: tallies(|p| p.created, |p| p.granted),
        idle: tallies(|p| p.granted, |p| p.expires_at),
        revoke: tallies(|p| p.expires_at, |p| p.revoked),
        restart,
        informer_calls,
    };
    bench.progress(&format!(
        "calls per grant: grant {:.1} ({:.1} writes), idle {:.1}, revoke {:.1} ({:.1} writes); restart: {} writes in the grants' namespaces",
        results.grant.requests_mean,
        results.grant.writes_mean,
        results.idle.requests_mean,
        results.revoke.requests_mean,
        results.revoke.writes_mean,
        results.restart.in_grant_namespaces.writes
    ));
    Ok(results)
}

fn request(name: &str, duration: Option<String>, phase: &'static str) -> RequestSpec<'static> {
    RequestSpec {
        name: name.into(),
        template: TEMPLATE,
        duration,
        target_pod: None,
        phase,
    }
}

/// Holds one long grant in each namespace, restarts oz-manager and counts its calls until it
/// has armed every timer, reconciled everything once and gone quiet.
async fn restart(
    bench: &mut Bench,
    watch: &RequestWatch,
    log: &Path,
    namespaces: &[String],
) -> Result<RestartCalls> {
    let mut last_ready = Timestamp::now();
    for namespace in namespaces {
        let spec = request(HELD, Some("1h".into()), "calls-held");
        cluster::create_request(&bench.alice, namespace, &spec).await?;
        last_ready = watch
            .wait_for(
                &watch::key(namespace, HELD),
                RequestPhase::Ready,
                Duration::from_secs(60),
            )
            .await
            .and_then(|seen| seen.first_wall(RequestPhase::Ready))
            .ok_or_else(|| format!("{namespace}/{HELD} was not Ready within 60s"))?;
    }
    quiet_after(log, None, last_ready).await?;
    let all = Api::<ExecAccessRequest>::all(bench.admin.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let expiries = scale::expiries_in_force(&all);

    let from = Timestamp::now();
    bench.oz.restart(Parts::WithWebhooks)?;
    bench.sampler.follow(bench.oz.pid());
    bench
        .oz
        .wait_for_metrics(&bench.http, Duration::from_secs(120))
        .await?;
    scale::timers_armed(bench, &expiries)
        .await?
        .ok_or("oz-manager did not arm every expiry timer within a minute of its restart")?;
    bench.catch_up(all.len()).await?;
    let to = quiet_after(log, None, Timestamp::now()).await?;

    let oz = OzCalls::of(&audit::read(log)?);
    let (ours, others): (Vec<_>, Vec<_>) = oz
        .others
        .into_iter()
        .partition(|c| namespaces.iter().any(|n| n == c.namespace()));
    Ok(RestartCalls {
        requests: all.len(),
        in_force: expiries.len(),
        seconds: to.duration_since(from).as_secs_f64(),
        in_grant_namespaces: Tally::of(&ours, None, from, to),
        elsewhere: Tally::of(&others, None, from, to),
    })
}

/// Waits until the namespace's template says it is ready (the template controller has read its
/// Deployment and written its status).
async fn template_ready(admin: &kube::Client, namespace: &str) -> Result<()> {
    let api = Api::<ExecAccessTemplate>::namespaced(admin.clone(), namespace);
    let give_up = Timestamp::now() + SignedDuration::try_from(QUIET_TIMEOUT)?;
    loop {
        let template = api.get(TEMPLATE).await?;
        if template.status.as_ref().is_some_and(|s| s.ready) {
            return Ok(());
        }
        if Timestamp::now() > give_up {
            return Err(
                format!("{namespace}/{TEMPLATE} was not ready within {QUIET_TIMEOUT:?}").into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until oz-manager has made no call (but its informers') in `namespace` (`None`: any)
/// for [`QUIET`], counting from `since` at the earliest; returns when it saw that.
async fn quiet_after(log: &Path, namespace: Option<&str>, since: Timestamp) -> Result<Timestamp> {
    let quiet = SignedDuration::try_from(QUIET)?;
    let give_up = Timestamp::now() + SignedDuration::try_from(QUIET_TIMEOUT)?;
    loop {
        let now = Timestamp::now();
        let oz = OzCalls::of(&audit::read(log)?);
        let last = oz
            .others
            .iter()
            .filter(|c| namespace.is_none_or(|ns| ns == c.namespace()))
            .map(|c| c.request_received_timestamp)
            .filter(|&t| t >= since)
            .max()
            .unwrap_or(since);
        if now.duration_since(last) >= quiet || now > give_up {
            return Ok(now);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
