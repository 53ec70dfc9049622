//! Fleets: one oz (the hub) where requests are made, approved and audited for many clusters
//! (its spokes), each running its own oz that grants and revokes. What the API says about it:
//! which spokes a hub's template covers ([`FleetClusters`]), which spoke a hub's request is for
//! (`spec.cluster`), and what a hub attests when it forwards a decided request to a spoke
//! ([`Forwarded`]), and how a spoke names the hub's users ([`names`]). `docs/fleet.md` tells
//! the whole model.

pub mod names;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use serde::{Deserialize, Serialize};

use crate::Requester;

/// The label on a spoke's copy of a hub's template: its value is the hub's name. Only the
/// hub's own credential may create, change or delete a template carrying it, and only the
/// hub may request access through one.
pub const HUB_MANAGED_LABEL: &str = "crds.wizardofoz.co/hub-managed";

/// The fleet hub that manages an object: the value of its [`HUB_MANAGED_LABEL`], if it carries
/// the label at all (an empty value still marks it hub-managed, by a hub with no name).
pub fn managing_hub(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()?
        .get(HUB_MANAGED_LABEL)
        .map(String::as_str)
}

/// The spoke clusters a hub's template covers: ClusterProfiles in the hub's fleet namespace,
/// by name, by labels, or both (a cluster is covered if either picks it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetClusters {
    /// ClusterProfile names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub names: Vec<String>,
    /// A label selector over ClusterProfiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

impl FleetClusters {
    /// Whether the cluster `name`, labelled `labels`, is covered.
    pub fn covers(&self, name: &str, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.names.iter().any(|n| n == name)
            || self
                .selector
                .as_ref()
                .is_some_and(|selector| crate::label_selector::matches(selector, labels))
    }
}

/// What a hub attests when it has a spoke grant a request it decided: set by the hub's
/// credential only (the spoke's webhook refuses it from anyone else), read by the spoke's oz
/// for its status and audit trail.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Forwarded {
    /// The hub's name (its oz-manager's `--fleet-name`).
    pub hub: String,
    /// This spoke's name in the hub's inventory (its ClusterProfile).
    pub cluster: String,
    /// The hub's request: its name (in the same namespace) and uid.
    pub request_name: String,
    /// The hub request's uid.
    pub request_uid: String,
    /// The requester as the hub attested them, in the hub's names. Written by this spoke's
    /// webhook, which puts the same person in `spec.requester` under this cluster's names
    /// (oz-manager's `--fleet-user-prefix`, `--fleet-group-prefix`); whatever the hub writes
    /// here is replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<Requester>,
    /// The approvals the hub counted, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<ForwardedApproval>,
}

/// One approval a hub counted towards a forwarded request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForwardedApproval {
    /// The approver's user name on the hub.
    pub approver: String,
    /// When the approval was made, by the hub's clock.
    pub at: Time,
    /// A break-glass self-approval.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub break_glass: bool,
}

/// How a hub's template stands on one spoke it covers, in the template's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSync {
    /// The ClusterProfile's name.
    pub name: String,
    /// True once the spoke holds the template as the hub last wrote it.
    pub synced: bool,
    /// What is wrong, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_cluster_is_covered_by_name_or_by_labels() {
        let clusters = FleetClusters {
            names: vec!["b".into()],
            selector: Some(LabelSelector {
                match_labels: Some(labels(&[("env", "prod")])),
                ..Default::default()
            }),
        };
        assert!(clusters.covers("b", &labels(&[])));
        assert!(clusters.covers("d", &labels(&[("env", "prod")])));
        assert!(!clusters.covers("c", &labels(&[("env", "dev")])));
    }

    #[test]
    fn a_hub_managed_object_names_its_hub_in_its_label() {
        let meta = |pairs: &[(&str, &str)]| ObjectMeta {
            labels: Some(labels(pairs)),
            ..Default::default()
        };
        assert_eq!(
            managing_hub(&meta(&[(HUB_MANAGED_LABEL, "hub")])),
            Some("hub")
        );
        assert_eq!(managing_hub(&meta(&[(HUB_MANAGED_LABEL, "")])), Some(""));
        assert_eq!(managing_hub(&meta(&[("team", "hub")])), None);
        assert_eq!(managing_hub(&ObjectMeta::default()), None);
    }

    #[test]
    fn an_empty_selector_covers_no_cluster() {
        let clusters = FleetClusters {
            names: Vec::new(),
            selector: Some(LabelSelector::default()),
        };
        assert!(!clusters.covers("b", &labels(&[("env", "prod")])));
    }
}
