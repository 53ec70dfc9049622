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
    polling::SETTLE,
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
