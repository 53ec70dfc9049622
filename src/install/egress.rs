//! The optional egress NetworkPolicy on oz-manager's pods (`--egress-cidrs`, chart
//! `egressCIDRs`): oz may then open connections only to name servers (port 53) and the address
//! ranges listed, which must hold the apiserver's and every notification sink's. It keeps a
//! sink URL a namespace editor wrote from reaching anything else in the cluster or the cloud's
//! metadata service, below what oz itself checks before each POST
//! (`src/notify/sink_addresses.rs`).

use k8s_openapi::{
    api::networking::v1::{NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPort},
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::{
    options::InstallOptions,
    pod_policies::{address_ranges, oz_pods_policy},
};

/// The policy's name: `<name>-egress`.
pub fn egress_policy_name(options: &InstallOptions) -> String {
    format!("{}-egress", options.name)
}

/// Egress from oz-manager's pods: DNS anywhere, everything to `options.egress_cidrs`, nothing
/// else. The policy selects the pods, so every other destination is closed.
pub fn egress_policy(options: &InstallOptions) -> NetworkPolicy {
    let dns = |protocol: &str| NetworkPolicyPort {
        port: Some(IntOrString::Int(53)),
        protocol: Some(protocol.into()),
        end_port: None,
    };
    let mut policy = oz_pods_policy(options, &egress_policy_name(options), "Egress");
    policy
        .spec
        .as_mut()
        .expect("oz_pods_policy has a spec")
        .egress = Some(vec![
        NetworkPolicyEgressRule {
            to: None,
            ports: Some(vec![dns("UDP"), dns("TCP")]),
        },
        NetworkPolicyEgressRule {
            to: Some(address_ranges(&options.egress_cidrs)),
            ports: None,
        },
    ]);
    policy
}
