//! An audit of every grant in a namespace: each request's Role, RoleBinding and pod are what
//! its phase says, and nothing else is oz's.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;

use k8s_openapi::api::{
    core::v1::Pod,
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, ObjectMeta},
    runtime::watcher,
};
use oz_api::{AccessRequest, ExecAccessRequest, PodAccessRequest, RequestPhase};

use super::{
    polling::SETTLE,
    requests::{grant_name, phase, requests_of},
};

/// A request of either kind, as [`grant_problems`] judges it.
struct Judged {
    kind: &'static str,
    name: String,
    uid: String,
    grant: String,
    phase: Option<RequestPhase>,
    pod: Option<String>,
    requester: Option<String>,
}

impl Judged {
    fn of<R: AccessRequest>(kind: &'static str, request: &R) -> Self {
        let status = request.request_status();
        Self {
            kind,
            name: request.name_any(),
            uid: request.uid().unwrap(),
            grant: grant_name(request),
            phase: phase(request),
            pod: status.and_then(|s| s.pod_name.clone()),
            requester: request.requester().map(|r| r.username.clone()),
        }
    }

    /// The rules its Role must have: get and exec on the granted pod; and attach, for the
    /// private access Pod of a pod grant.
    fn wanted_rules(&self) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
        let pod = vec![self.pod.clone().unwrap_or_default()];
        let rule = |resource: &str, verbs: &[&str]| {
            (
                vec![resource.to_string()],
                verbs.iter().map(|v| v.to_string()).collect(),
                pod.clone(),
            )
        };
        let mut rules = vec![
            rule("pods", &["get"]),
            rule("pods/exec", &["create", "get"]),
        ];
        if self.kind == "PodAccessRequest" {
            rules.push(rule("pods/attach", &["create", "get"]));
        }
        rules
    }
}

/// Everything wrong with the grants in `ns`, of ExecAccessRequests and PodAccessRequests alike.
/// Each Ready request must have exactly its own Role and RoleBinding (named `<request>-<uid8>`,
/// controlled by the request, the Role granting `get` on the pod and `create`, `get` on its exec
/// subresource, and for a pod grant on its attach subresource, for `status.podName` only, the
/// RoleBinding binding only the requester); a Ready PodAccessRequest also exactly one access Pod,
/// its `status.podName`, named like its Role and controlled by it. No other request may own any
/// Role, RoleBinding or Pod, and no Role, RoleBinding or Pod oz made may be left without a Ready
/// request. Empty when all is well.
///
/// oz revokes first (the RoleBinding, then the Role, then a pod grant's Pod) and only then
/// writes the status Expired: a request may be Ready for a moment with its grant already gone.
/// Callers judge a settled namespace, so they wait for this to be empty (`eventually`) rather
/// than assert it once while oz may still be writing.
pub async fn grant_problems(admin: &Client, ns: &str) -> Vec<String> {
    let requests: Vec<Judged> = requests_of::<ExecAccessRequest>(admin, ns)
        .await
        .values()
        .map(|r| Judged::of("ExecAccessRequest", r))
        .chain(
            requests_of::<PodAccessRequest>(admin, ns)
                .await
                .values()
                .map(|r| Judged::of("PodAccessRequest", r)),
        )
        .collect();
    let roles: Vec<Role> = Api::<Role>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let bindings: Vec<RoleBinding> = Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let pods: Vec<Pod> = Api::<Pod>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let oz_made = |meta: &ObjectMeta| {
        let kinds = ["ExecAccessRequest", "PodAccessRequest"];
        meta.labels.as_ref().is_some_and(|l| {
            l.get("oz.wizardofoz.co/request-kind")
                .is_some_and(|k| kinds.contains(&k.as_str()))
        }) || meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| kinds.contains(&o.kind.as_str()))
    };
    let owned_by =
        |meta: &ObjectMeta, uid: &str| meta.owner_references.iter().flatten().any(|o| o.uid == uid);
    let mut problems = Vec::new();
    let mut ready_roles = 0;
    let mut ready_pods = 0;
    for request in &requests {
        let Judged {
            kind, name, uid, ..
        } = request;
        let name = format!("{kind} {name}");
        let expected = &request.grant;
        let my_roles: Vec<&Role> = roles
            .iter()
            .filter(|r| owned_by(&r.metadata, uid))
            .collect();
        let my_bindings: Vec<&RoleBinding> = bindings
            .iter()
            .filter(|b| owned_by(&b.metadata, uid))
            .collect();
        let my_pods: Vec<&Pod> = pods.iter().filter(|p| owned_by(&p.metadata, uid)).collect();
        if request.phase != Some(RequestPhase::Ready) {
            if !my_roles.is_empty() || !my_bindings.is_empty() || !my_pods.is_empty() {
                problems.push(format!(
                    "{name} is {:?} but owns Roles {:?}, RoleBindings {:?} and Pods {:?}",
                    request.phase,
                    my_roles.iter().map(|r| r.name_any()).collect::<Vec<_>>(),
                    my_bindings.iter().map(|b| b.name_any()).collect::<Vec<_>>(),
                    my_pods.iter().map(|p| p.name_any()).collect::<Vec<_>>()
                ));
            }
            continue;
        }
        ready_roles += 1;
        match my_roles.as_slice() {
            [role] => {
                if &role.name_any() != expected {
                    problems.push(format!(
                        "{name}'s Role is {} not {expected}",
                        role.name_any()
                    ));
                }
                let rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = role
                    .rules
                    .iter()
                    .flatten()
                    .map(|r| {
                        (
                            r.resources.clone().unwrap_or_default(),
                            r.verbs.clone(),
                            r.resource_names.clone().unwrap_or_default(),
                        )
                    })
                    .collect();
                let wanted = request.wanted_rules();
                if rules != wanted {
                    problems.push(format!("{name}'s Role grants {rules:?}, not {wanted:?}"));
                }
                if !controlled_by(&role.metadata, uid) {
                    problems.push(format!("{name}'s Role is not controlled by it alone"));
                }
            }
            other => problems.push(format!(
                "{name} is Ready with {} Roles: {:?}",
                other.len(),
                other.iter().map(|r| r.name_any()).collect::<Vec<_>>()
            )),
        }
        match my_bindings.as_slice() {
            [binding] => {
                let subjects: Vec<(String, String)> = binding
                    .subjects
                    .iter()
                    .flatten()
                    .map(|s| (s.kind.clone(), s.name.clone()))
                    .collect();
                let wanted = vec![(
                    "User".to_string(),
                    request.requester.clone().unwrap_or_default(),
                )];
                if &binding.name_any() != expected
                    || &binding.role_ref.name != expected
                    || subjects != wanted
                    || !controlled_by(&binding.metadata, uid)
                {
                    problems.push(format!(
                        "{name}'s RoleBinding {} binds {subjects:?} to {} (wanted {wanted:?} to {expected})",
                        binding.name_any(),
                        binding.role_ref.name
                    ));
                }
            }
            other => problems.push(format!(
                "{name} is Ready with {} RoleBindings: {:?}",
                other.len(),
                other.iter().map(|b| b.name_any()).collect::<Vec<_>>()
            )),
        }
        // A pod grant's private Pod; an exec grant owns none (it execs into the workload's).
        match (*kind, my_pods.as_slice()) {
            ("ExecAccessRequest", []) => {}
            ("PodAccessRequest", [pod]) => {
                ready_pods += 1;
                if &pod.name_any() != expected
                    || request.pod.as_ref() != Some(expected)
                    || !controlled_by(&pod.metadata, uid)
                {
                    problems.push(format!(
                        "{name}'s access Pod is {} (status.podName {:?}, controlled by it alone: {}), wanted {expected}",
                        pod.name_any(),
                        request.pod,
                        controlled_by(&pod.metadata, uid)
                    ));
                }
            }
            (_, other) => problems.push(format!(
                "{name} is Ready with {} Pods: {:?}",
                other.len(),
                other.iter().map(|p| p.name_any()).collect::<Vec<_>>()
            )),
        }
    }
    // Orphans: oz's objects whose owner is not a request of this namespace.
    let uids: Vec<&String> = requests.iter().map(|r| &r.uid).collect();
    for (kind, meta) in roles
        .iter()
        .map(|r| ("Role", &r.metadata))
        .chain(bindings.iter().map(|b| ("RoleBinding", &b.metadata)))
        .chain(pods.iter().map(|p| ("Pod", &p.metadata)))
    {
        if oz_made(meta) && !uids.iter().any(|uid| owned_by(meta, uid)) {
            problems.push(format!(
                "orphan {kind} {} (owners {:?})",
                meta.name.clone().unwrap_or_default(),
                meta.owner_references
            ));
        }
    }
    let oz_roles = roles.iter().filter(|r| oz_made(&r.metadata)).count();
    if oz_roles != ready_roles {
        problems.push(format!(
            "{oz_roles} oz Roles for {ready_roles} Ready requests"
        ));
    }
    let oz_pods = pods.iter().filter(|p| oz_made(&p.metadata)).count();
    if oz_pods != ready_pods {
        problems.push(format!(
            "{oz_pods} oz Pods for {ready_pods} Ready PodAccessRequests"
        ));
    }
    problems
}

/// Waits until [`grant_problems`] finds nothing (oz has settled: every revocation and the
/// status that follows it written), or panics with what it found last.
pub async fn wait_until_no_grant_problems(admin: &Client, ns: &str, why: &str) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let problems = grant_problems(admin, ns).await;
        if problems.is_empty() {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "{} problems with the grants after {SETTLE:?} ({why}):\n{}",
                problems.len(),
                problems.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    matches!(meta.owner_references.as_deref(), Some([owner]) if owner.uid == uid && owner.controller == Some(true))
}

/// Records every oz-managed Role and RoleBinding that appears in `ns` (as `Role/<name>`), from
/// a watch started (and listed) before this returns.
pub async fn record_grants(admin: &Client, ns: &str) -> Arc<Mutex<BTreeSet<String>>> {
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let config = watcher::Config::default().labels("app.kubernetes.io/managed-by=oz");
    let roles = watcher::watcher(Api::<Role>::namespaced(admin.clone(), ns), config.clone())
        .map(|e| e.map(|e| named("Role", e)));
    let bindings = watcher::watcher(Api::<RoleBinding>::namespaced(admin.clone(), ns), config)
        .map(|e| e.map(|e| named("RoleBinding", e)));
    let (listed_tx, mut listed) = tokio::sync::mpsc::channel(2);
    let recorded = seen.clone();
    let mut events = futures::stream::select(roles, bindings).boxed();
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            match event {
                Ok(None) => {
                    let _ = listed_tx.send(()).await;
                }
                Ok(Some(name)) if !name.is_empty() => {
                    recorded.lock().unwrap().insert(name);
                }
                _ => {}
            }
        }
    });
    for _ in 0..2 {
        listed.recv().await.expect("the grant watches list");
    }
    seen
}

/// What the grant recorder keeps of a watch event: the initial list's end, or `kind/name`.
fn named<K: ResourceExt>(kind: &str, event: watcher::Event<K>) -> Option<String> {
    match event {
        watcher::Event::InitDone => None,
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
            Some(format!("{kind}/{}", o.name_any()))
        }
        _ => Some(String::new()),
    }
}
