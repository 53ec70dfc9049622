//! How big each part of the benchmark is: the full run's sizes by default, small ones with
//! `--quick`, and any of them overridden by its own flag or environment variable.

use std::{path::PathBuf, time::Duration};

use clap::{Parser, ValueEnum};
use serde::Serialize;

/// The parts of the benchmark, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// oz's API calls per grant, from the apiserver's audit log (first, on a clean cluster).
    Calls,
    /// Time to access: sequential requests, then a burst.
    Access,
    /// Revocation lag of short grants.
    Revocation,
    /// Many active grants, and a restart at that scale.
    Scale,
    /// The webhook server called directly at fixed rates (after Scale, so its load does not
    /// inflate the memory measured there).
    Webhooks,
    /// Brokered sessions: how soon oz closes them after their grants expire, and their
    /// throughput against a direct exec (runs oz-manager's sessions server from the start).
    Sessions,
    /// Creates and execs through the apiserver, with webhooks and without (restarts oz-manager
    /// without them, so it runs last of the parts on the one control plane).
    Apiserver,
    /// A fleet: a hub and spokes, each a control plane of its own with its own oz-manager
    /// (started after the single-cluster parts have stopped theirs).
    Fleet,
}

/// oz's benchmark: runs the release oz-manager against a private local control plane, prints a
/// table and writes JSON.
#[derive(Parser, Debug, Clone)]
#[command(name = "oz-bench")]
pub struct Cli {
    /// A small smoke run of every part (about a minute); explicit sizes still override it.
    #[arg(long, env = "OZ_BENCH_QUICK")]
    pub quick: bool,

    /// Exit non-zero when a target is missed (the run's errors always make it fail).
    #[arg(long, env = "OZ_BENCH_CHECK")]
    pub check: bool,

    /// Run only these parts (comma-separated); default all.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<Part>,

    /// The oz-manager binary under test.
    #[arg(
        long,
        env = "OZ_BENCH_OZ_MANAGER",
        default_value = "target/release/oz-manager"
    )]
    pub oz_manager: PathBuf,

    /// Where the JSON results go.
    #[arg(
        long,
        env = "OZ_BENCH_OUTPUT",
        default_value = "target/bench/results.json"
    )]
    pub output: PathBuf,

    /// An earlier run's JSON whose figures the table shows next to this run's (default
    /// docs/benchmarks-results.json, when it exists).
    #[arg(long, env = "OZ_BENCH_PREVIOUS")]
    pub previous: Option<PathBuf>,

    /// Where oz-manager's logs go.
    #[arg(long, env = "OZ_BENCH_LOG_DIR", default_value = "target/bench/logs")]
    pub log_dir: PathBuf,

    /// Grants whose API calls are counted, one namespace each (default 5; quick 3).
    #[arg(long, env = "OZ_BENCH_CALLS_GRANTS")]
    pub calls_grants: Option<usize>,

    /// Sequential requests for time to access (default 500; quick 20).
    #[arg(long, env = "OZ_BENCH_SEQUENTIAL")]
    pub sequential: Option<usize>,

    /// Concurrent requests in the burst (default 1000; quick 50).
    #[arg(long, env = "OZ_BENCH_BURST")]
    pub burst: Option<usize>,

    /// Bursts, each on a namespace cleared of the one before; the median rate is the figure
    /// (default 3; quick 1).
    #[arg(long, env = "OZ_BENCH_BURST_RUNS", value_parser = clap::value_parser!(u16).range(1..))]
    pub burst_runs: Option<u16>,

    /// Short grants for revocation lag (default 500; quick 30).
    #[arg(long, env = "OZ_BENCH_REVOCATIONS")]
    pub revocations: Option<usize>,

    /// Seconds over which the short grants are created, evenly (default 40; quick 2).
    #[arg(long, env = "OZ_BENCH_REVOCATION_SPREAD")]
    pub revocation_spread: Option<f64>,

    /// Of those, how many are probed with SubjectAccessReviews (default 50; quick 5).
    #[arg(long, env = "OZ_BENCH_SAR_SAMPLES")]
    pub sar_samples: Option<usize>,

    /// Scale points, each GRANTSxNAMESPACES, comma-separated, in increasing order of grants;
    /// each point adds to the one before (default 10000x100,50000x500; quick 50x5,100x10).
    #[arg(long, env = "OZ_BENCH_SCALE_POINTS", value_delimiter = ',', value_parser = scale_point)]
    pub scale_points: Vec<(usize, usize)>,

    /// Short grants expiring while a scale point's grants are in force (default 100; quick 10).
    #[arg(long, env = "OZ_BENCH_IN_FORCE_CANARIES")]
    pub in_force_canaries: Option<usize>,

    /// Canary grants across the restart at scale (default 10; quick 2).
    #[arg(long, env = "OZ_BENCH_CANARIES")]
    pub canaries: Option<usize>,

    /// Direct webhook call rates per second, comma-separated (default 500,2000,5000,10000; quick
    /// 500,2000).
    #[arg(long, env = "OZ_BENCH_WEBHOOK_RATES", value_delimiter = ',')]
    pub webhook_rates: Vec<u64>,

    /// Seconds each direct webhook rate runs for (default 5; quick 1).
    #[arg(long, env = "OZ_BENCH_WEBHOOK_SECONDS")]
    pub webhook_seconds: Option<f64>,

    /// Brokered sessions closed at their grants' expiry (default 50; quick 5).
    #[arg(long, env = "OZ_BENCH_SESSIONS")]
    pub sessions: Option<usize>,

    /// MiB streamed through `cat` per throughput run (default 64; quick 8).
    #[arg(long, env = "OZ_BENCH_SESSION_MIB")]
    pub session_mib: Option<u64>,

    /// Throughput runs per mode, brokered and direct (default 3; quick 1).
    #[arg(long, env = "OZ_BENCH_SESSION_RUNS")]
    pub session_runs: Option<usize>,

    /// Calls through the apiserver per case (default 200; quick 20).
    #[arg(long, env = "OZ_BENCH_APISERVER_CALLS")]
    pub apiserver_calls: Option<usize>,

    /// Spoke counts of the fleet part, one fleet each, comma-separated (default 2,10; quick 2).
    #[arg(long, env = "OZ_BENCH_FLEET_SPOKES", value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..))]
    pub fleet_spokes: Vec<u16>,

    /// Sequential requests asked on the hub, and on the spokes themselves, per fleet (default
    /// 100; quick 10).
    #[arg(long, env = "OZ_BENCH_FLEET_SEQUENTIAL")]
    pub fleet_sequential: Option<usize>,

    /// Fleet grants held at once for the hub's memory per grant (default 500; quick 20).
    #[arg(long, env = "OZ_BENCH_FLEET_HELD")]
    pub fleet_held: Option<usize>,

    /// Short fleet grants whose revocation lag is measured with the hub stopped (default 100;
    /// quick 10).
    #[arg(long, env = "OZ_BENCH_FLEET_REVOCATIONS")]
    pub fleet_revocations: Option<usize>,

    /// An extra kube-apiserver flag for the control plane the bench starts, e.g.
    /// `--apiserver-arg=--profiling=true` to read its pprof endpoints while a part runs
    /// (repeatable). Figures measured with one are not comparable with a plain run's.
    #[arg(long = "apiserver-arg", allow_hyphen_values = true)]
    pub apiserver_args: Vec<String>,
}

/// The resolved sizes.
#[derive(Clone, Debug, Serialize)]
pub struct Sizes {
    pub quick: bool,
    /// Grants whose API calls are counted, and how long each lasts.
    pub calls_grants: usize,
    pub calls_grant_seconds: u64,
    pub sequential: usize,
    pub burst: usize,
    pub burst_runs: usize,
    pub revocations: usize,
    pub sar_samples: usize,
    /// Grant durations, uniformly spread in [min, max] seconds.
    pub revocation_durations: (u64, u64),
    /// The short grants are created evenly over this long.
    #[serde(serialize_with = "seconds")]
    pub revocation_spread: Duration,
    /// (grants, namespaces) of each scale point.
    pub scale_points: Vec<(usize, usize)>,
    /// Short grants whose revocation lag is measured with a point's grants in force, and their
    /// durations, spread uniformly in [min, max] seconds.
    pub in_force_canaries: usize,
    pub in_force_durations: (u64, u64),
    /// Creates in flight at once while filling the cluster.
    pub create_concurrency: usize,
    /// Canary grants across the restart, and how long they last.
    pub canaries: usize,
    pub canary_seconds: u64,
    pub webhook_rates: Vec<u64>,
    pub webhook_seconds: f64,
    /// Cap on the calls of one direct run, whatever its rate and length.
    pub webhook_max_requests: usize,
    /// Calls per part of the audit breakdown.
    pub breakdown_calls: usize,
    pub apiserver_calls: usize,
    /// Brokered sessions, each under a grant of its own, closed at expiry.
    pub sessions: usize,
    /// Their grants' durations, uniformly spread in [min, max] seconds.
    pub session_durations: (u64, u64),
    /// The grants are created evenly over this long.
    #[serde(serialize_with = "seconds")]
    pub session_spread: Duration,
    /// MiB per throughput run, and runs per mode.
    pub session_mib: u64,
    pub session_runs: usize,
    /// The fleet part: spokes per fleet, sequential requests, grants held at once, and short
    /// grants revoked with the hub stopped, whose durations are spread in [min, max] seconds.
    pub fleet_spokes: Vec<usize>,
    pub fleet_sequential: usize,
    pub fleet_held: usize,
    pub fleet_revocations: usize,
    pub fleet_revocation_durations: (u64, u64),
    /// Idle measurements last this long.
    #[serde(serialize_with = "seconds")]
    pub idle: Duration,
    /// Wait this long before an idle measurement.
    #[serde(serialize_with = "seconds")]
    pub settle: Duration,
}

/// `GRANTSxNAMESPACES`, e.g. `50000x500`.
fn scale_point(point: &str) -> Result<(usize, usize), String> {
    let parsed = point
        .split_once('x')
        .and_then(|(g, n)| Some((g.parse().ok()?, n.parse().ok()?)));
    match parsed {
        Some((grants, namespaces)) if grants > 0 && namespaces > 0 => Ok((grants, namespaces)),
        _ => Err(format!(
            "--scale-points: {point:?} is not GRANTSxNAMESPACES with both above 0, e.g. 50000x500"
        )),
    }
}

fn seconds<S: serde::Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(duration.as_secs_f64())
}

impl Sizes {
    /// The full run's sizes.
    pub fn full() -> Self {
        Self {
            quick: false,
            calls_grants: 5,
            calls_grant_seconds: 20,
            sequential: 500,
            burst: 1000,
            burst_runs: 3,
            revocations: 500,
            sar_samples: 50,
            revocation_durations: (3, 30),
            revocation_spread: Duration::from_secs(40),
            scale_points: vec![(10_000, 100), (50_000, 500)],
            in_force_canaries: 100,
            in_force_durations: (10, 30),
            create_concurrency: 64,
            canaries: 10,
            canary_seconds: 10,
            webhook_rates: vec![500, 2000, 5000, 10_000],
            webhook_seconds: 5.0,
            webhook_max_requests: 50_000,
            breakdown_calls: 200,
            apiserver_calls: 200,
            sessions: 50,
            session_durations: (20, 30),
            session_spread: Duration::from_secs(10),
            session_mib: 64,
            session_runs: 3,
            fleet_spokes: vec![2, 10],
            fleet_sequential: 100,
            fleet_held: 500,
            fleet_revocations: 100,
            fleet_revocation_durations: (30, 45),
            idle: Duration::from_secs(10),
            settle: Duration::from_secs(5),
        }
    }

    /// Small enough to finish in about a minute.
    pub fn quick() -> Self {
        Self {
            quick: true,
            calls_grants: 3,
            calls_grant_seconds: 8,
            sequential: 20,
            burst: 50,
            burst_runs: 1,
            revocations: 30,
            sar_samples: 5,
            revocation_durations: (3, 8),
            revocation_spread: Duration::from_secs(2),
            scale_points: vec![(50, 5), (100, 10)],
            in_force_canaries: 10,
            in_force_durations: (3, 8),
            create_concurrency: 16,
            canaries: 2,
            canary_seconds: 8,
            webhook_rates: vec![500, 2000],
            webhook_seconds: 1.0,
            webhook_max_requests: 2000,
            breakdown_calls: 50,
            apiserver_calls: 20,
            sessions: 5,
            session_durations: (10, 14),
            session_spread: Duration::from_secs(2),
            session_mib: 8,
            session_runs: 1,
            fleet_spokes: vec![2],
            fleet_sequential: 10,
            fleet_held: 20,
            fleet_revocations: 10,
            fleet_revocation_durations: (15, 20),
            idle: Duration::from_secs(3),
            settle: Duration::from_secs(2),
        }
    }

    pub fn from_cli(cli: &Cli) -> Self {
        let mut sizes = if cli.quick {
            Self::quick()
        } else {
            Self::full()
        };
        let set = |target: &mut usize, value: Option<usize>| {
            if let Some(value) = value {
                *target = value;
            }
        };
        set(&mut sizes.calls_grants, cli.calls_grants);
        set(&mut sizes.sequential, cli.sequential);
        set(&mut sizes.burst, cli.burst);
        set(&mut sizes.burst_runs, cli.burst_runs.map(usize::from));
        set(&mut sizes.revocations, cli.revocations);
        set(&mut sizes.sar_samples, cli.sar_samples);
        set(&mut sizes.in_force_canaries, cli.in_force_canaries);
        if !cli.scale_points.is_empty() {
            sizes.scale_points = cli.scale_points.clone();
        }
        set(&mut sizes.apiserver_calls, cli.apiserver_calls);
        set(&mut sizes.canaries, cli.canaries);
        set(&mut sizes.sessions, cli.sessions);
        set(&mut sizes.session_runs, cli.session_runs);
        if let Some(mib) = cli.session_mib {
            sizes.session_mib = mib;
        }
        if !cli.webhook_rates.is_empty() {
            sizes.webhook_rates = cli.webhook_rates.clone();
        }
        if !cli.fleet_spokes.is_empty() {
            sizes.fleet_spokes = cli.fleet_spokes.iter().map(|&n| usize::from(n)).collect();
        }
        set(&mut sizes.fleet_sequential, cli.fleet_sequential);
        set(&mut sizes.fleet_held, cli.fleet_held);
        set(&mut sizes.fleet_revocations, cli.fleet_revocations);
        if let Some(seconds) = cli.revocation_spread {
            sizes.revocation_spread = Duration::from_secs_f64(seconds);
        }
        if let Some(seconds) = cli.webhook_seconds {
            sizes.webhook_seconds = seconds;
        }
        sizes.sar_samples = sizes.sar_samples.min(sizes.revocations);
        sizes.calls_grants = sizes.calls_grants.max(1);
        sizes.session_runs = sizes.session_runs.max(1);
        sizes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_with_an_explicit_size_keeps_the_explicit_one() {
        let cli = Cli::parse_from([
            "oz-bench",
            "--quick",
            "--burst",
            "7",
            "--webhook-rates",
            "100,200",
        ]);
        let sizes = Sizes::from_cli(&cli);
        assert!(sizes.quick);
        assert_eq!(sizes.burst, 7);
        assert_eq!(sizes.sequential, Sizes::quick().sequential);
        assert_eq!(sizes.webhook_rates, [100, 200]);
    }

    #[test]
    fn scale_points_are_grants_x_namespaces() {
        let cli = Cli::parse_from(["oz-bench", "--scale-points", "10000x100,50000x500"]);
        assert_eq!(
            Sizes::from_cli(&cli).scale_points,
            [(10_000, 100), (50_000, 500)]
        );
        let bad = Cli::try_parse_from(["oz-bench", "--scale-points", "10000"]).unwrap_err();
        assert!(bad.to_string().contains("GRANTSxNAMESPACES"), "{bad}");
    }

    #[test]
    fn the_full_sizes_are_the_issues() {
        let sizes = Sizes::from_cli(&Cli::parse_from(["oz-bench"]));
        assert_eq!(
            (sizes.sequential, sizes.burst, sizes.revocations),
            (500, 1000, 500)
        );
        assert_eq!(sizes.scale_points, [(10_000, 100), (50_000, 500)]);
        assert_eq!(sizes.webhook_rates, [500, 2000, 5000, 10_000]);
        assert_eq!(
            (sizes.sessions, sizes.session_mib, sizes.session_runs),
            (50, 64, 3)
        );
        assert_eq!(sizes.fleet_spokes, [2, 10]);
        let two = Sizes::from_cli(&Cli::parse_from(["oz-bench", "--fleet-spokes", "3"]));
        assert_eq!(two.fleet_spokes, [3]);
    }
}
