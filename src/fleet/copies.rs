//! What a spoke holds of a hub's template: the same template, under the same namespace and
//! name, labelled hub-managed, without what the hub keeps for itself. Pure, so the rule is
//! tested without clusters.
//!
//! Left out of the copy: `clusters` (a spoke covers nothing), the approval (counted on the hub,
//! which forwards a request only once it is approved, and attests the approvers) and the
//! notifications (sent by the hub, whose sinks and Secrets the spoke does not have).

use std::collections::BTreeMap;

use oz_api::{AccessKind, AccessTemplate, HUB_MANAGED_LABEL};
use serde_json::{Value, json};

/// The field manager the hub writes spokes' templates and its own templates' fleet status as.
pub const FIELD_MANAGER: &str = "oz-fleet-hub";

/// One of the hub's templates to keep on spokes.
#[derive(Clone, Debug, PartialEq)]
pub struct HubTemplate {
    /// Its kind.
    pub kind: AccessKind,
    /// Its namespace, the same on every spoke.
    pub namespace: String,
    /// Its name, the same on every spoke.
    pub name: String,
    /// The spokes it covers.
    pub clusters: oz_api::FleetClusters,
    /// The copy's spec, as the spoke should hold it.
    pub spec: Value,
    /// How it stands on each spoke, as its status says now.
    pub status: Vec<oz_api::ClusterSync>,
}

impl HubTemplate {
    /// `template`, if it is a fleet template (it names clusters).
    pub fn of<T: AccessTemplate>(template: &T) -> Option<Self> {
        let clusters = template.clusters()?.clone();
        let mut whole = serde_json::to_value(template).ok()?;
        let mut spec = whole.get_mut("spec").map(Value::take)?;
        let object = spec.as_object_mut()?;
        object.remove("clusters");
        if let Some(config) = object
            .get_mut("accessConfig")
            .and_then(Value::as_object_mut)
        {
            config.remove("approval");
            config.remove("notifications");
        }
        Some(Self {
            kind: T::KIND,
            namespace: template.meta().namespace.clone().unwrap_or_default(),
            name: template.meta().name.clone().unwrap_or_default(),
            clusters,
            spec,
            status: template
                .template_status()
                .map(|s| s.clusters.clone())
                .unwrap_or_default(),
        })
    }

    /// The copy, as the server-side apply that writes it on a spoke of `hub`.
    pub fn copy(&self, hub: &str) -> Value {
        json!({
            "apiVersion": format!("{}/{}", oz_api::GROUP, oz_api::VERSION),
            "kind": self.kind.template_kind(),
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": { HUB_MANAGED_LABEL: hub },
            },
            "spec": self.spec,
        })
    }

    /// Whether a spoke's `copy` (its labels and spec as the spoke holds them) is this
    /// template as `hub` writes it.
    pub fn is_held_by(&self, hub: &str, labels: &BTreeMap<String, String>, spec: &Value) -> bool {
        labels.get(HUB_MANAGED_LABEL).map(String::as_str) == Some(hub) && *spec == self.spec
    }
}

#[cfg(test)]
mod tests {
    use oz_api::{ExecAccessTemplate, FleetClusters};

    use super::*;

    fn template(clusters: Option<FleetClusters>) -> ExecAccessTemplate {
        let mut json = json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "labels": {"team": "a"}},
            "spec": {
                "accessConfig": {
                    "allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h",
                    "approval": {"required": 1, "approverGroups": ["leads"]},
                },
                "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            },
        });
        if let Some(clusters) = clusters {
            json["spec"]["clusters"] = serde_json::to_value(clusters).unwrap();
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_template_without_clusters_is_not_a_fleet_template() {
        assert_eq!(HubTemplate::of(&template(None)), None);
    }

    #[test]
    fn the_copy_keeps_access_and_target_but_not_clusters_or_approval() {
        let hub = HubTemplate::of(&template(Some(FleetClusters {
            names: vec!["b".into()],
            selector: None,
        })))
        .unwrap();
        let copy = hub.copy("hub");
        assert_eq!(
            copy["metadata"]["labels"],
            json!({HUB_MANAGED_LABEL: "hub"})
        );
        assert_eq!(copy["metadata"]["namespace"], "shop");
        assert_eq!(copy["spec"].get("clusters"), None);
        assert_eq!(copy["spec"]["accessConfig"].get("approval"), None);
        assert_eq!(
            copy["spec"]["accessConfig"]["allowedGroups"],
            json!(["devs"])
        );
        assert_eq!(copy["spec"]["controllerTargetRef"]["name"], "web");
        // What the copy reads back as on a spoke is what the hub wrote.
        let held: ExecAccessTemplate = serde_json::from_value(copy.clone()).unwrap();
        let held_spec = serde_json::to_value(&held).unwrap()["spec"].take();
        let labels = held.metadata.labels.clone().unwrap();
        assert!(hub.is_held_by("hub", &labels, &held_spec));
        assert!(!hub.is_held_by("other-hub", &labels, &held_spec));
        let mut edited = held_spec.clone();
        edited["accessConfig"]["allowedGroups"] = json!(["devs", "qa"]);
        assert!(!hub.is_held_by("hub", &labels, &edited));
    }
}
