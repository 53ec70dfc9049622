//! Calls through the apiserver as alice, with oz's webhooks registered and without them.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use oz_api::ExecAccessRequest;
use serde::Serialize;

use super::{APISERVER_NAMESPACE, TEMPLATE, namespace_with_grant};
use crate::{
    Bench, Result,
    cluster::{self, RequestSpec},
    operator::Parts,
    stats::{Latencies, Summary},
};

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
