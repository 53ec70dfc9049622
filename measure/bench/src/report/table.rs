//! The table printed at the end of a run, each figure next to the previous run's.

use std::fmt::Write;

mod fleet;

use super::{
    Results,
    cells::{summary, window},
};
use crate::calls::CallsResults;

impl Results {
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
        if let Some(f) = &self.fleet {
            fleet::rows(&mut rows, f);
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
}
