//! Notices when oz loses (or regains) the permissions it needs in a watched namespace. The
//! controllers keep retrying on their own and resume when access returns; this makes the
//! problem visible: logged once per change, exported as `oz_namespace_access_denied`, and
//! listed in the readiness detail.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::{Api, Client, api::PostParams};
use prometheus_client::metrics::{family::Family, gauge::Gauge};

use oz_api::AccessKind;

use super::Health;
use crate::metrics::Metrics;

/// How often access is checked.
const INTERVAL: Duration = Duration::from_secs(5);

/// Checks each namespace every few seconds, forever.
pub async fn run(
    client: Client,
    namespaces: Vec<String>,
    kinds: Vec<AccessKind>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
) {
    if namespaces.is_empty() {
        return;
    }
    let denied = metrics.namespace_access_denied.clone();
    let mut known: std::collections::BTreeMap<String, Option<String>> = Default::default();
    loop {
        for namespace in &namespaces {
            let problem = check(&client, namespace, &kinds).await;
            if known.get(namespace) != Some(&problem) {
                match &problem {
                    Some(p) => {
                        tracing::error!(%namespace, problem = %p, "oz cannot work in this namespace; its requests wait until access returns")
                    }
                    None if known.contains_key(namespace) => {
                        tracing::info!(%namespace, "access to the namespace is back")
                    }
                    None => {}
                }
                set(&denied, namespace, problem.is_some());
                health.set_problem(namespace, problem.clone());
                known.insert(namespace.clone(), problem);
            }
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

fn set(family: &Family<crate::metrics::NamespaceLabels, Gauge>, namespace: &str, denied: bool) {
    family
        .get_or_create(&crate::metrics::NamespaceLabels {
            namespace: namespace.into(),
        })
        .set(denied as i64);
}

/// What oz cannot do in `namespace`, if anything: the verbs its watches need on its kinds.
async fn check(client: &Client, namespace: &str, kinds: &[AccessKind]) -> Option<String> {
    let mut resources = vec![];
    for kind in kinds {
        resources.extend([kind.request_plural(), kind.template_plural()]);
    }
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut missing = vec![];
    for resource in resources {
        for verb in ["list", "watch"] {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        namespace: Some(namespace.into()),
                        group: Some(oz_api::GROUP.into()),
                        resource: Some(resource.into()),
                        verb: Some(verb.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            match reviews.create(&PostParams::default(), &review).await {
                Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => {}
                Ok(_) => missing.push(format!("{verb} {resource}")),
                Err(e) => return Some(format!("cannot check access: {e}")),
            }
        }
    }
    (!missing.is_empty()).then(|| format!("forbidden: {}", missing.join(", ")))
}
