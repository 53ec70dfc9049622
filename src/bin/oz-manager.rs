//! oz-manager: oz's controllers (and, as they land, its admission webhooks) in one process.

use std::{process::ExitCode, sync::Arc, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};
use futures::FutureExt;
use oz::{
    Context, Settings,
    controllers::{self, AccessKind, Scope},
    metrics::Metrics,
};

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
}

#[derive(Args)]
struct RunArgs {
    /// Namespaces to watch, comma-separated; empty means every namespace.
    #[arg(long, env = "OZ_WATCH_NAMESPACES", value_delimiter = ',')]
    watch_namespaces: Vec<String>,

    /// The controllers to run.
    #[arg(long, env = "OZ_CONTROLLERS", value_delimiter = ',', default_values = ["exec", "pod"])]
    controllers: Vec<ControllerName>,

    /// How long an expired request is kept (access revoked) for access reviews before it is
    /// deleted: a Go duration such as 168h, or days such as 7d. 0 deletes at expiry, as Oz does.
    #[arg(long, env = "OZ_HISTORY_RETENTION", default_value = "7d", value_parser = parse_retention)]
    history_retention: Duration,

    /// Log format.
    #[arg(long, env = "OZ_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,

    /// Log filter, in tracing's EnvFilter syntax (e.g. info, oz=debug).
    #[arg(long, env = "OZ_LOG_LEVEL", default_value = "info")]
    log_level: String,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ControllerName {
    Exec,
    Pod,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

fn parse_retention(text: &str) -> Result<Duration, String> {
    if let Some(days) = text.strip_suffix('d') {
        let days: u64 = days.parse().map_err(|_| {
            format!(
                "{text:?}: want a whole number of days such as 7d, or a Go duration such as 168h"
            )
        })?;
        return Ok(Duration::from_secs(days * 24 * 3600));
    }
    let duration = oz_api::duration::parse_go_duration(text).map_err(|e| e.to_string())?;
    duration
        .to_std()
        .map_err(|_| format!("{text:?}: history retention cannot be negative"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Crds) => match oz_api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("oz-manager: could not render the CRDs: {e}");
                ExitCode::FAILURE
            }
        },
        None => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime starts");
            match runtime.block_on(run(cli.run)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e}");
                    eprintln!("oz-manager: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

async fn run(args: RunArgs) -> Result<(), String> {
    init_logging(args.log_format, &args.log_level)?;
    let client = kube::Client::try_default().await.map_err(|e| {
        format!("cannot reach a cluster (check KUBECONFIG or the in-cluster service account): {e}")
    })?;
    let ctx = Context::new(
        client,
        Arc::new(Metrics::default()),
        Settings {
            history_retention: args.history_retention,
        },
    );
    let kinds: Vec<AccessKind> = args
        .controllers
        .iter()
        .map(|c| match c {
            ControllerName::Exec => AccessKind::Exec,
            ControllerName::Pod => AccessKind::Pod,
        })
        .collect();
    let scopes: Vec<Scope> = if args.watch_namespaces.iter().all(|n| n.is_empty()) {
        vec![Scope::Cluster]
    } else {
        args.watch_namespaces
            .iter()
            .filter(|n| !n.is_empty())
            .map(|n| Scope::Namespace(n.clone()))
            .collect()
    };
    let shutdown = shutdown_signal().shared();
    let mut tasks = Vec::new();
    for scope in scopes {
        tracing::info!(?scope, "starting controllers");
        tasks.extend(controllers::controllers(ctx.clone(), scope, &kinds, shutdown.clone()).await);
    }
    futures::future::join_all(tasks).await;
    tracing::info!("stopped");
    Ok(())
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
