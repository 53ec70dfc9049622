//! Step: does an AccessLock hold over this request? A lock names a user, a group, a namespace
//! or a template (`oz_api::lock`); while one matches the request's requester (their name and
//! the groups stamped at creation), its namespace and its template, the grant ends now, as a
//! revocation does: its resources are deleted and the request is kept Revoked, the lock named
//! as who revoked it. A lock wakes every request it matches (`request_controller.rs`), so this
//! runs within moments of its creation; unlocking gives nothing back.

use k8s_openapi::jiff::Timestamp;
use oz_api::{AccessRequest, LockTarget, locking};

use super::{
    ending,
    outcome::{Step, Stop, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::builders::AccessBuilder;

/// Ends the grant now if a lock holds over it; goes on otherwise.
pub async fn is_locked<B: AccessBuilder>(r: &Reconciling<'_, B>, pass: &mut Pass) -> Step {
    let Some(lock) = lock_over(r.request, &r.stores.locks.state(), pass.now) else {
        return go_on(());
    };
    // Before the status says so: what users read never runs ahead of their access.
    r.revoke().await?;
    ending::record_revocation(
        pass,
        &format!("AccessLock {} ({})", lock.name(), lock.spec.reason),
    );
    stop(Stop::Ended(pass.now))
}

/// The lock that holds over `request` at `now`, among `locks`, if one does.
pub fn lock_over<R: AccessRequest>(
    request: &R,
    locks: &[std::sync::Arc<oz_api::AccessLock>],
    now: Timestamp,
) -> Option<oz_api::AccessLock> {
    let (user, groups) = match request.requester() {
        Some(requester) => (requester.username.as_str(), requester.groups.as_slice()),
        None => ("", &[][..]),
    };
    let target = LockTarget {
        user,
        groups,
        namespace: request.meta().namespace.as_deref().unwrap_or_default(),
        template: Some((R::KIND, request.template_name())),
    };
    locking(locks.iter().map(|l| &**l), &target, now).cloned()
}
