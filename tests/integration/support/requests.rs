//! Templates and requests as YAML, requests created in bulk, their phases and their grants'
//! names.

use std::{collections::BTreeMap, time::Duration};

use futures::{StreamExt, stream};
use kube::{Api, Client, ResourceExt, api::ListParams};
use oz_api::{AccessRequest, ExecAccessRequest, OzResource, RequestPhase};

use super::{manifests::create_manifest, polling::SETTLE};

/// The label oz puts on everything it creates.
pub const MANAGED_BY_OZ: &str = "app.kubernetes.io/managed-by=oz";

/// An ExecAccessTemplate `name` for `deployment`, open to `devs`, default 1h, max 2h.
pub fn exec_template(name: &str, deployment: &str) -> String {
    template("ExecAccessTemplate", name, deployment)
}

/// A template of `kind` named `name` for `deployment`, open to `devs`, default 1h, max 2h.
fn template(kind: &str, name: &str, deployment: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n  \
         accessConfig: {{allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}}\n  \
         controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {deployment}}}\n"
    )
}

/// An ExecAccessRequest as `user` gets it through oz's mutating webhook (for creation by admin,
/// with no webhook running). alice and carol are in devs; anyone else is in qa.
pub fn exec_request(name: &str, template: &str, user: &str, duration: &str) -> String {
    let groups = match user {
        "alice" | "carol" => "[devs, system:authenticated]",
        _ => "[qa, system:authenticated]",
    };
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\n\
         spec: {{templateName: {template}, duration: \"{duration}\", requester: {{username: {user}, groups: {groups}}}}}\n"
    )
}

/// A PodAccessTemplate `name` copying `deployment`'s pod, open to `devs`, default 1h, max 2h.
pub fn pod_template(name: &str, deployment: &str) -> String {
    template("PodAccessTemplate", name, deployment)
}

/// A PodAccessRequest as `user` gets it through oz's mutating webhook (see [`exec_request`]).
pub fn pod_request(name: &str, template: &str, user: &str, duration: &str) -> String {
    exec_request(name, template, user, duration)
        .replace("kind: ExecAccessRequest\n", "kind: PodAccessRequest\n")
}

/// Creates every `(name, user, duration)` ExecAccessRequest in `ns` as admin, `parallel` at a
/// time.
pub async fn create_requests(
    admin: &Client,
    ns: &str,
    template: &str,
    requests: Vec<(String, &'static str, String)>,
    parallel: usize,
) {
    create_all(admin, ns, template, requests, parallel, exec_request).await;
}

/// [`create_requests`] for PodAccessRequests.
pub async fn create_pod_requests(
    admin: &Client,
    ns: &str,
    template: &str,
    requests: Vec<(String, &'static str, String)>,
    parallel: usize,
) {
    create_all(admin, ns, template, requests, parallel, pod_request).await;
}

async fn create_all(
    admin: &Client,
    ns: &str,
    template: &str,
    requests: Vec<(String, &'static str, String)>,
    parallel: usize,
    manifest: fn(&str, &str, &str, &str) -> String,
) {
    stream::iter(requests)
        .for_each_concurrent(parallel, |(name, user, duration)| {
            let yaml = manifest(&name, template, user, &duration);
            async move {
                // A create may race an apiserver hiccup; the name makes a retry safe.
                for attempt in 0..5 {
                    match create_manifest(admin, ns, &yaml).await {
                        Ok(_) => return,
                        Err(kube::Error::Api(s)) if s.code == 409 => return,
                        Err(e) if attempt == 4 => panic!("creating {name}: {e}"),
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
            }
        })
        .await;
}

/// Every ExecAccessRequest in `ns`, by name.
pub async fn exec_requests(admin: &Client, ns: &str) -> BTreeMap<String, ExecAccessRequest> {
    requests_of(admin, ns).await
}

/// Every request of kind `R` in `ns`, by name.
pub async fn requests_of<R: OzResource>(admin: &Client, ns: &str) -> BTreeMap<String, R> {
    let api: Api<R> = Api::namespaced(admin.clone(), ns);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| (r.name_any(), r))
        .collect()
}

/// A request's phase, if it has a status yet.
pub fn phase<R: AccessRequest>(request: &R) -> Option<RequestPhase> {
    request.request_status().and_then(|s| s.phase)
}

/// Waits until all `count` ExecAccessRequests of `ns` are in one of `phases`, and returns them.
pub async fn wait_until_all_in(
    admin: &Client,
    ns: &str,
    count: usize,
    phases: &[RequestPhase],
    why: &str,
) -> BTreeMap<String, ExecAccessRequest> {
    wait_until_all_of(admin, ns, count, phases, why).await
}

/// [`wait_until_all_in`] for requests of kind `R`.
pub async fn wait_until_all_of<R: AccessRequest>(
    admin: &Client,
    ns: &str,
    count: usize,
    phases: &[RequestPhase],
    why: &str,
) -> BTreeMap<String, R> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let all = requests_of::<R>(admin, ns).await;
        if all.len() == count
            && all
                .values()
                .all(|r| phase(r).is_some_and(|p| phases.contains(&p)))
        {
            return all;
        }
        if tokio::time::Instant::now() > deadline {
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            for request in all.values() {
                *seen.entry(format!("{:?}", phase(request))).or_default() += 1;
            }
            panic!(
                "timed out after {SETTLE:?} waiting for {why}: {count} wanted in {phases:?}, found {seen:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `<request>-<first 8 characters of its uid>` (the request's name cut to fit 253 characters),
/// the name of a grant's Role and RoleBinding (and of a pod grant's access Pod).
pub fn grant_name<R: AccessRequest>(request: &R) -> String {
    oz::builders::resource_name(&request.name_any(), &request.uid().unwrap())
}
