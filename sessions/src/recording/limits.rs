//! How large recordings may grow: each session's (a per-session cap) and, optionally, all of
//! them together in the store (a total cap, counted in this process). A recording that reaches
//! either stops growing: it gets a "capped" marker, and what the session does after that is
//! only counted and digested (see [`super::unrecorded`]). The session itself goes on.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

/// The default per-session cap: an hour of a busy terminal, far from what fills a disk.
pub const DEFAULT_MAX_SESSION_BYTES: u64 = 64 << 20;
/// The smallest per-session cap accepted: room for a header and the markers.
pub const MIN_MAX_SESSION_BYTES: u64 = 64 << 10;
/// Room kept below each cap for what a recording always ends with: the longer final header,
/// the markers of what was not recorded, the end marker.
pub const RESERVED_BYTES: u64 = 4096;

/// What a recording may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordingLimits {
    /// The most bytes one session's recording file may have.
    pub max_session_bytes: u64,
    /// The most bytes all recordings in the store may have together (what was there when oz
    /// started, counted for a directory, and what this process wrote since); `None`: no limit.
    pub max_total_bytes: Option<u64>,
}

impl Default for RecordingLimits {
    fn default() -> Self {
        Self {
            max_session_bytes: DEFAULT_MAX_SESSION_BYTES,
            max_total_bytes: None,
        }
    }
}

/// Why a recording stopped growing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    /// The session's recording reached [`RecordingLimits::max_session_bytes`].
    Session,
    /// The store reached [`RecordingLimits::max_total_bytes`].
    Total,
}

impl Cap {
    /// The cause, as a marker says it.
    pub fn cause(self) -> &'static str {
        match self {
            Cap::Session => "the recording reached its size limit",
            Cap::Total => "the recordings store reached its size limit",
        }
    }
}

/// The bytes in the store, shared by every session of this process.
#[derive(Debug)]
pub struct StoreUsage {
    used: AtomicU64,
    max: Option<u64>,
}

impl StoreUsage {
    /// `used` bytes already in the store, at most `max`.
    pub fn new(used: u64, max: Option<u64>) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicU64::new(used),
            max,
        })
    }

    /// Counts `n` more bytes, unless that would pass the limit (then counts nothing).
    pub fn try_add(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                let after = used.checked_add(n)?;
                self.max.is_none_or(|max| after <= max).then_some(after)
            })
            .is_ok()
    }

    /// Counts `n` bytes whatever the limit (the small lines a recording must end with).
    pub fn add(&self, n: u64) {
        self.used.fetch_add(n, Ordering::Relaxed);
    }

    /// The bytes counted.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// One session's share: how many bytes its recording has, and whether it was capped.
#[derive(Debug)]
pub struct SessionBudget {
    written: u64,
    max: u64,
    capped: Option<Cap>,
    store: Arc<StoreUsage>,
}

impl SessionBudget {
    /// A budget of `max` bytes (less [`RESERVED_BYTES`]) in `store`.
    pub fn new(max: u64, store: Arc<StoreUsage>) -> Self {
        Self {
            written: 0,
            max,
            capped: None,
            store,
        }
    }

    /// Takes `n` bytes for a line, or says the recording is capped: `Err(cap, true)` the first
    /// time (the caller then writes the capped marker), `Err(cap, false)` after.
    pub fn take(&mut self, n: u64) -> Result<(), (Cap, bool)> {
        if let Some(cap) = self.capped {
            return Err((cap, false));
        }
        let cap = if self.written + n + RESERVED_BYTES > self.max {
            Some(Cap::Session)
        } else if !self.store.try_add(n) {
            Some(Cap::Total)
        } else {
            None
        };
        match cap {
            Some(cap) => {
                self.capped = Some(cap);
                Err((cap, true))
            }
            None => {
                self.written += n;
                Ok(())
            }
        }
    }

    /// Takes `n` bytes from the reserve, for a line the recording must have (its header, a
    /// marker).
    pub fn take_reserved(&mut self, n: u64) {
        self.written += n;
        self.store.add(n);
    }

    /// Why the recording is capped, if it is.
    pub fn capped(&self) -> Option<Cap> {
        self.capped
    }

    /// The bytes taken so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_capped_below_its_limit_with_room_for_its_end() {
        let store = StoreUsage::new(0, None);
        let mut budget = SessionBudget::new(10_000, store.clone());
        assert_eq!(budget.take(5_000), Ok(()));
        assert_eq!(budget.take(900), Ok(()));
        // 5900 + 200 + the reserve passes 10000.
        assert_eq!(budget.take(200), Err((Cap::Session, true)));
        assert_eq!(budget.take(1), Err((Cap::Session, false)));
        budget.take_reserved(300);
        assert_eq!(budget.written(), 6_200);
        assert_eq!(store.used(), 6_200);
        assert_eq!(budget.capped(), Some(Cap::Session));
    }

    #[test]
    fn the_store_total_caps_every_session_once_reached() {
        let store = StoreUsage::new(9_000, Some(10_000));
        let mut a = SessionBudget::new(DEFAULT_MAX_SESSION_BYTES, store.clone());
        let mut b = SessionBudget::new(DEFAULT_MAX_SESSION_BYTES, store.clone());
        assert_eq!(a.take(600), Ok(()));
        assert_eq!(b.take(600), Err((Cap::Total, true)));
        assert_eq!(a.take(400), Ok(()));
        assert_eq!(a.take(1), Err((Cap::Total, true)));
        assert_eq!(store.used(), 10_000);
        assert!(!StoreUsage::new(u64::MAX, None).try_add(1), "no overflow");
    }
}
