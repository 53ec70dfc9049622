//! The AdmissionReview on the wire: the request a handler is given ([`Review`], read with a
//! size limit and every fault answered with 400), and the answer it sends back ([`reply`],
//! [`deny`]).

use axum::{
    Json,
    extract::{FromRequest, Request},
    http::{HeaderValue, StatusCode, Version, header},
    response::{IntoResponse, Response},
};
use kube::core::{
    DynamicObject, Status, TypeMeta,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
};
use tracing::warn;

/// The largest AdmissionReview accepted. The apiserver caps objects at about 1.5 MiB, and a
/// review of an update carries two of them.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A v1 AdmissionReview's request, as extracted from an HTTP body.
pub struct Review(pub AdmissionRequest<DynamicObject>);

/// Why a body is not a usable AdmissionReview; answered with HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    #[error(
        "the AdmissionReview body could not be read within the {MAX_BODY_BYTES}-byte limit: {reason}"
    )]
    Body {
        /// Why reading stopped: the limit, or a transfer that broke off.
        reason: String,
        /// The body came over HTTP/1, where its unread rest leaves the connection unusable.
        http1: bool,
    },
    #[error("the body is not a valid AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "unsupported review {api_version:?} {kind:?}: only admission.k8s.io/v1 AdmissionReview is served"
    )]
    Version {
        /// The apiVersion sent.
        api_version: String,
        /// The kind sent.
        kind: String,
    },
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

impl IntoResponse for BadReview {
    fn into_response(self) -> Response {
        let message = self.to_string();
        warn!(%message, "refused an AdmissionReview");
        let mut response = (
            StatusCode::BAD_REQUEST,
            Json(AdmissionResponse::invalid(message).into_review()),
        )
            .into_response();
        // Reading stopped part way, so the rest of the body is still on the connection and
        // hyper closes it after this answer. hyper may write the answer before it notices,
        // without saying so; a client that had finished uploading would then keep the
        // connection for its next request, which fails on it. (HTTP/2 has no such header: the
        // stream is reset on its own.)
        if matches!(self, BadReview::Body { http1: true, .. }) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

impl<S: Send + Sync> FromRequest<S> for Review {
    type Rejection = BadReview;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let http1 = request.version() < Version::HTTP_2;
        let body = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|e| BadReview::Body {
                reason: e.to_string(),
                http1,
            })?;
        parse_review(&body).map(Review)
    }
}

/// An AdmissionReview as it arrives. kube's [`AdmissionReview`] flattens its apiVersion and
/// kind into itself, and serde reads a struct with a flattened field by first buffering the
/// whole body into an intermediate tree and then reading that: this reads the body once.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    api_version: String,
    kind: String,
    request: Option<AdmissionRequest<DynamicObject>>,
}

/// Parses a v1 AdmissionReview and takes its request out.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, BadReview> {
    let review: IncomingReview = serde_json::from_slice(body)?;
    if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
        return Err(BadReview::Version {
            api_version: review.api_version,
            kind: review.kind,
        });
    }
    let mut request = review.request.ok_or(BadReview::NoRequest)?;
    request.types = TypeMeta {
        api_version: review.api_version,
        kind: review.kind,
    };
    Ok(request)
}

/// The object of an AdmissionReview (a request, an AccessApproval), decoded into its kind's own
/// type (as linkerd's policy-controller's `parse_spec` does), so the checks read typed fields
/// rather than JSON by field name. Only the metadata and spec are taken: the status is not the
/// caller's to write, and nothing here reads it. The error names the spec as the field at fault.
pub fn parse_object<K: serde::de::DeserializeOwned>(object: &DynamicObject) -> Result<K, String> {
    let spec = object.data.get("spec").ok_or("spec: required")?;
    let typed = serde_json::json!({ "metadata": object.metadata, "spec": spec });
    serde_json::from_value(typed).map_err(|e| format!("spec: {e}"))
}

/// The response as an AdmissionReview body.
pub(crate) fn reply(response: AdmissionResponse) -> Json<AdmissionReview<DynamicObject>> {
    Json(response.into_review())
}

/// A denial the apiserver reports as 403 Forbidden with `message`.
pub(crate) fn deny(
    request: &AdmissionRequest<DynamicObject>,
    message: impl Into<String>,
) -> AdmissionResponse {
    let message = message.into();
    let mut response = AdmissionResponse::from(request).deny(&message);
    response.result = Status::failure(&message, "Forbidden").with_code(403);
    response
}
