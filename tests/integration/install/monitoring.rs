//! oz's alerts and dashboard (`charts/oz/files`): the rules pass `promtool check
//! rules` and their unit tests (`promtool test rules`), and every metric a rule or a dashboard
//! panel names is one a running oz-manager exports.

use std::{collections::BTreeSet, path::Path, process::Command, time::Duration};

use crate::support::{
    cluster::{env, install_crds},
    operator::{Operator, WebhookOperator, http_get, metric_value},
    polling::eventually,
};

/// The chart's monitoring files.
fn files() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/charts/oz/files"))
}

/// Runs promtool with `args` in the chart's files directory; fails with its output unless it
/// succeeds.
fn promtool(args: &[&str]) {
    let binary = oz_testenv::promtool().unwrap();
    let output = Command::new(&binary)
        .args(args)
        .current_dir(files())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", binary.display()));
    assert!(
        output.status.success(),
        "promtool {} failed ({}):\n{}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_alert_rules_pass_promtools_check_and_their_unit_tests() {
    promtool(&["check", "rules", "alerts.yaml"]);
    promtool(&["test", "rules", "alerts_test.yaml"]);
}

#[tokio::test]
async fn every_metric_the_alerts_and_the_dashboard_name_is_exported() {
    install_crds().await;
    let ns = env().namespace("monitoring").await.unwrap();
    // With webhooks, so the certificate's expiry is set as in an install.
    let oz = WebhookOperator::start_from(Operator::builder(&ns).metrics());
    let metrics = oz.operator.metrics_port();
    let exposition = eventually(
        Duration::from_secs(90),
        "oz-manager to serve its webhook certificate, and to lead (alone, without election)",
        || async {
            let text = http_get(&format!("http://127.0.0.1:{metrics}/metrics")).await;
            let expiry = metric_value(&text, "oz_webhook_certificate_expiry_timestamp_seconds")?;
            let leader = metric_value(&text, "oz_leader")?;
            (expiry > 0.0 && leader == 1.0).then_some(text)
        },
    )
    .await;
    oz.remove_configurations().await;

    let exported = exported_names(&exposition);
    let mut named = BTreeSet::new();
    for file in ["alerts.yaml", "dashboard.json"] {
        let text = std::fs::read_to_string(files().join(file)).unwrap();
        let found = metric_names(&text);
        assert!(!found.is_empty(), "{file} names no oz_ metric");
        named.extend(found.into_iter().map(|name| (name, file)));
    }
    let missing: Vec<String> = named
        .iter()
        .filter(|(name, _)| !exported.contains(name))
        .map(|(name, file)| format!("{name} (in {file})"))
        .collect();
    assert!(
        missing.is_empty(),
        "named but not exported by oz-manager: {missing:?}\nexported: {exported:?}"
    );
}

/// Every name a scrape of `exposition` can produce: each sample's, and for each family its
/// `# TYPE` line declares (a family without samples yet, e.g. an error counter before the first
/// error), the names its samples will have.
fn exported_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    // http_get's answer starts with the status line and headers.
    let body = exposition
        .split_once("\r\n\r\n")
        .map_or(exposition, |(_, body)| body);
    for line in body.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut words = declared.split_whitespace();
            let (Some(family), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            names.insert(family.to_string());
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[],
            };
            names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
        } else if !line.starts_with('#') {
            let name: String = line.chars().take_while(|c| is_name_char(*c)).collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// The identifiers in `text` that start with `oz_`: the PromQL of a rule file or a dashboard,
/// read loosely (a comment naming a metric must name a real one too).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("oz_") {
        let before = rest[..at].chars().next_back();
        let name: String = rest[at..]
            .chars()
            .take_while(|c| is_name_char(*c))
            .collect();
        if !before.is_some_and(is_name_char) {
            names.insert(name.clone());
        }
        rest = &rest[at + name.len()..];
    }
    names
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

#[test]
fn names_are_read_from_promql_and_expositions_alike() {
    let promql = "histogram_quantile(0.99, sum by (le) (rate(oz_revocation_lag_seconds_bucket[5m]))) / foo_oz_x + oz_leader";
    assert_eq!(
        metric_names(promql),
        BTreeSet::from([
            "oz_revocation_lag_seconds_bucket".to_string(),
            "oz_leader".to_string()
        ])
    );
    let exposition = "# HELP oz_reconcile_errors Reconciles that failed.\n\
                      # TYPE oz_reconcile_errors counter\n\
                      # TYPE oz_lag_seconds histogram\n\
                      oz_leader 1\n";
    let names = exported_names(exposition);
    for name in [
        "oz_reconcile_errors_total",
        "oz_lag_seconds_bucket",
        "oz_lag_seconds_count",
        "oz_leader",
    ] {
        assert!(names.contains(name), "{name} in {names:?}");
    }
    assert!(!names.contains("oz_leader_total"));
}
