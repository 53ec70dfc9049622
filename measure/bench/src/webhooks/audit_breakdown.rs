//! The audit call's parts, each alone: the handler in-process, and the grant lookup from
//! oz's cache and through the apiserver.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use oz_api::{AccessKind, ExecAccessRequest, PodAccessRequest, RequestPhase};
use oz_audit::AuditLog;
use oz_platform::registration::AUDIT_PATH;
use oz_webhooks::admission::{
    self, AccessLookup, AdmissionState, CachedLookup, EnforceSettings, GrantSummary, KubeLookup,
    LookupError, TemplateSummary, audit::find_grant,
};
use serde::Serialize;
use serde_json::json;
use tower::ServiceExt;

use super::reviews::{Body, DIRECT_NAMESPACE, TEMPLATE, allowed};
use crate::{
    Bench, Result, cluster,
    stats::{Latencies, Summary},
};

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
    ) -> BoxFuture<'_, Result<Option<TemplateSummary>, LookupError>> {
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
            extensions: Vec::new(),
        };
        Box::pin(async move { Ok(vec![summary]) })
    }
}

pub(super) async fn audit_breakdown(
    bench: &Bench,
    pod: &str,
    body: &Body,
) -> Result<AuditBreakdown> {
    let calls = bench.sizes.breakdown_calls;
    let router = admission::router(Arc::new(AdmissionState {
        places: Default::default(),
        locks: Default::default(),
        lookup: Arc::new(StaticLookup { pod: pod.into() }),
        audit_log: AuditLog::log_only(),
        events: None,
        enforce: EnforceSettings::default(),
        deletes: admission::requests::DeletePolicy::new(
            ["system:masters".to_string()],
            "oz-system",
        ),
        unverified_reads: admission::approvals::UnverifiedReads::default(),
        fleet_hub_user: None,
        fleet_names: Default::default(),
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
    let (lookup, watches) = CachedLookup::new(bench.admin.clone(), &[], &Default::default(), None);
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
            namespace: DIRECT_NAMESPACE,
            locks: &[],
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
