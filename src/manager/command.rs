//! The oz-manager command line: run (the default), or print the CRDs or an install.

use std::{
    io::{BufWriter, IsTerminal},
    process::ExitCode,
};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use futures::FutureExt;
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};

use oz_api::{FleetNames, PrefixMap};

use super::{
    LogFormat, RunArgs,
    config::{parse_group_prefix, parse_user_prefix},
    memory,
};
use crate::install::{self, Component, InstallOptions};

/// oz-manager's command line: a subcommand, or the flags of a run.
#[derive(Parser, Debug)]
#[command(
    name = "oz-manager",
    version,
    about = "oz: just-in-time access for Kubernetes"
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Command {
    #[command(subcommand)]
    command: Option<Print>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Print {
    /// Print the CustomResourceDefinitions of the five oz kinds as YAML.
    Crds,
    /// Print a complete install (Namespace, CRDs, ServiceAccount, least-privilege RBAC,
    /// Services, Deployment, webhook configurations) as YAML, scoped to exactly the given
    /// namespaces and parts; or, with --fleet-spoke, only what a fleet spoke adds for its hub.
    Manifests(Box<ManifestsArgs>),
}

impl Print {
    /// What it prints, or why it cannot.
    fn printed(self) -> Result<String, String> {
        match self {
            Print::Crds => {
                oz_api::crds_yaml().map_err(|e| format!("could not render the CRDs: {e}"))
            }
            Print::Manifests(args) if args.fleet_spoke => {
                install::fleet::hub_credential_yaml(&args.install_options())
                    .map_err(|e| e.to_string())
            }
            Print::Manifests(args) => {
                let options = args.install_options();
                options
                    .caller_choice()
                    .and_then(|()| install::install_yaml(&options))
                    .map_err(|e| e.to_string())
            }
        }
    }
}

// No `env =` here: these describe an install, and must not pick up the OZ_* run settings.
#[derive(clap::Args, Debug)]
struct ManifestsArgs {
    /// The operator's namespace.
    #[arg(long, default_value = install::DEFAULT_NAMESPACE)]
    namespace: String,
    /// The namespaces oz works in (each gets a Role); empty means all (a ClusterRole).
    #[arg(long, value_delimiter = ',')]
    watch_namespaces: Vec<String>,
    /// The parts to run and grant permissions for.
    // Parsed by `FromStr`, not clap's `ValueEnum` (which `oz-manager --controllers` uses), to
    // keep this command's help and error text as they have always been.
    #[arg(long, value_delimiter = ',', default_values = ["exec", "pod", "webhooks"], value_parser = <Component as std::str::FromStr>::from_str)]
    controllers: Vec<Component>,
    /// The oz-manager image.
    #[arg(long, default_value = install::DEFAULT_IMAGE)]
    image: String,
    /// Base name of everything installed, so several installs can share a cluster.
    #[arg(long, default_value = install::DEFAULT_NAME)]
    name: String,
    /// Replicas of the Deployment; more than one run as leader and hot standbys.
    #[arg(long, default_value_t = 1)]
    replicas: i32,
    /// Leave the CRDs out (config/default takes them from config/crd).
    #[arg(long)]
    no_crds: bool,
    /// A Secret in the operator's namespace whose ca.crt signs the apiserver's webhook client
    /// certificate: only the apiserver may then call the webhooks (docs/audit.md).
    #[arg(long, value_name = "SECRET")]
    webhook_client_ca_secret: Option<String>,
    /// The control plane's address ranges: a NetworkPolicy admits only these to the webhook
    /// port (metrics and health stay open). Empty: no NetworkPolicy.
    #[arg(long, value_delimiter = ',', value_name = "CIDR,...")]
    webhook_ingress_cidrs: Vec<String>,
    /// Serve webhook callers without a client certificate: for clusters whose apiserver
    /// cannot present one (EKS, GKE, AKS). An install with webhooks needs this or
    /// --webhook-client-ca-secret (docs/security.md).
    #[arg(long)]
    unverified_webhook_callers: bool,
    /// The address ranges oz-manager may connect to (the apiserver's and every notification
    /// sink's): a NetworkPolicy allows egress to these and to name servers only. Empty: no
    /// egress policy.
    #[arg(long, value_delimiter = ',', value_name = "CIDR,...")]
    egress_cidrs: Vec<String>,
    /// Where session recordings go, e.g. s3://BUCKET/PREFIX?region=eu-west-1; default: the
    /// pod's emptyDir. Never with credentials: see --session-recordings-secret.
    #[arg(long, value_name = "URL")]
    session_recordings: Option<String>,
    /// A Secret in the operator's namespace whose keys (AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, ...) become oz-manager's environment, for the recordings store.
    #[arg(long, value_name = "SECRET")]
    session_recordings_secret: Option<String>,
    /// Print only the fleet hub's credential on a spoke: its ServiceAccount in --namespace, and
    /// the ClusterRole and binding that let it keep templates and requests there. The spoke's
    /// oz then runs with --fleet-hub-user system:serviceaccount:NAMESPACE:oz-fleet-hub.
    #[arg(long, conflicts_with_all = [
        "watch_namespaces", "controllers", "image", "replicas", "no_crds",
        "webhook_client_ca_secret", "webhook_ingress_cidrs", "unverified_webhook_callers",
        "egress_cidrs", "session_recordings", "session_recordings_secret", "fleet_hub",
        "fleet_spoke_install", "fleet_user_prefix", "fleet_group_prefix",
    ])]
    fleet_spoke: bool,
    /// Install a fleet spoke: the usual install, plus the hub's credential (what --fleet-spoke
    /// prints alone), and oz-manager run with --fleet-hub-user naming it. Needs the webhooks.
    #[arg(long)]
    fleet_spoke_install: bool,
    /// On a fleet spoke: HUB_PREFIX=SPOKE_PREFIX, how this cluster names the hub's users, where
    /// its authenticator names people differently (oz-manager's --fleet-user-prefix,
    /// docs/fleet.md). Needs --fleet-spoke-install.
    #[arg(long, value_name = "HUB_PREFIX=SPOKE_PREFIX", requires = "fleet_spoke_install",
          value_parser = parse_user_prefix)]
    fleet_user_prefix: Option<PrefixMap>,
    /// On a fleet spoke: HUB_PREFIX=SPOKE_PREFIX, how this cluster names the hub's groups
    /// (oz-manager's --fleet-group-prefix). Needs --fleet-spoke-install.
    #[arg(long, value_name = "HUB_PREFIX=SPOKE_PREFIX", requires = "fleet_spoke_install",
          value_parser = parse_group_prefix)]
    fleet_group_prefix: Option<PrefixMap>,
    /// Install a fleet hub: oz-manager runs with --fleet-hub, its provider file (the image's
    /// secretreader plugin) in a ConfigMap, and RBAC to read ClusterProfiles and the spokes'
    /// token Secrets in --fleet-namespace only (docs/fleet.md).
    #[arg(long)]
    fleet_hub: bool,
    /// The hub's name, a label value on everything it keeps on spokes.
    #[arg(long, requires = "fleet_hub", default_value = install::DEFAULT_FLEET_NAME)]
    fleet_name: String,
    /// The hub's fleet namespace: its ClusterProfiles, and a Secret per spoke holding the
    /// hub's token there. It must exist; keep no other Secrets in it.
    #[arg(long, requires = "fleet_hub", default_value = install::DEFAULT_FLEET_NAMESPACE)]
    fleet_namespace: String,
}

impl ManifestsArgs {
    fn install_options(self) -> InstallOptions {
        InstallOptions {
            namespace: self.namespace,
            watch_namespaces: self
                .watch_namespaces
                .into_iter()
                .filter(|n| !n.is_empty())
                .collect(),
            controllers: self.controllers,
            image: self.image,
            name: self.name,
            replicas: self.replicas,
            crds: !self.no_crds,
            webhook_client_ca_secret: self.webhook_client_ca_secret,
            webhook_ingress_cidrs: self
                .webhook_ingress_cidrs
                .into_iter()
                .filter(|c| !c.is_empty())
                .collect(),
            unverified_webhook_callers: self.unverified_webhook_callers,
            egress_cidrs: self
                .egress_cidrs
                .into_iter()
                .filter(|c| !c.is_empty())
                .collect(),
            session_recordings: self.session_recordings,
            session_recordings_secret: self.session_recordings_secret,
            fleet_hub: self.fleet_hub.then_some(install::FleetHubOptions {
                name: self.fleet_name,
                namespace: self.fleet_namespace,
            }),
            fleet_spoke: self.fleet_spoke_install,
            fleet_names: FleetNames {
                users: self.fleet_user_prefix,
                groups: self.fleet_group_prefix,
            },
        }
    }
}

impl Command {
    /// Parses the process's arguments (clap exits on a usage error, and on `--version`, which
    /// names `commit`: see [`oz_api::build_info`]) and does what they say: prints, or runs
    /// until SIGTERM or Ctrl-C.
    pub fn parse_and_run(commit: Option<&str>) -> ExitCode {
        // First, before the allocator has touched more than a few pages: the kernel keeps a
        // huge page faulted in before this as it is.
        if let Err(error) = memory::turn_off_huge_pages() {
            eprintln!(
                "oz-manager: could not turn transparent huge pages off ({error}); it may hold more memory than it uses"
            );
        }
        let matches = Self::command_with_commit(commit).get_matches();
        match Self::from_arg_matches(&matches) {
            Ok(command) => command.run(),
            Err(e) => e.exit(),
        }
    }

    /// The clap command, its `--version` naming `commit`.
    pub fn command_with_commit(commit: Option<&str>) -> clap::Command {
        // Once per process: clap keeps a `'static` version unless its `string` feature is on.
        let version: &'static str = oz_api::build_info::version_text(commit).leak();
        Self::command().version(version)
    }

    /// The run flags, when no subcommand was given.
    pub fn run_args(&self) -> Option<&RunArgs> {
        self.command.is_none().then_some(&self.run)
    }

    fn run(self) -> ExitCode {
        let printed = match self.command {
            Some(print) => print.printed(),
            None => {
                // Declared before the runtime, so dropped after it: the last lines are written
                // before the process exits, `fail`'s included.
                let _log_writer = match init_logging(self.run.log_format, &self.run.log_level) {
                    Ok(guard) => guard,
                    Err(e) => return fail(&e),
                };
                let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime starts");
                return match runtime.block_on(run(self.run)) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => fail(&e),
                };
            }
        };
        match printed {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        }
    }
}

/// The target of this module's log lines: the binary's name, as when they were written in it,
/// so log filters and readers see the same lines as before.
const LOG_TARGET: &str = "oz_manager";

fn fail(message: &str) -> ExitCode {
    tracing::error!(target: LOG_TARGET, "{message}");
    eprintln!("oz-manager: {message}");
    ExitCode::FAILURE
}

async fn run(args: RunArgs) -> Result<(), String> {
    let config = args.manager_config()?;
    let client = client().await?;
    let shutdown = shutdown_signal().boxed().shared();
    super::run(client, config, shutdown).await?;
    tracing::info!(target: LOG_TARGET, "stopped");
    Ok(())
}

/// The client oz-manager calls the apiserver with. It names itself in its User-Agent, so an
/// apiserver audit log tells oz's calls from those of anyone using the same credentials (kube
/// sends none by default).
async fn client() -> Result<kube::Client, String> {
    let unreachable = |e: &dyn std::fmt::Display| {
        format!("cannot reach a cluster (check KUBECONFIG or the in-cluster service account): {e}")
    };
    let mut config = kube::Config::infer().await.map_err(|e| unreachable(&e))?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    kube::Client::try_from(config).map_err(|e| unreachable(&e))
}

/// `oz-manager/VERSION`: what an apiserver audit log records as oz's `userAgent`.
pub const USER_AGENT: &str = concat!("oz-manager/", env!("CARGO_PKG_VERSION"));

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be handled");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!(target: LOG_TARGET, "shutting down: finishing in-flight reconciles");
}

/// Up to this much of the log is written to stderr in one write.
const LOG_WRITE_BYTES: usize = 64 * 1024;

/// Lines that may wait for the log's thread before logging waits for it: about a second of
/// audit records at 10,000 reviews/s. tracing-appender's default, 128,000, allocates a slot for
/// each up front, a visible part of an idle oz-manager's RSS.
const LOG_QUEUE_LINES: usize = 8192;

/// Logs to stderr from a thread of its own: a line is formatted where it is logged and handed
/// over, and the thread writes whatever has queued up in one write. Every audit review logs
/// its record; written in place, each line was a write to stderr, under stderr's lock, by the
/// runtime thread serving the webhook (a visible share of oz-manager's CPU at high audit
/// rates, docs/benchmarks.md), and a slow reader of the log (a busy container runtime) would stall that thread
/// and every task on it, expiry timers included. Nothing is dropped: past [`LOG_QUEUE_LINES`]
/// lines queued, logging waits, as a write would. The lines queued are written when the
/// returned guard is dropped.
///
/// Text is coloured only for a person at a terminal: in a file or a container's log the colour
/// codes are bytes around every field that break a plain search for `key=value`.
fn init_logging(format: LogFormat, filter: &str) -> Result<WorkerGuard, String> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| format!("--log-level {filter:?}: {e}"))?;
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .thread_name("oz-log-writer")
        .finish(BufWriter::with_capacity(LOG_WRITE_BYTES, std::io::stderr()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour_wanted())
        .with_writer(writer);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
    Ok(guard)
}

/// Whether text logs get colour codes: stderr is a terminal and `NO_COLOR` is not set
/// (no-color.org).
fn colour_wanted() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// What `oz-manager ARGS` prints, or the usage error clap exits with.
    fn printed(args: &[&str]) -> Result<String, String> {
        let command = Command::try_parse_from(std::iter::once("oz-manager").chain(args.to_vec()))
            .map_err(|e| e.to_string())?;
        command.command.expect("a print subcommand").printed()
    }

    /// A spoke's admin applies what `--fleet-spoke` prints: the hub's credential in the
    /// namespace given, exactly the objects the fleet's code and tests apply, and nothing of an
    /// install (no Deployment, no webhooks, no choice of webhook callers to make).
    #[test]
    fn manifests_for_a_fleet_spoke_are_the_hubs_credential_alone() {
        let yaml = printed(&["manifests", "--fleet-spoke", "--namespace", "oz-ops"]).unwrap();
        assert!(
            yaml.contains(
                "# Generated by `oz-manager manifests --namespace oz-ops --fleet-spoke`;"
            ),
            "{yaml}"
        );
        let objects: Vec<serde_json::Value> = yaml
            .split("\n---\n")
            .skip(1)
            .map(|document| serde_saphyr::from_str(document).unwrap())
            .collect();
        assert_eq!(objects, install::fleet::hub_credential_objects("oz-ops"));

        // Flags that shape an install have no part in it: said, not ignored.
        let error = printed(&["manifests", "--fleet-spoke", "--controllers", "exec"]).unwrap_err();
        assert!(error.contains("cannot be used with"), "{error}");
    }

    /// `--fleet-hub` adds the hub to the usual install; its namespace and name need it.
    #[test]
    fn manifests_for_a_fleet_hub_name_its_namespace() {
        let yaml = printed(&[
            "manifests",
            "--unverified-webhook-callers",
            "--fleet-hub",
            "--fleet-namespace",
            "fleet-a",
        ])
        .unwrap();
        assert!(
            yaml.contains("--unverified-webhook-callers --fleet-hub --fleet-namespace fleet-a`"),
            "{yaml}"
        );
        assert!(yaml.contains("- --fleet-namespace=fleet-a\n"), "{yaml}");
        assert!(yaml.contains("kind: ConfigMap"), "{yaml}");
        let error = printed(&["manifests", "--fleet-namespace", "fleet-a"]).unwrap_err();
        assert!(error.contains("--fleet-hub"), "{error}");
    }

    /// A spoke's names for the hub's: parsed by oz-manager's own parser, so a value oz-manager
    /// would refuse at start-up is refused here, naming the flag; and only with
    /// `--fleet-spoke-install`.
    #[test]
    fn manifests_for_a_spoke_map_the_hubs_names_with_oz_managers_parser() {
        let spoke = [
            "manifests",
            "--unverified-webhook-callers",
            "--fleet-spoke-install",
        ];
        let with = |extra: &[&'static str]| printed(&[&spoke[..], extra].concat());
        let yaml = with(&[
            "--fleet-user-prefix",
            "=corp:",
            "--fleet-group-prefix=oidc:=corp:",
        ])
        .unwrap();
        assert!(
            yaml.contains(
                "--fleet-spoke-install --fleet-user-prefix =corp: --fleet-group-prefix oidc:=corp:`"
            ),
            "{yaml}"
        );
        let deployment = yaml
            .split("\n---\n")
            .find(|d| d.contains("kind: Deployment"))
            .unwrap();
        let deployment: k8s_openapi::api::apps::v1::Deployment =
            serde_saphyr::from_str(deployment).unwrap();
        let args = deployment.spec.unwrap().template.spec.unwrap().containers[0]
            .args
            .clone()
            .unwrap();
        assert!(
            args.contains(&"--fleet-user-prefix==corp:".to_string())
                && args.contains(&"--fleet-group-prefix=oidc:=corp:".to_string()),
            "{args:?}"
        );

        for (extra, said) in [
            (
                &["--fleet-user-prefix", "corp:"][..],
                "want HUB_PREFIX=SPOKE_PREFIX",
            ),
            (&["--fleet-group-prefix=a=b=c"][..], "more than one '='"),
            (&["--fleet-user-prefix=="][..], "maps no name"),
        ] {
            let error = with(extra).unwrap_err();
            let flag = extra[0].split_once("=").map_or(extra[0], |(flag, _)| flag);
            assert!(
                error.contains(said) && error.contains(flag),
                "{extra:?}: {error}"
            );
        }

        for args in [
            &[
                "manifests",
                "--unverified-webhook-callers",
                "--fleet-user-prefix=oidc:=corp:",
            ][..],
            &["manifests", "--fleet-group-prefix=oidc:=corp:"][..],
            &[
                "manifests",
                "--fleet-spoke",
                "--fleet-user-prefix=oidc:=corp:",
            ][..],
        ] {
            let error = printed(args).unwrap_err();
            let flag = args.last().unwrap().split_once("=").unwrap().0;
            assert!(
                error.contains(flag)
                    && (error.contains("--fleet-spoke-install")
                        || error.contains("cannot be used with")),
                "{args:?}: {error}"
            );
        }
    }
}
