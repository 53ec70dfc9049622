//! RBAC objects for tests: rules, subjects, and Roles bound to users and groups.

use kube::{Api, Client, api::PostParams};

/// An RBAC rule: `verbs` on `resources` of the API `groups` (`""` is the core group).
pub fn rule(
    groups: &[&str],
    resources: &[&str],
    verbs: &[&str],
) -> k8s_openapi::api::rbac::v1::PolicyRule {
    let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

/// An RBAC subject of `kind` `User` or `Group`.
pub fn subject(kind: &str, name: &str) -> k8s_openapi::api::rbac::v1::Subject {
    k8s_openapi::api::rbac::v1::Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
        namespace: None,
    }
}

/// The RoleBinding `name` of the Role `name` to `subjects`.
pub fn role_binding(
    name: &str,
    subjects: Vec<k8s_openapi::api::rbac::v1::Subject>,
) -> k8s_openapi::api::rbac::v1::RoleBinding {
    k8s_openapi::api::rbac::v1::RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        role_ref: k8s_openapi::api::rbac::v1::RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(subjects),
    }
}

/// Creates, as admin, a Role `name` with `rules` in `namespace` and binds it to `subjects`.
pub async fn grant(
    admin: &Client,
    namespace: &str,
    name: &str,
    rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
    subjects: Vec<k8s_openapi::api::rbac::v1::Subject>,
) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let role = Role {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        rules: Some(rules),
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role_binding(name, subjects))
        .await
        .unwrap();
}

/// What hack/demo/requesters.yaml grants every signed-in user in `ns`: ask for access, and read
/// the templates to ask through.
pub async fn let_everyone_request(admin: &Client, ns: &str) {
    grant(
        admin,
        ns,
        "oz-requesters",
        vec![
            rule(
                &[oz_api::GROUP],
                &["execaccessrequests", "podaccessrequests"],
                &["create", "get", "list", "watch", "patch", "delete"],
            ),
            rule(
                &[oz_api::GROUP],
                &["execaccesstemplates", "podaccesstemplates"],
                &["get", "list", "watch"],
            ),
        ],
        vec![subject("Group", "system:authenticated")],
    )
    .await;
}

/// `groups` may create, read, update and delete requests in `ns` (not their status), and read
/// templates, as a cluster admin would let people ask for access. Nothing else: exec comes only
/// from oz.
pub async fn let_groups_request(admin: &Client, ns: &str, groups: &[&str]) {
    let rules = vec![
        rule(
            &[oz_api::GROUP],
            &["execaccessrequests", "podaccessrequests"],
            &[
                "create", "get", "list", "watch", "update", "patch", "delete",
            ],
        ),
        rule(
            &[oz_api::GROUP],
            &["execaccesstemplates", "podaccesstemplates"],
            &["get", "list"],
        ),
    ];
    let subjects = groups.iter().map(|g| subject("Group", g)).collect();
    grant(admin, ns, "request-access", rules, subjects).await;
}
