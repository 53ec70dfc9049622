//! One record per grant of what its Role's and RoleBinding's watches last said: the
//! [`CachedRole`] and [`CachedBinding`] side by side, keyed by namespace and grant name (the Role
//! and the RoleBinding share the grant's name).
//!
//! kube's reflector stores hold each object behind its own `Arc`, under an `ObjectRef` key of
//! four strings, and need a whole `ObjectMeta` in every object: the two stores were a fifth of
//! a grant's heap (docs/benchmarks.md). Here a grant is one map entry under its
//! namespace's map, holding two fingerprints, two resourceVersions, its pod's name and a
//! fingerprint per subject.
//!
//! A [`GrantRbacWriter`] applies one watch's events (the Roles', or the RoleBindings') the way
//! kube's reflector does: a re-list is gathered aside and replaces that watch's half of every
//! record once it is complete, and the store is ready once both watches have listed once.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

use kube::{Resource, runtime::watcher};
use tokio::sync::watch;

use super::grant_rbac::{CachedBinding, CachedRole, WatchedBinding, WatchedRole};

/// What the watches last said of one grant's Role and RoleBinding.
#[derive(Debug, Default)]
pub struct GrantObjects {
    role: Option<CachedRole>,
    binding: Option<CachedBinding>,
}

/// Grant name by namespace.
type Grants = HashMap<Box<str>, HashMap<Box<str>, GrantObjects>>;

/// What a re-list has delivered so far: namespace, name and what the store will keep.
type Listed<C> = Vec<(Box<str>, Box<str>, C)>;

/// A watched kind whose objects are half of a grant's record.
pub trait GrantObject: Resource {
    /// What the store keeps of it.
    type Cached: Clone;

    /// What the store keeps of this object.
    fn cached(&self) -> &Self::Cached;

    /// Its half of a grant's record.
    fn half(objects: &mut GrantObjects) -> &mut Option<Self::Cached>;

    /// Its half of a grant's record, to read.
    fn read(objects: &GrantObjects) -> Option<&Self::Cached>;

    /// The resourceVersion `cached` was read at.
    fn cached_version(cached: &Self::Cached) -> &str;
}

impl GrantObject for WatchedRole {
    type Cached = CachedRole;

    fn cached(&self) -> &CachedRole {
        &self.cached
    }

    fn half(objects: &mut GrantObjects) -> &mut Option<CachedRole> {
        &mut objects.role
    }

    fn read(objects: &GrantObjects) -> Option<&CachedRole> {
        objects.role.as_ref()
    }

    fn cached_version(cached: &CachedRole) -> &str {
        cached.resource_version()
    }
}

impl GrantObject for WatchedBinding {
    type Cached = CachedBinding;

    fn cached(&self) -> &CachedBinding {
        &self.cached
    }

    fn half(objects: &mut GrantObjects) -> &mut Option<CachedBinding> {
        &mut objects.binding
    }

    fn read(objects: &GrantObjects) -> Option<&CachedBinding> {
        objects.binding.as_ref()
    }

    fn cached_version(cached: &CachedBinding) -> &str {
        cached.resource_version()
    }
}

/// The grants' Roles and RoleBindings of one request controller, as its watches last saw them.
#[derive(Clone)]
pub struct GrantRbacStore {
    grants: Arc<RwLock<Grants>>,
    roles_listed: watch::Receiver<bool>,
    bindings_listed: watch::Receiver<bool>,
}

/// Applies one watch's events to a [`GrantRbacStore`].
pub struct GrantRbacWriter<W: GrantObject> {
    grants: Arc<RwLock<Grants>>,
    listed: watch::Sender<bool>,
    /// A re-list under way.
    relisting: Option<Listed<W::Cached>>,
}

impl GrantRbacStore {
    /// An empty store, and the writers of its Roles' and RoleBindings' watches.
    pub fn new() -> (
        Self,
        GrantRbacWriter<WatchedRole>,
        GrantRbacWriter<WatchedBinding>,
    ) {
        let grants = Arc::new(RwLock::new(Grants::new()));
        let (roles, roles_listed) = watch::channel(false);
        let (bindings, bindings_listed) = watch::channel(false);
        let store = Self {
            grants: grants.clone(),
            roles_listed,
            bindings_listed,
        };
        (
            store,
            GrantRbacWriter::new(grants.clone(), roles),
            GrantRbacWriter::new(grants, bindings),
        )
    }

    /// What the store holds of the `W` of grant `name` in `namespace`.
    pub fn get<W: GrantObject>(&self, namespace: &str, name: &str) -> Option<W::Cached> {
        let grants = read(&self.grants);
        W::read(grants.get(namespace)?.get(name)?).cloned()
    }

    /// Waits until both watches have listed once, so that "not in the store" means "does not
    /// exist". Returns at once if a writer is gone: its controller is stopping.
    pub async fn wait_until_ready(&self) {
        let _ = self.roles_listed.clone().wait_for(|listed| *listed).await;
        let _ = self
            .bindings_listed
            .clone()
            .wait_for(|listed| *listed)
            .await;
    }
}

impl<W: GrantObject> GrantRbacWriter<W> {
    fn new(grants: Arc<RwLock<Grants>>, listed: watch::Sender<bool>) -> Self {
        Self {
            grants,
            listed,
            relisting: None,
        }
    }

    /// Applies one watch event.
    pub fn apply(&mut self, event: &watcher::Event<W>) {
        match event {
            watcher::Event::Apply(object) => {
                if let Some((namespace, name)) = key_of(object) {
                    let mut grants = write(&self.grants);
                    *W::half(record(&mut grants, namespace.into(), name.into())) =
                        Some(object.cached().clone());
                }
            }
            watcher::Event::Delete(object) => {
                if let Some((namespace, name)) = key_of(object) {
                    let mut grants = write(&self.grants);
                    if let Some(in_namespace) = grants.get_mut(namespace) {
                        if let Some(objects) = in_namespace.get_mut(name) {
                            *W::half(objects) = None;
                            if objects.is_empty() {
                                in_namespace.remove(name);
                            }
                        }
                        if in_namespace.is_empty() {
                            grants.remove(namespace);
                        }
                    }
                }
            }
            watcher::Event::Init => self.relisting = Some(Vec::new()),
            watcher::Event::InitApply(object) => {
                if let Some((namespace, name)) = key_of(object) {
                    self.relisting.get_or_insert_default().push((
                        namespace.into(),
                        name.into(),
                        object.cached().clone(),
                    ));
                }
            }
            watcher::Event::InitDone => {
                let listed = self.relisting.take().unwrap_or_default();
                let mut grants = write(&self.grants);
                for objects in grants.values_mut().flat_map(HashMap::values_mut) {
                    *W::half(objects) = None;
                }
                for (namespace, name, cached) in listed {
                    *W::half(record(&mut grants, namespace, name)) = Some(cached);
                }
                grants.retain(|_, in_namespace| {
                    in_namespace.retain(|_, objects| !objects.is_empty());
                    !in_namespace.is_empty()
                });
                drop(grants);
                self.listed.send_replace(true);
            }
        }
    }
}

impl GrantObjects {
    fn is_empty(&self) -> bool {
        self.role.is_none() && self.binding.is_none()
    }
}

/// The record of grant `name` in `namespace`, made empty if there is none.
fn record(grants: &mut Grants, namespace: Box<str>, name: Box<str>) -> &mut GrantObjects {
    grants
        .entry(namespace)
        .or_default()
        .entry(name)
        .or_default()
}

fn key_of(object: &impl Resource) -> Option<(&str, &str)> {
    let meta = object.meta();
    Some((meta.namespace.as_deref()?, meta.name.as_deref()?))
}

fn read(grants: &RwLock<Grants>) -> RwLockReadGuard<'_, Grants> {
    grants.read().unwrap_or_else(|e| e.into_inner())
}

fn write(grants: &RwLock<Grants>) -> RwLockWriteGuard<'_, Grants> {
    grants.write().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use k8s_openapi::api::rbac::v1::Subject;
    use kube::runtime::watcher::Event;
    use oz_api::ExecAccessRequest;

    use super::*;
    use crate::builders::{
        GrantIdentity, grant_identity_of,
        rbac::{EXEC_PERMISSIONS, build_role, build_role_binding},
    };

    fn grant(request: &str, namespace: &str) -> GrantIdentity {
        grant_identity_of::<ExecAccessRequest>(
            request,
            namespace.into(),
            "1a2b3c4d-5e6f-7a8b-9c0d-112233445566",
        )
    }

    fn role(grant: &GrantIdentity, pod: &str, version: &str) -> WatchedRole {
        let mut role = build_role(grant, pod, EXEC_PERMISSIONS);
        role.metadata.resource_version = Some(version.into());
        role.into()
    }

    fn binding(grant: &GrantIdentity, version: &str) -> WatchedBinding {
        let subjects = vec![Subject {
            kind: "User".into(),
            name: "alice".into(),
            ..Default::default()
        }];
        let mut binding = build_role_binding(grant, subjects);
        binding.metadata.resource_version = Some(version.into());
        binding.into()
    }

    /// How many grants have a Role or a RoleBinding in `store`.
    fn grants_in(store: &GrantRbacStore) -> usize {
        read(&store.grants).values().map(HashMap::len).sum()
    }

    fn pod_of(store: &GrantRbacStore, grant: &GrantIdentity) -> Option<String> {
        let role = store.get::<WatchedRole>(&grant.namespace, &grant.name)?;
        role.pod.map(String::from)
    }

    #[test]
    fn a_grant_s_role_and_binding_share_a_record_until_both_are_gone() {
        let (store, mut roles, mut bindings) = GrantRbacStore::new();
        let (a, b) = (grant("a", "shop"), grant("b", "shop"));
        roles.apply(&Event::Apply(role(&a, "web-1", "1")));
        bindings.apply(&Event::Apply(binding(&a, "2")));
        roles.apply(&Event::Apply(role(&b, "web-2", "3")));
        assert_eq!(grants_in(&store), 2);
        assert_eq!(pod_of(&store, &a).as_deref(), Some("web-1"));
        let cached = store.get::<WatchedBinding>("shop", &a.name).unwrap();
        assert_eq!(cached.resource_version(), "2");
        assert!(store.get::<WatchedBinding>("shop", &b.name).is_none());
        assert!(store.get::<WatchedRole>("other", &a.name).is_none());

        roles.apply(&Event::Apply(role(&a, "web-1", "4")));
        let updated = store.get::<WatchedRole>("shop", &a.name).unwrap();
        assert_eq!(updated.resource_version(), "4");
        roles.apply(&Event::Delete(role(&a, "web-1", "5")));
        assert!(store.get::<WatchedRole>("shop", &a.name).is_none());
        assert!(store.get::<WatchedBinding>("shop", &a.name).is_some());
        assert_eq!(grants_in(&store), 2, "a's binding is still there");
        bindings.apply(&Event::Delete(binding(&a, "6")));
        roles.apply(&Event::Delete(role(&b, "web-2", "7")));
        assert_eq!(grants_in(&store), 0);
        assert!(
            read(&store.grants).is_empty(),
            "no empty namespace map left"
        );
    }

    #[test]
    fn a_relist_replaces_its_own_half_once_complete_and_leaves_the_other() {
        let (store, mut roles, mut bindings) = GrantRbacStore::new();
        let (a, b, c) = (grant("a", "shop"), grant("b", "shop"), grant("c", "bank"));
        roles.apply(&Event::Apply(role(&a, "web-1", "1")));
        roles.apply(&Event::Apply(role(&b, "web-2", "2")));
        bindings.apply(&Event::Apply(binding(&a, "3")));

        roles.apply(&Event::Init);
        roles.apply(&Event::InitApply(role(&b, "web-9", "8")));
        roles.apply(&Event::InitApply(role(&c, "db-1", "9")));
        assert_eq!(
            pod_of(&store, &a).as_deref(),
            Some("web-1"),
            "until the re-list is complete, the store answers as before"
        );
        assert!(pod_of(&store, &c).is_none());
        roles.apply(&Event::InitDone);

        assert!(
            pod_of(&store, &a).is_none(),
            "a's Role was not listed: gone"
        );
        assert!(
            store.get::<WatchedBinding>("shop", &a.name).is_some(),
            "the bindings' half is not the roles' re-list's to drop"
        );
        assert_eq!(pod_of(&store, &b).as_deref(), Some("web-9"));
        assert_eq!(pod_of(&store, &c).as_deref(), Some("db-1"));
        assert_eq!(grants_in(&store), 3);
    }

    #[test]
    fn the_store_is_ready_once_both_watches_have_listed() {
        let (store, mut roles, mut bindings) = GrantRbacStore::new();
        for event in [Event::Init, Event::InitDone] {
            roles.apply(&event);
        }
        assert!(
            store.wait_until_ready().now_or_never().is_none(),
            "the bindings are not listed yet"
        );
        bindings.apply(&Event::Init);
        assert!(store.wait_until_ready().now_or_never().is_none());
        bindings.apply(&Event::InitDone);
        assert!(store.wait_until_ready().now_or_never().is_some());

        let (stopping, roles, bindings) = GrantRbacStore::new();
        drop((roles, bindings));
        assert!(
            stopping.wait_until_ready().now_or_never().is_some(),
            "a store whose watches are gone has nothing to wait for"
        );
    }
}
