//! The apiserver reads that AccessApproval reviews from callers not verified to be the
//! apiserver may cost, shared by all of them: each such review reads the request it decides
//! on, so without a budget anyone who reaches the port sets oz's read rate.

use super::events::TokenBucket;

/// Reviews of AccessApproval CREATEs from callers not verified to be the apiserver, each of
/// which costs reads of the apiserver, that may be answered per second on average ...
const UNVERIFIED_REVIEWS_PER_SECOND: f64 = 5.0;
/// ... and at once.
const UNVERIFIED_REVIEW_BURST: f64 = 20.0;

/// The reads that approval reviews from unverified callers may cost, shared by all of them
/// (see the module documentation).
pub struct UnverifiedReads(TokenBucket);

impl Default for UnverifiedReads {
    fn default() -> Self {
        Self::new(UNVERIFIED_REVIEWS_PER_SECOND, UNVERIFIED_REVIEW_BURST)
    }
}

impl UnverifiedReads {
    /// A budget of `burst` reviews at once, refilled at `per_second`.
    pub fn new(per_second: f64, burst: f64) -> Self {
        Self(TokenBucket::new(per_second, burst))
    }

    /// Takes one review's reads from the budget, if it has them.
    pub fn take(&self) -> bool {
        self.0.take()
    }
}
