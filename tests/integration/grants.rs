//! What the reliability and security tests (`faults`, `hostile`, `security`) share: requests in
//! bulk (exec and pod access), an audit of every grant in a namespace, a recorder of when grants
//! disappear, and oz-manager running its webhooks on a local URL, as `install.rs` runs it.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{StreamExt, stream};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::Pod,
        rbac::v1::{Role, RoleBinding},
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, ObjectMeta, PartialObjectMeta},
};
use oz_api::{AccessRequest, ExecAccessRequest, OzResource, PodAccessRequest, RequestPhase};

use crate::support::{Operator, create_manifest, env, grant, rule, subject, wait_until_admitting};

/// How long "eventually" waits in these tests: generous, since a loaded 2-core machine may be
/// slow to settle. The properties that matter (revocation lag, no extra access) are asserted
/// strictly and separately.
pub const SETTLE: Duration = Duration::from_secs(90);

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

/// Records, from a watch, when each of oz's RoleBindings in a namespace disappears: the moment
/// a grant is revoked (oz deletes the binding first). A deletion is stamped when its event
/// arrives, so never before it happened. When the watch breaks (the apiserver is down) it
/// resumes from where it was, and the deletions meanwhile arrive then; if it must list afresh,
/// a binding missing from the new list is stamped when the list is complete. A missed moment is
/// only ever recorded late, never early. (A watch rather than polling: a slow LIST under load
/// stamped every revocation of its interval at its end, and 20 LISTs a second loaded the
/// apiserver being measured.)
pub struct RevocationClock {
    gone: Arc<Mutex<BTreeMap<String, Timestamp>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RevocationClock {
    /// Starts watching `names` in `ns`, which must exist now. Returns once the watch has
    /// listed them, so that nothing after the return is missed.
    pub async fn start(admin: &Client, ns: &str, names: Vec<String>) -> Self {
        use kube::runtime::{WatchStreamExt, watcher};
        let gone = Arc::new(Mutex::new(BTreeMap::new()));
        let api: Api<PartialObjectMeta<RoleBinding>> = Api::namespaced(admin.clone(), ns);
        let record = gone.clone();
        let (listed, first_list) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut events = std::pin::pin!(
                watcher::watcher(api, watcher::Config::default().labels(MANAGED_BY_OZ))
                    .backoff(EveryFiftyMillis)
            );
            // The names present in a list in progress.
            let mut relisted: Vec<String> = Vec::new();
            while let Some(event) = events.next().await {
                let now = Timestamp::now();
                let Ok(event) = event else { continue };
                let mut gone = record.lock().unwrap();
                match event {
                    watcher::Event::Delete(binding) => {
                        let name = binding.name_any();
                        if names.contains(&name) {
                            gone.entry(name).or_insert(now);
                        }
                    }
                    watcher::Event::Init => relisted.clear(),
                    watcher::Event::InitApply(binding) => relisted.push(binding.name_any()),
                    watcher::Event::InitDone => {
                        for name in names.iter().filter(|n| !relisted.contains(n)) {
                            gone.entry(name.clone()).or_insert(now);
                        }
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    watcher::Event::Apply(_) => {}
                }
            }
        });
        let _ = tokio::time::timeout(SETTLE, first_list).await;
        Self { gone, task }
    }

    /// When each binding was first seen gone.
    pub fn gone(&self) -> BTreeMap<String, Timestamp> {
        self.gone.lock().unwrap().clone()
    }
}

/// Retry a broken watch every 50 ms (kube's default backs off up to 30 s): a revocation right
/// after the apiserver's return must be seen then, not when the watch happens to retry.
struct EveryFiftyMillis;

impl Iterator for EveryFiftyMillis {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
}

impl kube::runtime::utils::Backoff for EveryFiftyMillis {
    fn reset(&mut self) {}
}

impl Drop for RevocationClock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `groups` may create, read, update and delete requests in `ns` (not their status), and read
/// templates, as a cluster admin would let people ask for access. Nothing else: exec comes only
/// from oz.
pub async fn let_groups_request(admin: &Client, ns: &str, groups: &[&str]) {
    let rules = vec![
        rule(
            &[oz_api::GROUP],
            &["execaccessrequests", "podaccessrequests"],
            &[
                "create", "get", "list", "watch", "update", "patch", "delete",
            ],
        ),
        rule(
            &[oz_api::GROUP],
            &["execaccesstemplates", "podaccesstemplates"],
            &["get", "list"],
        ),
    ];
    let subjects = groups.iter().map(|g| subject("Group", g)).collect();
    grant(admin, ns, "request-access", rules, subjects).await;
}

/// A free port on 127.0.0.1 (free now; nothing keeps it so).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// oz-manager watching one namespace with its controllers and its webhooks, which the apiserver
/// calls at `https://127.0.0.1:PORT`. Its Secrets and Lease live in that same namespace, and its
/// webhook configurations are named after it and scoped to it, so tests never see each other's.
pub struct WebhookOperator {
    pub operator: Operator,
    pub ns: String,
    pub port: u16,
}

impl WebhookOperator {
    /// Starts it as admin, with `extra` flags (its controllers and webhooks, unless they
    /// say which `--controllers`).
    pub fn start(ns: &str, extra: &[&str]) -> Self {
        let port = free_port();
        let controllers = (!extra.iter().any(|a| a.starts_with("--controllers")))
            .then(|| "--controllers=exec,pod,webhooks".to_string());
        let args: Vec<String> = controllers
            .into_iter()
            .chain([
                format!("--namespace={ns}"),
                format!("--webhook-url-base=https://127.0.0.1:{port}"),
                format!("--webhook-port={port}"),
                format!("--webhook-configuration-name={ns}"),
            ])
            .chain(extra.iter().map(|a| a.to_string()))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self {
            operator: Operator::start(ns, &args),
            ns: ns.into(),
            port,
        }
    }

    /// The names of the Secrets holding the CA and the serving certificate.
    pub fn secrets(&self) -> [&'static str; 2] {
        ["oz-webhook-ca", "oz-webhook-tls"]
    }

    /// Waits until the apiserver calls oz's webhooks for `user`: a dry-run create naming a
    /// missing template is refused by oz, and one with a forged requester comes back stamped.
    pub async fn wait_until_admitting(&self, user: &str, template: &str) {
        let api =
            Api::<ExecAccessRequest>::namespaced(env().client_as(user).await.unwrap(), &self.ns);
        wait_until_admitting(&api, user, template, SETTLE, &self.operator.log).await;
    }

    /// Deletes the cluster-scoped webhook configurations it registered.
    pub async fn remove_configurations(&self) {
        let admin = env().admin().await.unwrap();
        let _ = Api::<MutatingWebhookConfiguration>::all(admin.clone())
            .delete(&format!("{}-requests", self.ns), &DeleteParams::default())
            .await;
        for name in [
            format!("{}-requests", self.ns),
            format!("{}-audit", self.ns),
        ] {
            let _ = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
                .delete(&name, &DeleteParams::default())
                .await;
        }
    }
}
