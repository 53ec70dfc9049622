//! The fleet part's steps (see the module above for what each measures).

use std::time::{Duration, Instant};

use futures::{
    StreamExt,
    future::{join_all, try_join_all},
    stream,
};
use k8s_openapi::{api::rbac::v1::RoleBinding, jiff::Timestamp};
use kube::{Api, api::PostParams};
use oz_api::{ExecAccessRequest, HUB_MANAGED_LABEL, RequestPhase};

use super::{
    planes::{FLEET_TEMPLATE, Fleet, NAMESPACE, WORKLOAD, hub_user},
    results::{HubCalls, HubStopped},
};
use crate::{
    Result,
    audit::{self, OzCalls, Tally},
    cluster::{self, PHASE_LABEL, RequestSpec},
    revocation,
    stats::{Latencies, Summary},
    watch::{self, BindingWatch, RequestWatch},
};

/// How long one request may take to become Ready before it counts as failed.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Requests asked at once when many are.
const CONCURRENCY: usize = 16;

/// What the steps watch: the hub's requests, and on each spoke alice's own requests, the
/// requests the hub made and oz's RoleBindings.
pub struct Watches {
    hub: RequestWatch,
    own: Vec<RequestWatch>,
    forwarded: Vec<RequestWatch>,
    bindings: Vec<BindingWatch>,
}

impl Watches {
    pub async fn start(fleet: &Fleet) -> Result<Self> {
        let requests =
            |client: &kube::Client| Api::<ExecAccessRequest>::namespaced(client.clone(), NAMESPACE);
        let mut watches = Self {
            hub: RequestWatch::start(requests(&fleet.hub.admin), PHASE_LABEL).await?,
            own: vec![],
            forwarded: vec![],
            bindings: vec![],
        };
        for spoke in &fleet.spokes {
            let admin = &spoke.admin;
            watches
                .own
                .push(RequestWatch::start(requests(admin), PHASE_LABEL).await?);
            watches
                .forwarded
                .push(RequestWatch::start(requests(admin), HUB_MANAGED_LABEL).await?);
            let bindings = Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE);
            watches.bindings.push(BindingWatch::start(bindings).await?);
        }
        Ok(watches)
    }
}

/// Sequential requests: who saw them Ready when, and over which span of wall-clock time.
pub struct Sequential {
    pub spoke_ready: Summary,
    pub hub_ready: Summary,
    pub failures: usize,
    pub window: (Timestamp, Timestamp),
}

/// Step 1: `count` requests by alice on the spokes themselves, in turn.
pub async fn spoke_own(fleet: &Fleet, watches: &Watches, count: usize) -> Result<Sequential> {
    let from = Timestamp::now();
    let (mut ready, mut failures) = (Latencies::default(), 0);
    for i in 0..count {
        let spoke = i % fleet.spokes.len();
        let spec = RequestSpec {
            name: format!("own-{i}"),
            template: WORKLOAD,
            duration: None,
            target_pod: None,
            phase: "fleet-own",
        };
        let sent = Instant::now();
        cluster::create_request(&fleet.spokes[spoke].alice, NAMESPACE, &spec).await?;
        let key = watch::key(NAMESPACE, &spec.name);
        match watches.own[spoke]
            .wait_for(&key, RequestPhase::Ready, READY_TIMEOUT)
            .await
            .and_then(|seen| seen.first(RequestPhase::Ready))
        {
            Some(at) => ready.record(at - sent),
            None => failures += 1,
        }
    }
    Ok(Sequential {
        spoke_ready: ready.summary(),
        hub_ready: Summary::default(),
        failures,
        window: (from, Timestamp::now()),
    })
}

/// Step 2: `count` requests by alice on the hub, naming the spokes in turn, one at a time.
pub async fn through_hub(fleet: &Fleet, watches: &Watches, count: usize) -> Result<Sequential> {
    let from = Timestamp::now();
    let (mut spoke_ready, mut hub_ready, mut failures) =
        (Latencies::default(), Latencies::default(), 0);
    for i in 0..count {
        let spoke = i % fleet.spokes.len();
        let name = format!("through-{i}");
        let sent = Instant::now();
        ask_hub(fleet, spoke, &name, None, "fleet-through").await?;
        let key = watch::key(NAMESPACE, &name);
        let on_spoke = watches.forwarded[spoke]
            .wait_for(&key, RequestPhase::Ready, READY_TIMEOUT)
            .await
            .and_then(|seen| seen.first(RequestPhase::Ready));
        let on_hub = (watches.hub)
            .wait_for(&key, RequestPhase::Ready, READY_TIMEOUT)
            .await
            .and_then(|seen| seen.first(RequestPhase::Ready));
        match (on_spoke, on_hub) {
            (Some(spoke_at), Some(hub_at)) => {
                spoke_ready.record(spoke_at - sent);
                hub_ready.record(hub_at - sent);
            }
            _ => failures += 1,
        }
    }
    // The hub's last status writes for the last grant come just after it is seen Ready: they
    // count until the calls part's quiet time has passed.
    tokio::time::sleep(crate::calls::QUIET).await;
    Ok(Sequential {
        spoke_ready: spoke_ready.summary(),
        hub_ready: hub_ready.summary(),
        failures,
        window: (from, Timestamp::now()),
    })
}

/// alice asks the hub for access on spoke `spoke` through the fleet template.
async fn ask_hub(
    fleet: &Fleet,
    spoke: usize,
    name: &str,
    duration: Option<String>,
    phase: &'static str,
) -> Result<()> {
    let mut request = RequestSpec {
        name: name.into(),
        template: FLEET_TEMPLATE,
        duration,
        target_pod: None,
        phase,
    }
    .object();
    request.spec.cluster = Some(fleet.spokes[spoke].name.as_str().into());
    Api::<ExecAccessRequest>::namespaced(fleet.hub.alice.clone(), NAMESPACE)
        .create(&PostParams::default(), &request)
        .await?;
    Ok(())
}

/// The hub's calls in step 2's `window`, over its `grants` grants.
pub fn hub_calls(fleet: &Fleet, window: (Timestamp, Timestamp), grants: usize) -> Result<HubCalls> {
    let (from, to) = window;
    let on_hub = audit::read(&fleet.hub.audit_log)?;
    let on_hub = OzCalls::of(&on_hub).others;
    let on_hub = Tally::of(&on_hub, Some(NAMESPACE), from, to);
    let hub_user = hub_user();
    let mut on_spokes = Tally::default();
    for spoke in &fleet.spokes {
        let calls = audit::read(&spoke.audit_log)?;
        let by_hub = OzCalls::split(calls.iter().filter(|c| c.user.username == hub_user)).others;
        let tally = Tally::of(&by_hub, Some(NAMESPACE), from, to);
        on_spokes.requests += tally.requests;
        on_spokes.writes += tally.writes;
        for (kind, count) in tally.by_kind {
            *on_spokes.by_kind.entry(kind).or_default() += count;
        }
    }
    let per = |count: usize| count as f64 / grants.max(1) as f64;
    Ok(HubCalls {
        grants,
        per_grant_on_hub: per(on_hub.requests),
        per_grant_on_spokes: per(on_spokes.requests),
        writes_per_grant_on_hub: per(on_hub.writes),
        writes_per_grant_on_spokes: per(on_spokes.writes),
        on_hub,
        on_spokes,
    })
}

/// Step 3: `count` grants asked on the hub at once ([`CONCURRENCY`] in flight), the spokes in
/// turn; returns how many were seen Ready on the hub.
pub async fn hold(fleet: &Fleet, watches: &Watches, count: usize) -> Result<usize> {
    let asked = stream::iter(0..count)
        .map(|i| async move {
            let name = format!("held-{i}");
            ask_hub(fleet, i % fleet.spokes.len(), &name, None, "fleet-held").await?;
            let key = watch::key(NAMESPACE, &name);
            let seen = (watches.hub)
                .wait_for(&key, RequestPhase::Ready, READY_TIMEOUT)
                .await;
            Result::<bool>::Ok(seen.is_some())
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let mut ready = 0;
    for outcome in asked {
        ready += usize::from(outcome?);
    }
    Ok(ready)
}

/// Step 4: `count` short grants through the hub, durations spread in `durations` seconds; the
/// hub is stopped once all are Ready on their spokes.
pub async fn with_the_hub_stopped(
    fleet: &mut Fleet,
    watches: &Watches,
    count: usize,
    durations: (u64, u64),
) -> Result<HubStopped> {
    let (min, max) = durations;
    let seconds = revocation::durations(count, min, max);
    let started = Instant::now();
    let spokes = fleet.spokes.len();
    let asking: &Fleet = fleet;
    try_join_all(seconds.iter().enumerate().map(|(i, s)| async move {
        let name = format!("short-{i}");
        ask_hub(
            asking,
            i % spokes,
            &name,
            Some(format!("{s}s")),
            "fleet-short",
        )
        .await
    }))
    .await?;
    let keys: Vec<(usize, String)> = (0..count)
        .map(|i| (i % spokes, watch::key(NAMESPACE, &format!("short-{i}"))))
        .collect();
    let ready_on_spokes = join_all(keys.iter().map(|(spoke, key)| async move {
        let seen = watches.forwarded[*spoke]
            .wait_for(key, RequestPhase::Ready, READY_TIMEOUT)
            .await;
        seen.and_then(|s| s.expires_at)
    }))
    .await;
    let all_ready_seconds = started.elapsed().as_secs_f64();
    if all_ready_seconds >= min as f64 {
        return Err(format!(
            "the short grants took {all_ready_seconds:.1} s to be Ready on their spokes, past the shortest's {min} s: \
             the hub would be stopped after an expiry"
        )
        .into());
    }
    // As a crash would: no clean-up, no last status write. The spokes alone revoke from here.
    fleet.hub.oz.kill();

    let deadline = Instant::now() + Duration::from_secs(max + 20);
    let pending = || {
        keys.iter()
            .zip(&ready_on_spokes)
            .filter(|((spoke, key), expires)| {
                expires.is_some() && watches.bindings[*spoke].deleted(key).is_none()
            })
            .count()
    };
    while pending() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut results = HubStopped {
        grants: count,
        durations_seconds: durations,
        all_ready_seconds,
        ..Default::default()
    };
    let mut lags = Latencies::default();
    for ((spoke, key), expires_at) in keys.iter().zip(ready_on_spokes) {
        let deleted = watches.bindings[*spoke].deleted(key);
        let (Some(expires_at), Some(deleted)) = (expires_at, deleted) else {
            results.missing += 1;
            continue;
        };
        let lag = deleted.duration_since(expires_at).as_secs_f64();
        results.early += usize::from(lag < 0.0);
        lags.record_seconds(lag);
    }
    results.binding_deleted = lags.summary();
    Ok(results)
}
