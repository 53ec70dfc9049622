//! The results: one JSON document, and a table for the terminal.

use std::fmt::Write;

use serde::Serialize;

use crate::{
    access::AccessResults,
    calls::CallsResults,
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
    pub calls: Option<CallsResults>,
    pub access: Option<AccessResults>,
    pub revocation: Option<RevocationResults>,
    pub webhooks: Option<DirectResults>,
    /// One entry per scale point.
    pub scale: Vec<ScaleResults>,
    pub sessions: Option<SessionsResults>,
    pub apiserver: Option<ApiserverResults>,
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

/// One of the targets, and where the run stands.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub figure: String,
    pub target: String,
    pub measured: Option<f64>,
    pub unit: &'static str,
    pub met: Option<bool>,
    /// The same figure in the previous run's results, when it had it.
    pub previous: Option<f64>,
}

/// Which side of its limit a figure must stay on.
#[derive(Clone, Copy, Debug)]
pub enum Bound {
    Below(f64),
    AtMost(f64),
    AtLeast(f64),
}

impl Bound {
    fn met(self, measured: f64) -> bool {
        match self {
            Self::Below(limit) => measured < limit,
            Self::AtMost(limit) => measured <= limit,
            Self::AtLeast(limit) => measured >= limit,
        }
    }

    /// `< 200 ms`, `≤ 4`, `≥ 112 grants/s`.
    fn describe(self, unit: &str) -> String {
        let (sign, limit) = match self {
            Self::Below(l) => ("<", l),
            Self::AtMost(l) => ("≤", l),
            Self::AtLeast(l) => ("≥", l),
        };
        format!("{sign} {limit} {unit}").trim_end().to_string()
    }
}

fn target(figure: &str, bound: Bound, unit: &'static str, measured: Option<f64>) -> Target {
    Target {
        figure: figure.into(),
        target: bound.describe(unit),
        measured,
        unit,
        met: measured.map(|m| bound.met(m)),
        previous: None,
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

    /// Whether the run passes: no part failed and, with `check`, no measured target was
    /// missed (without it, a run is for reading).
    pub fn passes(&self, check: bool) -> bool {
        self.errors.is_empty() && (!check || self.missed().is_empty())
    }

    /// Fills `targets` from what was measured.
    pub fn judge(&mut self) {
        let audit_at = |rate: u64| {
            self.webhooks.as_ref().and_then(|w| {
                w.runs
                    .iter()
                    .find(|r| r.endpoint == Endpoint::Audit && r.target_rate == rate)
                    .map(|r| r.latency.p99_ms)
            })
        };
        let point = |grants: usize| self.scale.iter().find(|p| p.grants == grants);
        let calls = self.calls.as_ref();
        let mut targets = vec![
            target(
                "API calls to grant, per grant (max)",
                Bound::AtMost(5.0),
                "requests",
                calls.map(|c| c.grant.requests_max as f64),
            ),
            target(
                "API writes to grant, per grant (max)",
                Bound::AtMost(4.0),
                "writes",
                calls.map(|c| c.grant.writes_max as f64),
            ),
            target(
                "API calls while a grant is idle, per grant (max)",
                Bound::AtMost(0.0),
                "requests",
                calls.map(|c| c.idle.requests_max as f64),
            ),
            target(
                "API calls to revoke, per grant (max)",
                Bound::AtMost(4.0),
                "requests",
                calls.map(|c| c.revoke.requests_max as f64),
            ),
            target(
                "API writes of a no-op reconcile (restart)",
                Bound::AtMost(0.0),
                "writes",
                calls.map(|c| c.restart.in_grant_namespaces.writes as f64),
            ),
            target(
                "Time to access, p99 (sequential)",
                Bound::Below(200.0),
                "ms",
                self.access.as_ref().map(|a| a.sequential.p99_ms),
            ),
            target(
                "Burst of 1,000, all Ready",
                Bound::AtLeast(112.0),
                "grants/s",
                self.access
                    .as_ref()
                    .filter(|a| a.burst.requests == 1000)
                    .map(|a| a.burst.rate_per_second),
            ),
            target(
                "Revocation lag, p99 (RoleBinding deleted)",
                Bound::Below(1000.0),
                "ms",
                self.revocation.as_ref().map(|r| r.binding_deleted.p99_ms),
            ),
            target(
                "Revocation lag, p99 (access denied)",
                Bound::Below(1000.0),
                "ms",
                self.revocation
                    .as_ref()
                    .filter(|r| r.sar_denied.count > 0)
                    .map(|r| r.sar_denied.p99_ms),
            ),
            target(
                "RSS, idle",
                Bound::Below(64.0),
                "MiB",
                self.idle.map(|w| w.rss_max_mib),
            ),
            target(
                "RSS, 10,000 grants (peak: filling, idle, restarted)",
                Bound::AtMost(80.0),
                "MiB",
                point(10_000).map(ScaleResults::rss_peak_mib),
            ),
            target(
                "RSS, 50,000 grants (peak: filling, idle, restarted)",
                Bound::AtMost(320.0),
                "MiB",
                point(50_000).map(ScaleResults::rss_peak_mib),
            ),
        ];
        // A few hundred grants move RSS by less than the allocator's own noise: the target
        // is judged at the sizes only.
        for p in self.scale.iter().filter(|p| p.grants >= 10_000) {
            targets.push(target(
                &format!("Memory per grant at {} grants", p.grants),
                Bound::AtMost(3.0),
                "KB",
                Some(p.kb_per_grant),
            ));
        }
        targets.extend([
            target(
                "All timers armed after a restart at 50,000 grants",
                Bound::AtMost(5.0),
                "s",
                point(50_000).map(|p| p.restart.timers_armed_seconds.unwrap_or(f64::INFINITY)),
            ),
            target(
                "Revocation lag p99 with 50,000 grants in force",
                Bound::Below(1000.0),
                "ms",
                point(50_000)
                    .filter(|p| p.in_force_lag.count > 0)
                    .map(|p| p.in_force_lag.p99_ms),
            ),
            target(
                "Session close lag, p99 (expiresAt → client's stream ended)",
                Bound::Below(500.0),
                "ms",
                self.sessions
                    .as_ref()
                    .filter(|s| s.close_lag.count > 0)
                    .map(|s| s.close_lag.p99_ms),
            ),
            target(
                "Audit webhook p99, direct at 2,000 req/s",
                Bound::AtMost(5.0),
                "ms",
                audit_at(2000),
            ),
            target(
                "Audit webhook p99, direct at 10,000 req/s",
                Bound::AtMost(5.0),
                "ms",
                audit_at(10_000),
            ),
        ]);
        self.targets = targets;
    }

    /// Sets each target's `previous` from an earlier run's results JSON: the same figure's
    /// measurement there, if it had one.
    pub fn compare_with(&mut self, previous: &serde_json::Value) {
        self.previous = Some(previous.clone());
        let earlier = previous["targets"].as_array().cloned().unwrap_or_default();
        for t in &mut self.targets {
            t.previous = earlier
                .iter()
                .find(|p| p["figure"] == t.figure.as_str())
                .and_then(|p| p["measured"].as_f64())
                .or_else(|| derived(previous, &t.figure));
        }
    }

    /// The previous run's figure at `pointer` (a JSON pointer), `None` when it had none.
    fn was(&self, pointer: &str) -> Option<&serde_json::Value> {
        self.previous.as_ref()?.pointer(pointer)
    }

    /// The previous run's scale point with `grants` grants (older runs had a single point).
    fn scale_was(&self, grants: usize) -> Option<&serde_json::Value> {
        let scale = self.previous.as_ref()?.get("scale")?;
        let points = match scale {
            serde_json::Value::Array(points) => points.iter().collect(),
            point => vec![point],
        };
        points
            .into_iter()
            .find(|p| p["grants"].as_u64() == Some(grants as u64))
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
        if let Some(c) = &self.calls {
            calls_rows(&mut rows, c, self.previous.as_ref());
        }
        if let Some(a) = &self.access {
            rows.push(("== time to access (create → Ready)".into(), String::new()));
            rows.push((
                format!("sequential, {} requests", a.sequential.count),
                summary(&a.sequential) + &previously(self.was("/access/sequential")),
            ));
            rows.push((
                "  of which the create call".into(),
                summary(&a.sequential_create_call),
            ));
            rows.push((
                format!("burst of {}: total", a.burst.requests),
                format!(
                    "{:.2} s ({:.0} grants/s), {} failed{}",
                    a.burst.total_seconds,
                    a.burst.rate_per_second,
                    a.burst.failures,
                    previously(self.was("/access/burst/total_seconds"))
                ),
            ));
            if a.burst_rates.len() > 1 {
                let rates: Vec<String> = a.burst_rates.iter().map(|r| format!("{r:.0}")).collect();
                rows.push((
                    format!("  the median of {} bursts (grants/s)", a.burst_rates.len()),
                    rates.join(", "),
                ));
            }
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
                    "{}; missing {}, early {}{}",
                    summary(&r.binding_deleted),
                    r.binding_missing,
                    r.binding_early,
                    previously(self.was("/revocation/binding_deleted"))
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
                    ) + &previously(self.previous.as_ref().and_then(|p| {
                        p["webhooks"]["runs"].as_array()?.iter().find(|r| {
                            r["target_rate"].as_u64() == Some(run.target_rate)
                                && r["endpoint"] == serde_json::json!(run.endpoint)
                        })
                    }).map(|r| &r["latency"])),
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
        for s in &self.scale {
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
                    "{:.1} s, {:.0} grants/s, {} create failures, {} not Ready{}",
                    s.fill_seconds,
                    s.fill_rate_per_second,
                    s.create_failures,
                    s.not_ready,
                    previously(self.scale_was(s.grants).map(|p| &p["fill_rate_per_second"]))
                ),
            ));
            rows.push(("oz-manager while filling".into(), window(&s.during_fill)));
            rows.push((
                "control plane while filling".into(),
                window(&s.apiserver_during_fill),
            ));
            rows.push((
                "oz-manager idle at scale".into(),
                window(&s.idle_at_scale)
                    + &previously(self.scale_was(s.grants).map(|p| &p["idle_at_scale"])),
            ));
            rows.push((
                format!(
                    "memory per request ({} in the cluster)",
                    s.requests_in_cluster
                ),
                format!(
                    "{:.2} KB (idle RSS {:.1} MiB, {:.1} MiB before any grant)",
                    s.kb_per_grant, s.idle_at_scale.rss_end_mib, s.rss_idle_before_mib
                ),
            ));
            rows.push((
                format!(
                    "revocation lag with all in force ({} short grants)",
                    s.in_force_canaries
                ),
                format!(
                    "{}; missing {}",
                    summary(&s.in_force_lag),
                    s.in_force_missing
                ),
            ));
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
                format!(
                    "{}; previous {}",
                    match t.measured {
                        Some(v) => format!("{v:.2} {}: {verdict}", t.unit),
                        None => verdict.into(),
                    },
                    t.previous
                        .map_or("-".into(), |v| format!("{v:.2} {}", t.unit))
                ),
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

/// A figure that runs from before its target existed did not record, worked out from what
/// they did record.
fn derived(previous: &serde_json::Value, figure: &str) -> Option<f64> {
    if figure.starts_with("Burst of 1,000") {
        let burst = &previous["access"]["burst"];
        if burst["requests"].as_u64()? != 1000 {
            return None;
        }
        let ready = burst["requests"].as_f64()? - burst["failures"].as_f64()?;
        return Some(ready / burst["total_seconds"].as_f64()?);
    }
    None
}

/// The API-calls part: per phase, per grant, and the breakdown by call.
fn calls_rows(
    rows: &mut Vec<(String, String)>,
    c: &CallsResults,
    previous: Option<&serde_json::Value>,
) {
    rows.push((
        format!(
            "== oz's API calls per grant (audit log; {} grants of {} s)",
            c.grants, c.grant_seconds
        ),
        String::new(),
    ));
    for (phase, figures) in [
        ("grant", &c.grant),
        ("idle", &c.idle),
        ("revoke", &c.revoke),
    ] {
        rows.push((
            format!("{phase}: requests, writes"),
            format!(
                "{:.1} (max {}), {:.1} (max {}){}",
                figures.requests_mean,
                figures.requests_max,
                figures.writes_mean,
                figures.writes_max,
                previously(previous.and_then(|p| p.pointer(&format!("/calls/{phase}"))))
            ),
        ));
        for (kind, mean) in &figures.by_kind_mean {
            rows.push((format!("  {kind}"), format!("{mean:.1}")));
        }
    }
    let r = &c.restart;
    rows.push((
        format!(
            "restart, {} requests ({} in force): in their namespaces",
            r.requests, r.in_force
        ),
        format!(
            "{} requests, {} writes over {:.1} s",
            r.in_grant_namespaces.requests, r.in_grant_namespaces.writes, r.seconds
        ),
    ));
    for (kind, count) in &r.in_grant_namespaces.by_kind {
        rows.push((format!("  {kind}"), count.to_string()));
    }
    rows.push((
        "restart: elsewhere (start-up)".into(),
        format!(
            "{} requests, {} writes",
            r.elsewhere.requests, r.elsewhere.writes
        ),
    ));
    for (kind, count) in &r.elsewhere.by_kind {
        rows.push((format!("  {kind}"), count.to_string()));
    }
    rows.push((
        "informers (not per grant): watches, lists".into(),
        c.informer_calls
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect::<Vec<_>>()
            .join(", "),
    ));
}

/// `; previous ...`: the earlier run's figure, as compact as its shape allows (a latency
/// summary, a process window, per-grant calls, a number); empty when it had none.
fn previously(was: Option<&serde_json::Value>) -> String {
    let Some(was) = was.filter(|w| !w.is_null()) else {
        return String::new();
    };
    let number = |key: &str| was[key].as_f64();
    let figure = if let Some(p99) = number("p99_ms") {
        format!(
            "p50 {:.1} ms, p99 {p99:.1} ms",
            number("p50_ms").unwrap_or_default()
        )
    } else if let Some(rss) = number("rss_max_mib") {
        format!(
            "RSS max {rss:.1} MiB, CPU {:.1}%",
            number("cpu_percent").unwrap_or_default()
        )
    } else if let Some(requests) = number("requests_mean") {
        format!(
            "{requests:.1} requests, {:.1} writes",
            number("writes_mean").unwrap_or_default()
        )
    } else if let Some(value) = was.as_f64() {
        format!("{value:.1}")
    } else {
        return String::new();
    };
    format!("; previous {figure}")
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

    fn calls(grant_requests: usize, grant_writes: usize) -> CallsResults {
        let mut calls = CallsResults::default();
        calls.grant.requests_max = grant_requests;
        calls.grant.writes_max = grant_writes;
        calls
    }

    #[test]
    fn a_grant_over_its_call_budget_fails_a_checked_run() {
        let mut results = Results {
            calls: Some(calls(6, 4)),
            ..Default::default()
        };
        results.judge();
        assert_eq!(
            results.missed(),
            ["API calls to grant, per grant (max): 6.0 requests, target ≤ 5 requests"]
        );
        assert!(!results.passes(true), "--check fails on a missed target");
        assert!(
            results.passes(false),
            "without --check a run is for reading"
        );

        results.calls = Some(calls(5, 4));
        results.judge();
        assert!(
            results.passes(true),
            "at the limit is within it: {:?}",
            results.missed()
        );
    }

    #[test]
    fn a_burst_below_112_grants_per_second_is_missed() {
        let mut access = AccessResults::default();
        access.burst.requests = 1000;
        access.burst.rate_per_second = 56.0;
        let mut results = Results {
            access: Some(access),
            ..Default::default()
        };
        results.judge();
        assert_eq!(
            results.missed(),
            ["Burst of 1,000, all Ready: 56.0 grants/s, target ≥ 112 grants/s"]
        );
    }

    #[test]
    fn previous_figures_come_from_the_same_target_or_the_burst_it_recorded() {
        let mut results = Results {
            calls: Some(calls(5, 4)),
            ..Default::default()
        };
        results.judge();
        results.compare_with(&serde_json::json!({
            "targets": [{"figure": "API calls to grant, per grant (max)", "measured": 19.0}],
            "access": {"burst": {"requests": 1000, "failures": 0, "total_seconds": 20.0}},
        }));
        let previous = |figure: &str| {
            results
                .targets
                .iter()
                .find(|t| t.figure.starts_with(figure))
                .and_then(|t| t.previous)
        };
        assert_eq!(previous("API calls to grant"), Some(19.0));
        assert_eq!(previous("Burst of 1,000"), Some(50.0));
        assert_eq!(previous("RSS, idle"), None);
    }

    #[test]
    fn a_previous_figure_is_shown_in_its_own_shape() {
        let was = serde_json::json!({
            "sequential": {"p50_ms": 29.8, "p99_ms": 71.0},
            "grant": {"requests_mean": 19.0, "writes_mean": 8.0},
            "rate": 56.0,
        });
        assert_eq!(
            previously(was.get("sequential")),
            "; previous p50 29.8 ms, p99 71.0 ms"
        );
        assert_eq!(
            previously(was.get("grant")),
            "; previous 19.0 requests, 8.0 writes"
        );
        assert_eq!(previously(was.get("rate")), "; previous 56.0");
        assert_eq!(previously(was.get("missing")), "");
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
