//! The writes oz has just made to the objects of its grants, so that the watch events they cause
//! do not wake their requests again.
//!
//! A grant's Role and RoleBinding are watched so that anyone else's change to them (an edit, a
//! delete) is undone at once. oz's own apply or delete comes back through the same watch a few
//! milliseconds later; reconciling the request again then only re-reads what oz has just written,
//! from caches that may not have caught up yet, and could write a status or an Event twice
//! (every grant was reconciled twice). Each write records what its watch event
//! will carry: the resourceVersion an apply returned, or a delete. The watch drops the one event
//! that matches and lets every other through. An entry lives from the write until its event
//! arrives; a request that is deleted takes its entries with it ([`Echoes::forget`]).
//!
//! The event can arrive before the write's answer does: while a write is in flight
//! ([`Echoes::track`]), events of its object are held back, and once the answer names the
//! version written, a held event that was not its echo (someone else's later change) is not
//! lost: the request is looked at again ([`Echoes::take_missed`]).

use std::{
    borrow::Cow,
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
};

use kube::{Resource, ResourceExt};

/// The kind, namespace and name of an object oz wrote.
type Key = (Cow<'static, str>, String, String);

/// One of oz's writes of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Write {
    /// A write whose answer has not come yet, with the versions of the events held back
    /// meanwhile.
    InFlight(Vec<String>),
    /// An apply or patch that stored this resourceVersion.
    Applied(String),
    /// A delete.
    Deleted,
}

/// The writes whose watch events have not come back yet. Shared by every controller and timer
/// of one oz-manager.
#[derive(Clone, Default)]
pub struct Echoes {
    pending: Arc<Mutex<HashMap<Key, Vec<Write>>>>,
    /// The namespaces and names of objects an event was held back for that was not oz's echo.
    missed: Arc<Mutex<std::collections::HashSet<(String, String)>>>,
}

impl Echoes {
    /// Runs `write` of the object `name` in `namespace` (an apply or patch that returns the
    /// object stored) and records it as oz's own. `before` is the resourceVersion oz's cache
    /// held: a write that changed nothing returns it, and causes no event.
    pub async fn track<K, E>(
        &self,
        namespace: &str,
        name: &str,
        before: Option<&str>,
        write: impl Future<Output = Result<K, E>>,
    ) -> Result<K, E>
    where
        K: Resource<DynamicType = ()>,
    {
        let key = key_of::<K>(namespace, name);
        self.record(key.clone(), Write::InFlight(Vec::new()));
        let result = write.await;
        let written = result.as_ref().ok().and_then(|k| k.resource_version());
        self.landed(key, written, before);
        result
    }

    /// Settles an in-flight write that stored `written` (none: it failed).
    fn landed(&self, key: Key, written: Option<String>, before: Option<&str>) {
        let mut pending = self.lock();
        let writes = pending.entry(key.clone()).or_default();
        let held = match writes.iter().position(|w| matches!(w, Write::InFlight(_))) {
            Some(i) => match writes.remove(i) {
                Write::InFlight(held) => held,
                _ => Vec::new(),
            },
            None => Vec::new(),
        };
        let echoed = written.as_ref().is_some_and(|v| held.contains(v));
        // The held events reached the cache: earlier writes they have passed are settled too.
        for seen in &held {
            settle(writes, Some(seen));
        }
        // Events that were neither this write's echo nor older than it: someone else's change,
        // after oz's, that nobody has looked at.
        let foreign = held.iter().any(|v| {
            Some(v) != written.as_ref()
                && !written.as_deref().is_some_and(|w| not_after(v, Some(w)))
        });
        if let Some(version) = written
            && !echoed
            && before != Some(version.as_str())
        {
            writes.push(Write::Applied(version));
        }
        if writes.is_empty() {
            pending.remove(&key);
        }
        drop(pending);
        if foreign {
            self.missed_lock().insert((key.1, key.2));
        }
    }

    /// Whether an event about the object `name` in `namespace` was held back during one of oz's
    /// writes and turned out not to be its echo; asking clears it. The reconcile that wrote it
    /// looks again.
    pub fn take_missed(&self, namespace: &str, name: &str) -> bool {
        self.missed_lock()
            .remove(&(namespace.to_string(), name.to_string()))
    }

    /// Records that oz is about to delete `name` (before the call, so its event cannot arrive
    /// first). [`Echoes::gone`] takes it back when there was nothing to delete.
    pub fn deleting<K: Resource<DynamicType = ()>>(&self, namespace: &str, name: &str) {
        self.record(key_of::<K>(namespace, name), Write::Deleted);
    }

    /// Takes back a recorded delete of `name` that found nothing: no event will come.
    pub fn gone<K: Resource<DynamicType = ()>>(&self, namespace: &str, name: &str) {
        let key = key_of::<K>(namespace, name);
        let mut pending = self.lock();
        if let Some(writes) = pending.get_mut(&key) {
            writes.retain(|w| *w != Write::Deleted);
            if writes.is_empty() {
                pending.remove(&key);
            }
        }
    }

    /// Whether oz has written the `K` named `name` in `namespace` since its cache last heard of
    /// it, the cache holding it at `cached_version` (`None`: absent): a write in flight, a
    /// delete, or an apply that stored a later version than the cached copy's. The writes the
    /// copy has passed are settled here, so that an echo that slipped by cannot leave the
    /// object looking stale for good.
    pub fn ahead_of<K: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
        cached_version: Option<&str>,
    ) -> bool {
        let key = key_of::<K>(namespace, name);
        let mut pending = self.lock();
        let Some(writes) = pending.get_mut(&key) else {
            return false;
        };
        settle(writes, cached_version);
        let ahead = !writes.is_empty();
        if !ahead {
            pending.remove(&key);
        }
        ahead
    }

    /// Whether a watch event about `object` (`deleted`, or applied) is the echo of one of oz's
    /// own writes, which the caller then drops. The event settles the writes it shows the cache
    /// has caught up with: the one it echoes and any before it.
    pub fn is_echo<K: Resource<DynamicType = ()>>(&self, object: &K, deleted: bool) -> bool {
        let key = key(object);
        let mut pending = self.lock();
        let Some(writes) = pending.get_mut(&key) else {
            return false;
        };
        let seen = object.resource_version();
        if let Some(Write::InFlight(held)) =
            writes.iter_mut().find(|w| matches!(w, Write::InFlight(_)))
        {
            // Whose it is is known once the write answers ([`Echoes::landed`]).
            held.extend(seen.clone().filter(|_| !deleted));
            if deleted {
                self.missed_lock().insert((key.1.clone(), key.2.clone()));
            }
            return true;
        }
        let echo = if deleted {
            writes.contains(&Write::Deleted)
        } else {
            writes
                .iter()
                .any(|w| matches!(w, Write::Applied(v) if Some(v) == seen.as_ref()))
        };
        if deleted {
            writes.clear();
        } else {
            settle(writes, seen.as_deref());
            // Any change seen after a delete: the object is back (someone re-created it).
            writes.retain(|w| *w != Write::Deleted);
        }
        if writes.is_empty() {
            pending.remove(&key);
        }
        echo
    }

    /// Forgets the pending writes in `namespace` of the objects named `name` (a deleted
    /// request's, and its grant's): their events may never come.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock()
            .retain(|(_, ns, n), _| !(ns == namespace && n == name));
        self.take_missed(namespace, name);
    }

    /// How many objects have writes waiting for their events (a test's view).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no write waits for its event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn record(&self, key: Key, write: Write) {
        self.lock().entry(key).or_default().push(write);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Write>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn missed_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashSet<(String, String)>> {
        self.missed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Drops the applies a cache at version `seen` has caught up with.
fn settle(writes: &mut Vec<Write>, seen: Option<&str>) {
    writes.retain(|w| !matches!(w, Write::Applied(version) if not_after(version, seen)));
}

/// Whether the write that stored `version` is one a watch event at `seen` has passed. Kubernetes
/// calls resourceVersions opaque, but every apiserver backed by etcd hands out its revision, an
/// increasing integer; anything else is compared for equality only.
fn not_after(version: &str, seen: Option<&str>) -> bool {
    let Some(seen) = seen else { return false };
    match (version.parse::<u64>(), seen.parse::<u64>()) {
        (Ok(version), Ok(seen)) => version <= seen,
        _ => version == seen,
    }
}

fn key_of<K: Resource<DynamicType = ()>>(namespace: &str, name: &str) -> Key {
    (K::kind(&()), namespace.to_string(), name.to_string())
}

fn key<K: Resource<DynamicType = ()>>(object: &K) -> Key {
    key_of::<K>(&object.namespace().unwrap_or_default(), &object.name_any())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::ObjectMeta;

    use super::*;

    fn role(version: &str) -> Role {
        Role {
            metadata: ObjectMeta {
                name: Some("r-1".into()),
                namespace: Some("shop".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            rules: None,
        }
    }

    /// oz's apply of r-1, which stores `version`, with the cache at `before`.
    async fn apply(own: &Echoes, version: &str, before: Option<&str>) {
        let stored = role(version);
        let write = async { Ok::<_, ()>(stored) };
        own.track("shop", "r-1", before, write).await.unwrap();
    }

    #[tokio::test]
    async fn the_event_of_an_own_apply_is_an_echo_once_and_any_other_is_news() {
        let own = Echoes::default();
        apply(&own, "7", Some("5")).await;
        assert!(own.ahead_of::<Role>("shop", "r-1", None));
        assert!(!own.is_echo(&role("6"), false), "an older version is news");
        assert!(
            own.ahead_of::<Role>("shop", "r-1", None),
            "and leaves the write pending"
        );
        assert!(own.is_echo(&role("7"), false));
        assert!(!own.ahead_of::<Role>("shop", "r-1", None));
        apply(&own, "8", Some("7")).await;
        assert!(own.is_echo(&role("8"), false));
        assert!(!own.is_echo(&role("8"), false), "an echo is consumed");
        assert!(own.is_empty());
    }

    #[tokio::test]
    async fn a_later_event_settles_the_writes_it_has_passed() {
        let own = Echoes::default();
        apply(&own, "7", None).await;
        apply(&own, "9", Some("7")).await;
        // The watch skipped 7 (a re-list shows only the latest): 9 settles both.
        assert!(own.is_echo(&role("9"), false));
        assert!(own.is_empty());
        apply(&own, "11", Some("9")).await;
        assert!(!own.is_echo(&role("12"), false), "someone wrote after oz");
        assert!(own.is_empty());
    }

    #[tokio::test]
    async fn an_apply_that_changed_nothing_waits_for_no_event() {
        let own = Echoes::default();
        apply(&own, "7", Some("7")).await;
        assert!(own.is_empty());
        assert!(!own.ahead_of::<Role>("shop", "r-1", None));
    }

    #[tokio::test]
    async fn an_echo_that_arrives_before_the_answer_is_still_an_echo() {
        let own = Echoes::default();
        let write = async {
            // The watch is faster than the write's answer.
            assert!(own.is_echo(&role("7"), false), "held back while in flight");
            Ok::<_, ()>(role("7"))
        };
        own.track("shop", "r-1", Some("5"), write).await.unwrap();
        assert!(own.is_empty(), "nothing left to wait for");
        assert!(!own.take_missed("shop", "r-1"));
    }

    #[tokio::test]
    async fn echoes_held_back_during_a_later_write_settle_the_earlier_one() {
        let own = Echoes::default();
        apply(&own, "7", Some("5")).await;
        let write = async {
            // Both echoes arrive while the second write is in flight.
            assert!(own.is_echo(&role("7"), false));
            assert!(own.is_echo(&role("9"), false));
            Ok::<_, ()>(role("9"))
        };
        own.track("shop", "r-1", Some("7"), write).await.unwrap();
        assert!(own.is_empty(), "nothing left to wait for");
        // And a copy the cache holds settles whatever it has passed.
        apply(&own, "11", Some("9")).await;
        assert!(own.ahead_of::<Role>("shop", "r-1", Some("9")));
        assert!(!own.ahead_of::<Role>("shop", "r-1", Some("11")));
        assert!(own.is_empty());
    }

    #[tokio::test]
    async fn a_change_by_someone_else_held_back_during_a_write_is_not_lost() {
        let own = Echoes::default();
        let write = async {
            assert!(own.is_echo(&role("7"), false));
            assert!(own.is_echo(&role("8"), false), "held back too");
            Ok::<_, ()>(role("7"))
        };
        own.track("shop", "r-1", Some("5"), write).await.unwrap();
        assert!(own.take_missed("shop", "r-1"), "8 came after oz's write");
        assert!(!own.take_missed("shop", "r-1"), "asking clears it");
        // Held back and older than oz's write: superseded by it, nothing to look at.
        let write = async {
            assert!(own.is_echo(&role("9"), false));
            Ok::<_, ()>(role("10"))
        };
        own.track("shop", "r-1", Some("8"), write).await.unwrap();
        assert!(!own.take_missed("shop", "r-1"));
        assert!(own.is_echo(&role("10"), false));
        // A write that fails: whatever was held back is someone else's.
        let write = async {
            assert!(own.is_echo(&role("11"), false));
            Err::<Role, _>(())
        };
        assert!(own.track("shop", "r-1", Some("10"), write).await.is_err());
        assert!(own.take_missed("shop", "r-1"));
        assert!(own.is_empty());
    }

    #[test]
    fn an_own_delete_is_an_echo_unless_there_was_nothing_to_delete() {
        let own = Echoes::default();
        own.deleting::<Role>("shop", "r-1");
        assert!(
            !own.ahead_of::<RoleBinding>("shop", "r-1", None),
            "kinds are apart"
        );
        assert!(own.is_echo(&role("9"), true));
        own.deleting::<Role>("shop", "r-1");
        own.gone::<Role>("shop", "r-1");
        assert!(own.is_empty());
        own.deleting::<Role>("shop", "r-1");
        assert!(
            !own.is_echo(&role("9"), false),
            "someone re-created it: news"
        );
    }

    #[tokio::test]
    async fn a_deleted_request_takes_its_pending_writes_with_it() {
        let own = Echoes::default();
        apply(&own, "7", None).await;
        own.deleting::<RoleBinding>("shop", "r-1");
        own.deleting::<Role>("other", "r-1");
        own.forget("shop", "r-1");
        assert_eq!(own.len(), 1);
    }
}
