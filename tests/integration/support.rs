//! Helpers shared by the integration test modules.

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::core::v1::ConfigMap,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams,
        PostParams,
    },
};
use oz_api::{AccessRequest, ExecAccessRequest};
use oz_testenv::{ControlPlane, exec};
use serde_json::json;
use tokio::sync::OnceCell;

/// The shared control plane of this test binary.
pub fn env() -> &'static ControlPlane {
    ControlPlane::shared()
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_or_show(timeout, what, &[], check).await
}

/// [`eventually`], for something `operators` should do: a timeout's panic ends with the last
/// lines each of them logged, so that a failure seen once (in CI, say) shows what oz was doing.
pub async fn eventually_or_show<T, F, Fut>(
    timeout: Duration,
    what: &str,
    operators: &[&Operator],
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            let logs: String = operators.iter().map(|o| o.log_tail(60)).collect();
            panic!("timed out after {timeout:?} waiting for {what}{logs}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The cores this binary's tests share. Bursts of requests load both cores for seconds; a test
/// that asserts a strict time bound (revocation within a second of expiry) must not measure
/// under one, or it measures this binary's load instead of oz.
static CORES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Held while a strict time bound is measured: measurements run alongside each other, never
/// alongside a burst.
pub async fn strict_timing() -> tokio::sync::RwLockReadGuard<'static, ()> {
    CORES.read().await
}

/// Held while a burst loads the machine: no strict time bound is measured meanwhile.
pub async fn heavy_load() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    CORES.write().await
}

/// Waits until `name` is gone from `api`, or panics after `timeout` with `what`.
pub async fn wait_until_gone<K>(api: &Api<K>, name: &str, timeout: Duration, what: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(timeout, what, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

static CRDS: OnceCell<()> = OnceCell::const_new();

/// Installs oz's CRDs (once per test binary) and waits until the apiserver serves them.
pub async fn install_crds() {
    CRDS.get_or_init(|| async {
        let admin = env().admin().await.unwrap();
        install_crds_into(&admin).await;
        wait_until_collected_by_gc(&admin).await;
    })
    .await;
}

/// Installs oz's CRDs into the control plane `admin` is a client of (a test's own, or the
/// shared one through [`install_crds`]) and waits until each is established.
pub async fn install_crds_into(admin: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in oz_api::all_crds() {
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("oz-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    }
    for crd in oz_api::all_crds() {
        let name = crd.name_any();
        eventually(
            Duration::from_secs(30),
            &format!("CRD {name} to be established"),
            || {
                let (crds, name) = (crds.clone(), name.clone());
                async move {
                    let crd = crds.get(&name).await.ok()?;
                    let conditions = crd.status?.conditions?;
                    conditions
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(())
                }
            },
        )
        .await;
    }
}

/// Waits until the garbage collector tracks the request kinds: it learns of new CRDs only at
/// its next discovery sync (every 5 s in the test control plane), and until then it deletes an
/// orphaned template without orphaning its requests, then collects them later as dependents of
/// an owner that is gone. A canary request owned by a ConfigMap, collected once the ConfigMap is
/// deleted, shows it tracks each kind.
async fn wait_until_collected_by_gc(admin: &Client) {
    let ns = env().namespace("gc-canary").await.unwrap();
    let owners: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let owner = owners
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let owner_ref = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid().unwrap(),
    }]);
    let mut canaries = Vec::new();
    for kind in ["ExecAccessRequest", "PodAccessRequest"] {
        let yaml = json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": kind,
            "metadata": {"name": "canary", "ownerReferences": owner_ref},
            "spec": {"templateName": "none"},
        })
        .to_string();
        let (object, resource) = parse_manifest(&yaml);
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &resource);
        api.create(&PostParams::default(), &object).await.unwrap();
        canaries.push((kind, api));
    }
    owners
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    for (kind, api) in canaries {
        eventually(
            Duration::from_secs(60),
            &format!("the garbage collector to track {kind}s"),
            || {
                let api = api.clone();
                async move { api.get_opt("canary").await.unwrap().is_none().then_some(()) }
            },
        )
        .await;
    }
}

/// Parses one YAML manifest into a typeless object and the API resource it belongs to.
pub fn parse_manifest(yaml: &str) -> (DynamicObject, ApiResource) {
    let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
    let object: DynamicObject = serde_json::from_value(value).unwrap();
    let types = object
        .types
        .clone()
        .expect("manifests have apiVersion and kind");
    let (group, version) = match types.api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), types.api_version.clone()),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, &types.kind));
    (object, resource)
}

/// Creates a YAML manifest in `namespace` (whatever namespace it names) as `client`, returning
/// the stored object or the apiserver's refusal.
pub async fn create_manifest(
    client: &Client,
    namespace: &str,
    yaml: &str,
) -> Result<DynamicObject, kube::Error> {
    let (mut object, resource) = parse_manifest(yaml);
    object.metadata.namespace = Some(namespace.into());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    api.create(&PostParams::default(), &object).await
}

/// An oz-manager process watching one namespace, as admin, logging to
/// `target/tmp/oz-manager-<namespace>-<n>.log`. It is killed when dropped.
pub struct Operator {
    child: std::process::Child,
    binary: std::path::PathBuf,
    namespace: String,
    kubeconfig: std::path::PathBuf,
    args: Vec<String>,
    /// Where this run logs.
    pub log: std::path::PathBuf,
}

static OPERATOR_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Operator {
    /// Starts oz-manager for `namespace` with extra flags, as admin.
    pub fn start(namespace: &str, args: &[&str]) -> Operator {
        Self::start_with_kubeconfig(namespace, env().admin_kubeconfig(), args)
    }

    /// Starts oz-manager for `namespace` with extra flags, as whoever `kubeconfig` names.
    pub fn start_with_kubeconfig(
        namespace: &str,
        kubeconfig: &std::path::Path,
        args: &[&str],
    ) -> Operator {
        Self::start_binary(
            std::path::Path::new(env!("CARGO_BIN_EXE_oz-manager")),
            namespace,
            kubeconfig,
            args,
        )
    }

    /// Starts the oz-manager `binary` (another build than this run's: the image's) for
    /// `namespace` with extra flags, as whoever `kubeconfig` names.
    pub fn start_binary(
        binary: &std::path::Path,
        namespace: &str,
        kubeconfig: &std::path::Path,
        args: &[&str],
    ) -> Operator {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        Self::spawn(
            binary.to_path_buf(),
            namespace,
            kubeconfig.to_path_buf(),
            args,
        )
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The operator's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn spawn(
        binary: std::path::PathBuf,
        namespace: &str,
        kubeconfig: std::path::PathBuf,
        args: Vec<String>,
    ) -> Operator {
        let run = OPERATOR_RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("oz-manager-{namespace}-{run}.log"));
        let file = std::fs::File::create(&log).unwrap();
        // Webhooks are only run where a test asks for them (they register cluster-wide objects).
        let parts = (!args.iter().any(|a| a.starts_with("--controllers")))
            .then_some("--controllers=exec,pod");
        let child = std::process::Command::new(&binary)
            .arg(format!("--watch-namespaces={namespace}"))
            .args(parts)
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .env("OZ_LOG_LEVEL", "info,oz=debug")
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Operator {
            child,
            binary,
            namespace: namespace.into(),
            kubeconfig,
            args,
            log,
        }
    }

    /// Kills the process with SIGKILL: no cleanup code runs.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a new process with the same flags (after [`Operator::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        let next = Self::spawn(
            self.binary.clone(),
            &self.namespace,
            self.kubeconfig.clone(),
            self.args.clone(),
        );
        *self = next;
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `user` may `verb` the `resource` (with `subresource`) named `name` in `namespace`,
/// asked by that user through their own credentials.
pub async fn can(
    user: &str,
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: &str,
    name: &str,
) -> bool {
    let client = env().client_as(user).await.unwrap();
    client_can(&client, verb, resource, subresource, namespace, name).await
}

/// [`can`], asked with `client`'s credentials.
pub async fn client_can(
    client: &Client,
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: &str,
    name: &str,
) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                subresource: subresource.map(Into::into),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

/// Whether `user` may exec into `pod`: both verbs a 1.35 websocket exec needs.
pub async fn can_exec(user: &str, namespace: &str, pod: &str) -> bool {
    may_exec(&env().client_as(user).await.unwrap(), namespace, pod).await
}

/// [`can_exec`], asked with `client`'s credentials.
pub async fn may_exec(client: &Client, namespace: &str, pod: &str) -> bool {
    client_can(client, "create", "pods", Some("exec"), namespace, pod).await
        && client_can(client, "get", "pods", Some("exec"), namespace, pod).await
}

/// Runs `kubectl exec` into `pod` as `user`, as that user would, through the apiserver to the
/// pod's kwok node, which runs `command` as a local process.
pub async fn exec(user: &str, ns: &str, pod: &str, command: &[&str]) -> exec::Output {
    let mut kubectl = env().kubectl(Some(user)).unwrap();
    kubectl.args(["exec", "-n", ns, pod, "--"]).args(command);
    exec::run(kubectl, exec::RUN_TIMEOUT).await.unwrap()
}

/// An RBAC rule: `verbs` on `resources` of the API `groups` (`""` is the core group).
pub fn rule(
    groups: &[&str],
    resources: &[&str],
    verbs: &[&str],
) -> k8s_openapi::api::rbac::v1::PolicyRule {
    let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

/// An RBAC subject of `kind` `User` or `Group`.
pub fn subject(kind: &str, name: &str) -> k8s_openapi::api::rbac::v1::Subject {
    k8s_openapi::api::rbac::v1::Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
        namespace: None,
    }
}

/// The RoleBinding `name` of the Role `name` to `subjects`.
pub fn role_binding(
    name: &str,
    subjects: Vec<k8s_openapi::api::rbac::v1::Subject>,
) -> k8s_openapi::api::rbac::v1::RoleBinding {
    k8s_openapi::api::rbac::v1::RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        role_ref: k8s_openapi::api::rbac::v1::RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(subjects),
    }
}

/// Creates, as admin, a Role `name` with `rules` in `namespace` and binds it to `subjects`.
pub async fn grant(
    admin: &Client,
    namespace: &str,
    name: &str,
    rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
    subjects: Vec<k8s_openapi::api::rbac::v1::Subject>,
) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let role = Role {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        rules: Some(rules),
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role_binding(name, subjects))
        .await
        .unwrap();
}

impl Operator {
    /// Asks the process to stop with SIGTERM, as Kubernetes does: its shutdown code runs.
    pub fn terminate(&mut self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM {}", self.pid());
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        !self.is_running()
    }

    /// What the process has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines the process logged, under a heading naming it.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        let tail = all[all.len().saturating_sub(lines)..].join("\n");
        format!(
            "\n--- the last {} lines of oz-manager {} ({}):\n{tail}",
            lines.min(all.len()),
            self.pid(),
            self.log.display()
        )
    }
}

/// The value of the sample `sample` (its name and labels exactly as exported, e.g.
/// `oz_expiry_timers{kind="ExecAccessRequest"}`) in a Prometheus text exposition.
pub fn metric_value(exposition: &str, sample: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(sample)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// Whether oz's webhooks answer for `user` right now: a dry-run request naming a missing
/// template is refused by oz, and one for `template` with a forged requester comes back with
/// `user` stamped in.
pub async fn admits(api: &Api<ExecAccessRequest>, user: &str, template: &str) -> bool {
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let probe = |template: &str| -> ExecAccessRequest {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessRequest",
            "metadata": {"name": "probe"},
            "spec": {"templateName": template, "requester": {"username": "mallory", "groups": ["system:masters"]}},
        }))
        .unwrap()
    };
    let refused = matches!(
        api.create(&dry_run, &probe("no-such-template")).await,
        Err(kube::Error::Api(ref s)) if s.message.contains("does not exist")
    );
    let stamped = api
        .create(&dry_run, &probe(template))
        .await
        .ok()
        .and_then(|r| r.spec.requester)
        .is_some_and(|r| r.username == user);
    refused && stamped
}

/// ExecAccessRequest `name` through `template` as a user writes it: no requester (oz's
/// mutating webhook records who created it) and the template's default duration.
pub fn written_request(name: &str, template: &str) -> ExecAccessRequest {
    serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": name},
        "spec": {"templateName": template},
    }))
    .unwrap()
}

/// Waits up to `timeout` until oz's webhooks answer for `user` ([`admits`]), through `api`
/// (that user's client). `log` names oz-manager's log for the timeout message.
pub async fn wait_until_admitting(
    api: &Api<ExecAccessRequest>,
    user: &str,
    template: &str,
    timeout: Duration,
    log: &std::path::Path,
) {
    eventually(
        timeout,
        &format!("oz's webhooks to admit {user} (log: {})", log.display()),
        || async { admits(api, user, template).await.then_some(()) },
    )
    .await;
}

/// Creates `request` through `api` (a user's client) once oz's webhooks answer
/// ([`wait_until_admitting`]), and returns it, with `user` stamped as its requester. A request
/// created before oz registered its webhooks would carry no requester, and a real create retried
/// after that would only conflict with it.
pub async fn create_once_admitted(
    api: &Api<ExecAccessRequest>,
    request: &ExecAccessRequest,
    user: &str,
    log: &std::path::Path,
) -> ExecAccessRequest {
    let template = &request.spec.template_name;
    wait_until_admitting(api, user, template, Duration::from_secs(60), log).await;
    let created = api.create(&PostParams::default(), request).await.unwrap();
    assert!(
        created.requester().is_some_and(|r| r.username == user),
        "the webhook recorded {user}: {created:?}"
    );
    created
}

/// A fresh audit file path for one test, `PREFIX-PID-NANOS.jsonl` in the tests' temporary
/// directory (kept after the run, for a look at what oz wrote).
pub fn audit_log_path(prefix: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{prefix}-{}-{nanos}.jsonl", std::process::id()))
}

/// A plain HTTP/1.0 GET of `url` (`http://HOST:PORT/PATH`: oz-manager's metrics and health
/// endpoints on loopback): the whole response, status line and headers included; empty if
/// nothing answers.
pub async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.trim_start_matches("http://");
    let (host, path) = address.split_once('/').unwrap();
    let Ok(mut stream) = tokio::net::TcpStream::connect(host).await else {
        return String::new();
    };
    if stream
        .write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .is_err()
    {
        return String::new();
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response
}

/// Runs the bundled kubectl as admin, blocking, and ignores how it ends: for `Drop` impls,
/// which must work without a runtime, even while a failed test unwinds.
pub fn kubectl_quietly(args: &[&str]) {
    let _ = env()
        .kubectl(None)
        .unwrap()
        .args(args)
        .stdin(std::process::Stdio::null())
        .output();
}

/// Deletes the webhook configurations oz-manager registered with
/// `--webhook-configuration-name=NAME` (blocking, like [`kubectl_quietly`]).
pub fn delete_webhook_configurations(name: &str) {
    kubectl_quietly(&[
        "delete",
        "--ignore-not-found",
        &format!("mutatingwebhookconfiguration/{name}-requests"),
        &format!("validatingwebhookconfiguration/{name}-requests"),
        &format!("validatingwebhookconfiguration/{name}-audit"),
    ]);
}

/// What hack/demo/workload.yaml grants every signed-in user in `ns`: ask for access, and read
/// the templates to ask through.
pub async fn let_everyone_request(admin: &Client, ns: &str) {
    grant(
        admin,
        ns,
        "oz-requesters",
        vec![
            rule(
                &[oz_api::GROUP],
                &["execaccessrequests", "podaccessrequests"],
                &["create", "get", "list", "watch", "patch", "delete"],
            ),
            rule(
                &[oz_api::GROUP],
                &["execaccesstemplates", "podaccesstemplates"],
                &["get", "list", "watch"],
            ),
        ],
        vec![subject("Group", "system:authenticated")],
    )
    .await;
}

/// The reasons of the Events about object `name` in `ns`, once one with `reason` is among
/// them (waiting up to `timeout`).
pub async fn event_reasons_once(
    admin: &Client,
    ns: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), ns);
    let selector = format!("regarding.name={name}");
    eventually(timeout, &format!("a {reason} event about {name}"), || {
        let (events, selector) = (events.clone(), selector.clone());
        async move {
            let list = events
                .list(&kube::api::ListParams::default().fields(&selector))
                .await
                .ok()?;
            let reasons: Vec<String> = list.items.into_iter().filter_map(|e| e.reason).collect();
            reasons.iter().any(|r| r == reason).then_some(reasons)
        }
    })
    .await
}
