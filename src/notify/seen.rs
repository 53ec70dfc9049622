//! The notices already queued, remembered for hours so that a reconcile may send on every
//! pass that sees a state and the sinks still hear of it once.

use std::{
    collections::{HashSet, VecDeque},
    hash::{DefaultHasher, Hash, Hasher},
    time::{Duration, Instant},
};

use super::NoticeKind;

/// How long a (request, kind) already sent is remembered, so a repeat is dropped.
pub(super) const SEEN_FOR: Duration = Duration::from_secs(6 * 3600);
/// At most this many (request, kind) pairs are remembered; the oldest are forgotten first.
pub(super) const SEEN_CAPACITY: usize = 100_000;

/// A notice as [`Seen`] remembers it: its request's uid as the 128-bit number a Kubernetes uid
/// (a UUID) is, and its kind. One is kept per grant for hours, twice (to look up, and in order
/// of age): as text, each copy was a string of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct SeenKey {
    uid: u128,
    kind: NoticeKind,
}

impl SeenKey {
    pub(super) fn of(uid: &str, kind: NoticeKind) -> Self {
        Self {
            uid: uuid_number(uid).unwrap_or_else(|| hashed(uid)),
            kind,
        }
    }
}

/// The number `uid` spells, if it is a UUID (32 hex digits and 4 dashes).
fn uuid_number(uid: &str) -> Option<u128> {
    let digits: String = uid.chars().filter(|c| *c != '-').collect();
    if uid.len() != 36 || digits.len() != 32 {
        return None;
    }
    u128::from_str_radix(&digits, 16).ok()
}

/// A uid that is not a UUID (only ever a test's) by its hash, above every UUID's number
/// space it could be confused with only by another such uid's hash.
fn hashed(uid: &str) -> u128 {
    let mut hasher = DefaultHasher::new();
    uid.hash(&mut hasher);
    (1 << 127) | u128::from(hasher.finish())
}

/// The (request uid, kind) pairs already queued, forgotten after [`SEEN_FOR`] or, past
/// [`SEEN_CAPACITY`], oldest first.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) keys: HashSet<SeenKey>,
    pub(super) order: VecDeque<(Instant, SeenKey)>,
}

impl Seen {
    pub(super) fn contains(&mut self, key: &SeenKey) -> bool {
        self.forget_old(Instant::now());
        self.keys.contains(key)
    }

    pub(super) fn insert(&mut self, key: SeenKey, now: Instant) {
        if self.keys.insert(key) {
            self.order.push_back((now, key));
        }
        while self.order.len() > SEEN_CAPACITY {
            if let Some((_, oldest)) = self.order.pop_front() {
                self.keys.remove(&oldest);
            }
        }
    }

    pub(super) fn forget_old(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < SEEN_FOR {
                break;
            }
            let (_, key) = self.order.pop_front().expect("just looked");
            self.keys.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_is_kept_as_its_number_and_any_other_uid_apart_from_every_uuid() {
        let uid = "0c7b2a6e-5d7f-4a8b-9b1e-000000000042";
        assert_eq!(
            SeenKey::of(uid, NoticeKind::Ready).uid,
            0x0c7b2a6e_5d7f_4a8b_9b1e_000000000042
        );
        assert_ne!(
            SeenKey::of(uid, NoticeKind::Ready),
            SeenKey::of(uid, NoticeKind::Expired)
        );
        assert_ne!(
            SeenKey::of(uid, NoticeKind::Ready),
            SeenKey::of("0c7b2a6e-5d7f-4a8b-9b1e-000000000043", NoticeKind::Ready)
        );
        for not_a_uuid in [
            "uid-r1",
            "0c7b2a6e5d7f4a8b9b1e000000000042",
            "0c7b2a6e-5d7f-4a8b-9b1e-00000000004g",
        ] {
            let key = SeenKey::of(not_a_uuid, NoticeKind::Ready);
            assert!(key.uid >= 1 << 127, "{not_a_uuid}");
            assert_eq!(key, SeenKey::of(not_a_uuid, NoticeKind::Ready));
        }
        assert_ne!(
            SeenKey::of("uid-r1", NoticeKind::Ready),
            SeenKey::of("uid-r2", NoticeKind::Ready)
        );
    }

    #[test]
    fn remembered_notices_are_bounded_by_age_and_count() {
        let key = |uid: String| SeenKey::of(&uid, NoticeKind::Ready);
        let mut seen = Seen::default();
        let start = Instant::now();
        seen.insert(key("old".into()), start);
        seen.forget_old(start + SEEN_FOR - Duration::from_secs(1));
        assert!(seen.keys.contains(&key("old".into())));
        seen.forget_old(start + SEEN_FOR);
        assert!(seen.keys.is_empty() && seen.order.is_empty());

        for i in 0..SEEN_CAPACITY + 5 {
            seen.insert(key(i.to_string()), start);
        }
        assert_eq!(seen.keys.len(), SEEN_CAPACITY);
        assert_eq!(seen.order.len(), SEEN_CAPACITY);
        assert!(!seen.keys.contains(&key("0".into())));
        assert!(seen.keys.contains(&key((SEEN_CAPACITY + 4).to_string())));
    }
}
