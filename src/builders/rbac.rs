//! The Role and RoleBinding of a grant: pure constructors, and the one write path both builders
//! use.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::{Api, api::ObjectMeta};
use oz_api::{AccessConfig, GrantTo, Requester, SESSIONS_GROUP, SessionMode};

use super::GrantIdentity;
use crate::{
    Context, Result,
    apply::create_or_apply,
    cache::{
        BuildCaches,
        grant_rbac::{CachedBinding, CachedRole},
    },
};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A verb set on one subresource of one pod.
#[derive(Clone, Copy, Debug)]
pub struct PodPermission {
    /// The API group: `""` (core) for the pod itself and Direct streams,
    /// [`SESSIONS_GROUP`] for the streams of a Brokered grant.
    pub api_group: &'static str,
    /// `pods`, `pods/exec`, `pods/attach`, ...
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
}

/// Reading the pod (`kubectl get`, and ozctl before it opens a session).
pub const READ_POD: PodPermission = PodPermission {
    api_group: "",
    resource: "pods",
    verbs: &["get"],
};

/// Opening a stream: create (POST, and since 1.35 the websocket GET upgrade too) plus get.
const STREAM_VERBS: &[&str] = &["create", "get"];

/// `kubectl exec`: read the pod, and create plus get on core pods/exec.
pub const EXEC_PERMISSIONS: &[PodPermission] = &[
    READ_POD,
    PodPermission {
        api_group: "",
        resource: "pods/exec",
        verbs: STREAM_VERBS,
    },
];

/// `ozctl exec` through oz (Brokered): read the pod, and create plus get on pods/exec in
/// [`SESSIONS_GROUP`] only, which oz serves; nothing on core pods/exec, so the apiserver
/// refuses a plain `kubectl exec`.
pub const BROKERED_EXEC_PERMISSIONS: &[PodPermission] = &[
    READ_POD,
    PodPermission {
        api_group: SESSIONS_GROUP,
        resource: "pods/exec",
        verbs: STREAM_VERBS,
    },
];

/// The session mode a grant gets: the template's, except that a grant that is Brokered stays
/// Brokered (its `existing` Role, oz's record of the grant, names [`SESSIONS_GROUP`]). Switching
/// a template to Brokered narrows its live grants (their sessions go through oz from then on);
/// switching it back to Direct never widens one to unrecorded `kubectl exec`: only grants made
/// after the switch are Direct.
pub fn granted_session_mode(template: SessionMode, existing: Option<&CachedRole>) -> SessionMode {
    match existing.map(|role| role.session_mode) {
        Some(SessionMode::Brokered) => SessionMode::Brokered,
        _ => template,
    }
}

/// The Role granting `permissions` on the one pod `pod`, and nothing else.
pub fn build_role(grant: &GrantIdentity, pod: &str, permissions: &[PodPermission]) -> Role {
    Role {
        metadata: grant_metadata(grant),
        rules: Some(
            permissions
                .iter()
                .map(|p| PolicyRule {
                    api_groups: Some(vec![p.api_group.into()]),
                    resources: Some(vec![p.resource.into()]),
                    resource_names: Some(vec![pod.into()]),
                    verbs: p.verbs.iter().map(|v| v.to_string()).collect(),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

/// The RoleBinding of the grant's Role to `subjects`.
pub fn build_role_binding(grant: &GrantIdentity, subjects: Vec<Subject>) -> RoleBinding {
    RoleBinding {
        metadata: grant_metadata(grant),
        role_ref: RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: "Role".into(),
            name: grant.name.clone(),
        },
        subjects: Some(subjects),
    }
}

/// Who the template says gets the grant: the requester alone, or every allowed group.
pub fn subjects_for(config: &AccessConfig, requester: &Requester) -> Vec<Subject> {
    match config.grant_to() {
        GrantTo::Requester => vec![Subject {
            api_group: Some(RBAC_GROUP.into()),
            kind: "User".into(),
            name: requester.username.clone(),
            namespace: None,
        }],
        GrantTo::AllowedGroups => config
            .allowed_groups
            .iter()
            .map(|group| Subject {
                api_group: Some(RBAC_GROUP.into()),
                kind: "Group".into(),
                name: group.clone(),
                namespace: None,
            })
            .collect(),
    }
}

/// Subjects for a binding that may already exist: editing a template after a grant must never
/// widen it, so an existing binding keeps only the subjects that are still wanted.
pub fn never_wider(existing: Option<&CachedBinding>, wanted: Vec<Subject>) -> Vec<Subject> {
    match existing {
        Some(binding) => wanted
            .into_iter()
            .filter(|s| binding.binds(s) != Some(false))
            .collect(),
        None => wanted,
    }
}

/// Writes the grant's Role and RoleBinding for `pod`, each only if the existing one (the
/// builder's read of the Role, the cache's of the RoleBinding) differs from what it should be:
/// re-applying an unchanged object is still a call (two per reconcile), and a
/// reconcile that changes nothing should make none. One that does not exist yet is created,
/// one that differs is applied ([`create_or_apply`]).
pub async fn apply_grant(
    ctx: &Context,
    cache: &BuildCaches,
    grant: &GrantIdentity,
    existing_role: Option<&CachedRole>,
    pod: &str,
    permissions: &[PodPermission],
    subjects: Vec<Subject>,
) -> Result<()> {
    let role = build_role(grant, pod, permissions);
    if !same_role(existing_role, &role) {
        let roles: Api<Role> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        let before = existing_role.map(CachedRole::resource_version);
        ctx.echoes
            .track(
                &grant.namespace,
                &grant.name,
                before,
                create_or_apply(&roles, &role, existing_role.is_none()),
            )
            .await?;
    }
    let existing = cache.binding(ctx, grant).await?;
    let subjects = never_wider(existing.as_ref(), subjects);
    let binding = build_role_binding(grant, subjects);
    if !same_binding(existing.as_ref(), &binding) {
        let bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &grant.namespace);
        let before = existing.as_ref().map(CachedBinding::resource_version);
        ctx.echoes
            .track(
                &grant.namespace,
                &grant.name,
                before,
                create_or_apply(&bindings, &binding, existing.is_none()),
            )
            .await?;
    }
    Ok(())
}

/// Whether `existing` is `wanted` in everything oz sets: its rules, labels and owner.
fn same_role(existing: Option<&CachedRole>, wanted: &Role) -> bool {
    existing.is_some_and(|e| e.is(wanted))
}

/// Whether `existing` is `wanted` in everything oz sets: its Role, subjects, labels and owner.
fn same_binding(existing: Option<&CachedBinding>, wanted: &RoleBinding) -> bool {
    existing.is_some_and(|e| e.is(wanted))
}

fn grant_metadata(grant: &GrantIdentity) -> ObjectMeta {
    ObjectMeta {
        name: Some(grant.name.clone()),
        namespace: Some(grant.namespace.clone()),
        labels: Some(grant.labels.clone()),
        owner_references: Some(vec![grant.owner.clone()]),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::cache::grant_rbac::role_session_mode;

    fn grant() -> GrantIdentity {
        GrantIdentity {
            name: "req-1a2b3c4d".into(),
            namespace: "shop".into(),
            labels: BTreeMap::from([("app.kubernetes.io/managed-by".into(), "oz".into())]),
            owner: OwnerReference {
                api_version: "crds.wizardofoz.co/v1alpha1".into(),
                kind: "ExecAccessRequest".into(),
                name: "req".into(),
                uid: "1a2b3c4d-0000".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        }
    }

    fn config(grant_to: Option<GrantTo>) -> AccessConfig {
        AccessConfig {
            approval: None,
            notifications: None,
            session_mode: None,
            record_input: None,
            session_idle_timeout: None,
            max_extensions: None,
            max_total_duration: None,
            max_lead_time: None,
            max_grants_per_user: None,
            max_grants: None,
            allowed_groups: vec!["devs".into(), "sre".into()],
            default_duration: "1h".into(),
            max_duration: "2h".into(),
            access_command: String::new(),
            grant_to,
        }
    }

    fn alice() -> Requester {
        Requester {
            username: "alice".into(),
            uid: None,
            groups: vec!["devs".into()],
        }
    }

    #[test]
    fn the_exec_role_grants_exactly_get_pod_and_create_get_exec_on_one_pod() {
        let role = build_role(&grant(), "web-0", EXEC_PERMISSIONS);
        let rules = role.rules.unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["pods".to_string()][..])
        );
        assert_eq!(rules[0].verbs, ["get"]);
        assert_eq!(
            rules[1].resources.as_deref(),
            Some(&["pods/exec".to_string()][..])
        );
        assert_eq!(rules[1].verbs, ["create", "get"]);
        for rule in &rules {
            assert_eq!(
                rule.resource_names.as_deref(),
                Some(&["web-0".to_string()][..])
            );
            assert_eq!(rule.api_groups.as_deref(), Some(&["".to_string()][..]));
        }
        assert_eq!(
            role.metadata.owner_references.unwrap()[0].controller,
            Some(true)
        );
    }

    /// The Role a Direct exec grant wrote before sessions existed, as JSON: it must not change.
    const DIRECT_EXEC_ROLE_RULES: &str = r#"[{"apiGroups":[""],"resourceNames":["web-0"],"resources":["pods"],"verbs":["get"]},{"apiGroups":[""],"resourceNames":["web-0"],"resources":["pods/exec"],"verbs":["create","get"]}]"#;

    #[test]
    fn a_direct_exec_role_is_unchanged_byte_for_byte() {
        let role = build_role(&grant(), "web-0", EXEC_PERMISSIONS);
        assert_eq!(
            serde_json::to_string(&role.rules).unwrap(),
            DIRECT_EXEC_ROLE_RULES
        );
        assert_eq!(role_session_mode(&role), SessionMode::Direct);
    }

    #[test]
    fn a_brokered_exec_role_grants_exec_only_through_oz() {
        let role = build_role(&grant(), "web-0", BROKERED_EXEC_PERMISSIONS);
        let rules: Vec<_> = role
            .rules
            .clone()
            .unwrap()
            .into_iter()
            .map(|r| {
                (
                    r.api_groups.unwrap().join(","),
                    r.resources.unwrap().join(","),
                    r.verbs.join(","),
                    r.resource_names.unwrap().join(","),
                )
            })
            .collect();
        let expected = [
            ("", "pods", "get", "web-0"),
            (SESSIONS_GROUP, "pods/exec", "create,get", "web-0"),
        ]
        .map(|(g, r, v, n)| (g.to_string(), r.to_string(), v.to_string(), n.to_string()));
        assert_eq!(rules, expected);
        assert_eq!(role_session_mode(&role), SessionMode::Brokered);
    }

    #[test]
    fn a_brokered_grant_stays_brokered_and_a_direct_one_follows_its_template() {
        let direct = CachedRole::from(build_role(&grant(), "web-0", EXEC_PERMISSIONS));
        let brokered = CachedRole::from(build_role(&grant(), "web-0", BROKERED_EXEC_PERMISSIONS));
        use SessionMode::{Brokered, Direct};
        // No grant yet: the template decides.
        assert_eq!(granted_session_mode(Direct, None), Direct);
        assert_eq!(granted_session_mode(Brokered, None), Brokered);
        // Template switched to Brokered: the live Direct grant narrows to Brokered.
        assert_eq!(granted_session_mode(Brokered, Some(&direct)), Brokered);
        // Switched back to Direct: a Brokered grant is never widened.
        assert_eq!(granted_session_mode(Direct, Some(&brokered)), Brokered);
        assert_eq!(granted_session_mode(Direct, Some(&direct)), Direct);
    }

    #[test]
    fn requester_grants_bind_only_the_requester_as_a_user() {
        let subjects = subjects_for(&config(None), &alice());
        assert_eq!(subjects.len(), 1);
        assert_eq!(
            (subjects[0].kind.as_str(), subjects[0].name.as_str()),
            ("User", "alice")
        );
    }

    #[test]
    fn allowed_groups_grants_bind_every_group_as_oz_does() {
        let subjects = subjects_for(&config(Some(GrantTo::AllowedGroups)), &alice());
        let names: Vec<_> = subjects
            .iter()
            .map(|s| (s.kind.as_str(), s.name.as_str()))
            .collect();
        assert_eq!(names, [("Group", "devs"), ("Group", "sre")]);
    }

    #[test]
    fn an_existing_binding_is_never_widened() {
        let existing = CachedBinding::from(build_role_binding(
            &grant(),
            subjects_for(&config(Some(GrantTo::AllowedGroups)), &alice())[..1].to_vec(),
        ));
        let mut wider = config(Some(GrantTo::AllowedGroups));
        wider.allowed_groups.push("everyone".into());
        let kept = never_wider(Some(&existing), subjects_for(&wider, &alice()));
        let names: Vec<_> = kept.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["devs"]);
        // A binding that does not exist yet gets what is wanted.
        assert_eq!(never_wider(None, subjects_for(&wider, &alice())).len(), 3);
    }
}
