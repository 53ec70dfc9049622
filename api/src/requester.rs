//! Who created a request, as the apiserver authenticated them.

use serde::{Deserialize, Serialize};

/// The identity of the user who created a request, recorded by oz's mutating webhook from the
/// AdmissionReview's userInfo. Whatever a user writes here is overwritten at creation, and it
/// cannot be changed afterwards.
///
/// It lives in `spec` because the apiserver discards `status` on create, before storing the
/// object, so an admission webhook cannot write it there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Requester {
    /// The authenticated user name.
    pub username: String,
    /// The user's UID, when the authenticator provides one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The user's groups at the time of the request.
    #[serde(default)]
    pub groups: Vec<String>,
}
