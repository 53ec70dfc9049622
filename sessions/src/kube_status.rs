//! Failures as Kubernetes `Status` objects, which kubectl and kube-rs print as the error of a
//! call: every refusal the sessions API answers is one.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

/// A failure with the reason Kubernetes gives `code` (`Forbidden` for 403, ...).
pub fn failure(code: StatusCode, message: impl Into<String>) -> Response {
    respond(code, reason_of(code), message.into(), None)
}

/// [`failure`] about one object: `details` names it (`{"name", "group", "kind"}`).
pub fn failure_about(code: StatusCode, message: impl Into<String>, details: Value) -> Response {
    respond(code, reason_of(code), message.into(), Some(details))
}

/// A failure passed on as another server reported it, with its own reason.
pub fn passed_on(code: StatusCode, reason: &str, message: impl Into<String>) -> Response {
    respond(code, reason, message.into(), None)
}

fn reason_of(code: StatusCode) -> &'static str {
    match code {
        StatusCode::BAD_REQUEST => "BadRequest",
        StatusCode::UNAUTHORIZED => "Unauthorized",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        _ => "InternalError",
    }
}

fn respond(code: StatusCode, reason: &str, message: String, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    (code, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(response: Response) -> (StatusCode, Value) {
        let code = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (code, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn a_failure_is_a_status_with_the_codes_reason() {
        let (code, status) = body(failure(StatusCode::FORBIDDEN, "no")).await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "no", "reason": "Forbidden", "code": 403})
        );
        let (_, status) = body(failure_about(
            StatusCode::NOT_FOUND,
            "gone",
            json!({"name": "x"}),
        ))
        .await;
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["details"], json!({"name": "x"}));
        let (code, status) = body(passed_on(StatusCode::CONFLICT, "AlreadyExists", "m")).await;
        assert_eq!(
            (code, &status["reason"]),
            (StatusCode::CONFLICT, &json!("AlreadyExists"))
        );
        let (_, status) = body(failure(StatusCode::BAD_GATEWAY, "m")).await;
        assert_eq!(status["reason"], "InternalError");
    }
}
