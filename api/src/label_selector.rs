//! Label selectors, matched the way oz needs everywhere it uses one: a workload's pods, and a
//! fleet template's clusters.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` satisfy `selector`. An empty selector matches nothing here: a workload
/// controller always has one, and granting access to "every pod" (or covering "every cluster")
/// is never intended.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let match_labels = selector.match_labels.iter().flatten();
    let expressions = selector.match_expressions.iter().flatten();
    if selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty())
    {
        return false;
    }
    match_labels
        .into_iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && expressions.into_iter().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}
