//! How the table writes a distribution and a process's window, the same in every part's rows.

use crate::{procstat::Window, stats::Summary};

pub fn summary(s: &Summary) -> String {
    if s.count == 0 {
        return "no data".into();
    }
    format!(
        "n {}, p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        s.count, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms
    )
}

pub fn window(w: &Window) -> String {
    format!(
        "RSS max {:.1} MiB (end {:.1}), CPU {:.1}% of a core over {:.1} s",
        w.rss_max_mib, w.rss_end_mib, w.cpu_percent, w.seconds
    )
}
