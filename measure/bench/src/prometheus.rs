//! Just enough of the Prometheus text format to read oz's counters and histograms.

use serde::Serialize;

/// One scrape of `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    samples: Vec<Sample>,
}

#[derive(Clone, Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

impl Scrape {
    /// Parses the exposition text; lines it cannot read are skipped.
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(parse_line)
            .collect();
        Self { samples }
    }

    /// The sum of every series named `name` whose labels include all of `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// Each value of `label` among the series named `name`, with the sum of its series.
    pub fn by_label(&self, name: &str, label: &str) -> Vec<(String, f64)> {
        let mut values: Vec<(String, f64)> = Vec::new();
        for sample in self.matching(name, &[]) {
            let Some((_, value)) = sample.labels.iter().find(|(k, _)| k == label) else {
                continue;
            };
            match values.iter_mut().find(|(v, _)| v == value) {
                Some((_, sum)) => *sum += sample.value,
                None => values.push((value.clone(), sample.value)),
            }
        }
        values.sort_by(|a, b| a.0.cmp(&b.0));
        values
    }

    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
    }

    /// The histogram `name` (without `_bucket`), restricted to series with `labels`.
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> PromHistogram {
        let bucket_name = format!("{name}_bucket");
        let mut buckets: Vec<(f64, f64)> = self
            .matching(&bucket_name, labels)
            .filter_map(|s| {
                let le = s.labels.iter().find(|(k, _)| k == "le")?.1.as_str();
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((bound, s.value))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Several series (other labels) add up bucket by bucket.
        buckets.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        PromHistogram {
            buckets,
            sum: self.sum(&format!("{name}_sum"), labels),
            count: self.sum(&format!("{name}_count"), labels),
        }
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let (series, value) = line.trim().rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)),
        None => (series, Vec::new()),
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn parse_labels(text: &str) -> Vec<(String, String)> {
    text.split("\",")
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((
                key.trim().to_string(),
                value.trim().trim_matches('"').to_string(),
            ))
        })
        .collect()
}

/// A cumulative histogram: (upper bound, count ≤ bound) in increasing bound order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromHistogram {
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl PromHistogram {
    /// What was observed between `earlier` and this scrape.
    pub fn since(&self, earlier: &PromHistogram) -> PromHistogram {
        let before = |bound: f64| {
            earlier
                .buckets
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0.0, |(_, c)| *c)
        };
        PromHistogram {
            buckets: self
                .buckets
                .iter()
                .map(|(bound, count)| (*bound, count - before(*bound)))
                .collect(),
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
        }
    }

    /// The q-quantile, interpolated linearly inside its bucket as Prometheus'
    /// `histogram_quantile` does; only as precise as the bucket bounds.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count <= 0.0 {
            return None;
        }
        let rank = q * self.count;
        let mut lower = (0.0, 0.0);
        for &(bound, cumulative) in &self.buckets {
            if cumulative >= rank {
                if bound.is_infinite() {
                    return Some(lower.0);
                }
                let in_bucket = cumulative - lower.1;
                let fraction = if in_bucket > 0.0 {
                    (rank - lower.1) / in_bucket
                } else {
                    1.0
                };
                return Some(lower.0 + (bound - lower.0) * fraction);
            }
            lower = (bound, cumulative);
        }
        None
    }

    /// Count, mean and interpolated p50/p99, in milliseconds.
    pub fn summary(&self) -> HistogramSummary {
        HistogramSummary {
            count: self.count as u64,
            mean_ms: if self.count > 0.0 {
                1000.0 * self.sum / self.count
            } else {
                0.0
            },
            p50_ms: self.quantile(0.5).map(|s| s * 1000.0),
            p99_ms: self.quantile(0.99).map(|s| s * 1000.0),
        }
    }
}

/// oz's own view of a latency, from its histogram buckets.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HistogramSummary {
    pub count: u64,
    pub mean_ms: f64,
    /// Interpolated inside a bucket: only as precise as the bucket bounds.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP oz_reconciles Reconciles started.
# TYPE oz_reconciles counter
oz_reconciles_total{controller="request",kind="ExecAccessRequest"} 12
oz_reconciles_total{controller="template",kind="ExecAccessTemplate"} 3
oz_revocation_lag_seconds_sum{kind="ExecAccessRequest"} 0.5
oz_revocation_lag_seconds_count{kind="ExecAccessRequest"} 10
oz_revocation_lag_seconds_bucket{le="0.005",kind="ExecAccessRequest"} 0
oz_revocation_lag_seconds_bucket{le="0.01",kind="ExecAccessRequest"} 2
oz_revocation_lag_seconds_bucket{le="0.1",kind="ExecAccessRequest"} 10
oz_revocation_lag_seconds_bucket{le="+Inf",kind="ExecAccessRequest"} 10
"#;

    #[test]
    fn counters_are_summed_over_matching_series() {
        let scrape = Scrape::parse(TEXT);
        assert_eq!(scrape.sum("oz_reconciles_total", &[]), 15.0);
        assert_eq!(
            scrape.sum("oz_reconciles_total", &[("controller", "request")]),
            12.0
        );
        let more = Scrape::parse(&format!(
            "{TEXT}oz_reconciles_total{{controller=\"request\",kind=\"PodAccessRequest\"}} 5\n"
        ));
        assert_eq!(
            more.by_label("oz_reconciles_total", "controller"),
            [("request".to_string(), 17.0), ("template".to_string(), 3.0)],
            "each value's series add up"
        );
    }

    #[test]
    fn histogram_quantiles_interpolate_inside_buckets() {
        let histogram = Scrape::parse(TEXT).histogram("oz_revocation_lag_seconds", &[]);
        assert_eq!(histogram.count, 10.0);
        // Rank 5 of 10 is the 3rd of 8 observations in (0.01, 0.1].
        let p50 = histogram.quantile(0.5).unwrap();
        assert!((p50 - (0.01 + 0.09 * 3.0 / 8.0)).abs() < 1e-9, "{p50}");
        let merged = Scrape::parse(&format!(
            "{TEXT}oz_revocation_lag_seconds_bucket{{le=\"0.1\",kind=\"PodAccessRequest\"}} 4\n"
        ))
        .histogram("oz_revocation_lag_seconds", &[]);
        assert_eq!(
            merged.buckets.iter().find(|(b, _)| *b == 0.1),
            Some(&(0.1, 14.0)),
            "series of other labels add up per bucket"
        );
        let empty = histogram.since(&histogram);
        assert_eq!(empty.count, 0.0);
        assert_eq!(empty.quantile(0.5), None);
    }
}
