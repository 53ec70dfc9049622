//! The results: one JSON document, and a table for the terminal.

use std::fmt::Write;

use serde::Serialize;

use crate::{
    access::AccessResults,
    procstat::Window,
    revocation::RevocationResults,
    scale::ScaleResults,
    sessions::SessionsResults,
    sizes::Sizes,
    stats::Summary,
    webhooks::{ApiserverResults, DirectResults, Endpoint},
};

#[derive(Clone, Debug, Default, Serialize)]
pub struct Results {
    pub meta: Meta,
    /// oz-manager started, nothing to do yet.
    pub idle: Option<Window>,
    pub access: Option<AccessResults>,
    pub revocation: Option<RevocationResults>,
    pub webhooks: Option<DirectResults>,
    pub scale: Option<ScaleResults>,
    pub sessions: Option<SessionsResults>,
    pub apiserver: Option<ApiserverResults>,
    pub targets: Vec<Target>,
    /// Parts that failed, with why.
    pub errors: Vec<String>,
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

/// One of the targets, and where the run stands.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub figure: String,
    pub target: String,
    pub measured: Option<f64>,
    pub unit: &'static str,
    pub met: Option<bool>,
}

fn target(
    figure: &str,
    target: &str,
    limit: f64,
    unit: &'static str,
    measured: Option<f64>,
) -> Target {
    Target {
        figure: figure.into(),
        target: target.into(),
        measured,
        unit,
        met: measured.map(|m| m < limit),
    }
}

impl Results {
    /// The targets measured and missed, each as a line saying by how much.
    pub fn missed(&self) -> Vec<String> {
        self.targets
            .iter()
            .filter(|t| t.met == Some(false))
            .map(|t| {
                format!(
                    "{}: {:.1} {}, target {}",
                    t.figure,
                    t.measured.unwrap_or_default(),
                    t.unit,
                    t.target
                )
            })
            .collect()
    }

    /// Fills `targets` from what was measured.
    pub fn judge(&mut self) {
        let audit_2000 = self.webhooks.as_ref().and_then(|w| {
            w.runs
                .iter()
                .find(|r| r.endpoint == Endpoint::Audit && r.target_rate == 2000)
                .map(|r| r.latency.p99_ms)
        });
        // Every state in which oz-manager holds the grants: filling, idle, and restarted.
        let rss_at_scale = self.scale.as_ref().map(|s| {
            [
                s.during_fill.rss_max_mib,
                s.idle_at_scale.rss_max_mib,
                s.restart.during.rss_max_mib,
                s.restart.idle_after.rss_max_mib,
            ]
            .into_iter()
            .fold(0.0, f64::max)
        });
        self.targets = vec![
            target(
                "Time to access, p99 (sequential)",
                "< 200 ms",
                200.0,
                "ms",
                self.access.as_ref().map(|a| a.sequential.p99_ms),
            ),
            target(
                "Revocation lag, p99 (RoleBinding deleted)",
                "< 1 s",
                1000.0,
                "ms",
                self.revocation.as_ref().map(|r| r.binding_deleted.p99_ms),
            ),
            target(
                "Revocation lag, p99 (access denied)",
                "< 1 s",
                1000.0,
                "ms",
                self.revocation
                    .as_ref()
                    .filter(|r| r.sar_denied.count > 0)
                    .map(|r| r.sar_denied.p99_ms),
            ),
            target(
                "RSS, idle",
                "< 64 MiB",
                64.0,
                "MiB",
                self.idle.map(|w| w.rss_max_mib),
            ),
            target(
                "RSS, 10,000 grants (peak: filling, idle, restarted)",
                "< 256 MiB",
                256.0,
                "MiB",
                rss_at_scale,
            ),
            target(
                "Session close lag, p99 (expiresAt → client's stream ended)",
                "< 500 ms",
                500.0,
                "ms",
                self.sessions
                    .as_ref()
                    .filter(|s| s.close_lag.count > 0)
                    .map(|s| s.close_lag.p99_ms),
            ),
            target(
                "Audit webhook p99, direct at 2,000 req/s",
                "< 5 ms",
                5.0,
                "ms",
                audit_2000,
            ),
        ];
    }

    /// The table printed at the end of a run.
    pub fn table(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        rows.push(("== machine".into(), String::new()));
        let m = &self.meta;
        rows.push((
            "cpus, model, memory".into(),
            format!(
                "{} × {}, {}",
                m.machine.cpus, m.machine.cpu_model, m.machine.memory_total
            ),
        ));
        rows.push(("commit".into(), m.commit.clone()));
        rows.push((
            "load average start / end".into(),
            format!("{} / {}", m.load_average_start, m.load_average_end),
        ));
        if let Some(idle) = &self.idle {
            rows.push(("oz-manager idle, no grants".into(), window(idle)));
        }
        if let Some(a) = &self.access {
            rows.push(("== time to access (create → Ready)".into(), String::new()));
            rows.push((
                format!("sequential, {} requests", a.sequential.count),
                summary(&a.sequential),
            ));
            rows.push((
                "  of which the create call".into(),
                summary(&a.sequential_create_call),
            ));
            rows.push((
                format!("burst of {}: total", a.burst.requests),
                format!(
                    "{:.2} s, {} failed",
                    a.burst.total_seconds, a.burst.failures
                ),
            ));
            rows.push(("burst: per request".into(), summary(&a.burst.per_request)));
            rows.push(("burst: oz-manager".into(), window(&a.burst.process)));
            rows.push(("burst: control plane".into(), window(&a.burst.apiserver)));
            rows.push((
                "oz_time_to_ready_seconds (oz's view)".into(),
                format!(
                    "n {}, mean {:.0} ms, p50 ≈ {} (creationTimestamp has 1 s precision)",
                    a.oz_time_to_ready.count,
                    a.oz_time_to_ready.mean_ms,
                    opt_ms(a.oz_time_to_ready.p50_ms)
                ),
            ));
        }
        if let Some(r) = &self.revocation {
            rows.push((
                format!(
                    "== revocation lag ({} grants of {}–{} s)",
                    r.grants, r.durations_seconds.0, r.durations_seconds.1
                ),
                String::new(),
            ));
            rows.push((
                "expiresAt → RoleBinding deleted (watch)".into(),
                format!(
                    "{}; missing {}, early {}",
                    summary(&r.binding_deleted),
                    r.binding_missing,
                    r.binding_early
                ),
            ));
            rows.push((
                "expiresAt → phase Expired seen".into(),
                summary(&r.expired_seen),
            ));
            rows.push((
                format!("expiresAt → SAR denied ({} samples)", r.sar_samples),
                format!(
                    "{}; invalid {}, resolution ≤ {:.1} ms",
                    summary(&r.sar_denied),
                    r.sar_invalid,
                    r.sar_resolution_max_ms
                ),
            ));
            rows.push((
                "oz_revocation_lag_seconds (oz's view)".into(),
                format!(
                    "n {}, mean {:.1} ms, p50 ≈ {}, p99 ≈ {}",
                    r.oz_revocation_lag.count,
                    r.oz_revocation_lag.mean_ms,
                    opt_ms(r.oz_revocation_lag.p50_ms),
                    opt_ms(r.oz_revocation_lag.p99_ms)
                ),
            ));
        }
        if let Some(w) = &self.webhooks {
            rows.push((
                "== webhooks, direct over TLS (latency from due time)".into(),
                String::new(),
            ));
            for run in &w.runs {
                rows.push((
                    format!("{:?} at {}/s", run.endpoint, run.target_rate),
                    format!(
                        "p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms; {:.0}/s achieved, {} errors; CPU: oz {:.0}%, control plane {:.0}%, client {:.0}%; oz RSS max {:.0} MiB",
                        run.latency.p50_ms,
                        run.latency.p99_ms,
                        run.latency.max_ms,
                        run.achieved_rate,
                        run.errors,
                        run.process.cpu_percent,
                        run.apiserver.cpu_percent,
                        run.load_generator.cpu_percent,
                        run.process.rss_max_mib
                    ),
                ));
            }
            rows.push((
                "audit handler alone, in-process".into(),
                summary(&w.audit_breakdown.handler_in_process),
            ));
            let b = &w.audit_breakdown;
            rows.push((
                "audit grant lookup alone, from oz's cache".into(),
                summary(&b.lookup_cached),
            ));
            rows.push((
                "audit grant lookup (2 LISTs) alone".into(),
                summary(&b.lookup_through_apiserver),
            ));
            rows.push((
                "  the same, right after a write".into(),
                summary(&b.lookup_after_a_write),
            ));
            rows.push((
                "  the same at resourceVersion=0, after a write".into(),
                summary(&b.lookup_any_version_after_a_write),
            ));
            rows.push((
                "exec builder's pod LIST, after a write".into(),
                summary(&b.pod_list_after_a_write),
            ));
        }
        if let Some(s) = &self.scale {
            rows.push((
                format!(
                    "== scale: {} grants in {} namespaces",
                    s.grants, s.namespaces
                ),
                String::new(),
            ));
            rows.push((
                "fill (create → all Ready)".into(),
                format!(
                    "{:.1} s, {:.0} grants/s, {} create failures, {} not Ready",
                    s.fill_seconds, s.fill_rate_per_second, s.create_failures, s.not_ready
                ),
            ));
            rows.push(("oz-manager while filling".into(), window(&s.during_fill)));
            rows.push((
                "control plane while filling".into(),
                window(&s.apiserver_during_fill),
            ));
            rows.push(("oz-manager idle at scale".into(), window(&s.idle_at_scale)));
            let o = &s.object_bytes;
            rows.push((
                "one grant's objects, JSON bytes (w/o managedFields)".into(),
                format!(
                    "request {} ({}), Role {} ({}), RoleBinding {} ({})",
                    o.request,
                    o.request_without_managed_fields,
                    o.role,
                    o.role_without_managed_fields,
                    o.role_binding,
                    o.role_binding_without_managed_fields
                ),
            ));
            let r = &s.restart;
            rows.push((
                format!("restart with {} requests", r.requests),
                format!(
                    "metrics up {:.2} s; {} expiry timers armed by {}; {} reconciles started by {}; counter quiet at {} ({:.0} reconciles); CPU busy until {}",
                    r.metrics_up_seconds,
                    r.in_force,
                    opt_s(r.timers_armed_seconds),
                    r.requests,
                    opt_s(r.reconciled_all_seconds),
                    opt_s(r.quiet_seconds),
                    r.reconciles,
                    opt_s(r.busy_seconds)
                ),
            ));
            rows.push(("oz-manager during restart".into(), window(&r.during)));
            rows.push((
                "control plane after restart".into(),
                format!(
                    "busy until {}; {}",
                    opt_s(r.apiserver_busy_seconds),
                    window(&r.apiserver_during)
                ),
            ));
            rows.push((
                "oz-manager idle after restart".into(),
                window(&r.idle_after),
            ));
            rows.push((
                format!(
                    "canaries ({}), expiring {:.1} s after spawn",
                    r.canaries, r.canary_expiry_after_spawn_seconds
                ),
                format!("{}; missing {}", summary(&r.canary_lag), r.canary_missing),
            ));
            rows.push((
                "canaries: expiresAt → phase Expired seen".into(),
                summary(&r.canary_expired_lag),
            ));
        }
        if let Some(s) = &self.sessions {
            rows.push((
                format!(
                    "== brokered sessions ({} under grants of {}–{} s, each running cat)",
                    s.sessions, s.durations_seconds.0, s.durations_seconds.1
                ),
                String::new(),
            ));
            rows.push((
                "expiresAt → client's stream ended".into(),
                format!(
                    "{}; with oz's line {}, never closed {}, early {}, failed {}",
                    summary(&s.close_lag),
                    s.closed_with_notice,
                    s.never_closed,
                    s.closed_early,
                    s.failed
                ),
            ));
            rows.push((
                "oz_session_close_lag_seconds (oz's view)".into(),
                format!(
                    "n {}, mean {:.1} ms, p50 ≈ {}, p99 ≈ {}",
                    s.oz_close_lag.count,
                    s.oz_close_lag.mean_ms,
                    opt_ms(s.oz_close_lag.p50_ms),
                    opt_ms(s.oz_close_lag.p99_ms)
                ),
            ));
            rows.push((
                "oz_sessions_ended_total / refused_total".into(),
                format!("{} / {}", by_reason(&s.oz_ended), by_reason(&s.oz_refused)),
            ));
            let t = &s.throughput;
            let runs = |v: &[f64]| {
                v.iter()
                    .map(|r| format!("{r:.0}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            rows.push((
                format!("cat of {} MiB, brokered", t.bytes / (1024 * 1024)),
                format!(
                    "median {:.1} MiB/s (runs {})",
                    t.brokered_median_mib_s,
                    runs(&t.brokered_mib_s)
                ),
            ));
            rows.push((
                format!("cat of {} MiB, direct pods/exec", t.bytes / (1024 * 1024)),
                format!(
                    "median {:.1} MiB/s (runs {})",
                    t.direct_median_mib_s,
                    runs(&t.direct_mib_s)
                ),
            ));
            rows.push((
                "brokered overhead (time), recordings on disk".into(),
                format!(
                    "{:+.0}%, {:.1} MiB",
                    t.overhead_percent,
                    t.recordings_bytes as f64 / (1024.0 * 1024.0)
                ),
            ));
        }
        if let Some(a) = &self.apiserver {
            rows.push((
                "== through the apiserver (alice, sequential)".into(),
                String::new(),
            ));
            rows.push((
                "create, with webhooks".into(),
                summary(&a.create_with_webhooks),
            ));
            rows.push((
                "create, without webhooks".into(),
                summary(&a.create_without_webhooks),
            ));
            rows.push((
                "exec POST, with audit webhook".into(),
                summary(&a.exec_with_audit),
            ));
            rows.push((
                "exec POST, without audit webhook".into(),
                summary(&a.exec_without_audit),
            ));
            if a.unexpected > 0 {
                rows.push(("unexpected answers".into(), a.unexpected.to_string()));
            }
        }
        rows.push(("== targets".into(), String::new()));
        for t in &self.targets {
            let verdict = match t.met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            };
            rows.push((
                format!("{} {}", t.figure, t.target),
                match t.measured {
                    Some(v) => format!("{v:.2} {}: {verdict}", t.unit),
                    None => verdict.into(),
                },
            ));
        }
        for e in &self.errors {
            rows.push(("ERROR".into(), e.clone()));
        }

        let width = rows
            .iter()
            .filter(|(k, _)| !k.starts_with("=="))
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (key, value) in rows {
            if key.starts_with("==") {
                let _ = writeln!(out, "\n{key}");
            } else {
                let _ = writeln!(out, "  {key:<width$}  {value}");
            }
        }
        out
    }
}

fn summary(s: &Summary) -> String {
    if s.count == 0 {
        return "no data".into();
    }
    format!(
        "n {}, p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        s.count, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms
    )
}

fn window(w: &Window) -> String {
    format!(
        "RSS max {:.1} MiB (end {:.1}), CPU {:.1}% of a core over {:.1} s",
        w.rss_max_mib, w.rss_end_mib, w.cpu_percent, w.seconds
    )
}

fn opt_ms(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.0} ms"))
}

fn by_reason(counts: &[(String, f64)]) -> String {
    if counts.is_empty() {
        return "none".into();
    }
    counts
        .iter()
        .map(|(reason, count)| format!("{reason} {count:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn opt_s(value: Option<f64>) -> String {
    value.map_or("never".into(), |v| format!("{v:.1} s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_measured_targets_that_miss_are_missed() {
        let mut results = Results {
            idle: Some(Window {
                rss_max_mib: 65.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        results.judge();
        assert_eq!(
            results.missed(),
            ["RSS, idle: 65.0 MiB, target < 64 MiB"],
            "the idle RSS misses; what was not measured is not missed"
        );

        results.idle = Some(Window {
            rss_max_mib: 22.0,
            ..Default::default()
        });
        results.judge();
        assert!(results.missed().is_empty());
    }

    #[test]
    fn a_session_close_lag_p99_over_500_ms_is_missed() {
        let mut sessions = SessionsResults::default();
        sessions.close_lag.count = 50;
        sessions.close_lag.p99_ms = 600.0;
        let mut results = Results {
            sessions: Some(sessions),
            ..Default::default()
        };
        results.judge();
        assert_eq!(
            results.missed(),
            [
                "Session close lag, p99 (expiresAt → client's stream ended): 600.0 ms, target < 500 ms"
            ]
        );
    }
}
