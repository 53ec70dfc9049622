//! The expiry timers: every grant in force is revoked at its `expiresAt` by a timer, outside the
//! reconcile queue.
//!
//! The reconcile queue is shared: when oz starts with thousands of grants, each is reconciled
//! once, and a grant expiring a few seconds in would wait behind all of them (tens of seconds
//! late, docs/benchmarks.md). Revocation is what must be exact, so it does not queue: each
//! controller keeps its grants' expiry times in a queue of its own, whose task sleeps until the
//! soonest, and each grant due is revoked on a task of its own (its resources deleted, its
//! request marked Expired), after which its request is reconciled to finish what the timer
//! could not. At start-up the timers are armed from the Table of requests before their first
//! LIST (`table_timers.rs`), again as that LIST brings each request in, before the first
//! reconcile, and by every reconcile that decides an expiry.
//!
//! A timer only ever takes access away, so it may be early but never late: arming a grant again
//! with a later time is ignored (a grant's `expiresAt` is fixed when it is made; a later value can
//! only come from an edited status, which the reconcile does not trust either). The one way a
//! timer moves later is a granted extension, which the reconcile decides from the request and
//! its approvals ([`ExpiryTimers::extend_to`]).

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::jiff::Timestamp;
use kube::{
    Resource,
    runtime::reflector::{ObjectRef, Store},
};
use oz_api::{AccessRequest, expiry_table::ListedExpiry};
use tokio::{
    sync::Notify,
    task::{AbortHandle, JoinSet},
};

use super::{
    ending::{record_expiry_by_timer, revoke_at_expiry},
    stores::RequestStores,
};
use crate::{
    Context,
    builders::{AccessBuilder, GrantIdentity, grant_identity_of},
    cache::requests::CachedRequest,
    time,
};

/// What a timer keeps of its grant: the namespace, name and uid of the request it belongs
/// to, from which the whole [`GrantIdentity`] (labels, owner reference: a dozen allocations) is
/// made again when it fires. Shared by the queue's indexes, and kept as one string,
/// `namespace/name/uid` (a namespace and a name hold no `/`): one allocation a grant in force,
/// not three.
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct TimedGrant(Box<str>);

impl TimedGrant {
    fn new(namespace: &str, request: &str, uid: &str) -> Self {
        Self(format!("{namespace}/{request}/{uid}").into())
    }

    fn of(grant: &GrantIdentity) -> Self {
        Self::new(&grant.namespace, &grant.owner.name, &grant.owner.uid)
    }

    /// Its namespace, request name and uid.
    fn parts(&self) -> (&str, &str, &str) {
        let mut parts = self.0.splitn(3, '/');
        let mut next = || parts.next().unwrap_or_default();
        (next(), next(), next())
    }

    fn request_ref<R: AccessRequest>(&self) -> ObjectRef<CachedRequest<R>> {
        let (namespace, request, _) = self.parts();
        ObjectRef::new(request).within(namespace)
    }

    fn identity<R: AccessRequest>(&self) -> GrantIdentity {
        let (namespace, request, uid) = self.parts();
        grant_identity_of::<R>(request, namespace.to_string(), uid)
    }
}

/// The armed timers: one queue per controller, not a task per grant (a sleeping task with its
/// future costs several times the heap of an entry here).
#[derive(Default)]
struct Queue {
    /// Each armed grant's times; a grant stays here while it is being revoked, so that arming
    /// it again meanwhile does not revoke it twice.
    armed: HashMap<Arc<TimedGrant>, Armed>,
    /// The grants not yet fired, soonest first.
    due: BTreeSet<(Timestamp, Arc<TimedGrant>)>,
    /// The reconciles asked for before a grant's expiry, soonest first.
    wakes: BTreeSet<(Timestamp, Arc<TimedGrant>)>,
}

/// The times of one armed grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Armed {
    /// When it is revoked.
    expires: Timestamp,
    /// When its request is reconciled before that, if one was asked for.
    wake: Option<Timestamp>,
}

impl Queue {
    /// The grants due at `now`, taken off the queue (they stay armed until revoked).
    fn take_due(&mut self, now: Timestamp) -> Vec<(Timestamp, Arc<TimedGrant>)> {
        let mut fired = Vec::new();
        while let Some(first) = self.due.first()
            && first.0 <= now
        {
            fired.extend(self.due.pop_first());
        }
        fired
    }

    /// The grants whose reconcile is due at `now`, taken off the queue.
    fn take_wakes(&mut self, now: Timestamp) -> Vec<Arc<TimedGrant>> {
        let mut woken = Vec::new();
        while let Some(first) = self.wakes.first()
            && first.0 <= now
        {
            let (_, grant) = self.wakes.pop_first().expect("just looked");
            if let Some(armed) = self.armed.get_mut(&grant) {
                armed.wake = None;
            }
            woken.push(grant);
        }
        woken
    }

    /// The soonest instant anything is due.
    fn next(&self) -> Option<Timestamp> {
        let expiry = self.due.first().map(|(at, _)| *at);
        let wake = self.wakes.first().map(|(at, _)| *at);
        expiry.into_iter().chain(wake).min()
    }

    /// Arms `grant` for `at` unless it is armed for that time or earlier already. Returns
    /// whether it was armed (`None`: left as it was; `Some(true)`: re-armed sooner), and whether
    /// it is now the soonest due. A reconcile asked for before the new time is kept.
    fn arm(&mut self, grant: TimedGrant, at: Timestamp) -> Option<(bool, bool)> {
        let before = self.armed.get(&grant).copied();
        if before.is_some_and(|armed| armed.expires <= at) {
            return None;
        }
        let wake = before
            .and_then(|armed| armed.wake)
            .filter(|wake| *wake < at);
        let rearmed = self.remove(&grant);
        let soonest = self.next().is_none_or(|first| at < first);
        let grant = Arc::new(grant);
        self.armed
            .insert(Arc::clone(&grant), Armed { expires: at, wake });
        if let Some(wake) = wake {
            self.wakes.insert((wake, Arc::clone(&grant)));
        }
        self.due.insert((at, grant));
        Some((rearmed, soonest))
    }

    /// Moves `grant`'s timer, armed for an earlier time and not firing yet, to `at`; whether it
    /// did. A reconcile asked for before is kept.
    fn move_later(&mut self, grant: &TimedGrant, at: Timestamp) -> bool {
        let Some((key, armed)) = self.armed.get_key_value(grant) else {
            return false;
        };
        let (key, armed) = (Arc::clone(key), *armed);
        // Off `due` already: it is being revoked, too late to extend.
        if armed.expires >= at || !self.due.contains(&(armed.expires, Arc::clone(&key))) {
            return false;
        }
        self.due.remove(&(armed.expires, Arc::clone(&key)));
        self.due.insert((at, Arc::clone(&key)));
        self.armed.insert(
            key,
            Armed {
                expires: at,
                ..armed
            },
        );
        true
    }

    /// Asks for `grant`'s request to be reconciled at `at`, in place of any reconcile asked
    /// for before. Returns whether that is now the soonest due; `None` when `grant` has no
    /// timer. A time at or past its expiry needs nothing: the timer has the request reconciled
    /// once it has revoked the grant.
    fn wake(&mut self, grant: &TimedGrant, at: Timestamp) -> Option<bool> {
        let (grant, armed) = self.armed.get_key_value(grant)?;
        let (grant, armed) = (Arc::clone(grant), *armed);
        if armed.wake == Some(at) || at >= armed.expires {
            return Some(false);
        }
        let soonest = self.next().is_none_or(|first| at < first);
        if let Some(before) = armed.wake {
            self.wakes.remove(&(before, Arc::clone(&grant)));
        }
        self.wakes.insert((at, Arc::clone(&grant)));
        self.armed.insert(
            grant,
            Armed {
                wake: Some(at),
                ..armed
            },
        );
        Some(soonest)
    }

    /// Disarms `grant`, and drops the reconcile asked for it; whether it was armed.
    fn remove(&mut self, grant: &TimedGrant) -> bool {
        match self.armed.remove_entry(grant) {
            Some((grant, armed)) => {
                if let Some(wake) = armed.wake {
                    self.wakes.remove(&(wake, Arc::clone(&grant)));
                }
                self.due.remove(&(armed.expires, grant));
                true
            }
            None => false,
        }
    }
}

/// The armed timers of one request kind in one scope, and the task that fires them. The gauge
/// is shared by every scope (one controller per watched namespace), so each adds and removes
/// its own. Dropping it (the controller stopping, leadership lost) stops the task and every
/// revocation it has started: only the leader revokes.
pub struct ExpiryTimers<B: AccessBuilder> {
    ctx: Arc<Context>,
    queue: Arc<Mutex<Queue>>,
    /// Wakes the task when a grant is armed to fire sooner than the one it sleeps for.
    sooner: Arc<Notify>,
    task: AbortHandle,
    _builder: std::marker::PhantomData<B>,
}

impl<B: AccessBuilder> ExpiryTimers<B> {
    /// `reconcile` takes each request whose grant a timer has revoked, or whose reconcile was
    /// asked for ([`Self::wake`]), to be reconciled.
    pub fn new(
        ctx: Context,
        builder: B,
        stores: RequestStores<B::Request>,
        reconcile: UnboundedSender<ObjectRef<CachedRequest<B::Request>>>,
    ) -> Self {
        let (ctx, queue, sooner) = (Arc::new(ctx), Arc::default(), Arc::new(Notify::new()));
        let task = tokio::spawn(fire_when_due(
            ctx.clone(),
            builder,
            stores,
            Arc::clone(&queue),
            Arc::clone(&sooner),
            reconcile,
        ))
        .abort_handle();
        Self {
            ctx,
            queue,
            sooner,
            task,
            _builder: std::marker::PhantomData,
        }
    }

    /// Revokes `grant` at `at`, unless it is already armed for that time or earlier.
    pub fn arm(&self, grant: &GrantIdentity, at: Timestamp) {
        self.arm_timed(TimedGrant::of(grant), at);
    }

    /// Revokes `grant` at `at`, later than it was armed for: a granted extension's new end, which
    /// the reconcile computed from the request and its approvals (never from a status). Arms it
    /// if it was not armed; a timer already firing is left to fire.
    pub fn extend_to(&self, grant: &GrantIdentity, at: Timestamp) {
        if !lock(&self.queue).move_later(&TimedGrant::of(grant), at) {
            self.arm(grant, at);
        }
    }

    /// Has the request of `grant`, whose timer is armed, reconciled at `at` (before its
    /// expiry), in place of any time asked before; `false` when the grant has no timer, and
    /// the caller must ask kube's scheduler. An entry here is a few dozen bytes beside the
    /// grant's timer; a requeue in kube's scheduler copies the request's reference twice, for
    /// hundreds of bytes a grant (docs/benchmarks.md).
    pub fn wake(&self, grant: &GrantIdentity, at: Timestamp) -> bool {
        let Some(soonest) = lock(&self.queue).wake(&TimedGrant::of(grant), at) else {
            return false;
        };
        if soonest {
            self.sooner.notify_one();
        }
        true
    }

    fn arm_timed(&self, grant: TimedGrant, at: Timestamp) {
        let armed = lock(&self.queue).arm(grant, at);
        let Some((rearmed, soonest)) = armed else {
            return;
        };
        if !rearmed {
            self.gauge().inc();
        }
        if soonest {
            self.sooner.notify_one();
        }
    }

    /// Arms the timer of `request` if its grant may be in force. The request watch calls this
    /// for each request of its first LIST as it arrives, before the list is complete and before
    /// any reconcile: at start-up this is what makes expiry exact. (Arming once the whole list
    /// was in made grants expiring meanwhile wait for it, and a list of tens of thousands of
    /// requests takes seconds.)
    pub fn arm_listed(&self, request: &CachedRequest<B::Request>) {
        let Some(at) = expiry_in_force(request) else {
            return;
        };
        if let Ok(grant) = request.grant_identity() {
            self.arm(&grant, at);
        }
    }

    /// Arms the timer of a grant read from the Table of requests, before the first LIST
    /// (the table of requests, `table_timers`): keyed as [`Self::arm_listed`] keys it, so that the LIST finds
    /// it armed, and [`Self::forget_absent`] drops it if the request is gone by then.
    pub fn arm_from_row(&self, expiry: &ListedExpiry) {
        let grant = TimedGrant::new(&expiry.namespace, &expiry.name, &expiry.uid);
        self.arm_timed(grant, expiry.expires_at);
    }

    /// How many grants have a timer.
    pub fn armed(&self) -> usize {
        lock(&self.queue).armed.len()
    }

    /// Logs how many timers are armed, once the first LIST is in.
    pub fn report_listed(&self) {
        let count = self.armed();
        tracing::info!(
            kind = %B::Request::kind(&()),
            timers = count,
            "expiry timers armed from the first list"
        );
    }

    /// Forgets the timer of a request that is gone: deleted by a user, with its template, or
    /// with its namespace. Its access resources are owned by it, so the garbage collector
    /// removes them; its timer would only find nothing to revoke, at `expiresAt`, hours later.
    pub fn forget(&self, request: &CachedRequest<B::Request>) {
        let Ok(grant) = request.grant_identity() else {
            return;
        };
        if lock(&self.queue).remove(&TimedGrant::of(&grant)) {
            self.gauge().dec();
        }
    }

    /// Forgets the timers of the requests no longer in `store`: deletions that a watch missed
    /// and a re-list reveals.
    pub fn forget_absent(&self, store: &Store<CachedRequest<B::Request>>) {
        let present: HashSet<TimedGrant> = store
            .state()
            .iter()
            .filter_map(|r| r.grant_identity().ok())
            .map(|g| TimedGrant::of(&g))
            .collect();
        let mut queue = lock(&self.queue);
        let absent: Vec<Arc<TimedGrant>> = queue
            .armed
            .keys()
            .filter(|grant| !present.contains(&***grant))
            .cloned()
            .collect();
        for grant in &absent {
            queue.remove(grant);
        }
        drop(queue);
        self.gauge().dec_by(absent.len() as i64);
    }

    fn gauge(&self) -> prometheus_client::metrics::gauge::Gauge {
        timers_gauge::<B>(&self.ctx)
    }
}

impl<B: AccessBuilder> Drop for ExpiryTimers<B> {
    fn drop(&mut self) {
        self.task.abort();
        let count = std::mem::take(&mut *lock(&self.queue)).armed.len();
        self.gauge().dec_by(count as i64);
    }
}

fn lock(queue: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `expiresAt` of a request whose grant is (or may be) in force.
fn expiry_in_force<R: AccessRequest>(request: &CachedRequest<R>) -> Option<Timestamp> {
    if request.meta().deletion_timestamp.is_some() {
        return None;
    }
    // Failed may still hold resources; a timer that finds nothing to delete costs two 404s.
    match request.phase() {
        Some(phase) if !phase.is_settled() => request.expires_at(),
        _ => None,
    }
}

fn timers_gauge<B: AccessBuilder>(ctx: &Context) -> prometheus_client::metrics::gauge::Gauge {
    ctx.metrics.expiry_timers_of(&B::Request::kind(&()))
}

/// The timers' task: sleeps until the soonest grant is due (or a sooner one is armed), and
/// revokes each due grant on a task of its own, so that one slow revocation delays no other;
/// then sends its request to `reconcile`, whose reconcile finishes what the timer could not.
/// A request whose reconcile is due is sent there at once.
async fn fire_when_due<B: AccessBuilder>(
    ctx: Arc<Context>,
    builder: B,
    stores: RequestStores<B::Request>,
    queue: Arc<Mutex<Queue>>,
    sooner: Arc<Notify>,
    reconcile: UnboundedSender<ObjectRef<CachedRequest<B::Request>>>,
) {
    // Closed only when the controller has stopped, and this task with it.
    let send = |grant: &TimedGrant| {
        let _ = reconcile.unbounded_send(grant.request_ref());
    };
    // Dropped with this task, which aborts the revocations in flight.
    let mut revoking = JoinSet::new();
    loop {
        let now = Timestamp::now();
        let (due, woken, next) = {
            let mut queue = lock(&queue);
            (queue.take_due(now), queue.take_wakes(now), queue.next())
        };
        for grant in woken {
            send(&grant);
        }
        for (at, grant) in due {
            let (ctx, stores) = (ctx.clone(), stores.clone());
            revoking.spawn(async move {
                // Boxed: the revocation's futures are large, and many may be in flight.
                Box::pin(fire(&ctx, builder, &stores, &grant, at)).await;
                (grant, at)
            });
        }
        // A day at most: a sleep far in the future is re-armed from the queue anyway.
        let wait = next.map_or(Duration::from_secs(86_400), |at| time::until(now, at));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = sooner.notified() => {}
            Some(Ok((grant, at))) = revoking.join_next() => {
                // Revoked: disarm, unless it was armed again meanwhile for another time.
                let mut queue = lock(&queue);
                if queue.armed.get(&grant).is_some_and(|armed| armed.expires == at) {
                    queue.remove(&grant);
                    drop(queue);
                    timers_gauge::<B>(&ctx).dec();
                }
                send(&grant);
            }
        }
    }
}

/// Revokes `grant`, whose time `at` has come, retrying until the apiserver answers, and marks
/// its request Expired.
async fn fire<B: AccessBuilder>(
    ctx: &Context,
    builder: B,
    stores: &RequestStores<B::Request>,
    grant: &TimedGrant,
    at: Timestamp,
) {
    let grant = grant.identity::<B::Request>();
    let mut backoff = Duration::from_millis(100);
    while let Err(error) = revoke_at_expiry(ctx, builder, &grant, at).await {
        tracing::warn!(namespace = %grant.namespace, grant = %grant.name, %error, "revoking an expired grant failed; retrying");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
    tracing::debug!(namespace = %grant.namespace, grant = %grant.name, "grant revoked at expiry");
    // Access is gone; the status follows. If this fails, the reconcile the timer asks for next
    // writes it.
    if let Err(error) = record_expiry_by_timer(ctx, stores, &grant, at).await {
        tracing::warn!(namespace = %grant.namespace, grant = %grant.name, %error, "could not mark an expired request Expired; its reconcile will");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use oz_api::RequestPhase;

    use crate::controllers::fixtures::request;

    /// The timers read requests as the controller caches them.
    fn cached(request: oz_api::ExecAccessRequest) -> CachedRequest<oz_api::ExecAccessRequest> {
        CachedRequest::of(request).unwrap()
    }

    #[test]
    fn only_an_extension_moves_a_timer_later_and_never_one_already_firing() {
        let grant = || TimedGrant::new("shop", "alice-1", "uid-1");
        let first = Timestamp::from_second(1_000).unwrap();
        let later = Timestamp::from_second(1_020).unwrap();
        let mut queue = Queue::default();
        queue.arm(grant(), first);
        // Arming later is ignored; moving later is what an extension does.
        assert_eq!(queue.arm(grant(), later), None);
        assert_eq!(queue.next(), Some(first));
        assert!(queue.move_later(&grant(), later));
        assert_eq!(queue.next(), Some(later));
        assert!(queue.take_due(first).is_empty());
        // Never earlier, and not once it fired: it is being revoked.
        assert!(!queue.move_later(&grant(), first));
        assert_eq!(queue.take_due(later).len(), 1);
        let again = Timestamp::from_second(1_040).unwrap();
        assert!(!queue.move_later(&grant(), again));
        assert_eq!(queue.next(), None);
    }

    #[test]
    fn only_grants_that_may_be_in_force_get_a_timer() {
        let at = Timestamp::now();
        assert_eq!(
            expiry_in_force(&cached(request(RequestPhase::Ready, Some(at)))),
            Some(at)
        );
        assert_eq!(
            expiry_in_force(&cached(request(RequestPhase::Pending, Some(at)))),
            Some(at)
        );
        assert_eq!(
            expiry_in_force(&cached(request(RequestPhase::Failed, Some(at)))),
            Some(at)
        );
        assert_eq!(
            expiry_in_force(&cached(request(RequestPhase::Ready, None))),
            None
        );
        for done in [RequestPhase::Expired, RequestPhase::Denied] {
            assert_eq!(
                expiry_in_force(&cached(request(done, Some(at)))),
                None,
                "{done:?}"
            );
        }
        let mut deleting = request(RequestPhase::Ready, Some(at));
        deleting.metadata.deletion_timestamp = Some(Time(at));
        assert_eq!(expiry_in_force(&cached(deleting)), None);
    }

    fn timed(request: &str) -> TimedGrant {
        TimedGrant::new("shop", request, &format!("{request}-uid"))
    }

    #[test]
    fn the_queue_fires_soonest_first_and_a_timer_moves_only_sooner() {
        let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let mut queue = Queue::default();
        assert_eq!(queue.arm(timed("a"), t(20)), Some((false, true)));
        assert_eq!(queue.arm(timed("b"), t(10)), Some((false, true)));
        assert_eq!(queue.arm(timed("c"), t(30)), Some((false, false)));
        // Never later: a timer may be early, never late.
        assert_eq!(queue.arm(timed("a"), t(25)), None);
        assert_eq!(queue.arm(timed("a"), t(20)), None);
        // Sooner moves it, and it is counted once.
        assert_eq!(queue.arm(timed("c"), t(15)), Some((true, false)));
        assert_eq!(queue.armed.len(), 3);

        let names = |due: Vec<(Timestamp, Arc<TimedGrant>)>| -> Vec<String> {
            due.into_iter()
                .map(|(_, g)| g.parts().1.to_string())
                .collect()
        };
        assert!(queue.take_due(t(9)).is_empty());
        assert_eq!(names(queue.take_due(t(15))), ["b", "c"]);
        // Fired grants stay armed until revoked: arming them again changes nothing.
        assert_eq!(queue.arm(timed("b"), t(10)), None);
        assert_eq!(queue.armed.len(), 3);
        assert!(queue.remove(&timed("a")));
        assert!(!queue.remove(&timed("a")));
        assert!(queue.take_due(t(100)).is_empty(), "a was disarmed");
    }

    #[test]
    fn a_reconcile_asked_before_the_expiry_fires_once_in_time_order_and_goes_with_its_timer() {
        let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let names = |woken: Vec<Arc<TimedGrant>>| -> Vec<String> {
            woken.into_iter().map(|g| g.parts().1.to_string()).collect()
        };
        let mut queue = Queue::default();
        // Only a grant with a timer: the caller asks kube's scheduler for the others.
        assert_eq!(queue.wake(&timed("a"), t(5)), None);
        assert_eq!(queue.arm(timed("a"), t(100)), Some((false, true)));
        assert_eq!(queue.arm(timed("b"), t(100)), Some((false, false)));
        assert_eq!(queue.arm(timed("c"), t(100)), Some((false, false)));
        assert_eq!(queue.wake(&timed("a"), t(50)), Some(true));
        assert_eq!(queue.next(), Some(t(50)));
        assert_eq!(queue.wake(&timed("b"), t(40)), Some(true));
        assert_eq!(queue.wake(&timed("b"), t(40)), Some(false), "already asked");
        // A later time replaces the earlier one.
        assert_eq!(queue.wake(&timed("b"), t(60)), Some(false));
        // At or past the expiry, the timer's own reconcile does.
        assert_eq!(queue.wake(&timed("c"), t(100)), Some(false));
        assert_eq!(queue.wakes.len(), 2);

        assert!(queue.take_wakes(t(49)).is_empty());
        assert_eq!(names(queue.take_wakes(t(60))), ["a", "b"]);
        assert!(queue.take_wakes(t(99)).is_empty(), "each fires once");
        assert_eq!(queue.next(), Some(t(100)));
        assert!(queue.take_due(t(60)).is_empty(), "a wake revokes nothing");

        // Re-armed sooner, a grant keeps a wake still before its new expiry, not one after.
        queue.wake(&timed("a"), t(70));
        queue.wake(&timed("b"), t(90));
        assert_eq!(queue.arm(timed("a"), t(80)), Some((true, true)));
        assert_eq!(
            queue.arm(timed("b"), t(80)),
            Some((true, false)),
            "a's wake is sooner"
        );
        assert_eq!(names(queue.take_wakes(t(100))), ["a"]);
        // Disarmed, a grant's wake goes too.
        queue.wake(&timed("c"), t(75));
        assert!(queue.remove(&timed("c")));
        assert!(queue.wakes.is_empty());
        assert_eq!(queue.next(), Some(t(80)));
    }

    #[test]
    fn a_firing_timer_revokes_the_grant_it_was_armed_for() {
        let mut request = request(RequestPhase::Ready, None);
        request.metadata.namespace = Some("shop".into());
        request.metadata.uid = Some("1a2b3c4d-5e6f-7a8b-9c0d-112233445566".into());
        let armed = crate::builders::grant_identity(&request).unwrap();
        let fired = TimedGrant::of(&armed).identity::<oz_api::ExecAccessRequest>();
        // GrantIdentity has no PartialEq; its Debug shows every field.
        assert_eq!(format!("{fired:?}"), format!("{armed:?}"));
        let owner = crate::builders::blocking(request.controller_owner_ref(&()).unwrap());
        assert_eq!(fired.owner, owner);
    }
}
