//! What the direct calls send and look for: the namespace and template they run in, an
//! AdmissionReview body with a fresh uid per call, and whether an answer allowed it.

use hyper::body::Bytes;

/// Namespace of the direct calls: Deployment web (1 pod), template web, alice's grant.
pub(super) const DIRECT_NAMESPACE: &str = "bench-webhooks";
pub(super) const TEMPLATE: &str = "web";

/// An AdmissionReview body with a fresh uid per call.
#[derive(Clone)]
pub(super) struct Body {
    before_uid: String,
    after_uid: String,
}

impl Body {
    pub(super) const UID: &'static str = "UID-PLACEHOLDER";

    pub(super) fn new(review: serde_json::Value) -> Self {
        let text = review.to_string();
        let (before, after) = text
            .split_once(Self::UID)
            .expect("the review carries the uid placeholder");
        Self {
            before_uid: before.into(),
            after_uid: after.into(),
        }
    }

    pub(super) fn render(&self, i: usize) -> Bytes {
        Bytes::from(format!("{}bench-{i}{}", self.before_uid, self.after_uid))
    }
}

pub(super) fn allowed(body: &[u8]) -> bool {
    const ALLOWED: &[u8] = b"\"allowed\":true";
    body.windows(ALLOWED.len()).any(|w| w == ALLOWED)
}
