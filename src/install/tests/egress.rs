//! The egress NetworkPolicy: with `egress_cidrs`, oz-manager's pods may reach name servers and
//! those ranges only; without, the install has no egress policy.

use k8s_openapi::{
    api::networking::v1::NetworkPolicy, apimachinery::pkg::util::intstr::IntOrString,
};

use super::{of_kind, scoped, typed};
use crate::install::*;

fn with_egress() -> InstallOptions {
    InstallOptions {
        egress_cidrs: vec!["10.96.0.1/32".into(), "203.0.113.0/24".into()],
        ..scoped()
    }
}

fn egress_policies(options: &InstallOptions) -> Vec<NetworkPolicy> {
    let manifests = install_objects(options).unwrap();
    of_kind(&manifests, "NetworkPolicy")
        .into_iter()
        .map(typed::<NetworkPolicy>)
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.policy_types.clone())
                .is_some_and(|t| t.contains(&"Egress".to_string()))
        })
        .collect()
}

#[test]
fn with_egress_cidrs_oz_may_reach_name_servers_and_those_ranges_only() {
    let policies = egress_policies(&with_egress());
    assert_eq!(policies.len(), 1);
    let policy = &policies[0];
    assert_eq!(policy.metadata.name.as_deref(), Some("oz-egress"));
    let spec = policy.spec.clone().unwrap();
    assert_eq!(spec.policy_types, Some(vec!["Egress".to_string()]));
    assert!(
        spec.ingress.is_none(),
        "the egress policy leaves ingress alone"
    );
    let selector = spec.pod_selector.unwrap().match_labels.unwrap();
    assert!(!selector.is_empty());
    let rules = spec.egress.unwrap();
    assert_eq!(rules.len(), 2);
    // DNS, to any address: names of sinks and of the apiserver must resolve.
    assert_eq!(rules[0].to, None);
    let dns: Vec<(Option<IntOrString>, Option<String>)> = rules[0]
        .ports
        .clone()
        .unwrap()
        .into_iter()
        .map(|p| (p.port, p.protocol))
        .collect();
    assert_eq!(
        dns,
        [
            (Some(IntOrString::Int(53)), Some("UDP".into())),
            (Some(IntOrString::Int(53)), Some("TCP".into()))
        ]
    );
    // Everything else only to the listed ranges: no rule opens the rest.
    assert_eq!(rules[1].ports, None);
    let cidrs: Vec<String> = rules[1]
        .to
        .clone()
        .unwrap()
        .into_iter()
        .map(|peer| {
            assert!(peer.pod_selector.is_none() && peer.namespace_selector.is_none());
            peer.ip_block.unwrap().cidr
        })
        .collect();
    assert_eq!(cidrs, with_egress().egress_cidrs);
    assert!(
        with_egress()
            .command_line()
            .ends_with(" --egress-cidrs 10.96.0.1/32,203.0.113.0/24"),
        "{}",
        with_egress().command_line()
    );

    assert!(
        egress_policies(&scoped()).is_empty(),
        "no policy unless asked"
    );
    let bad = InstallOptions {
        egress_cidrs: vec!["metadata".into()],
        ..scoped()
    };
    let refused = install_objects(&bad).unwrap_err().to_string();
    assert!(refused.contains("metadata"), "{refused}");
}
