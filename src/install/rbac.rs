//! The install's least-privilege RBAC: the Roles and ClusterRoles (with their bindings) that hold
//! the rules oz needs ([`rules`]: in the namespaces it works in, in its own namespace and
//! cluster-wide, each with its reason), written with a comment per rule. `docs/rbac.md` explains
//! the design.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};

use super::{
    Component, InstallOptions, Manifest, ManifestError, meta,
    yaml::{COMMENT_WIDTH, wrap},
};

mod rules;

use rules::RBAC_GROUP;
pub use rules::{
    CLUSTER_INVENTORY_GROUP, Rule, cluster_rules, fleet_hub_credential_rules, fleet_hub_rules,
    operator_namespace_rules, watched_namespace_rules,
};

/// Where the apiserver publishes its front-proxy settings, and the built-in Role that reads them.
const FRONT_PROXY_NAMESPACE: &str = "kube-system";
const FRONT_PROXY_READER_ROLE: &str = "extension-apiserver-authentication-reader";

/// The RBAC objects of the install, in order: what oz does where it works (a ClusterRole, or a
/// Role per watched namespace), its own state in its namespace, and (with the webhooks) its
/// webhook configurations; each bound to oz's ServiceAccount.
pub(super) fn manifests(o: &InstallOptions) -> Result<Vec<Manifest>, ManifestError> {
    let mut out = Vec::new();
    let watched = o.watched();
    let rules = watched_namespace_rules(o);
    if watched.is_empty() {
        let mut comment = vec![
            "What oz does in the namespaces it works in: all of them (no --watch-namespaces)."
                .into(),
        ];
        comment.extend(no_escalation_note());
        comment.extend(rule_comments(&rules));
        out.extend(bound_role(
            o,
            &o.manager_name(),
            None,
            comment,
            &rules,
            "Grants it in every namespace.".into(),
        )?);
    } else {
        for namespace in &watched {
            let mut comment = vec![format!(
                "What oz does in watched namespace {namespace}; a Role per watched namespace, so oz gets nothing elsewhere."
            )];
            comment.extend(no_escalation_note());
            comment.extend(rule_comments(&rules));
            out.extend(bound_role(
                o,
                &o.manager_name(),
                Some(namespace),
                comment,
                &rules,
                format!("Grants it in {namespace}."),
            )?);
        }
    }

    let state = operator_namespace_rules(o);
    let mut comment = vec![format!(
        "oz's own state in its namespace {}: the leader-election Lease{}.",
        o.namespace,
        if o.runs(Component::Webhooks) {
            ", the webhook certificate Secrets and the audit file's signing key"
        } else {
            ""
        }
    )];
    comment.extend(rule_comments(&state));
    out.extend(bound_role(
        o,
        &format!("{}-state", o.manager_name()),
        Some(&o.namespace),
        comment,
        &state,
        format!("Grants it in {}.", o.namespace),
    )?);

    if o.runs(Component::Sessions) {
        out.push(Manifest::new(
            vec![
                "Sessions: oz reads the apiserver's front-proxy CA and request headers from the ConfigMap \
                 kube-system/extension-apiserver-authentication, through the built-in Role made for that."
                    .into(),
            ],
            &RoleBinding {
                metadata: meta(
                    o,
                    &format!("{}-authentication-reader", o.manager_name()),
                    Some(FRONT_PROXY_NAMESPACE),
                ),
                role_ref: role_ref("Role", FRONT_PROXY_READER_ROLE),
                subjects: Some(vec![service_account(o)]),
            },
        )?);
    }

    let cluster = cluster_rules(o);
    if !cluster.is_empty() {
        let mut comment = vec![if o.runs(Component::Sessions) {
            "The only cluster-scoped objects oz touches: the AccessLocks it reads, its own webhook configurations and \
             its sessions APIService."
        } else {
            "The only cluster-scoped objects oz touches: the AccessLocks it reads and its own webhook configurations."
        }
        .into()];
        comment.extend(rule_comments(&cluster));
        out.extend(bound_role(
            o,
            &format!("{}-webhooks", o.manager_name()),
            None,
            comment,
            &cluster,
            "Grants it (the rules name their objects).".into(),
        )?);
    }
    Ok(out)
}

/// A Role named `name` in `namespace` (a ClusterRole with no namespace) holding `rules`, and
/// the binding of the same name that grants it to oz's ServiceAccount there.
pub(super) fn bound_role(
    o: &InstallOptions,
    name: &str,
    namespace: Option<&str>,
    comment: Vec<String>,
    rules: &[Rule],
    binding_comment: String,
) -> Result<[Manifest; 2], ManifestError> {
    let policy = Some(rules.iter().map(|r| r.rule.clone()).collect());
    let subjects = Some(vec![service_account(o)]);
    Ok(match namespace {
        Some(namespace) => [
            Manifest::new(
                comment,
                &Role {
                    metadata: meta(o, name, Some(namespace)),
                    rules: policy,
                },
            )?,
            Manifest::new(
                vec![binding_comment],
                &RoleBinding {
                    metadata: meta(o, name, Some(namespace)),
                    role_ref: role_ref("Role", name),
                    subjects,
                },
            )?,
        ],
        None => [
            Manifest::new(
                comment,
                &ClusterRole {
                    metadata: meta(o, name, None),
                    rules: policy,
                    aggregation_rule: None,
                },
            )?,
            Manifest::new(
                vec![binding_comment],
                &ClusterRoleBinding {
                    metadata: meta(o, name, None),
                    role_ref: role_ref("ClusterRole", name),
                    subjects,
                },
            )?,
        ],
    })
}

/// Why oz cannot grant more than exec into a pod, above the rules that make it so.
pub(super) fn no_escalation_note() -> Vec<String> {
    vec![
        String::new(),
        "oz creates a Role and RoleBinding per grant. RBAC lets a subject create a Role only with \
         permissions it holds itself (or with the escalate verb), and bind one only if it holds its \
         permissions (or the bind verb). oz has neither verb: it holds exactly what templates can grant \
         (the grantable rules), so it can never mint a Role beyond them."
            .into(),
    ]
}

/// The comment lines documenting `rules`, one per rule, in order.
pub(super) fn rule_comments(rules: &[Rule]) -> Vec<String> {
    let mut lines = vec![
        String::new(),
        "Rules, in order, and why each exists:".to_string(),
    ];
    for (index, rule) in rules.iter().enumerate() {
        let group = match rule.rule.api_groups.as_deref() {
            Some([group]) if group.is_empty() => "core".to_string(),
            Some(groups) => groups.join(","),
            None => String::new(),
        };
        let names = match &rule.rule.resource_names {
            Some(names) => format!(" named {}", names.join(",")),
            None => String::new(),
        };
        lines.push(format!(
            "{index:>2}. {group} {}{names} [{}]",
            rule.rule.resources.as_deref().unwrap_or_default().join(","),
            rule.rule.verbs.join(",")
        ));
        for why in &rule.why {
            lines.extend(wrap(why, COMMENT_WIDTH, "    - ", "      "));
        }
    }
    lines
}

/// A reference to the Role or ClusterRole `name`.
pub(super) fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.into(),
        kind: kind.into(),
        name: name.into(),
    }
}

/// oz's ServiceAccount, as a binding's subject.
fn service_account(options: &InstallOptions) -> Subject {
    Subject {
        api_group: None,
        kind: "ServiceAccount".into(),
        name: options.manager_name(),
        namespace: Some(options.namespace.clone()),
    }
}
