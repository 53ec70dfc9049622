//! Who the user is, as the cluster sees them: a SelfSubjectReview, the same answer oz's
//! admission webhook gets when it records a request's requester.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::{Api, api::PostParams};

use super::{error::CliError, session::Session};

/// The authenticated user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Me {
    /// The user name, as `spec.requester.username` records it.
    pub username: String,
    /// Every group the user is in, including `system:authenticated`: what a template's
    /// [`oz_api::AccessConfig::admits`] is asked about.
    pub groups: Vec<String>,
}

/// Asks the cluster who the session's user is.
pub async fn whoami(session: &Session) -> Result<Me, CliError> {
    let reviews: Api<SelfSubjectReview> = Api::all(session.client.clone());
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(|e| session.error(e))?;
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    match user.username {
        Some(username) if !username.is_empty() => Ok(Me {
            username,
            groups: user.groups.unwrap_or_default(),
        }),
        _ => Err(CliError::Api(format!(
            "the cluster at {} does not say who you are (its SelfSubjectReview has no user name); oz needs an authenticated user",
            session.server
        ))),
    }
}
