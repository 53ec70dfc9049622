//! oz-manager's resident memory and CPU, read from `/proc/PID/status` (VmRSS) and
//! `/proc/PID/stat` (utime + stime), sampled in the background so a window of the run (idle,
//! a burst, a restart) can be summarised afterwards.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use serde::Serialize;

/// How often the sampler reads `/proc`.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// One reading of a process.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    pub at: Instant,
    pub pid: u32,
    /// VmRSS, in KiB.
    pub rss_kib: u64,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

/// Reads `pid` now; `None` if it has exited.
pub fn read(pid: u32) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(Reading {
        at: Instant::now(),
        pid,
        rss_kib,
        cpu_ticks: cpu_ticks(&stat)?,
    })
}

/// utime + stime from the text of `/proc/PID/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted from the last `)`: utime and stime are fields
/// 14 and 15 of the line, the 12th and 13th after it.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux unless configured otherwise).
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// Samples whichever process id is current (it changes when oz-manager is restarted).
#[derive(Clone)]
pub struct Sampler {
    pid: Arc<AtomicU32>,
    readings: Arc<Mutex<Vec<Reading>>>,
    ticks_per_second: u64,
}

impl Sampler {
    /// Starts sampling `pid` every [`SAMPLE_EVERY`] in a background task.
    pub fn start(pid: u32) -> Self {
        let sampler = Self {
            pid: Arc::new(AtomicU32::new(pid)),
            readings: Arc::default(),
            ticks_per_second: clock_ticks_per_second(),
        };
        let background = sampler.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                background.sample();
            }
        });
        sampler
    }

    /// From now on, samples `pid`.
    pub fn follow(&self, pid: u32) {
        self.pid.store(pid, Ordering::SeqCst);
        self.sample();
    }

    /// Takes a reading now (also done every [`SAMPLE_EVERY`]).
    pub fn sample(&self) {
        if let Some(reading) = read(self.pid.load(Ordering::SeqCst)) {
            self.readings.lock().unwrap().push(reading);
        }
    }

    /// Marks the start of a window (with a reading at its start).
    pub fn mark(&self) -> Instant {
        let at = Instant::now();
        self.sample();
        at
    }

    /// RSS and CPU over the readings taken since `since`.
    pub fn window(&self, since: Instant) -> Window {
        self.sample();
        let readings: Vec<Reading> = self
            .readings
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.at >= since)
            .copied()
            .collect();
        summarise(&readings, self.ticks_per_second)
    }
}

impl Sampler {
    /// The end of the last sampling interval since `since` in which the process used more than
    /// `percent` of a core.
    pub fn busy_until(&self, since: Instant, percent: f64) -> Option<Instant> {
        let readings = self.readings.lock().unwrap();
        let after: Vec<&Reading> = readings.iter().filter(|r| r.at >= since).collect();
        after
            .windows(2)
            .rev()
            .filter(|pair| pair[0].pid == pair[1].pid)
            .filter(|pair| {
                let seconds = pair[1].at.duration_since(pair[0].at).as_secs_f64();
                let cpu = pair[1].cpu_ticks.saturating_sub(pair[0].cpu_ticks) as f64
                    / self.ticks_per_second as f64;
                seconds > 0.0 && 100.0 * cpu / seconds > percent
            })
            .map(|pair| pair[1].at)
            .next()
    }
}

/// A window of readings, summarised.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Window {
    pub seconds: f64,
    pub rss_max_mib: f64,
    pub rss_end_mib: f64,
    /// CPU time over wall time, in percent of one core.
    pub cpu_percent: f64,
    pub cpu_seconds: f64,
}

/// Summarises readings in time order. CPU is summed only between consecutive readings of the
/// same process, so a restart inside the window does not count the old process's total.
pub fn summarise(readings: &[Reading], ticks_per_second: u64) -> Window {
    let (Some(first), Some(last)) = (readings.first(), readings.last()) else {
        return Window::default();
    };
    let ticks: u64 = readings
        .windows(2)
        .filter(|pair| pair[0].pid == pair[1].pid)
        .map(|pair| pair[1].cpu_ticks.saturating_sub(pair[0].cpu_ticks))
        .sum();
    let seconds = last.at.duration_since(first.at).as_secs_f64();
    let cpu_seconds = ticks as f64 / ticks_per_second as f64;
    let mib = |kib: u64| kib as f64 / 1024.0;
    Window {
        seconds,
        rss_max_mib: mib(readings.iter().map(|r| r.rss_kib).max().unwrap_or(0)),
        rss_end_mib: mib(last.rss_kib),
        cpu_percent: if seconds > 0.0 {
            100.0 * cpu_seconds / seconds
        } else {
            0.0
        },
        cpu_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_counted_after_the_command_name() {
        let stat = "4242 (oz manager (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 \
                    9 0 12345 100000000 4000 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(300));
    }

    #[test]
    fn a_restart_inside_a_window_does_not_count_the_old_process_total() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let readings = [
            Reading {
                at: at(0),
                pid: 1,
                rss_kib: 10 * 1024,
                cpu_ticks: 1000,
            },
            Reading {
                at: at(1000),
                pid: 1,
                rss_kib: 30 * 1024,
                cpu_ticks: 1050,
            },
            Reading {
                at: at(1500),
                pid: 2,
                rss_kib: 5 * 1024,
                cpu_ticks: 10,
            },
            Reading {
                at: at(2000),
                pid: 2,
                rss_kib: 6 * 1024,
                cpu_ticks: 60,
            },
        ];
        let window = summarise(&readings, 100);
        assert!((window.cpu_seconds - 1.0).abs() < 1e-9, "{window:?}");
        assert!((window.cpu_percent - 50.0).abs() < 1e-9, "{window:?}");
        assert_eq!(window.rss_max_mib, 30.0);
        assert_eq!(window.rss_end_mib, 6.0);
    }
}
