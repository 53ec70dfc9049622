//! The fleet part's rows: one block per fleet.

use crate::fleet::FleetResults;
use crate::report::cells::{summary, window};

pub fn rows(rows: &mut Vec<(String, String)>, fleets: &FleetResults) {
    for f in &fleets.runs {
        rows.push((
            format!("== fleet: a hub and {} spokes", f.spokes),
            String::new(),
        ));
        rows.push(("hub oz-manager idle".into(), window(&f.hub_idle)));
        rows.push((
            format!("asked on a spoke itself, {} requests", f.spoke_own.count),
            summary(&f.spoke_own),
        ));
        rows.push((
            "asked on the hub: → Ready on the spoke".into(),
            summary(&f.through_hub),
        ));
        rows.push((
            "asked on the hub: → Ready on the hub".into(),
            summary(&f.through_hub_hub_ready),
        ));
        rows.push((
            "p99 through the hub over a spoke's own".into(),
            format!("{:.1} ms ({} not Ready)", f.p99_over_spoke_ms, f.failures),
        ));
        let c = &f.hub_calls;
        rows.push((
            "hub's API calls per grant: on the hub / on spokes".into(),
            format!(
                "{:.1} / {:.1} ({:.1} / {:.1} writes), informers apart",
                c.per_grant_on_hub,
                c.per_grant_on_spokes,
                c.writes_per_grant_on_hub,
                c.writes_per_grant_on_spokes
            ),
        ));
        for (place, tally) in [("hub", &c.on_hub), ("spokes", &c.on_spokes)] {
            let kinds: Vec<String> = (tally.by_kind.iter())
                .map(|(kind, n)| format!("{kind} {:.1}", *n as f64 / c.grants.max(1) as f64))
                .collect();
            rows.push((format!("  on the {place}, per grant"), kinds.join(", ")));
        }
        let h = &f.held;
        rows.push((
            format!("{} grants held: hub RSS", h.grants),
            format!(
                "{:.1} → {:.1} MiB, {:.2} KB a grant; {} Ready in {:.1} s",
                h.hub_rss_before_mib, h.hub_rss_after_mib, h.hub_kb_per_grant, h.ready, h.seconds
            ),
        ));
        rows.push(("  hub oz-manager meanwhile".into(), window(&h.hub)));
        let r = &f.revocation;
        rows.push((
            format!(
                "hub stopped, {} grants of {}–{} s: binding deleted",
                r.grants, r.durations_seconds.0, r.durations_seconds.1
            ),
            format!(
                "{}; {} missing, {} early; all Ready after {:.1} s",
                summary(&r.binding_deleted),
                r.missing,
                r.early,
                r.all_ready_seconds
            ),
        ));
    }
}
