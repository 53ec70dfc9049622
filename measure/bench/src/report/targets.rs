//! The targets: each figure with its limit, whether a run met it, and the same figure in the
//! previous run.

use serde::Serialize;

use super::Results;
use crate::{scale::ScaleResults, webhooks::Endpoint};

/// One of oz's targets (docs/benchmarks.md), and where the run stands.
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
        // is judged at the full run's sizes only.
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
        for run in self.fleet.iter().flat_map(|f| &f.runs) {
            targets.extend([
                target(
                    &format!(
                        "Fleet of {}: time to access p99 through the hub, over a spoke's own",
                        run.spokes
                    ),
                    Bound::Below(500.0),
                    "ms",
                    (run.through_hub.count > 0).then_some(run.p99_over_spoke_ms),
                ),
                target(
                    &format!(
                        "Fleet of {}: revocation lag p99 with the hub stopped (RoleBinding deleted)",
                        run.spokes
                    ),
                    Bound::Below(1000.0),
                    "ms",
                    (run.revocation.binding_deleted.count > 0)
                        .then_some(run.revocation.binding_deleted.p99_ms),
                ),
                target(
                    &format!(
                        "Fleet of {}: grants not revoked with the hub stopped",
                        run.spokes
                    ),
                    Bound::AtMost(0.0),
                    "grants",
                    (run.revocation.grants > 0).then_some(run.revocation.missing as f64),
                ),
            ]);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        access::AccessResults, calls::CallsResults, procstat::Window, sessions::SessionsResults,
    };

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
    fn a_fleet_is_judged_on_its_overhead_over_the_spokes_own_time_and_its_revocations() {
        use crate::fleet::{FleetResults, FleetRun};
        let mut run = FleetRun {
            spokes: 10,
            p99_over_spoke_ms: 620.0,
            ..Default::default()
        };
        run.through_hub.count = 100;
        run.through_hub.p99_ms = 700.0;
        run.revocation.grants = 100;
        run.revocation.missing = 1;
        run.revocation.binding_deleted.count = 99;
        run.revocation.binding_deleted.p99_ms = 300.0;
        let mut results = Results {
            fleet: Some(FleetResults { runs: vec![run] }),
            ..Default::default()
        };
        results.judge();
        assert_eq!(
            results.missed(),
            [
                "Fleet of 10: time to access p99 through the hub, over a spoke's own: 620.0 ms, target < 500 ms",
                "Fleet of 10: grants not revoked with the hub stopped: 1.0 grants, target ≤ 0 grants",
            ]
        );
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
