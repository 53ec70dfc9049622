//! Label selectors: matching a pod's labels, and the string form for list calls.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub use oz_api::label_selector::matches;

/// The selector in the form list calls take (`app=web,tier in (a,b)`).
pub fn to_query(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

/// A short human form for messages, e.g. `app=web`.
pub fn describe(selector: &LabelSelector) -> String {
    let query = to_query(selector);
    if query.is_empty() {
        "(empty)".into()
    } else {
        query
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_must_all_be_present() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            ..Default::default()
        };
        assert!(matches(&selector, &labels(&[("app", "web"), ("x", "y")])));
        assert!(!matches(&selector, &labels(&[("app", "db")])));
        assert!(!matches(&selector, &labels(&[])));
        assert_eq!(to_query(&selector), "app=web");
    }

    #[test]
    fn expressions_follow_kubernetes_semantics() {
        let selector = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![
                requirement("tier", "In", &["a", "b"]),
                requirement("canary", "NotIn", &["true"]),
                requirement("team", "Exists", &[]),
                requirement("legacy", "DoesNotExist", &[]),
            ]),
        };
        assert!(matches(&selector, &labels(&[("tier", "a"), ("team", "x")])));
        assert!(!matches(
            &selector,
            &labels(&[("tier", "c"), ("team", "x")])
        ));
        assert!(!matches(
            &selector,
            &labels(&[("tier", "a"), ("team", "x"), ("canary", "true")])
        ));
        assert!(!matches(&selector, &labels(&[("tier", "a")])));
        assert!(!matches(
            &selector,
            &labels(&[("tier", "a"), ("team", "x"), ("legacy", "1")])
        ));
        assert_eq!(
            to_query(&selector),
            "tier in (a,b),canary notin (true),team,!legacy"
        );
    }

    #[test]
    fn an_empty_selector_matches_nothing() {
        assert!(!matches(
            &LabelSelector::default(),
            &labels(&[("app", "web")])
        ));
    }
}
