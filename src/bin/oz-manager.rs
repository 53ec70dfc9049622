//! oz-manager: oz's controllers and admission webhooks in one process.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};
use futures::FutureExt;
use oz::{
    Settings,
    controllers::Scope,
    manager::{self, ManagerConfig, leader::LeaderElection},
};
use oz_api::AccessKind;
use oz_webhooks::{WebhookConfig, WebhookEndpoint};

#[derive(Parser)]
#[command(
    name = "oz-manager",
    version,
    about = "oz: just-in-time access for Kubernetes"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of the four oz kinds as YAML.
    Crds,
    /// Print a complete install (Namespace, CRDs, ServiceAccount, least-privilege RBAC,
    /// Services, Deployment, webhook configurations) as YAML, scoped to exactly the given
    /// namespaces and parts.
    Manifests(ManifestsArgs),
}

// No `env =` here: these describe an install, and must not pick up the OZ_* run settings.
#[derive(Args)]
struct ManifestsArgs {
    /// The operator's namespace.
    #[arg(long, default_value = oz::install::DEFAULT_NAMESPACE)]
    namespace: String,
    /// The namespaces oz works in (each gets a Role); empty means all (a ClusterRole).
    #[arg(long, value_delimiter = ',')]
    watch_namespaces: Vec<String>,
    /// The parts to run and grant permissions for.
    #[arg(long, value_delimiter = ',', default_values = ["exec", "pod", "webhooks"], value_parser = <oz::install::Component as std::str::FromStr>::from_str)]
    controllers: Vec<oz::install::Component>,
    /// The oz-manager image.
    #[arg(long, default_value = oz::install::DEFAULT_IMAGE)]
    image: String,
    /// Base name of everything installed, so several installs can share a cluster.
    #[arg(long, default_value = oz::install::DEFAULT_NAME)]
    name: String,
    /// Replicas of the Deployment; more than one run as leader and hot standbys.
    #[arg(long, default_value_t = 1)]
    replicas: i32,
    /// Leave the CRDs out (config/default takes them from config/crd).
    #[arg(long)]
    no_crds: bool,
}

/// Every flag also reads an environment variable (shown in --help).
#[derive(Args)]
struct RunArgs {
    /// The operator's own namespace: its Lease and certificate Secrets live there.
    #[arg(long, env = "OZ_NAMESPACE", default_value = "oz-system")]
    namespace: String,

    /// Namespaces to watch, comma-separated; empty means every namespace.
    #[arg(long, env = "OZ_WATCH_NAMESPACES", value_delimiter = ',')]
    watch_namespaces: Vec<String>,

    /// What to run: exec and pod controllers, and the admission webhooks.
    #[arg(long, env = "OZ_CONTROLLERS", value_delimiter = ',', default_values = ["exec", "pod", "webhooks"])]
    controllers: Vec<Part>,

    /// Elect a leader through a Lease: only the leader reconciles and writes certificates;
    /// followers serve webhooks.
    #[arg(long, env = "OZ_LEADER_ELECT")]
    leader_elect: bool,

    /// Seconds a leader's Lease lasts without renewal; a follower takes over after that.
    #[arg(long, env = "OZ_LEADER_ELECT_LEASE_DURATION", default_value_t = 15)]
    leader_elect_lease_duration: u64,

    /// The Lease's name.
    #[arg(long, env = "OZ_LEADER_ELECT_LEASE_NAME", default_value = "oz-manager")]
    leader_elect_lease_name: String,

    /// Where to serve Prometheus metrics (`/metrics`), e.g. `:8080`; `0` turns it off.
    #[arg(long, env = "OZ_METRICS_BIND_ADDRESS", default_value = "0")]
    metrics_bind_address: String,

    /// Where to serve `/healthz` and `/readyz`, e.g. `:8081`; `0` turns it off.
    #[arg(long, env = "OZ_HEALTH_PROBE_BIND_ADDRESS", default_value = "0")]
    health_probe_bind_address: String,

    /// Log format.
    #[arg(long, env = "OZ_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,

    /// Log filter, in tracing's EnvFilter syntax (e.g. `info`, `oz=debug`).
    #[arg(long, env = "OZ_LOG_LEVEL", default_value = "info")]
    log_level: String,

    /// The webhook server's port.
    #[arg(long, env = "OZ_WEBHOOK_PORT", default_value_t = 9443)]
    webhook_port: u16,

    /// In a cluster: the Service in front of the webhook server, as NAMESPACE/NAME.
    #[arg(long, env = "OZ_WEBHOOK_SERVICE", conflicts_with = "webhook_url_base")]
    webhook_service: Option<String>,

    /// Locally: the URL the apiserver calls, e.g. `https://127.0.0.1:9443`.
    #[arg(long, env = "OZ_WEBHOOK_URL_BASE")]
    webhook_url_base: Option<String>,

    /// The Secret holding the webhook CA.
    #[arg(long, env = "OZ_WEBHOOK_CA_SECRET", default_value = "oz-webhook-ca")]
    webhook_ca_secret: String,

    /// The Secret holding the webhook serving certificate.
    #[arg(long, env = "OZ_WEBHOOK_CERT_SECRET", default_value = "oz-webhook-tls")]
    webhook_cert_secret: String,

    /// Base name of the webhook configurations oz registers (`<name>-requests`, `<name>-audit`).
    #[arg(long, env = "OZ_WEBHOOK_CONFIGURATION_NAME", default_value = "oz")]
    webhook_configuration_name: String,

    /// Also append exec/attach/port-forward/debug audit records to this file, as JSON lines.
    #[arg(long, env = "OZ_AUDIT_LOG_PATH")]
    audit_log_path: Option<PathBuf>,

    /// Deny exec/attach/port-forward/debug without an active grant in these namespaces (off by
    /// default: the audit webhook only records).
    #[arg(long, env = "OZ_AUDIT_ENFORCE_NAMESPACES", value_delimiter = ',')]
    audit_enforce_namespaces: Vec<String>,

    /// Groups whose members may delete anyone's requests, expired ones included; everyone else
    /// may only revoke their own active requests.
    #[arg(long, env = "OZ_REQUEST_ADMIN_GROUPS", value_delimiter = ',', default_values = ["system:masters"])]
    request_admin_groups: Vec<String>,

    /// How long an expired request is kept (access revoked) for access reviews before it is
    /// deleted: a Go duration such as 168h, or days such as 7d. 0 deletes at expiry, as Oz does.
    #[arg(long, env = "OZ_HISTORY_RETENTION", default_value = "7d", value_parser = parse_retention)]
    history_retention: Duration,

    /// How many requests of each kind are reconciled at once (at least 1). Revocation at expiry
    /// does not wait on this: every grant has a timer of its own.
    #[arg(long, env = "OZ_MAX_CONCURRENT_RECONCILES", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_reconciles: u16,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Part {
    Exec,
    Pod,
    Webhooks,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

fn parse_retention(text: &str) -> Result<Duration, String> {
    if let Some(days) = text.strip_suffix('d') {
        let seconds = days
            .parse::<u64>()
            .ok()
            .and_then(|days| days.checked_mul(24 * 3600))
            .ok_or_else(|| {
                format!(
                    "{text:?}: want a whole number of days such as 7d (at most {}d), or a Go duration such as 168h",
                    u64::MAX / (24 * 3600)
                )
            })?;
        return Ok(Duration::from_secs(seconds));
    }
    let duration = oz_api::duration::parse_go_duration(text).map_err(|e| e.to_string())?;
    duration
        .to_std()
        .map_err(|_| format!("{text:?}: history retention cannot be negative"))
}

/// `:8080`, `0.0.0.0:8080` or `0` (off).
fn parse_bind(flag: &str, text: &str) -> Result<Option<SocketAddr>, String> {
    match text {
        "" | "0" => Ok(None),
        _ => {
            let full = if text.starts_with(':') {
                format!("0.0.0.0{text}")
            } else {
                text.to_string()
            };
            full.parse()
                .map(Some)
                .map_err(|e| format!("--{flag} {text:?}: {e}"))
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Crds) => match oz_api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&format!("could not render the CRDs: {e}")),
        },
        Some(Command::Manifests(args)) => {
            let options = oz::install::InstallOptions {
                namespace: args.namespace,
                watch_namespaces: args
                    .watch_namespaces
                    .into_iter()
                    .filter(|n| !n.is_empty())
                    .collect(),
                controllers: args.controllers,
                image: args.image,
                name: args.name,
                replicas: args.replicas,
                crds: !args.no_crds,
            };
            match oz::install::install_yaml(&options) {
                Ok(yaml) => {
                    print!("{yaml}");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e.to_string()),
            }
        }
        None => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime starts");
            match runtime.block_on(run(cli.run)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e),
            }
        }
    }
}

fn fail(message: &str) -> ExitCode {
    tracing::error!("{message}");
    eprintln!("oz-manager: {message}");
    ExitCode::FAILURE
}

async fn run(args: RunArgs) -> Result<(), String> {
    init_logging(args.log_format, &args.log_level)?;
    let config = manager_config(&args)?;
    let client = kube::Client::try_default().await.map_err(|e| {
        format!("cannot reach a cluster (check KUBECONFIG or the in-cluster service account): {e}")
    })?;
    let shutdown = shutdown_signal().boxed().shared();
    manager::run(client, config, shutdown).await?;
    tracing::info!("stopped");
    Ok(())
}

fn manager_config(args: &RunArgs) -> Result<ManagerConfig, String> {
    let watched: Vec<String> = args
        .watch_namespaces
        .iter()
        .filter(|n| !n.is_empty())
        .cloned()
        .collect();
    let scopes = if watched.is_empty() {
        vec![Scope::Cluster]
    } else {
        watched
            .iter()
            .map(|n| Scope::Namespace(n.clone()))
            .collect()
    };
    let kinds = args
        .controllers
        .iter()
        .filter_map(|c| match c {
            Part::Exec => Some(AccessKind::Exec),
            Part::Pod => Some(AccessKind::Pod),
            Part::Webhooks => None,
        })
        .collect();
    let webhooks = if args.controllers.contains(&Part::Webhooks) {
        Some(webhook_config(args, &watched)?)
    } else {
        None
    };
    let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    Ok(ManagerConfig {
        namespace: args.namespace.clone(),
        scopes,
        kinds,
        leader_election: args.leader_elect.then(|| LeaderElection {
            lease_name: args.leader_elect_lease_name.clone(),
            identity,
            lease_duration: args.leader_elect_lease_duration.max(2),
            renew_grace: (args.leader_elect_lease_duration / 3).max(1),
        }),
        metrics_addr: parse_bind("metrics-bind-address", &args.metrics_bind_address)?,
        health_addr: parse_bind("health-probe-bind-address", &args.health_probe_bind_address)?,
        settings: Settings {
            history_retention: args.history_retention,
            max_concurrent_reconciles: args.max_concurrent_reconciles,
        },
        webhooks,
    })
}

fn webhook_config(args: &RunArgs, watched: &[String]) -> Result<WebhookConfig, String> {
    let endpoint = match (&args.webhook_service, &args.webhook_url_base) {
        (Some(service), None) => {
            WebhookEndpoint::service(service, 443).map_err(|e| format!("--webhook-service: {e}"))?
        }
        (None, Some(base)) => {
            WebhookEndpoint::url(base).map_err(|e| format!("--webhook-url-base: {e}"))?
        }
        _ => {
            return Err("the webhooks need --webhook-service NAMESPACE/NAME in a cluster, or --webhook-url-base \
                        https://127.0.0.1:PORT locally (or leave webhooks out of --controllers)"
                .into());
        }
    };
    let mut config = WebhookConfig::new(&args.namespace, endpoint);
    config.listen = SocketAddr::from(([0, 0, 0, 0], args.webhook_port));
    config.secrets.ca = args.webhook_ca_secret.clone();
    config.secrets.serving = args.webhook_cert_secret.clone();
    config.registration.name = args.webhook_configuration_name.clone();
    config.audit_log_path = args.audit_log_path.clone();
    config.request_admin_groups = args
        .request_admin_groups
        .iter()
        .filter(|g| !g.is_empty())
        .cloned()
        .collect();
    config.enforce.namespaces = args
        .audit_enforce_namespaces
        .iter()
        .filter(|n| !n.is_empty())
        .cloned()
        .collect();
    // A scoped operator admits and audits only its own namespaces, and may read only those.
    config.watch_namespaces = watched.to_vec();
    if !watched.is_empty() {
        let selector = namespaces_selector(watched);
        config.registration.request_namespace_selector = Some(selector.clone());
        config.registration.audit_namespace_selector = Some(selector);
    }
    Ok(config)
}

fn namespaces_selector(
    namespaces: &[String],
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "In".into(),
            values: Some(namespaces.to_vec()),
        }]),
        match_labels: None,
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be handled");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: finishing in-flight reconciles");
}

fn init_logging(format: LogFormat, filter: &str) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| format!("--log-level {filter:?}: {e}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_takes_days_or_go_durations_and_refuses_overflow() {
        assert_eq!(parse_retention("7d"), Ok(Duration::from_secs(7 * 86400)));
        assert_eq!(parse_retention("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_retention("0"), Ok(Duration::ZERO));
        // Found by the hostile-input review: this overflowed (a panic in debug builds, a
        // wrapped, much shorter retention in release builds).
        let error = parse_retention("999999999999999999d").unwrap_err();
        assert!(error.contains("at most 213503982334601d"), "{error}");
        assert!(parse_retention("-1h").is_err());
        assert!(parse_retention("1w").is_err());
    }
}
