//! The ClusterRoles for the people who use oz, labelled to aggregate into Kubernetes' own `view`,
//! `edit` and `admin` roles (as Oz's chart ships them), so whoever may view, edit or administer a
//! namespace gets the matching oz rights there without a binding of oz's own. Each may also be
//! bound on its own (e.g. `<name>-approver` to a group of approvers).
//!
//! None of them reaches what oz grants: a request or a template is a wish that oz's controllers
//! and webhooks check (allowed groups, approver groups), and a grant's Role is oz's to write.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{ClusterRole, PolicyRule},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::{InstallOptions, Manifest, ManifestError, meta};

/// The label prefix the ClusterRole aggregation controller reads for the built-in roles.
const AGGREGATE_TO: &str = "rbac.authorization.k8s.io/aggregate-to-";
/// The label on every one of these ClusterRoles, aggregated or not: what tells them from oz's
/// own.
const USERS_ROLE: &str = "oz.wizardofoz.co/users-role";

/// One user-facing ClusterRole: its name after the install's, the built-in roles it joins, what
/// it allows, and why.
struct UserRole {
    suffix: &'static str,
    aggregate_to: &'static [&'static str],
    rules: Vec<PolicyRule>,
    why: &'static str,
}

/// The ClusterRoles, in order: view, request access, template manager, lock admin, approver.
pub(super) fn manifests(o: &InstallOptions) -> Result<Vec<Manifest>, ManifestError> {
    let kinds = o.access_kinds();
    let requests: Vec<&str> = kinds.iter().map(|k| k.request_plural()).collect();
    let templates: Vec<&str> = kinds.iter().map(|k| k.template_plural()).collect();
    let mut everything: Vec<&str> = requests.iter().chain(&templates).copied().collect();
    everything.push("accessapprovals");
    let roles = [
        UserRole {
            suffix: "view",
            aggregate_to: &["view", "edit", "admin"],
            rules: vec![rule(&everything, &["get", "list", "watch"])],
            why: "Read oz's templates, requests and approvals: who may view a namespace sees who \
                  has access to its pods and why.",
        },
        UserRole {
            suffix: "request-access",
            aggregate_to: &["edit", "admin"],
            rules: vec![rule(
                &requests,
                &["create", "get", "list", "watch", "patch", "delete"],
            )],
            why: "Ask for access and end it: `ozctl revoke` patches the request with the \
                  crds.wizardofoz.co/revoked-by annotation (oz's webhook lets only the requester \
                  set it, and keeps the spec unchangeable), and delete ends it without a record. \
                  oz's webhooks record the requester and check the template's allowed groups: \
                  creating a request grants nothing by itself.",
        },
        UserRole {
            suffix: "template-manager",
            aggregate_to: &["edit", "admin"],
            rules: vec![rule(
                &templates,
                &[
                    "create", "get", "list", "watch", "update", "patch", "delete",
                ],
            )],
            why: "Write the templates that say who may ask for what. `edit` already holds pods/exec \
                  in its namespace, so a template it writes hands out nothing it could not do.",
        },
        UserRole {
            suffix: "lock-admin",
            aggregate_to: &[],
            rules: vec![rule(
                &["accesslocks"],
                &[
                    "create", "get", "list", "watch", "update", "patch", "delete",
                ],
            )],
            why: "Lock and unlock access (`ozctl lock`, docs/security.md): an AccessLock revokes \
                  every grant it names, in every namespace, and refuses new ones. AccessLocks are \
                  cluster-scoped, so this ClusterRole gives rights only through a \
                  ClusterRoleBinding: bind it to the security team alone.",
        },
        UserRole {
            suffix: "approver",
            aggregate_to: &["admin"],
            rules: vec![rule(
                &["accessapprovals"],
                &["create", "get", "list", "watch"],
            )],
            why: "Decide on requests that need approval (docs/approvals.md); the decision counts \
                  only for members of the template's approverGroups. Bind it to approvers who are \
                  not namespace admins.",
        },
    ];
    roles
        .into_iter()
        .map(|role| {
            let name = format!("{}-{}", o.name, role.suffix);
            let mut metadata = meta(o, &name, None);
            let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.insert(USERS_ROLE.into(), "true".into());
            for built_in in role.aggregate_to {
                labels.insert(format!("{AGGREGATE_TO}{built_in}"), "true".into());
            }
            Manifest::new(
                vec![match role.aggregate_to {
                    [] => format!("For users (bind it yourself). {}", role.why),
                    into => format!(
                        "For users (aggregated into {}). {}",
                        into.join(", "),
                        role.why
                    ),
                }],
                &ClusterRole {
                    metadata,
                    rules: Some(role.rules),
                    aggregation_rule: None,
                },
            )
        })
        .collect()
}

/// Whether an object of the install is one of these users' ClusterRoles (it carries their
/// label), rather than one of oz's own.
pub fn is_users_role(metadata: &ObjectMeta) -> bool {
    metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(USERS_ROLE))
}

fn rule(resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![oz_api::GROUP.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_roles_aggregate_into_the_built_in_roles_and_touch_only_ozs_kinds() {
        let manifests = manifests(&InstallOptions::default()).unwrap();
        let roles: Vec<(String, Vec<String>)> = manifests
            .iter()
            .map(|m| {
                let labels = m.object.metadata.labels.clone().unwrap_or_default();
                let into = labels
                    .keys()
                    .filter_map(|k| k.strip_prefix(AGGREGATE_TO).map(String::from))
                    .collect();
                (m.object.metadata.name.clone().unwrap(), into)
            })
            .collect();
        let expected = [
            ("oz-view", vec!["admin", "edit", "view"]),
            ("oz-request-access", vec!["admin", "edit"]),
            ("oz-template-manager", vec!["admin", "edit"]),
            ("oz-lock-admin", vec![]),
            ("oz-approver", vec!["admin"]),
        ];
        assert_eq!(
            roles,
            expected.map(|(n, into)| (n.to_string(), into.into_iter().map(String::from).collect()))
        );
        for manifest in &manifests {
            for rule in manifest.object.data["rules"].as_array().unwrap() {
                assert_eq!(
                    rule["apiGroups"],
                    serde_json::json!([oz_api::GROUP]),
                    "{rule}"
                );
            }
        }
    }
}
