//! oz-manager as a process: started for one namespace (with its webhooks, on a free port), its
//! log, its metrics and health endpoints, and the webhook configurations it leaves behind.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::{Api, api::DeleteParams};
use oz_api::ExecAccessRequest;

use super::{
    admission::wait_until_admitting,
    cluster::{env, kubectl_quietly},
    polling::{SETTLE, eventually_then_show},
};

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
    ports: Ports,
}

/// The loopback ports an [`OperatorBuilder`] chose for the endpoints it was asked for.
#[derive(Clone, Copy, Default)]
struct Ports {
    metrics: Option<u16>,
    health: Option<u16>,
    webhooks: Option<u16>,
}

static OPERATOR_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How a test starts oz-manager for one namespace: which binary, as whom, with which flags,
/// and which endpoints listen on a free loopback port of their own (chosen here, and read
/// back from the [`Operator`]).
pub struct OperatorBuilder {
    namespace: String,
    binary: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
    metrics: bool,
    health: bool,
    /// The name of the webhook configurations, when its webhooks run.
    webhooks: Option<String>,
    /// Whether it serves every namespace instead of its own alone.
    cluster_wide: bool,
    args: Vec<String>,
}

impl OperatorBuilder {
    /// Every namespace, not its own alone (`--watch-namespaces` left out): a fleet hub, which
    /// is never scoped.
    pub fn cluster_wide(mut self) -> Self {
        self.cluster_wide = true;
        self
    }

    /// As whoever `kubeconfig` names (admin by default).
    pub fn kubeconfig(mut self, kubeconfig: &std::path::Path) -> Self {
        self.kubeconfig = kubeconfig.to_path_buf();
        self
    }

    /// The oz-manager `binary` (another build than this run's: the image's).
    pub fn binary(mut self, binary: &std::path::Path) -> Self {
        self.binary = binary.to_path_buf();
        self
    }

    /// Extra flags, after those the builder adds.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Its metrics endpoint on a free port ([`Operator::metrics_port`]).
    pub fn metrics(mut self) -> Self {
        self.metrics = true;
        self
    }

    /// Its health endpoint on a free port ([`Operator::health_port`]).
    pub fn health(mut self) -> Self {
        self.health = true;
        self
    }

    /// Its webhooks, served on a free port ([`Operator::webhook_port`]) that the apiserver
    /// calls at `https://127.0.0.1:PORT`, registered as `configuration_name`. Its Secrets and
    /// Lease live in the namespace it watches. It runs the exec and pod controllers beside
    /// them, unless the flags say which `--controllers`.
    pub fn webhooks(mut self, configuration_name: &str) -> Self {
        self.webhooks = Some(configuration_name.into());
        self
    }

    /// Starts the process.
    pub fn start(self) -> Operator {
        let mut ports = Ports::default();
        let mut args = Vec::new();
        if !self.cluster_wide {
            args.push(format!("--watch-namespaces={}", self.namespace));
        }
        if let Some(name) = &self.webhooks {
            let port = free_port();
            ports.webhooks = Some(port);
            if !self.args.iter().any(|a| a.starts_with("--controllers")) {
                args.push("--controllers=exec,pod,webhooks".to_string());
            }
            args.extend([
                format!("--namespace={}", self.namespace),
                format!("--webhook-url-base=https://127.0.0.1:{port}"),
                format!("--webhook-port={port}"),
                format!("--webhook-configuration-name={name}"),
            ]);
        }
        if self.metrics {
            let port = free_port();
            ports.metrics = Some(port);
            args.push(format!("--metrics-bind-address=127.0.0.1:{port}"));
        }
        if self.health {
            let port = free_port();
            ports.health = Some(port);
            args.push(format!("--health-probe-bind-address=127.0.0.1:{port}"));
        }
        args.extend(self.args);
        let mut operator = Operator::spawn(self.binary, &self.namespace, self.kubeconfig, args);
        operator.ports = ports;
        operator
    }
}

impl Operator {
    /// How to start oz-manager for `namespace`: this run's build, as admin, no extra flags.
    pub fn builder(namespace: &str) -> OperatorBuilder {
        OperatorBuilder {
            namespace: namespace.into(),
            binary: std::path::Path::new(env!("CARGO_BIN_EXE_oz-manager")).to_path_buf(),
            kubeconfig: env().admin_kubeconfig().to_path_buf(),
            metrics: false,
            health: false,
            webhooks: None,
            cluster_wide: false,
            args: Vec::new(),
        }
    }

    /// Starts oz-manager for `namespace` with extra flags, as admin.
    pub fn start(namespace: &str, args: &[&str]) -> Operator {
        Self::builder(namespace).args(args).start()
    }

    /// Starts oz-manager for `namespace` with extra flags, as whoever `kubeconfig` names.
    pub fn start_with_kubeconfig(
        namespace: &str,
        kubeconfig: &std::path::Path,
        args: &[&str],
    ) -> Operator {
        Self::builder(namespace)
            .kubeconfig(kubeconfig)
            .args(args)
            .start()
    }

    /// The port of its metrics endpoint ([`OperatorBuilder::metrics`]).
    pub fn metrics_port(&self) -> u16 {
        self.ports
            .metrics
            .expect("started with OperatorBuilder::metrics")
    }

    /// The port of its health endpoint ([`OperatorBuilder::health`]).
    pub fn health_port(&self) -> u16 {
        self.ports
            .health
            .expect("started with OperatorBuilder::health")
    }

    /// The port its webhooks listen on ([`OperatorBuilder::webhooks`]).
    pub fn webhook_port(&self) -> u16 {
        self.ports
            .webhooks
            .expect("started with OperatorBuilder::webhooks")
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
            ports: Ports::default(),
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
        let mut next = Self::spawn(
            self.binary.clone(),
            &self.namespace,
            self.kubeconfig.clone(),
            self.args.clone(),
        );
        next.ports = self.ports;
        *self = next;
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill();
    }
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
        Self::start_from(Operator::builder(ns).args(extra))
    }

    /// Starts it as `operator` says, with its webhooks registered under the namespace's name.
    pub fn start_from(operator: OperatorBuilder) -> Self {
        let ns = operator.namespace.clone();
        let operator = operator.webhooks(&ns).start();
        Self {
            port: operator.webhook_port(),
            operator,
            ns,
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

/// [`eventually`], for something `operators` should do: a timeout's panic ends with the last
/// lines each of them logged, so that a failure seen once (in CI, say) shows what oz was doing.
pub async fn eventually_or_show<T, F, Fut>(
    timeout: std::time::Duration,
    what: &str,
    operators: &[&Operator],
    check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let logs = || operators.iter().map(|o| o.log_tail(60)).collect();
    eventually_then_show(timeout, what, logs, check).await
}
