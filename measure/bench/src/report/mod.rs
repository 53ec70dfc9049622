//! The results: one JSON document ([`Results`]), judged against the targets (`targets.rs`), and
//! a table for the terminal (`table.rs`).

use serde::Serialize;

use crate::{
    access::AccessResults,
    calls::CallsResults,
    fleet::FleetResults,
    procstat::Window,
    revocation::RevocationResults,
    scale::ScaleResults,
    sessions::SessionsResults,
    sizes::Sizes,
    webhooks::{ApiserverResults, DirectResults},
};

mod cells;
mod table;
mod targets;

pub use targets::Target;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Results {
    pub meta: Meta,
    /// oz-manager started, nothing to do yet.
    pub idle: Option<Window>,
    pub calls: Option<CallsResults>,
    pub access: Option<AccessResults>,
    pub revocation: Option<RevocationResults>,
    pub webhooks: Option<DirectResults>,
    /// One entry per scale point.
    pub scale: Vec<ScaleResults>,
    pub sessions: Option<SessionsResults>,
    pub apiserver: Option<ApiserverResults>,
    /// One entry per fleet (spoke count).
    pub fleet: Option<FleetResults>,
    pub targets: Vec<Target>,
    /// Parts that failed, with why.
    pub errors: Vec<String>,
    /// The run compared with ([`Results::compare_with`]); not written out again.
    #[serde(skip)]
    pub previous: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Meta {
    /// When the run started (UTC).
    pub date: String,
    pub command: String,
    pub oz_manager: String,
    /// The commit measured, as `git describe` names it (`-dirty` when the tree had changes).
    pub commit: String,
    pub machine: Machine,
    pub sizes: Option<Sizes>,
    /// `/proc/loadavg` at the start and the end: other work on the machine.
    pub load_average_start: String,
    pub load_average_end: String,
    pub seconds: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_total: String,
    pub kernel: String,
}

impl Machine {
    pub fn read() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Self {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
                .unwrap_or_default(),
            memory_total: meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .map(|l| l.trim().to_string())
                .unwrap_or_default(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    }
}

/// The commit of the working tree the bench runs in, with `-dirty` when it has uncommitted
/// changes (a figure measured on a dirty tree belongs to no commit); "unknown" outside git.
pub fn commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|commit| !commit.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}
