//! What a request controller keeps of its grants' Roles and RoleBindings: not the objects, but
//! what the builders read of them. The two cached objects took more heap than the request itself
//! (labels alone are a B-tree node of 11 slots), and kept as kube objects with their own
//! metadata and store keys what was left of them was still large (the grant store keeps them in
//! one record instead); the measurements are in docs/benchmarks.md.
//!
//! A builder asks three things of a grant's Role: is it exactly what oz would write, which pod
//! does it name, and is it Brokered; and of a RoleBinding: is it exactly what oz would write,
//! and does it bind a given subject (a binding is never widened). "Exactly what oz would write"
//! is kept as a fingerprint: a hash, keyed afresh by each process, of everything oz sets (the
//! rules, or the roleRef and subjects; oz's labels; its controller owner reference), taken of
//! the object as the watch delivers it and of the object oz would apply. Someone else's edit of
//! any of them changes the fingerprint, and the grant is put back, as when the whole objects
//! were compared. The subjects are kept the same way, one fingerprint each.
//!
//! The objects are converted as they are read off the watch ([`From`], through serde), so the
//! full object is never held: the watch delivers a [`WatchedRole`] or [`WatchedBinding`] (its
//! name, namespace and resourceVersion, which the watch machinery reads, and the name of the
//! request that controls it, which maps a change to that request), and the store keeps only
//! its [`CachedRole`] or [`CachedBinding`].

use std::{
    borrow::Cow,
    hash::{BuildHasher, Hash, RandomState},
    sync::LazyLock,
};

use k8s_openapi::{
    NamespaceResourceScope,
    api::rbac::v1::{Role, RoleBinding, Subject},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{Resource, api::ObjectMeta};
use oz_api::{SESSIONS_GROUP, SessionMode};
use serde::Deserialize;

use crate::builders::grant::{MANAGED_BY, REQUEST_KIND_LABEL, REQUEST_LABEL};

/// The labels oz sets on a grant's objects ([`crate::builders::grant::grant_identity`]); others' labels are not
/// compared.
pub const GRANT_LABEL_KEYS: [&str; 3] = [MANAGED_BY.0, REQUEST_LABEL, REQUEST_KIND_LABEL];

/// What oz keeps of a grant's Role.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedRole {
    resource_version: Box<str>,
    fingerprint: u64,
    /// The pod its rules name: the grant's pod.
    pub pod: Option<Box<str>>,
    pub session_mode: SessionMode,
}

/// What oz keeps of a grant's RoleBinding.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedBinding {
    resource_version: Box<str>,
    fingerprint: u64,
    /// The fingerprint of each subject it binds; `None` when it has no subjects field.
    subjects: Option<Box<[u64]>>,
}

/// A grant's Role as its watch delivers it.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "Role")]
pub struct WatchedRole {
    /// Its name, namespace and resourceVersion only.
    pub metadata: ObjectMeta,
    /// The name of the request that controls it.
    pub owner: Option<String>,
    pub cached: CachedRole,
}

/// A grant's RoleBinding as its watch delivers it, the same way.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "RoleBinding")]
pub struct WatchedBinding {
    pub metadata: ObjectMeta,
    pub owner: Option<String>,
    pub cached: CachedBinding,
}

impl CachedRole {
    /// Whether this Role is `wanted` in everything oz sets.
    pub fn is(&self, wanted: &Role) -> bool {
        self.fingerprint == role_fingerprint(wanted)
    }

    /// The resourceVersion it was read at.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }
}

impl CachedBinding {
    /// Whether this RoleBinding is `wanted` in everything oz sets.
    pub fn is(&self, wanted: &RoleBinding) -> bool {
        self.fingerprint == binding_fingerprint(wanted)
    }

    /// The resourceVersion it was read at.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// Whether it binds `subject`; `None` when it has no subjects at all.
    pub fn binds(&self, subject: &Subject) -> Option<bool> {
        let fingerprint = subject_fingerprint(subject);
        self.subjects
            .as_ref()
            .map(|subjects| subjects.contains(&fingerprint))
    }
}

impl From<Role> for CachedRole {
    fn from(role: Role) -> Self {
        WatchedRole::from(role).cached
    }
}

impl From<RoleBinding> for CachedBinding {
    fn from(binding: RoleBinding) -> Self {
        WatchedBinding::from(binding).cached
    }
}

impl From<Role> for WatchedRole {
    fn from(role: Role) -> Self {
        let pod = role.rules.iter().flatten().find_map(|rule| {
            rule.resource_names
                .as_ref()?
                .first()
                .map(|p| p.as_str().into())
        });
        let cached = CachedRole {
            resource_version: version_of(&role.metadata),
            fingerprint: role_fingerprint(&role),
            session_mode: role_session_mode(&role),
            pod,
        };
        Self {
            cached,
            owner: controller_name(&role.metadata),
            metadata: kept_metadata(role.metadata),
        }
    }
}

impl From<RoleBinding> for WatchedBinding {
    fn from(binding: RoleBinding) -> Self {
        let cached = CachedBinding {
            resource_version: version_of(&binding.metadata),
            fingerprint: binding_fingerprint(&binding),
            subjects: binding
                .subjects
                .as_ref()
                .map(|subjects| subjects.iter().map(subject_fingerprint).collect()),
        };
        Self {
            cached,
            owner: controller_name(&binding.metadata),
            metadata: kept_metadata(binding.metadata),
        }
    }
}

/// The key of every fingerprint this process takes: a hash an editor of a Role cannot aim at.
static FINGERPRINT_KEY: LazyLock<RandomState> = LazyLock::new(RandomState::new);

fn role_fingerprint(role: &Role) -> u64 {
    let rules = role.rules.as_ref().map(|rules| {
        rules
            .iter()
            .map(|r| {
                (
                    &r.api_groups,
                    &r.resources,
                    &r.resource_names,
                    &r.non_resource_urls,
                    &r.verbs,
                )
            })
            .collect::<Vec<_>>()
    });
    fingerprint(&role.metadata, rules)
}

fn binding_fingerprint(binding: &RoleBinding) -> u64 {
    let role_ref = &binding.role_ref;
    let subjects = binding
        .subjects
        .as_ref()
        .map(|subjects| subjects.iter().map(subject_fields).collect::<Vec<_>>());
    let body = (
        (&role_ref.api_group, &role_ref.kind, &role_ref.name),
        subjects,
    );
    fingerprint(&binding.metadata, body)
}

/// What a subject is made of, as hashed.
fn subject_fields(s: &Subject) -> impl Hash + '_ {
    (&s.api_group, &s.kind, &s.name, &s.namespace)
}

fn subject_fingerprint(subject: &Subject) -> u64 {
    FINGERPRINT_KEY.hash_one(subject_fields(subject))
}

/// The hash of `body` with oz's labels and controller owner reference in `meta`.
fn fingerprint(meta: &ObjectMeta, body: impl Hash) -> u64 {
    let labels = GRANT_LABEL_KEYS.map(|key| meta.labels.as_ref().and_then(|l| l.get(key)));
    let owner = controller_of(meta).map(|o| {
        (
            &o.api_version,
            &o.kind,
            &o.name,
            &o.uid,
            o.controller,
            o.block_owner_deletion,
        )
    });
    FINGERPRINT_KEY.hash_one((labels, owner, body))
}

fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

fn controller_name(meta: &ObjectMeta) -> Option<String> {
    controller_of(meta).map(|o| o.name.clone())
}

fn version_of(meta: &ObjectMeta) -> Box<str> {
    meta.resource_version.as_deref().unwrap_or_default().into()
}

fn kept_metadata(meta: ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        resource_version: meta.resource_version,
        ..Default::default()
    }
}

/// The watched forms are read and watched where their objects are: `K` names the API kind.
macro_rules! watched_as {
    ($cached:ty, $kind:ty) => {
        impl Resource for $cached {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;

            fn kind(dt: &()) -> Cow<'_, str> {
                <$kind>::kind(dt)
            }

            fn group(dt: &()) -> Cow<'_, str> {
                <$kind>::group(dt)
            }

            fn version(dt: &()) -> Cow<'_, str> {
                <$kind>::version(dt)
            }

            fn plural(dt: &()) -> Cow<'_, str> {
                <$kind>::plural(dt)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

watched_as!(WatchedRole, Role);
watched_as!(WatchedBinding, RoleBinding);

/// The session mode a grant's Role gives: Brokered when any rule is in [`SESSIONS_GROUP`].
pub fn role_session_mode(role: &Role) -> SessionMode {
    let brokered = role.rules.iter().flatten().any(|rule| {
        rule.api_groups
            .iter()
            .flatten()
            .any(|group| group == SESSIONS_GROUP)
    });
    if brokered {
        SessionMode::Brokered
    } else {
        SessionMode::Direct
    }
}

#[cfg(test)]
mod tests {
    use oz_api::ExecAccessRequest;

    use super::*;
    use crate::builders::{
        GrantIdentity, grant_identity_of,
        rbac::{EXEC_PERMISSIONS, build_role, build_role_binding},
    };

    fn grant() -> GrantIdentity {
        grant_identity_of::<ExecAccessRequest>(
            "req",
            "shop".into(),
            "1a2b3c4d-5e6f-7a8b-9c0d-112233445566",
        )
    }

    fn alice() -> Vec<Subject> {
        vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: "alice".into(),
            namespace: None,
        }]
    }

    /// `object` as the watch delivers it: through JSON, with what the apiserver adds.
    fn watched<K: serde::Serialize, C: serde::de::DeserializeOwned>(object: &K) -> C {
        let mut json = serde_json::to_value(object).unwrap();
        let meta = json["metadata"].as_object_mut().unwrap();
        meta.insert("uid".into(), "r-1".into());
        meta.insert("resourceVersion".into(), "42".into());
        meta.insert(
            "managedFields".into(),
            serde_json::json!([{"manager": "oz"}]),
        );
        meta["labels"]["team"] = "payments".into();
        serde_json::from_value(json).unwrap()
    }

    /// What the store keeps of `object` as the watch delivers it.
    fn cached_of<K: serde::Serialize, W>(object: &K) -> W::Cached
    where
        W: serde::de::DeserializeOwned + crate::cache::grant_rbac_store::GrantObject,
    {
        watched::<K, W>(object).cached().clone()
    }

    #[test]
    fn the_label_keys_compared_are_the_ones_oz_sets() {
        let grant = grant();
        let mut keys: Vec<&str> = grant.labels.keys().map(String::as_str).collect();
        let mut compared = GRANT_LABEL_KEYS.to_vec();
        keys.sort();
        compared.sort();
        assert_eq!(keys, compared);
    }

    #[test]
    fn a_cached_role_is_what_oz_wrote_until_anything_oz_sets_changes() {
        let role = build_role(&grant(), "web-1", EXEC_PERMISSIONS);
        let seen: WatchedRole = watched(&role);
        assert_eq!(
            seen.owner.as_deref(),
            Some("req"),
            "the controller owner maps a change to its request"
        );
        assert_eq!(
            seen.metadata,
            ObjectMeta {
                name: Some(grant().name),
                namespace: Some("shop".into()),
                resource_version: Some("42".into()),
                ..Default::default()
            },
            "only where it is and its version: no labels, managedFields or owners"
        );
        let cached = seen.cached;
        assert!(cached.is(&role), "the Role oz wrote, with others' labels");
        assert_eq!(cached.pod.as_deref(), Some("web-1"));
        assert_eq!(cached.session_mode, SessionMode::Direct);
        assert_eq!(cached.resource_version(), "42");

        let mut widened = role.clone();
        widened.rules.as_mut().unwrap()[1]
            .verbs
            .push("update".into());
        assert!(!cached.is(&widened) && !cached_of::<_, WatchedRole>(&widened).is(&role));
        let other_pod = build_role(&grant(), "web-2", EXEC_PERMISSIONS);
        assert!(!cached.is(&other_pod));
        let mut relabelled = role.clone();
        relabelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(REQUEST_LABEL.into(), "other".into());
        assert!(!cached_of::<_, WatchedRole>(&relabelled).is(&role));
        let mut orphaned = role.clone();
        orphaned.metadata.owner_references = None;
        assert!(!cached_of::<_, WatchedRole>(&orphaned).is(&role));
    }

    #[test]
    fn a_cached_binding_is_what_oz_wrote_until_its_subjects_or_role_change() {
        let binding = build_role_binding(&grant(), alice());
        let seen: WatchedBinding = watched(&binding);
        assert_eq!(seen.owner.as_deref(), Some("req"));
        assert!(seen.metadata.owner_references.is_none());
        let cached = seen.cached;
        assert!(cached.is(&binding));
        assert_eq!(cached.resource_version(), "42");

        let mut more = alice();
        more[0].name = "mallory".into();
        assert_eq!(cached.binds(&alice()[0]), Some(true));
        assert_eq!(cached.binds(&more[0]), Some(false));
        let mut as_group = alice();
        as_group[0].kind = "Group".into();
        assert_eq!(cached.binds(&as_group[0]), Some(false), "kind is compared");
        let mut nobody = binding.clone();
        nobody.subjects = None;
        assert_eq!(
            cached_of::<_, WatchedBinding>(&nobody).binds(&alice()[0]),
            None
        );

        let mut widened = binding.clone();
        widened.subjects.as_mut().unwrap().extend(more);
        assert!(!cached_of::<_, WatchedBinding>(&widened).is(&binding));
        let mut elsewhere = binding.clone();
        elsewhere.role_ref.name = "admin".into();
        assert!(!cached_of::<_, WatchedBinding>(&elsewhere).is(&binding));
    }
}
