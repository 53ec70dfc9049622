//! `GET /namespaces/{namespace}/recordings/{id}`: a recording's asciicast file. The apiserver
//! has already authorized the caller (`get` on `recordings` in `sessions.wizardofoz.co`) before
//! proxying the request here.

use axum::{
    Router,
    body::Body,
    extract::{Path, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use oz_api::SESSIONS_GROUP;
use serde_json::json;

use super::Recordings;
use crate::kube_status::failure_about;

/// The route serving recordings, relative to `/apis/sessions.wizardofoz.co/v1alpha1`.
pub fn router(recordings: Recordings) -> Router {
    Router::new()
        .route("/namespaces/{namespace}/recordings/{id}", get(serve))
        .with_state(recordings)
}

async fn serve(
    State(recordings): State<Recordings>,
    Path((namespace, id)): Path<(String, String)>,
) -> Response {
    if !is_namespace(&namespace) {
        return failure_about(
            StatusCode::BAD_REQUEST,
            format!("{namespace:?} is not a namespace name"),
            details(&id),
        );
    }
    if !is_session_id(&id) {
        return failure_about(
            StatusCode::BAD_REQUEST,
            format!("{id:?} is not a session id (like 20261123-081500-k3x9qa7m)"),
            details(&id),
        );
    }
    match recordings.read_stream(&namespace, &id).await {
        // Streamed as it is read: a recording may be as large as its cap.
        Ok(Some(body)) => (
            [(header::CONTENT_TYPE, "application/x-asciicast")],
            Body::from_stream(body),
        )
            .into_response(),
        Ok(None) => failure_about(
            StatusCode::NOT_FOUND,
            format!("recordings.{SESSIONS_GROUP} {id:?} not found in namespace {namespace:?}"),
            details(&id),
        ),
        Err(error) => {
            tracing::warn!(%error, "cannot read a recording");
            failure_about(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read recording {id:?}: the recordings store failed; see oz's log"),
                details(&id),
            )
        }
    }
}

/// What a refusal names: the recording asked for.
fn details(id: &str) -> serde_json::Value {
    json!({"name": id, "group": SESSIONS_GROUP, "kind": "recordings"})
}

/// `^[0-9]{8}-[0-9]{6}-[a-z0-9]{8}$`: what [`new_session_id`](crate::new_session_id) makes.
pub fn is_session_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 24
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'-'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'-'
        && b[16..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// A DNS-1123 label, as namespace names are (so never `..` or a path).
fn is_namespace(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_and_namespaces_are_checked() {
        assert!(is_session_id("20261123-081500-k3x9qa7m"));
        assert!(is_session_id(&crate::new_session_id(chrono::Utc::now())));
        for bad in [
            "20261123-081500-k3x9qa7",
            "20261123-081500-K3x9qa7m",
            "2026112x-081500-k3x9qa7m",
            "20261123_081500-k3x9qa7m",
            "../../etc/passwd",
            "",
        ] {
            assert!(!is_session_id(bad), "{bad}");
        }
        assert!(is_namespace("team-a"));
        for bad in ["..", "-a", "A", ""] {
            assert!(!is_namespace(bad), "{bad}");
        }
    }
}
