//! oz-bench: oz's benchmark. It starts a private control plane (oz-testenv), runs the release
//! oz-manager against it as a child process, measures time to access, revocation lag, scale,
//! webhook latency and brokered sessions, then starts fleets of control planes (a hub and its
//! spokes) and measures them; prints a table and writes JSON. `make bench` builds and runs it; the method
//! and the latest results are in docs/benchmarks.md.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Instant,
};

use clap::Parser;
use k8s_openapi::jiff::Timestamp;
use oz_testenv::{ControlPlane, ControlPlaneOptions};

mod access;
mod audit;
mod calls;
mod cluster;
mod error;
mod fleet;
mod harness;
mod http_client;
mod operator;
mod poll;
mod procstat;
mod prometheus;
mod report;
mod revocation;
mod scale;
mod sessions;
mod sizes;
mod stats;
mod watch;
mod webhooks;

use operator::{OZ_NAMESPACE, OzManager, Parts};
use procstat::Sampler;
use report::{Machine, Meta, Results};
use sizes::{Cli, Part, Sizes};

pub use error::{Error, Result};
pub use harness::{Bench, CatchUp};
pub use poll::poll;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let sizes = Sizes::from_cli(&cli);
    let started = Instant::now();
    let mut results = Results {
        meta: Meta {
            date: Timestamp::now().to_string(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            oz_manager: cli.oz_manager.display().to_string(),
            commit: report::commit(),
            machine: Machine::read(),
            sizes: Some(sizes.clone()),
            load_average_start: report::load_average(),
            ..Default::default()
        },
        ..Default::default()
    };
    // On Ctrl-C or SIGTERM the run is dropped, which kills oz-manager and the control plane.
    let outcome = tokio::select! {
        outcome = run(&cli, sizes, &mut results, started) => outcome,
        signal = interrupted() => Err(format!("interrupted by {signal}").into()),
    };
    if let Err(e) = outcome {
        results.errors.push(e.to_string());
    }
    results.meta.load_average_end = report::load_average();
    results.meta.seconds = started.elapsed().as_secs_f64();
    results.judge();
    match previous_results(&cli) {
        Ok(Some(previous)) => results.compare_with(&previous),
        Ok(None) => {}
        Err(e) => eprintln!("oz-bench: {e}; the table has no previous figures"),
    }
    println!("{}", results.table());
    match write_json(&cli, &results) {
        Ok(()) => eprintln!("results written to {}", cli.output.display()),
        Err(e) => {
            eprintln!("oz-bench: writing {}: {e}", cli.output.display());
            return ExitCode::FAILURE;
        }
    }
    for line in results.missed() {
        eprintln!("oz-bench: target missed: {line}");
    }
    if results.passes(cli.check) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The earlier run's results to compare with: `--previous`, or docs/benchmarks-results.json
/// when it exists.
fn previous_results(cli: &Cli) -> Result<Option<serde_json::Value>> {
    const PUBLISHED: &str = "docs/benchmarks-results.json";
    let path = match &cli.previous {
        Some(path) => path.clone(),
        None if Path::new(PUBLISHED).is_file() => PathBuf::from(PUBLISHED),
        None => return Ok(None),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("reading --previous {}: {e}", path.display()))?;
    let value = serde_json::from_str(&text)
        .map_err(|e| format!("--previous {} is not a results JSON: {e}", path.display()))?;
    Ok(Some(value))
}

/// Resolves on SIGINT or SIGTERM, naming it.
async fn interrupted() -> &'static str {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be handled");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

fn write_json(cli: &Cli, results: &Results) -> Result<()> {
    if let Some(dir) = cli.output.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&cli.output, serde_json::to_string_pretty(results)? + "\n")?;
    Ok(())
}

async fn run(cli: &Cli, sizes: Sizes, results: &mut Results, started: Instant) -> Result<()> {
    let mut parts: Vec<Part> = if cli.only.is_empty() {
        vec![
            Part::Calls,
            Part::Access,
            Part::Revocation,
            Part::Scale,
            Part::Webhooks,
            Part::Sessions,
            Part::Apiserver,
            Part::Fleet,
        ]
    } else {
        let mut only = cli.only.clone();
        only.sort();
        only.dedup();
        only
    };
    let fleets = parts.contains(&Part::Fleet);
    parts.retain(|part| *part != Part::Fleet);
    if !parts.is_empty() {
        on_one_control_plane(cli, sizes.clone(), results, started, parts).await?;
    }
    if fleets {
        let progress = |message: &str| {
            eprintln!("[{:7.1}s] {message}", started.elapsed().as_secs_f64());
        };
        match fleet::run(&cli.oz_manager, &cli.log_dir, &sizes, &progress).await {
            Ok(fleets) => results.fleet = Some(fleets),
            Err(e) => {
                progress(&format!("FAILED Fleet: {e}"));
                results.errors.push(format!("Fleet: {e}"));
            }
        }
    }
    Ok(())
}

/// The parts that share one control plane and one oz-manager (all but [`Part::Fleet`]).
async fn on_one_control_plane(
    cli: &Cli,
    sizes: Sizes,
    results: &mut Results,
    started: Instant,
    parts: Vec<Part>,
) -> Result<()> {
    eprintln!(
        "[{:7.1}s] starting a control plane",
        started.elapsed().as_secs_f64()
    );
    let extra: Vec<&str> = cli.apiserver_args.iter().map(String::as_str).collect();
    let mut options = ControlPlaneOptions::default().apiserver_args(&extra);
    let audit_log = if parts.contains(&Part::Calls) {
        // The calls part's namespaces and oz's own.
        let mut namespaces = calls::namespaces(sizes.calls_grants);
        namespaces.push(OZ_NAMESPACE.into());
        let (flags, log) = audit::turn_on(&cli.log_dir, &namespaces)?;
        options = options.apiserver_args(&flags.each_ref().map(String::as_str));
        Some(log)
    } else {
        None
    };
    let plane = tokio::task::spawn_blocking(|| ControlPlane::start(options)).await??;
    let admin = plane.admin().await?;
    let alice = plane.client_as(cluster::REQUESTER).await?;
    cluster::install_crds(&admin).await?;
    cluster::let_devs_request(&admin).await?;
    cluster::create_namespace(&admin, OZ_NAMESPACE).await?;
    // The sessions server runs from the start when its part runs, so that every part measures
    // the same oz-manager.
    let oz = OzManager::start(
        &cli.oz_manager,
        plane.admin_kubeconfig(),
        &cli.log_dir,
        Parts::WithWebhooks,
        parts.contains(&Part::Sessions),
        &[],
    )?;
    let mut bench = Bench {
        sampler: Sampler::start(oz.pid()),
        apiserver: Sampler::start(plane.pid()),
        own: Sampler::start(std::process::id()),
        oz,
        admin,
        alice,
        http: http_client::client(None)?,
        sizes,
        audit_log,
        started,
        _plane: plane,
    };
    bench.progress(&format!(
        "oz-manager {} running (pid {}, log {})",
        cli.oz_manager.display(),
        bench.oz.pid(),
        bench.oz.log.display()
    ));
    bench.wait_until_admitting().await?;
    tokio::time::sleep(bench.sizes.settle).await;
    let idle = bench.idle_window().await;
    bench.progress(&format!(
        "idle: RSS {:.1} MiB, CPU {:.1}%",
        idle.rss_max_mib, idle.cpu_percent
    ));
    results.idle = Some(idle);

    for part in parts {
        bench.progress(&format!("{part:?}"));
        let outcome: Result<()> = match part {
            Part::Calls => calls::run(&mut bench)
                .await
                .map(|r| results.calls = Some(r)),
            Part::Access => access::run(&mut bench)
                .await
                .map(|r| results.access = Some(r)),
            Part::Revocation => revocation::run(&mut bench)
                .await
                .map(|r| results.revocation = Some(r)),
            Part::Webhooks => webhooks::direct(&mut bench)
                .await
                .map(|r| results.webhooks = Some(r)),
            Part::Scale => {
                let idle_before = results.idle.map_or(0.0, |w| w.rss_end_mib);
                scale::run(&mut bench, idle_before)
                    .await
                    .map(|r| results.scale = r)
            }
            Part::Sessions => sessions::run(&mut bench)
                .await
                .map(|r| results.sessions = Some(r)),
            Part::Apiserver => webhooks::through_apiserver(&mut bench)
                .await
                .map(|r| results.apiserver = Some(r)),
            // `run` takes the fleets out: they run on control planes of their own.
            Part::Fleet => Err("a fleet does not run on the single control plane".into()),
        };
        if let Err(e) = outcome {
            let message = format!("{part:?}: {e}");
            bench.progress(&format!("FAILED {message}"));
            results.errors.push(message);
            // A dead oz-manager fails every later part for the same reason.
            bench.oz.check_running()?;
        }
    }
    Ok(())
}
