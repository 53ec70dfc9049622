use std::{
    collections::BTreeMap,
    io::Read,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, Config,
    api::{ObjectMeta, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde::Deserialize;

use crate::{Error, Result, USERS};

/// What `kube-testenv run` writes to `ready.json` once the apiserver answers.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyInfo {
    /// The apiserver's URL, `https://127.0.0.1:PORT`.
    pub server: String,
    /// The admin kubeconfig (user `admin`, group `system:masters`).
    pub admin_kubeconfig: PathBuf,
    /// Each test user's kubeconfig, by user name.
    pub users: BTreeMap<String, PathBuf>,
    /// The in-process controllers that run (`gc`, `namespace`, `deployment`, ...).
    pub controllers: Vec<String>,
    /// The simulated (kwok) nodes pods run on.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Seconds from process start to ready.
    pub startup_seconds: f64,
    /// With [`ControlPlaneOptions::webhook_client_cert`]: the CA of the client certificate the
    /// apiserver presents to admission webhooks.
    #[serde(default)]
    pub webhook_client_ca_file: Option<PathBuf>,
    /// That client certificate (CN `kube-apiserver-webhook-client`).
    #[serde(default)]
    pub webhook_client_cert_file: Option<PathBuf>,
    /// Its key.
    #[serde(default)]
    pub webhook_client_key_file: Option<PathBuf>,
    /// The aggregation layer's front proxy: the CA that signs the client certificate the
    /// apiserver presents to aggregated API servers (`requestheader-client-ca-file`).
    pub front_proxy_ca_file: PathBuf,
    /// That client certificate (CN `front-proxy-client`, the one allowed name).
    pub front_proxy_client_cert_file: PathBuf,
    /// Its key.
    pub front_proxy_client_key_file: PathBuf,
}

/// How to start a control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneOptions {
    users: Vec<(String, Vec<String>)>,
    controllers: Vec<String>,
    nodes: usize,
    restartable: bool,
    webhook_client_cert: bool,
    apiserver_args: Vec<String>,
}

/// How many simulated nodes the shared control plane has: two, so a DaemonSet has two pods and
/// a workload's pods spread over nodes.
pub const DEFAULT_NODES: usize = 2;

impl Default for ControlPlaneOptions {
    /// The shared setup: [`USERS`], every controller kube-testenv can run (garbage collector,
    /// namespace, the workload controllers, ClusterRole aggregation and a pod binder), and
    /// [`DEFAULT_NODES`] kwok nodes on which pods run and `kubectl exec` works, and the
    /// apiserver presenting a client certificate to admission webhooks
    /// ([`ControlPlaneOptions::webhook_client_cert`]).
    fn default() -> Self {
        Self {
            users: USERS
                .iter()
                .map(|(name, groups)| {
                    (
                        name.to_string(),
                        groups.iter().map(|g| g.to_string()).collect(),
                    )
                })
                .collect(),
            controllers: vec!["all".into()],
            nodes: DEFAULT_NODES,
            restartable: false,
            webhook_client_cert: true,
            apiserver_args: vec![],
        }
    }
}

impl ControlPlaneOptions {
    /// No users, no controllers, no nodes and no webhook client certificate.
    pub fn empty() -> Self {
        Self {
            users: vec![],
            controllers: vec![],
            nodes: 0,
            restartable: false,
            webhook_client_cert: false,
            apiserver_args: vec![],
        }
    }

    /// Whether the apiserver presents a client certificate (CN `kube-apiserver-webhook-client`,
    /// from a CA of its own) to every admission webhook, as a cluster configured through an
    /// AdmissionConfiguration does ([`ControlPlane::webhook_client_ca`]). A webhook that does
    /// not ask for a client certificate is not affected.
    pub fn webhook_client_cert(mut self, on: bool) -> Self {
        self.webhook_client_cert = on;
        self
    }

    /// Runs `count` simulated nodes (kwok); 0 for none.
    pub fn nodes(mut self, count: usize) -> Self {
        self.nodes = count;
        self
    }

    /// Runs these in-process controllers (`all`, or names such as `gc`, `namespace`,
    /// `deployment`, `scheduler`) instead of the current choice.
    pub fn controllers(mut self, names: &[&str]) -> Self {
        self.controllers = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Lets the control plane be stopped and started again with its data
    /// ([`ControlPlane::stop`], [`ControlPlane::start_again`]): its work dir is kept when
    /// kube-testenv exits, and removed only when the [`ControlPlane`] is dropped. Never for the
    /// shared control plane.
    pub fn restartable(mut self) -> Self {
        self.restartable = true;
        self
    }

    /// Passes these flags to kube-apiserver as well (after kube-testenv's own, so they win),
    /// e.g. `--audit-policy-file=...`. kube-testenv runs the apiserver in its own process and
    /// parses what follows `--` as the apiserver's flags; a wrong flag fails the start.
    pub fn apiserver_args(mut self, args: &[&str]) -> Self {
        self.apiserver_args
            .extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Adds a user authenticated by a client certificate with CN=name and O=each group.
    pub fn user(mut self, name: &str, groups: &[&str]) -> Self {
        self.users
            .push((name.into(), groups.iter().map(|g| g.to_string()).collect()));
        self
    }
}

/// A running kube-testenv process. It exits when this value is dropped, and also when this
/// process dies, because it watches its standard input, which only this value holds open.
#[derive(Debug)]
pub struct ControlPlane {
    /// What the control plane reported once ready.
    pub ready: ReadyInfo,
    binary: PathBuf,
    work_dir: PathBuf,
    // The `run` arguments, kept for a restart.
    args: Vec<String>,
    restartable: bool,
    child: Mutex<Child>,
    // Held open for the control plane's lifetime; its closing is the signal to exit.
    stdin: Mutex<Option<ChildStdin>>,
}

static SHARED: OnceLock<ControlPlane> = OnceLock::new();

impl ControlPlane {
    /// The control plane shared by every test in this test binary, started on first use with
    /// [`ControlPlaneOptions::default`]. A static is never dropped; the control plane exits when
    /// the test binary does, because its stdin closes then.
    pub fn shared() -> &'static ControlPlane {
        SHARED.get_or_init(|| {
            ControlPlane::start(ControlPlaneOptions::default())
                .unwrap_or_else(|e| panic!("starting the shared test control plane: {e}"))
        })
    }

    /// Starts a control plane of its own (blocking until it is ready, up to 3 minutes).
    pub fn start(options: ControlPlaneOptions) -> Result<Self> {
        let binary = testenv_binary()?;
        let work_dir = tempfile::Builder::new()
            .prefix("oz-testenv-")
            .tempdir()
            .map_err(|e| Error::Start(format!("creating a work dir: {e}")))?
            .keep();
        let mut args = vec![
            "run".to_string(),
            format!("--work-dir={}", work_dir.display()),
            "--exit-on-stdin-eof".to_string(),
            format!("--controllers={}", options.controllers.join(",")),
        ];
        if !options.restartable {
            args.push("--remove-work-dir-on-exit".into());
        }
        if options.webhook_client_cert {
            args.push("--webhook-client-cert".into());
        }
        if options.nodes > 0 {
            args.push(format!("--nodes={}", options.nodes));
            args.push(format!("--kwok-dir={}", kwok_dir()?.display()));
        }
        for (name, groups) in &options.users {
            args.push(format!("--user={name}:{}", groups.join(",")));
        }
        if !options.apiserver_args.is_empty() {
            args.push("--".into());
            args.extend(options.apiserver_args);
        }
        let (child, stdin, ready) = spawn(&binary, &work_dir, &args)?;
        Ok(Self {
            ready,
            binary,
            work_dir,
            args,
            restartable: options.restartable,
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
        })
    }

    /// Stops kube-testenv, as a crash would: the apiserver and etcd exit at once, without a
    /// graceful shutdown, and every connection to them breaks. Waits up to 10 s, then kills it.
    pub fn stop(&self) {
        self.close_stdin();
        if !self.wait_for_exit(Duration::from_secs(10)) {
            let mut child = self.child.lock().unwrap();
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a stopped [restartable](ControlPlaneOptions::restartable) control plane again on
    /// the same work dir and the same apiserver port, with the objects, certificates and keys
    /// it had, so existing clients, kubeconfigs and ServiceAccount tokens reconnect to it.
    /// Blocks until it is ready again.
    pub fn start_again(&self) -> Result<()> {
        if !self.restartable {
            return Err(Error::Start(
                "only a control plane started with ControlPlaneOptions::restartable can start again".into(),
            ));
        }
        if self.is_running() {
            return Err(Error::Start(
                "the control plane is still running; stop it first".into(),
            ));
        }
        let port = self
            .ready
            .server
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| Error::Start(format!("no port in {}", self.ready.server)))?;
        let args = with_port(&self.args, port);
        let (child, stdin, _) = spawn(&self.binary, &self.work_dir, &args)?;
        *self.child.lock().unwrap() = child;
        *self.stdin.lock().unwrap() = stdin;
        Ok(())
    }

    /// The directory holding the kubeconfigs, certificates and logs.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The process id of kube-testenv.
    pub fn pid(&self) -> u32 {
        self.child.lock().unwrap().id()
    }

    /// Whether kube-testenv is still running.
    pub fn is_running(&self) -> bool {
        matches!(self.child.lock().unwrap().try_wait(), Ok(None))
    }

    /// Closes kube-testenv's standard input, exactly what happens when this process dies.
    pub fn close_stdin(&self) {
        self.stdin.lock().unwrap().take();
    }

    /// Waits up to `timeout` for kube-testenv to exit; true if it did.
    pub fn wait_for_exit(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.is_running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The bundled kubectl (same version as the apiserver), set up to act as `user`, or as
    /// admin for `None`.
    pub fn kubectl(&self, user: Option<&str>) -> Result<Command> {
        let kubeconfig = match user {
            Some(user) => self.kubeconfig_of(user)?,
            None => self.admin_kubeconfig(),
        };
        Ok(self.kubectl_with(kubeconfig))
    }

    /// The bundled kubectl with the kubeconfig at `kubeconfig`, which may name any server and
    /// any credential (a token, an exec plugin).
    pub fn kubectl_with(&self, kubeconfig: &Path) -> Command {
        let mut command = Command::new(&self.binary);
        command.arg("kubectl").arg("--kubeconfig").arg(kubeconfig);
        command
    }

    /// The admin kubeconfig path (group `system:masters`).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.ready.admin_kubeconfig
    }

    /// A user's kubeconfig path.
    pub fn kubeconfig_of(&self, user: &str) -> Result<&Path> {
        self.ready
            .users
            .get(user)
            .map(PathBuf::as_path)
            .ok_or_else(|| Error::UnknownUser(user.into()))
    }

    /// The CA that signs the client certificate the apiserver presents to admission webhooks
    /// (what oz-manager's `--webhook-client-ca-file` names). An error unless started with
    /// [`ControlPlaneOptions::webhook_client_cert`].
    pub fn webhook_client_ca(&self) -> Result<&Path> {
        webhook_client_file(&self.ready.webhook_client_ca_file)
    }

    /// The client certificate the apiserver presents to admission webhooks, to call one as the
    /// apiserver does.
    pub fn webhook_client_cert(&self) -> Result<&Path> {
        webhook_client_file(&self.ready.webhook_client_cert_file)
    }

    /// The key of [`ControlPlane::webhook_client_cert`].
    pub fn webhook_client_key(&self) -> Result<&Path> {
        webhook_client_file(&self.ready.webhook_client_key_file)
    }

    /// The apiserver's front-proxy client certificate, its key and its CA: what an aggregated
    /// API server verifies, and what a test presents to call one as the apiserver does.
    pub fn front_proxy(&self) -> (&Path, &Path, &Path) {
        (
            &self.ready.front_proxy_client_cert_file,
            &self.ready.front_proxy_client_key_file,
            &self.ready.front_proxy_ca_file,
        )
    }

    /// A client acting as admin (`system:masters`).
    pub async fn admin(&self) -> Result<Client> {
        client_from(self.admin_kubeconfig()).await
    }

    /// A client authenticated as `user` by that user's own client certificate.
    pub async fn client_as(&self, user: &str) -> Result<Client> {
        client_from(self.kubeconfig_of(user)?).await
    }

    /// Creates a fresh namespace named `oz-test-<prefix>-<random>` and returns its name.
    pub async fn namespace(&self, prefix: &str) -> Result<String> {
        let namespaces: Api<Namespace> = Api::all(self.admin().await?);
        let created = namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("oz-test-{prefix}-")),
                        labels: Some(BTreeMap::from([(
                            "oz.test/owner".into(),
                            "oz-testenv".into(),
                        )])),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await?;
        Ok(created
            .metadata
            .name
            .expect("the apiserver names generated namespaces"))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
        if self.restartable {
            let _ = std::fs::remove_dir_all(&self.work_dir);
        }
    }
}

/// `run`'s arguments with `--port`, a flag of kube-testenv's own, so before the `--` after which
/// come the apiserver's.
fn with_port(args: &[String], port: u16) -> Vec<String> {
    let mut args = args.to_vec();
    let own_flags_end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.insert(own_flags_end, format!("--port={port}"));
    args
}

fn webhook_client_file(path: &Option<PathBuf>) -> Result<&Path> {
    path.as_deref().ok_or(Error::NoWebhookClientCert)
}

/// Runs `kube-testenv` with `args` and waits until it writes `ready.json` in `work_dir`.
fn spawn(
    binary: &Path,
    work_dir: &Path,
    args: &[String],
) -> Result<(Child, Option<ChildStdin>, ReadyInfo)> {
    let ready_file = work_dir.join("ready.json");
    // A restart must not mistake the previous run's file for its own.
    let _ = std::fs::remove_file(&ready_file);
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Start(format!("running {}: {e}", binary.display())))?;
    let stdin = child.stdin.take();

    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(text) = std::fs::read_to_string(&ready_file) {
            let ready: ReadyInfo = serde_json::from_str(&text)
                .map_err(|e| Error::Start(format!("parsing {}: {e}", ready_file.display())))?;
            return Ok((child, stdin, ready));
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            let log = tail(&work_dir.join("logs/testenv.log"), 40);
            return Err(Error::Start(format!(
                "kube-testenv exited with {status} before it was ready\n{stderr}\n--- log tail ---\n{log}"
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let log = tail(&work_dir.join("logs/testenv.log"), 40);
            return Err(Error::Timeout(format!(
                "the control plane was not ready within 180s\n--- log tail ---\n{log}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn client_from(path: &Path) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// The kube-testenv binary: `$OZ_TESTENV_BIN`, or what `hack/testenv.sh build` prints, which
/// builds it once per machine (under a lock, so parallel test binaries wait for one build).
fn testenv_binary() -> Result<PathBuf> {
    built("OZ_TESTENV_BIN", "build")
}

/// The directory with kwok and its configuration: `$OZ_KWOK_DIR`, or what
/// `hack/testenv.sh build-kwok` prints (built once per machine, like kube-testenv).
fn kwok_dir() -> Result<PathBuf> {
    built("OZ_KWOK_DIR", "build-kwok")
}

/// `$variable`, or the path `hack/testenv.sh command` prints after building (or reusing) it.
pub(crate) fn built(variable: &str, command: &str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(variable) {
        return Ok(PathBuf::from(path));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/testenv.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(command)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::Binary(format!("running {}: {e}", script.display())))?;
    if !output.status.success() {
        return Err(Error::Binary(format!(
            "{} {command} failed ({})",
            script.display(),
            output.status
        )));
    }
    let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok(PathBuf::from(path))
}

fn tail(path: &Path, lines: usize) -> String {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| format!("({}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_port_goes_before_the_apiservers_flags() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            with_port(&args(&["run", "--nodes=2", "--", "--audit-log-path=x"]), 7),
            args(&["run", "--nodes=2", "--port=7", "--", "--audit-log-path=x"])
        );
        assert_eq!(with_port(&args(&["run"]), 7), args(&["run", "--port=7"]));
    }
}
