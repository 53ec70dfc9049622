//! Latency percentiles: an HdrHistogram of microseconds, summarised in milliseconds.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Recorded durations, kept to three significant figures from 1 µs to an hour.
#[derive(Clone, Debug)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self {
            histogram: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("constant, valid histogram bounds"),
        }
    }
}

impl Latencies {
    /// Records one duration (clamped to the histogram's range).
    pub fn record(&mut self, duration: Duration) {
        let micros = (duration.as_micros() as u64).clamp(1, self.histogram.high());
        self.histogram
            .record(micros)
            .expect("clamped into the histogram's range");
    }

    /// Records a duration given in (possibly negative) seconds; negatives count as zero.
    pub fn record_seconds(&mut self, seconds: f64) {
        self.record(Duration::from_secs_f64(seconds.max(0.0)));
    }

    /// Count, mean, p50, p95, p99 and max, in milliseconds.
    pub fn summary(&self) -> Summary {
        let ms = |micros: u64| micros as f64 / 1000.0;
        if self.histogram.is_empty() {
            return Summary::default();
        }
        Summary {
            count: self.histogram.len(),
            mean_ms: self.histogram.mean() / 1000.0,
            p50_ms: ms(self.histogram.value_at_quantile(0.50)),
            p95_ms: ms(self.histogram.value_at_quantile(0.95)),
            p99_ms: ms(self.histogram.value_at_quantile(0.99)),
            max_ms: ms(self.histogram.max()),
        }
    }
}

/// A distribution in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_to_a_hundred_milliseconds() {
        let mut latencies = Latencies::default();
        for ms in 1..=100 {
            latencies.record(Duration::from_millis(ms));
        }
        let summary = latencies.summary();
        assert_eq!(summary.count, 100);
        assert!((summary.p50_ms - 50.0).abs() < 0.1, "{summary:?}");
        assert!((summary.p99_ms - 99.0).abs() < 0.1, "{summary:?}");
        assert!((summary.max_ms - 100.0).abs() < 0.1, "{summary:?}");
    }

    #[test]
    fn negative_seconds_count_as_zero_and_empty_is_all_zero() {
        let mut latencies = Latencies::default();
        assert_eq!(latencies.summary(), Summary::default());
        latencies.record_seconds(-0.5);
        assert_eq!(latencies.summary().count, 1);
        assert!(latencies.summary().max_ms < 0.01);
    }
}
