//! The AccessLocks the handlers judge by ([`Locks`]): kept in memory by a cluster-wide watch,
//! so that a locked user's exec is denied (the grant rule grants nothing a lock holds over),
//! and their new requests, and decisions on their requests, are refused with the lock's
//! reason, without a read per review.

use std::sync::Arc;

use futures::{Future, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, reflector, reflector::Store, watcher},
};
use oz_api::{AccessKind, AccessLock, LockTarget, Requester, locking};

/// The locks, as the watch has them; none until it has listed (and none in handler tests that
/// give no watch).
#[derive(Clone, Default)]
pub struct Locks(Option<Store<AccessLock>>);

impl Locks {
    /// The locks over `client`, cluster-wide, and the future that keeps them current (spawn it
    /// for as long as they are read).
    pub fn watch(client: Client) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (store, writer) = reflector::store();
        let run = watcher::watcher(Api::<AccessLock>::all(client), watcher::Config::default())
            .default_backoff()
            .modify(|lock| oz_api::strip_unread_metadata(lock.meta_mut()))
            .reflect(writer)
            .for_each(|event| {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "the AccessLock watch failed; retrying with backoff");
                }
                futures::future::ready(())
            });
        (Self(Some(store)), run)
    }

    /// Locks given as they are, for handler tests.
    pub fn of(locks: Vec<AccessLock>) -> Self {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        for lock in locks {
            writer.apply_watcher_event(&watcher::Event::InitApply(lock));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        Self(Some(store))
    }

    /// Every lock, as far as the watch knows.
    pub fn current(&self) -> Vec<Arc<AccessLock>> {
        self.0.as_ref().map(Store::state).unwrap_or_default()
    }

    /// The refusal of the lock that holds now over `requester` asking through `kind`'s template
    /// `template` in `namespace`, if one does.
    pub fn refusal(
        &self,
        requester: &Requester,
        namespace: &str,
        (kind, template): (AccessKind, &str),
    ) -> Option<String> {
        let locks = self.current();
        let target = LockTarget {
            user: &requester.username,
            groups: &requester.groups,
            namespace,
            template: Some((kind, template)),
        };
        locking(locks.iter().map(|l| &**l), &target, Timestamp::now()).map(AccessLock::refusal)
    }
}
