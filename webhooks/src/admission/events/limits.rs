//! How many audit Events may be published: a rate across all of them ([`TokenBucket`]), and
//! one for each access ([`AccessLimit`]): one user's actions of one kind on one pod. The second
//! is client-go's spam filter (a bucket per object, a burst of 25 then one per 5 minutes) keyed
//! finer, by user and action too, so that one user's repeated execs into a pod (a script in a
//! loop) give the pod a few Events and then one a minute, carrying the count of those folded
//! into it, while other users' and other pods' Events are not held back by them.
//!
//! The overall rate alone was not enough: one user's loop still spent it all, at a cost to the
//! control plane and the webhook's latency measured in docs/benchmarks.md.

use std::{
    collections::HashMap,
    hash::{BuildHasher, Hash, RandomState},
    sync::Mutex,
    time::{Duration, Instant},
};

use oz_api::PodAction;

/// Sustained audit Events per second, across all pods.
pub const EVENTS_PER_SECOND: f64 = 50.0;

/// Audit Events that may be published at once above the sustained rate.
pub const EVENT_BURST: f64 = 200.0;

/// Events one user's actions of one kind on one pod may publish in a row...
pub const ACCESS_EVENT_BURST: f64 = 10.0;

/// ... and then one every this often; the others are counted into the next one.
pub const ACCESS_EVENT_PERIOD: Duration = Duration::from_secs(60);

/// Past this many accesses remembered, those with nothing to report are forgotten; if that does
/// not free a tenth of them, all are (each may then publish another burst: at worst more
/// Events, never fewer records).
const ACCESSES_KEPT: usize = 10_000;

/// How fast tokens come back, and how many may be saved up.
#[derive(Clone, Copy, Debug)]
struct Rate {
    per_second: f64,
    burst: f64,
}

/// Tokens left, as of an instant.
#[derive(Clone, Copy, Debug)]
struct Tokens {
    left: f64,
    at: Instant,
}

impl Rate {
    fn full(self, now: Instant) -> Tokens {
        Tokens {
            left: self.burst,
            at: now,
        }
    }

    /// Takes one of `tokens` if there is one.
    fn take(self, tokens: &mut Tokens, now: Instant) -> bool {
        let left = self.refilled(tokens, now);
        *tokens = Tokens { left, at: now };
        if left < 1.0 {
            return false;
        }
        tokens.left -= 1.0;
        true
    }

    fn refilled(self, tokens: &Tokens, now: Instant) -> f64 {
        (tokens.left + now.duration_since(tokens.at).as_secs_f64() * self.per_second)
            .min(self.burst)
    }
}

/// A token bucket: `burst` tokens, refilled at `per_second`.
pub(crate) struct TokenBucket {
    rate: Rate,
    tokens: Mutex<Tokens>,
}

impl TokenBucket {
    pub(crate) fn new(per_second: f64, burst: f64) -> Self {
        let rate = Rate { per_second, burst };
        Self {
            rate,
            tokens: Mutex::new(rate.full(Instant::now())),
        }
    }

    /// Takes a token if there is one.
    pub(crate) fn take(&self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> bool {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        self.rate.take(&mut tokens, now)
    }
}

/// Who did what to which pod: the access an Event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Access(u64);

/// A bucket per [`Access`], and how many of its Events were not published since its last one.
pub(super) struct AccessLimit {
    rate: Rate,
    /// Keyed afresh by each process: accesses are kept by hash, so that checking one costs no
    /// allocation; two that collide share a bucket (fewer Events, never fewer records).
    hasher: RandomState,
    accesses: Mutex<HashMap<Access, (Tokens, u64)>>,
}

impl AccessLimit {
    pub(super) fn new() -> Self {
        Self::with(ACCESS_EVENT_BURST, ACCESS_EVENT_PERIOD)
    }

    fn with(burst: f64, period: Duration) -> Self {
        Self {
            rate: Rate {
                per_second: 1.0 / period.as_secs_f64(),
                burst,
            },
            hasher: RandomState::new(),
            accesses: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn access(
        &self,
        namespace: &str,
        pod: &str,
        user: &str,
        action: PodAction,
    ) -> Access {
        Access(self.hasher.hash_one((namespace, pod, user, action)))
    }

    /// Whether `access` may publish an Event now: if so, how many of its Events were folded
    /// since its last one (they are then its to report); if not, it is counted as folded.
    pub(super) fn take(&self, access: Access) -> Option<u64> {
        self.take_at(access, Instant::now())
    }

    fn take_at(&self, access: Access, now: Instant) -> Option<u64> {
        let mut accesses = self.accesses.lock().unwrap_or_else(|e| e.into_inner());
        if accesses.len() >= ACCESSES_KEPT && !accesses.contains_key(&access) {
            self.make_room(&mut accesses, now);
        }
        let (tokens, folded) = accesses
            .entry(access)
            .or_insert_with(|| (self.rate.full(now), 0));
        if self.rate.take(tokens, now) {
            Some(std::mem::take(folded))
        } else {
            *folded += 1;
            None
        }
    }

    /// Forgets the accesses with nothing to report (no count, a full bucket), or all of them
    /// unless that leaves a tenth of [`ACCESSES_KEPT`] free: the pass walks every access under
    /// the lock a review takes, so it must not come again with the next new access.
    fn make_room(&self, accesses: &mut HashMap<Access, (Tokens, u64)>, now: Instant) {
        accesses.retain(|_, (tokens, folded)| {
            *folded > 0 || self.rate.refilled(tokens, now) < self.rate.burst
        });
        if accesses.len() > ACCESSES_KEPT - ACCESSES_KEPT / 10 {
            accesses.clear();
        }
    }

    /// Counts `events` of `access` as folded: taken, but then not published.
    pub(super) fn fold(&self, access: Access, events: u64) {
        let mut accesses = self.accesses.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, folded)) = accesses.get_mut(&access) {
            *folded += events;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_allows_a_burst_then_refills() {
        let bucket = TokenBucket::new(10.0, 3.0);
        let start = Instant::now();
        assert!((0..3).all(|_| bucket.take_at(start)), "the burst");
        assert!(!bucket.take_at(start), "then nothing");
        // 200 ms at 10/s refills two.
        let later = start + Duration::from_millis(200);
        assert!(bucket.take_at(later));
        assert!(bucket.take_at(later));
        assert!(!bucket.take_at(later));
        // Never more than the burst, however long it was idle.
        let much_later = later + Duration::from_secs(3600);
        assert!((0..3).all(|_| bucket.take_at(much_later)));
        assert!(!bucket.take_at(much_later));
    }

    #[test]
    fn an_access_publishes_a_burst_then_one_a_period_carrying_the_count_of_the_rest() {
        let limit = AccessLimit::with(2.0, Duration::from_secs(60));
        let alice = limit.access("team-a", "web-0", "alice", PodAction::Exec);
        let start = Instant::now();
        assert_eq!(limit.take_at(alice, start), Some(0));
        assert_eq!(limit.take_at(alice, start), Some(0));
        for _ in 0..5 {
            assert_eq!(limit.take_at(alice, start), None, "folded");
        }
        assert_eq!(limit.take_at(alice, start + Duration::from_secs(30)), None);
        // A period later the next one is published, and reports the six folded meanwhile.
        let next = start + Duration::from_secs(61);
        assert_eq!(limit.take_at(alice, next), Some(6));
        assert_eq!(limit.take_at(alice, next), None);
        // One taken but then not published (the overall rate, a full queue) is reported next.
        limit.fold(alice, 1);
        assert_eq!(
            limit.take_at(alice, next + Duration::from_secs(60)),
            Some(2)
        );
    }

    #[test]
    fn other_users_pods_and_actions_are_not_held_back_by_one_access() {
        let limit = AccessLimit::with(1.0, Duration::from_secs(60));
        let now = Instant::now();
        let alice = limit.access("team-a", "web-0", "alice", PodAction::Exec);
        assert_eq!(limit.take_at(alice, now), Some(0));
        assert_eq!(limit.take_at(alice, now), None);
        for other in [
            limit.access("team-a", "web-0", "bob", PodAction::Exec),
            limit.access("team-a", "web-1", "alice", PodAction::Exec),
            limit.access("team-b", "web-0", "alice", PodAction::Exec),
            limit.access("team-a", "web-0", "alice", PodAction::Attach),
        ] {
            assert_eq!(limit.take_at(other, now), Some(0), "{other:?}");
        }
    }

    #[test]
    fn past_the_accesses_kept_only_those_with_something_to_report_stay() {
        let limit = AccessLimit::with(1.0, Duration::from_secs(60));
        let start = Instant::now();
        let busy = limit.access("team-a", "web-0", "alice", PodAction::Exec);
        assert_eq!(limit.take_at(busy, start), Some(0));
        assert_eq!(limit.take_at(busy, start), None, "one folded, to report");
        // The map is full with the busy access and these.
        for i in 1..ACCESSES_KEPT {
            let pod = format!("pod-{i}");
            let one = limit.access("team-a", &pod, "bob", PodAction::Exec);
            assert_eq!(limit.take_at(one, start), Some(0));
        }
        // The buckets refill; the next new access makes room by forgetting the idle ones.
        let later = start + Duration::from_secs(61);
        let new = limit.access("team-b", "web-0", "carol", PodAction::Exec);
        assert_eq!(limit.take_at(new, later), Some(0));
        let kept = limit.accesses.lock().unwrap().len();
        assert_eq!(kept, 2, "the busy access and the new one");
        assert_eq!(limit.take_at(busy, later), Some(1), "its count survived");
    }

    #[test]
    fn pruning_that_frees_less_than_a_tenth_forgets_every_access() {
        let limit = AccessLimit::with(1.0, Duration::from_secs(60));
        let start = Instant::now();
        let idle = ACCESSES_KEPT / 20;
        for i in 0..ACCESSES_KEPT {
            let one = limit.access("team-a", &format!("pod-{i}"), "bob", PodAction::Exec);
            assert_eq!(limit.take_at(one, start), Some(0));
            if i >= idle {
                assert_eq!(limit.take_at(one, start), None, "folded: a count to report");
            }
        }
        // A period later only the first twentieth has nothing to report: not room enough.
        let later = start + Duration::from_secs(61);
        let new = limit.access("team-b", "web-0", "carol", PodAction::Exec);
        assert_eq!(limit.take_at(new, later), Some(0));
        assert_eq!(limit.accesses.lock().unwrap().len(), 1, "only the new one");
    }
}
