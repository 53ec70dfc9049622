//! The notices already queued, remembered for hours so that a reconcile may send on every
//! pass that sees a state and the sinks still hear of it once.
//!
//! One request's notices are one entry: its uid, folded to 64 bits, and a bit for each kind
//! sent. The entries outlive their requests by hours (a deleted request's are never looked up
//! again, and are forgotten in time), so each is a few bytes: as a (uid text, kind) pair kept
//! twice, to look up and in order of age, they were ~170 bytes a notice.

use std::{
    collections::{HashMap, VecDeque},
    hash::{DefaultHasher, Hash, Hasher},
    time::{Duration, Instant},
};

use super::NoticeKind;

/// How long a (request, kind) already sent is remembered, so a repeat is dropped.
pub(super) const SEEN_FOR: Duration = Duration::from_secs(6 * 3600);
/// At most this many (request, kind) pairs are remembered; the oldest are forgotten first.
pub(super) const SEEN_CAPACITY: usize = 100_000;

/// A notice as [`Seen`] remembers it: its request's uid as a 64-bit number, and its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct SeenKey {
    uid: u64,
    kind: NoticeKind,
}

impl SeenKey {
    /// A Kubernetes uid is a random UUID: its two halves XORed keep 64 random bits, so two
    /// requests among the 100,000 remembered share a number about once in 10^9 times (and then
    /// the later one's notice of a kind the earlier one was sent is dropped). A uid that is not
    /// a UUID (only ever a test's) is hashed.
    pub(super) fn of(uid: &str, kind: NoticeKind) -> Self {
        let uid = match uuid_number(uid) {
            Some(number) => (number >> 64) as u64 ^ number as u64,
            None => {
                let mut hasher = DefaultHasher::new();
                uid.hash(&mut hasher);
                hasher.finish()
            }
        };
        Self { uid, kind }
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

/// `kind`'s bit in a request's entry.
fn bit(kind: NoticeKind) -> u16 {
    1 << kind as u16
}

/// The (request, kind) pairs already queued, forgotten after [`SEEN_FOR`] or, past
/// [`SEEN_CAPACITY`], oldest first.
pub(super) struct Seen {
    /// When this was made: the ages below count from it, in seconds.
    started: Instant,
    /// The kinds queued of each request, a bit each.
    pub(super) sent: HashMap<u64, u16>,
    /// Each pair, with the second it was queued, oldest first.
    pub(super) order: VecDeque<(u32, SeenKey)>,
}

impl Default for Seen {
    fn default() -> Self {
        Self::since(Instant::now())
    }
}

impl Seen {
    fn since(started: Instant) -> Self {
        Self {
            started,
            sent: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn second(&self, now: Instant) -> u32 {
        u32::try_from(now.saturating_duration_since(self.started).as_secs()).unwrap_or(u32::MAX)
    }

    pub(super) fn contains(&mut self, key: &SeenKey) -> bool {
        self.forget_old(Instant::now());
        self.sent
            .get(&key.uid)
            .is_some_and(|kinds| kinds & bit(key.kind) != 0)
    }

    pub(super) fn insert(&mut self, key: SeenKey, now: Instant) {
        let kinds = self.sent.entry(key.uid).or_default();
        if *kinds & bit(key.kind) == 0 {
            *kinds |= bit(key.kind);
            let second = self.second(now);
            self.order.push_back((second, key));
        }
        while self.order.len() > SEEN_CAPACITY {
            if let Some((_, oldest)) = self.order.pop_front() {
                self.forget(oldest);
            }
        }
    }

    pub(super) fn forget_old(&mut self, now: Instant) {
        let now = self.second(now);
        while let Some((at, _)) = self.order.front() {
            if u64::from(now - at) < SEEN_FOR.as_secs() {
                break;
            }
            let (_, key) = self.order.pop_front().expect("just looked");
            self.forget(key);
        }
    }

    fn forget(&mut self, key: SeenKey) {
        if let Some(kinds) = self.sent.get_mut(&key.uid) {
            *kinds &= !bit(key.kind);
            if *kinds == 0 {
                self.sent.remove(&key.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [NoticeKind; 10] = [
        NoticeKind::PendingApproval,
        NoticeKind::Approved,
        NoticeKind::Denied,
        NoticeKind::Ready,
        NoticeKind::ExpiringSoon,
        NoticeKind::Expired,
        NoticeKind::BreakGlass,
        NoticeKind::ExtensionPending,
        NoticeKind::Extended,
        NoticeKind::ExtensionDenied,
    ];

    #[test]
    fn every_kind_has_a_bit_of_its_own() {
        let bits: Vec<u16> = KINDS.iter().map(|k| bit(*k)).collect();
        let all = bits.iter().fold(0, |all, b| all | b);
        assert_eq!(all.count_ones() as usize, KINDS.len(), "{bits:?}");
    }

    #[test]
    fn a_request_is_known_by_its_uid_and_each_kind_apart() {
        let uid = "0c7b2a6e-5d7f-4a8b-9b1e-000000000042";
        assert_eq!(
            SeenKey::of(uid, NoticeKind::Ready).uid,
            0x0c7b_2a6e_5d7f_4a8b ^ 0x9b1e_0000_0000_0042
        );
        let mut seen = Seen::default();
        let now = Instant::now();
        seen.insert(SeenKey::of(uid, NoticeKind::Ready), now);
        assert!(seen.contains(&SeenKey::of(uid, NoticeKind::Ready)));
        assert!(!seen.contains(&SeenKey::of(uid, NoticeKind::Expired)));
        let other = "0c7b2a6e-5d7f-4a8b-9b1e-000000000043";
        assert!(!seen.contains(&SeenKey::of(other, NoticeKind::Ready)));
        for test_uid in ["uid-r1", "0c7b2a6e5d7f4a8b9b1e000000000042"] {
            assert_eq!(
                SeenKey::of(test_uid, NoticeKind::Ready),
                SeenKey::of(test_uid, NoticeKind::Ready)
            );
        }
        assert_ne!(
            SeenKey::of("uid-r1", NoticeKind::Ready),
            SeenKey::of("uid-r2", NoticeKind::Ready)
        );
        // One entry per request, whatever the kinds sent.
        seen.insert(SeenKey::of(uid, NoticeKind::Expired), now);
        assert_eq!((seen.sent.len(), seen.order.len()), (1, 2));
    }

    #[test]
    fn remembered_notices_are_bounded_by_age_and_count() {
        let key = |uid: String| SeenKey::of(&uid, NoticeKind::Ready);
        let start = Instant::now();
        let mut seen = Seen::since(start);
        seen.insert(key("old".into()), start);
        seen.insert(
            SeenKey::of("old", NoticeKind::Expired),
            start + SEEN_FOR / 2,
        );
        seen.forget_old(start + SEEN_FOR - Duration::from_secs(1));
        assert!(seen.sent.contains_key(&key("old".into()).uid));
        seen.forget_old(start + SEEN_FOR);
        assert_eq!(
            seen.sent.get(&key("old".into()).uid),
            Some(&bit(NoticeKind::Expired))
        );
        seen.forget_old(start + SEEN_FOR + SEEN_FOR / 2);
        assert!(seen.sent.is_empty() && seen.order.is_empty());

        for i in 0..SEEN_CAPACITY + 5 {
            seen.insert(key(i.to_string()), start);
        }
        assert_eq!(seen.sent.len(), SEEN_CAPACITY);
        assert_eq!(seen.order.len(), SEEN_CAPACITY);
        assert!(!seen.sent.contains_key(&key("0".into()).uid));
        assert!(
            seen.sent
                .contains_key(&key((SEEN_CAPACITY + 4).to_string()).uid)
        );
    }
}
