//! oz-manager's NetworkPolicies. Ingress (`--webhook-ingress-cidrs`): only the control plane
//! reaches the webhook port. The optional egress policy on oz-manager's pods (`--egress-cidrs`, chart
//! `egressCIDRs`): oz may then open connections only to name servers (port 53) and the address
//! ranges listed, which must hold the apiserver's and every notification sink's. It keeps a
//! sink URL a namespace editor wrote from reaching anything else in the cluster or the cloud's
//! metadata service, below what oz itself checks before each POST
//! (`src/notify/sink_addresses.rs`).

use k8s_openapi::{
    api::networking::v1::{
        IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule,
        NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
    },
    apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString},
};

use super::{Component, InstallOptions, meta, selector_labels};

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

/// Ingress to oz-manager's pods: the webhook port from the control plane's address ranges only,
/// the metrics and health ports from anywhere (Prometheus, and kubelets whose probes a network
/// plugin does not exempt). The policy selects the pods, so any other port is closed too.
pub fn ingress_policy(options: &InstallOptions) -> NetworkPolicy {
    let port = |name: &str| NetworkPolicyPort {
        port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        end_port: None,
    };
    let mut policy = oz_pods_policy(
        options,
        &format!("{}-webhook-ingress", options.name),
        "Ingress",
    );
    let spec = policy.spec.as_mut().expect("oz_pods_policy has a spec");
    spec.ingress = Some(vec![
        NetworkPolicyIngressRule {
            from: Some(address_ranges(&options.webhook_ingress_cidrs)),
            ports: Some(if options.runs(Component::Sessions) {
                vec![port("webhook"), port("sessions")]
            } else {
                vec![port("webhook")]
            }),
        },
        NetworkPolicyIngressRule {
            from: None,
            ports: Some(vec![port("metrics"), port("health")]),
        },
    ]);
    policy
}

/// A NetworkPolicy peer for each of `cidrs`.
fn address_ranges(cidrs: &[String]) -> Vec<NetworkPolicyPeer> {
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
fn oz_pods_policy(options: &InstallOptions, name: &str, policy_type: &str) -> NetworkPolicy {
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
