//! The NetworkPolicies on oz-manager's pods, ingress and egress alike, start the same way.

use k8s_openapi::{
    api::networking::v1::{IPBlock, NetworkPolicy, NetworkPolicyPeer, NetworkPolicySpec},
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};

use super::{
    InstallOptions,
    manifest::{meta, selector_labels},
};

/// A NetworkPolicy peer for each of `cidrs`.
pub(super) fn address_ranges(cidrs: &[String]) -> Vec<NetworkPolicyPeer> {
    cidrs
        .iter()
        .map(|cidr| NetworkPolicyPeer {
            ip_block: Some(IPBlock {
                cidr: cidr.clone(),
                except: None,
            }),
            ..Default::default()
        })
        .collect()
}

/// A NetworkPolicy named `name` that selects oz-manager's pods, of `policy_type` (`Ingress` or
/// `Egress`), without rules yet: selecting the pods closes what no rule opens.
pub(super) fn oz_pods_policy(
    options: &InstallOptions,
    name: &str,
    policy_type: &str,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata: meta(options, name, Some(&options.namespace)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector_labels(options)),
                match_expressions: None,
            }),
            policy_types: Some(vec![policy_type.into()]),
            ingress: None,
            egress: None,
        }),
    }
}
