//! Who may write templates: where access is enforced, and on a fleet spoke.
//!
//! In a namespace under `--audit-enforce-namespaces`, an exec needs a grant even from a user
//! whose own RBAC allows it. A template decides who is granted, so whoever may write one could
//! grant themselves access with no approval; and the built-in `edit` and `admin` roles may
//! write templates (`oz-template-manager` aggregates into them, which outside enforcement
//! hands out nothing those roles could not do already). So in the enforced namespaces,
//! templates are created, changed and deleted only by members of the template admin groups
//! (`--template-admin-groups`, default `system:masters`). The webhook that asks this,
//! [`TEMPLATES_ENFORCED_WEBHOOK`](oz_platform::registration::TEMPLATES_ENFORCED_WEBHOOK), is
//! registered for those namespaces alone and fails closed.
//!
//! On a fleet spoke (`--fleet-hub-user`), the same handler keeps the hub's copies to the hub's
//! credential and that credential to the hub's copies ([`fleet::template_write`]), in every
//! namespace oz serves: [`TEMPLATES_WEBHOOK`](oz_platform::registration::TEMPLATES_WEBHOOK)
//! covers the namespaces the enforced webhook does not, so each write is judged once.

use std::sync::Arc;

use axum::{Json, extract::State};
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation},
};

use super::{AdmissionState, EnforceSettings, Review, deny, fleet, reply};

/// The validating handler.
pub async fn validate(
    State(state): State<Arc<AdmissionState>>,
    Review(request): Review,
) -> Json<AdmissionReview<DynamicObject>> {
    reply(template_write(
        &state.enforce,
        state.fleet_hub_user.as_deref(),
        &request,
    ))
}

/// Whether the template write `request` is allowed. On a fleet spoke (`hub_user`, the hub's
/// credential), a hub-managed template only by the hub, and the hub only on those
/// ([`fleet::template_write`]); then anywhere access is not enforced, and in an enforced
/// namespace to members of [`EnforceSettings::template_writers`] (the hub's credential
/// included: where exec needs a grant, writing a template is granting access). A subresource
/// (oz's own status) is never judged.
pub fn template_write(
    enforce: &EnforceSettings,
    hub_user: Option<&str>,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    if request.sub_resource.is_some() {
        return AdmissionResponse::from(request);
    }
    if let Some(hub_user) = hub_user
        && let Err(message) = fleet::template_write(hub_user, request)
    {
        return deny(request, message);
    }
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let groups = request.user_info.groups.as_deref().unwrap_or_default();
    if !enforce.namespaces.contains(namespace)
        || groups.iter().any(|g| enforce.template_writers.contains(g))
    {
        return AdmissionResponse::from(request);
    }
    let verb = match request.operation {
        Operation::Create => "create",
        Operation::Delete => "delete",
        _ => "change",
    };
    let user = request
        .user_info
        .username
        .as_deref()
        .unwrap_or("an unknown user");
    let writers: Vec<&str> = enforce
        .template_writers
        .iter()
        .map(String::as_str)
        .collect();
    deny(
        request,
        format!(
            "{user} may not {verb} {kind} {namespace}/{name}: access in {namespace} is enforced, \
             so its templates are written only by members of the template admin groups ({groups}); \
             ask one of them to make the change (oz-manager --template-admin-groups)",
            kind = request.kind.kind,
            name = request.name,
            groups = if writers.is_empty() {
                "none set".to_string()
            } else {
                writers.join(", ")
            },
        ),
    )
}
