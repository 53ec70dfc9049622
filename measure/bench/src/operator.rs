//! The oz-manager under test: the release binary as a child process, as admin, cluster-wide,
//! with its webhooks on a loopback port, its metrics on another and, when the sessions part
//! runs, its brokered-sessions server (the aggregated API) on a third. It is killed when
//! dropped.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{
    Result,
    http_client::{self, HttpClient},
    prometheus::Scrape,
};

/// oz-manager's own namespace: its certificate Secrets live there.
pub const OZ_NAMESPACE: &str = "oz-system";

/// What oz-manager runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parts {
    /// `--controllers exec,pod,webhooks`, the default install.
    WithWebhooks,
    /// `--controllers exec,pod`: no admission webhooks.
    WithoutWebhooks,
}

/// The Service the sessions APIService points at: `type: ExternalName`, `externalName:
/// localhost`, in oz's namespace (the benchmark creates it; oz-manager registers the
/// APIService).
pub const SESSIONS_SERVICE: &str = "oz-sessions";

/// oz-manager's brokered-sessions server, when it runs one.
#[derive(Clone, Debug)]
pub struct SessionsServer {
    /// Its TLS port on 127.0.0.1, which the apiserver dials as `localhost`.
    pub port: u16,
    /// Where it writes recordings (a directory).
    pub recordings: PathBuf,
}

/// A running oz-manager process.
pub struct OzManager {
    binary: PathBuf,
    kubeconfig: PathBuf,
    log_dir: PathBuf,
    parts: Parts,
    /// Flags beyond the benchmark's own (a fleet hub's or spoke's).
    extra_args: Vec<String>,
    child: Option<Child>,
    runs: usize,
    /// The webhook server's port on 127.0.0.1.
    pub webhook_port: u16,
    /// The metrics port on 127.0.0.1.
    pub metrics_port: u16,
    /// The sessions server, if oz-manager runs one (kept across restarts while webhooks run).
    pub sessions: Option<SessionsServer>,
    /// Where the current process logs.
    pub log: PathBuf,
    /// When the current process was spawned.
    pub started: Instant,
}

impl OzManager {
    /// Spawns `binary` as the admin of `kubeconfig`, logging under `log_dir`, with `extra_args`
    /// after the benchmark's own flags; with `sessions`, it also serves brokered sessions
    /// (recordings under `log_dir/recordings`).
    pub fn start(
        binary: &Path,
        kubeconfig: &Path,
        log_dir: &Path,
        parts: Parts,
        sessions: bool,
        extra_args: &[String],
    ) -> Result<Self> {
        if !binary.is_file() {
            return Err(format!(
                "{} does not exist: build it with `cargo build --release --bin oz-manager` (make bench does)",
                binary.display()
            )
            .into());
        }
        std::fs::create_dir_all(log_dir)?;
        let mut manager = Self {
            binary: binary.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            log_dir: log_dir.to_path_buf(),
            parts,
            extra_args: extra_args.to_vec(),
            child: None,
            runs: 0,
            webhook_port: free_port()?,
            metrics_port: free_port()?,
            sessions: None,
            log: PathBuf::new(),
            started: Instant::now(),
        };
        if sessions {
            let recordings = std::path::absolute(log_dir.join("recordings"))?;
            std::fs::create_dir_all(&recordings)?;
            manager.sessions = Some(SessionsServer {
                port: free_port()?,
                recordings,
            });
        }
        manager.spawn()?;
        Ok(manager)
    }

    fn spawn(&mut self) -> Result<()> {
        self.runs += 1;
        self.log = self.log_dir.join(format!("oz-manager-{}.log", self.runs));
        let file = File::create(&self.log)?;
        let sessions = self
            .sessions
            .as_ref()
            .filter(|_| self.parts == Parts::WithWebhooks);
        let controllers = match (self.parts, sessions) {
            (Parts::WithWebhooks, None) => "exec,pod,webhooks",
            (Parts::WithWebhooks, Some(_)) => "exec,pod,webhooks,sessions",
            (Parts::WithoutWebhooks, _) => "exec,pod",
        };
        let sessions_args = sessions.map_or_else(Vec::new, |s| {
            vec![
                format!("--sessions-port={}", s.port),
                format!("--sessions-service={OZ_NAMESPACE}/{SESSIONS_SERVICE}"),
                format!("--session-recordings={}", s.recordings.display()),
            ]
        });
        let base = format!("https://127.0.0.1:{}", self.webhook_port);
        self.started = Instant::now();
        let child = Command::new(&self.binary)
            .arg(format!("--namespace={OZ_NAMESPACE}"))
            .arg(format!("--controllers={controllers}"))
            .arg(format!("--webhook-url-base={base}"))
            .arg(format!("--webhook-port={}", self.webhook_port))
            .arg(format!(
                "--metrics-bind-address=127.0.0.1:{}",
                self.metrics_port
            ))
            .arg("--health-probe-bind-address=0")
            .args(sessions_args)
            .args(&self.extra_args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("OZ_WATCH_NAMESPACES")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .map_err(|e| format!("running {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// The current process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// An error with the log's tail if the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(child) = &mut self.child
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(format!(
                "oz-manager exited ({status}); log {}:\n{}",
                self.log.display(),
                tail(&self.log, 30)
            )
            .into());
        }
        Ok(())
    }

    /// SIGKILL, as a node failure or OOM kill would: no cleanup runs.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the process and starts a new one running `parts`.
    pub fn restart(&mut self, parts: Parts) -> Result<()> {
        self.kill();
        self.parts = parts;
        self.spawn()
    }

    /// The metrics endpoint's URL.
    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.metrics_port)
    }

    /// The webhook server's URL for `path`.
    pub fn webhook_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.webhook_port)
    }

    /// One scrape of `/metrics`.
    pub async fn scrape(&self, http: &HttpClient) -> Result<Scrape> {
        Ok(Scrape::parse(
            &http_client::get_text(http, &self.metrics_url()).await?,
        ))
    }

    /// Waits until `/metrics` answers; returns when it first did.
    pub async fn wait_for_metrics(&mut self, http: &HttpClient, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            if http_client::get_text(http, &self.metrics_url())
                .await
                .is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "oz-manager's metrics did not answer within {timeout:?}; log {}",
                    self.log.display()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for OzManager {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The last `lines` lines of a file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
