//! What a spoke installs so that a fleet hub can reach it: the hub's own ServiceAccount on the
//! spoke, and the ClusterRole that holds exactly what the hub's job needs
//! ([`fleet_hub_credential_rules`]). The hub reads a token of that ServiceAccount through the
//! ClusterProfile's access provider (`docs/fleet.md`); the spoke's oz learns the account's user
//! name from `--fleet-hub-user` ([`hub_user`]). `oz-manager manifests --fleet-spoke` prints
//! them alone ([`hub_credential_yaml`]) for a spoke's admin to apply.

use k8s_openapi::api::{
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Subject},
};

use super::{
    InstallOptions, Manifest, ManifestError,
    manifest::manifests_yaml,
    meta,
    rbac::{fleet_hub_credential_rules, role_ref, rule_comments},
};

/// The name of the hub's ServiceAccount on a spoke, and of its ClusterRole and binding.
pub const HUB_CREDENTIAL_NAME: &str = "oz-fleet-hub";

/// The user name the hub's ServiceAccount authenticates as on a spoke whose oz lives in
/// `namespace`: what the spoke's oz-manager is given as `--fleet-hub-user`.
pub fn hub_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{HUB_CREDENTIAL_NAME}")
}

/// The hub's ServiceAccount, ClusterRole and ClusterRoleBinding on a spoke, each under the
/// comment that says what it is for.
pub fn hub_credential_manifests(o: &InstallOptions) -> Result<Vec<Manifest>, ManifestError> {
    let rules = fleet_hub_credential_rules();
    let mut comment = vec![
        "The fleet hub's credential on this spoke: it keeps the hub's templates here and creates the requests the \
         hub approved. It cannot create RBAC, read Secrets, reach pods or impersonate; oz here does the granting, \
         and takes a request's requester from this account only on hub-managed templates."
            .to_string(),
    ];
    comment.extend(rule_comments(&rules));
    Ok(vec![
        Manifest::new(
            vec!["The account the fleet hub's token belongs to (docs/fleet.md).".into()],
            &ServiceAccount {
                metadata: meta(o, HUB_CREDENTIAL_NAME, Some(&o.namespace)),
                ..Default::default()
            },
        )?,
        Manifest::new(
            comment,
            &ClusterRole {
                metadata: meta(o, HUB_CREDENTIAL_NAME, None),
                rules: Some(rules.iter().map(|r| r.rule.clone()).collect()),
                aggregation_rule: None,
            },
        )?,
        Manifest::new(
            vec!["Grants it to the hub's account.".into()],
            &ClusterRoleBinding {
                metadata: meta(o, HUB_CREDENTIAL_NAME, None),
                role_ref: role_ref("ClusterRole", HUB_CREDENTIAL_NAME),
                subjects: Some(vec![Subject {
                    api_group: None,
                    kind: "ServiceAccount".into(),
                    name: HUB_CREDENTIAL_NAME.into(),
                    namespace: Some(o.namespace.clone()),
                }]),
            },
        )?,
    ])
}

/// The same objects as YAML, under the header of an install, naming the command that prints
/// them: `oz-manager manifests --fleet-spoke`. Only the options' namespace and name shape them.
pub fn hub_credential_yaml(o: &InstallOptions) -> Result<String, ManifestError> {
    let command_line = format!("{} --fleet-spoke", o.command_line());
    manifests_yaml(&command_line, hub_credential_manifests(o)?)
}

/// The same objects as JSON, for a spoke whose oz lives in `namespace`, ready to apply.
pub fn hub_credential_objects(namespace: &str) -> Vec<serde_json::Value> {
    let options = InstallOptions {
        namespace: namespace.to_string(),
        ..InstallOptions::default()
    };
    hub_credential_manifests(&options)
        .expect("the hub credential's objects are fixed and always serialize")
        .into_iter()
        .map(|m| serde_json::to_value(&m.object).expect("a DynamicObject serializes"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hub_credential_holds_templates_and_requests_only() {
        let objects = hub_credential_objects("oz-system");
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
        );
        let rules = objects[1]["rules"].as_array().unwrap();
        for rule in rules {
            assert_eq!(
                rule["apiGroups"],
                serde_json::json!([oz_api::GROUP]),
                "{rule}"
            );
            for resource in rule["resources"].as_array().unwrap() {
                let resource = resource.as_str().unwrap();
                assert!(
                    resource.ends_with("accesstemplates") || resource.ends_with("accessrequests"),
                    "{resource}"
                );
            }
        }
        assert_eq!(
            objects[2]["subjects"][0]["namespace"],
            serde_json::json!("oz-system")
        );
        assert_eq!(
            hub_user("oz-system"),
            "system:serviceaccount:oz-system:oz-fleet-hub"
        );
    }
}
