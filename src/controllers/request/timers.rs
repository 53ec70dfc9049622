//! The expiry timers: every grant in force has a timer of its own that revokes it at `expiresAt`,
//! outside the reconcile queue.
//!
//! The reconcile is also woken at `expiresAt`, and marks the request Expired. But the reconcile
//! queue is shared: when oz starts with thousands of grants, each is reconciled once, and a
//! grant expiring a few seconds in would wait behind all of them (measured: ~55 s late with
//! 10,000 grants). Revocation is what must be exact, so it does not queue: a timer fires on
//! its own task, deletes the grant's resources and marks the request Expired. The timers are
//! armed from the watch cache as soon as it is filled, before the first reconcile, and by every
//! reconcile that decides an expiry.
//!
//! A timer only ever takes access away, so it may be early but never late: arming a grant again
//! with a later time is ignored (a grant's `expiresAt` is fixed when it is made; a later value can
//! only come from an edited status, which the reconcile does not trust either).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, runtime::reflector::Store};
use oz_api::{AccessRequest, RequestPhase};
use tokio::task::AbortHandle;

use super::{
    RequestStores,
    expire::{record_expiry_by_timer, revoke_at_expiry},
};
use crate::{
    Context,
    builders::{AccessBuilder, GrantIdentity, grant_identity, grant_identity_of},
    time,
};

/// A grant's timer is keyed by its namespace and resource name (`<request>-<uid8>`), which is
/// unique per request object.
type Key = (String, String);

struct Armed {
    at: Timestamp,
    task: AbortHandle,
}

/// What a sleeping timer keeps of its grant: the request it belongs to. The whole
/// [`GrantIdentity`] (labels, owner reference: about 1 KB of heap in 13 allocations) is made
/// again when the timer fires; there is one timer per grant in force.
struct TimedGrant {
    namespace: String,
    request: String,
    uid: String,
}

impl TimedGrant {
    fn of(grant: &GrantIdentity) -> Self {
        Self {
            namespace: grant.namespace.clone(),
            request: grant.owner.name.clone(),
            uid: grant.owner.uid.clone(),
        }
    }

    fn identity<R: AccessRequest>(self) -> GrantIdentity {
        grant_identity_of::<R>(&self.request, self.namespace, &self.uid)
    }
}

/// The armed timers of one request kind in one scope. The gauge is shared by every scope (one
/// controller per watched namespace), so each adds and removes its own. Dropping it (the
/// controller stopping, leadership lost) cancels them all: only the leader revokes.
pub struct ExpiryTimers<B: AccessBuilder> {
    /// Shared by the timers: each holds a pointer, not a copy (about 300 bytes, and the
    /// allocations a Recorder's clone makes).
    ctx: Arc<Context>,
    builder: B,
    /// Where a timer reads its request and template when it marks the request Expired.
    stores: RequestStores<B::Request>,
    armed: Arc<Mutex<HashMap<Key, Armed>>>,
}

impl<B: AccessBuilder> ExpiryTimers<B> {
    pub fn new(ctx: Context, builder: B, stores: RequestStores<B::Request>) -> Self {
        Self {
            ctx: Arc::new(ctx),
            builder,
            stores,
            armed: Arc::default(),
        }
    }

    /// Revokes `grant` at `at`, unless it is already armed for that time or earlier.
    pub fn arm(&self, grant: &GrantIdentity, at: Timestamp) {
        let key = (grant.namespace.clone(), grant.name.clone());
        let mut armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        if armed.get(&key).is_some_and(|existing| existing.at <= at) {
            return;
        }
        let task = tokio::spawn(fire(
            self.ctx.clone(),
            self.builder,
            self.stores.clone(),
            TimedGrant::of(grant),
            at,
            Arc::downgrade(&self.armed),
        ))
        .abort_handle();
        match armed.insert(key, Armed { at, task }) {
            Some(replaced) => replaced.task.abort(),
            None => {
                self.gauge().inc();
            }
        }
    }

    /// Arms a timer for every grant in force in `store`, once the store has been filled by its
    /// first LIST: at start-up this is what makes expiry exact before any reconcile has run.
    pub async fn arm_from_cache(&self, store: Store<B::Request>) {
        if store.wait_until_ready().await.is_err() {
            return;
        }
        let started = std::time::Instant::now();
        let mut count = 0usize;
        for request in store.state() {
            let Some(at) = expiry_in_force(&*request) else {
                continue;
            };
            if let Ok(grant) = grant_identity(&*request) {
                self.arm(&grant, at);
                count += 1;
            }
        }
        tracing::info!(
            kind = %B::Request::kind(&()),
            timers = count,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "expiry timers armed from the cache"
        );
    }

    /// Forgets the timer of a request that is gone: deleted by a user, with its template, or
    /// with its namespace. Its access resources are owned by it, so the garbage collector
    /// removes them; its timer would only find nothing to revoke, at `expiresAt`, hours later.
    pub fn forget(&self, request: &B::Request) {
        let Ok(grant) = grant_identity(request) else {
            return;
        };
        let mut armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(timer) = armed.remove(&(grant.namespace, grant.name)) {
            timer.task.abort();
            self.gauge().dec();
        }
    }

    /// Forgets the timers of the requests no longer in `store`: deletions that a watch missed
    /// and a re-list reveals.
    pub fn forget_absent(&self, store: &Store<B::Request>) {
        let present: std::collections::HashSet<Key> = store
            .state()
            .iter()
            .filter_map(|r| grant_identity(&**r).ok())
            .map(|g| (g.namespace, g.name))
            .collect();
        let mut armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        let before = armed.len();
        armed.retain(|key, timer| {
            let keep = present.contains(key);
            if !keep {
                timer.task.abort();
            }
            keep
        });
        self.gauge().dec_by((before - armed.len()) as i64);
    }

    fn gauge(&self) -> prometheus_client::metrics::gauge::Gauge {
        timers_gauge::<B>(&self.ctx)
    }
}

impl<B: AccessBuilder> Drop for ExpiryTimers<B> {
    fn drop(&mut self) {
        let mut armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        let count = armed.len();
        for (_, timer) in armed.drain() {
            timer.task.abort();
        }
        self.gauge().dec_by(count as i64);
    }
}

/// The `expiresAt` of a request whose grant is (or may be) in force.
fn expiry_in_force<R: AccessRequest>(request: &R) -> Option<Timestamp> {
    if request.meta().deletion_timestamp.is_some() {
        return None;
    }
    let status = request.request_status()?;
    match status.phase {
        // Failed may still hold resources (an access command that cannot be rendered); a timer
        // that finds nothing to delete costs two 404s.
        Some(RequestPhase::Expired | RequestPhase::Denied) | None => None,
        _ => status.expires_at.as_ref().map(|t| t.0),
    }
}

fn timers_gauge<B: AccessBuilder>(ctx: &Context) -> prometheus_client::metrics::gauge::Gauge {
    ctx.metrics.expiry_timers_of(&B::Request::kind(&()))
}

/// Sleeps until `at`, then revokes `grant`, retrying until the apiserver answers, and marks its
/// request Expired.
async fn fire<B: AccessBuilder>(
    ctx: Arc<Context>,
    builder: B,
    stores: RequestStores<B::Request>,
    grant: TimedGrant,
    at: Timestamp,
    armed: Weak<Mutex<HashMap<Key, Armed>>>,
) {
    tokio::time::sleep(time::until(Timestamp::now(), at)).await;
    let grant = grant.identity::<B::Request>();
    let mut backoff = Duration::from_millis(100);
    // Boxed: the sleeping task is then a few hundred bytes, not the size of the API calls'
    // futures, and there is one task per grant in force.
    while let Err(error) = Box::pin(revoke_at_expiry(&ctx, builder, &grant, at)).await {
        tracing::warn!(namespace = %grant.namespace, grant = %grant.name, %error, "revoking an expired grant failed; retrying");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
    tracing::debug!(namespace = %grant.namespace, grant = %grant.name, "grant revoked at expiry");
    // Access is gone; the status follows. If this fails the reconcile at expiry writes it.
    if let Err(error) = Box::pin(record_expiry_by_timer(&ctx, &stores, &grant, at)).await {
        tracing::warn!(namespace = %grant.namespace, grant = %grant.name, %error, "could not mark an expired request Expired; its reconcile will");
    }
    // Done: forget this timer, unless it has been replaced by another one meanwhile.
    if let Some(armed) = armed.upgrade() {
        let mut armed = armed.lock().unwrap_or_else(|e| e.into_inner());
        let key = (grant.namespace.clone(), grant.name.clone());
        if armed.get(&key).is_some_and(|timer| timer.at == at) {
            armed.remove(&key);
            timers_gauge::<B>(&ctx).dec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use crate::controllers::fixtures::request;

    #[test]
    fn only_grants_that_may_be_in_force_get_a_timer() {
        let at = Timestamp::now();
        assert_eq!(
            expiry_in_force(&request(RequestPhase::Ready, Some(at))),
            Some(at)
        );
        assert_eq!(
            expiry_in_force(&request(RequestPhase::Pending, Some(at))),
            Some(at)
        );
        assert_eq!(
            expiry_in_force(&request(RequestPhase::Failed, Some(at))),
            Some(at)
        );
        assert_eq!(expiry_in_force(&request(RequestPhase::Ready, None)), None);
        for done in [RequestPhase::Expired, RequestPhase::Denied] {
            assert_eq!(expiry_in_force(&request(done, Some(at))), None, "{done:?}");
        }
        let mut deleting = request(RequestPhase::Ready, Some(at));
        deleting.metadata.deletion_timestamp = Some(Time(at));
        assert_eq!(expiry_in_force(&deleting), None);
    }

    #[test]
    fn a_firing_timer_revokes_the_grant_it_was_armed_for() {
        let mut request = request(RequestPhase::Ready, None);
        request.metadata.namespace = Some("shop".into());
        request.metadata.uid = Some("1a2b3c4d-5e6f-7a8b-9c0d-112233445566".into());
        let armed = grant_identity(&request).unwrap();
        let fired = TimedGrant::of(&armed).identity::<oz_api::ExecAccessRequest>();
        // GrantIdentity has no PartialEq; its Debug shows every field.
        assert_eq!(format!("{fired:?}"), format!("{armed:?}"));
        let owner = crate::builders::blocking(request.controller_owner_ref(&()).unwrap());
        assert_eq!(fired.owner, owner);
    }
}
