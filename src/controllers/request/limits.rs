//! Step: is the request within its template's limits (`accessConfig.maxGrantsPerUser`,
//! `maxGrants`)? oz's webhook refuses a request over a limit at admission; two requests that
//! raced past it for the last place (through two replicas, or with the webhook bypassed) are
//! told apart here: the earlier (by creation, then name) keeps the place, the later is denied
//! with the limit named. A request already granted (or scheduled) keeps its place: a limit
//! lowered later ends no grant.

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};
use oz_api::{
    AccessConfig, AccessRequest, RequestPhase, Requester, condition_reason as reason,
    condition_type as kind,
    conditions::Observation,
    limits::{Place, first_over, holds_place},
};

use super::{
    outcome::{Step, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::builders::AccessBuilder;

/// Goes on unless a request created earlier took the last place its template's limits leave.
pub async fn within_limits<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    config: &AccessConfig,
    requester: &Requester,
) -> Step {
    pass.status
        .conditions
        .retain(|c| c.type_() != kind::WITHIN_LIMITS);
    let limited = config.max_grants.is_some() || config.max_grants_per_user.is_some();
    let not_yet_granted = matches!(
        pass.previous().phase,
        None | Some(RequestPhase::PendingApproval)
    );
    if !limited || !not_yet_granted {
        return go_on(());
    }
    let namespace = r.grant.namespace.as_str();
    let template = r.request.template_name();
    let me = (created_at(r.request), r.request.name_any());
    let earlier: Vec<(String, B::Request)> = r
        .stores
        .requests
        .state()
        .iter()
        .filter(|c| {
            c.meta().namespace.as_deref() == Some(namespace)
                && c.template_name() == template
                && holds_place(c.phase())
        })
        .filter_map(|c| c.request().ok())
        .filter(|other| (created_at(other), other.name_any()) < me)
        .filter_map(|other| Some((other.requester()?.username.clone(), other)))
        .collect();
    let places = earlier.iter().map(|(user, _)| Place { user });
    let Some(why) = first_over(
        config,
        (B::Request::KIND, template),
        &requester.username,
        places,
    ) else {
        return go_on(());
    };
    let why = Observation::no(
        kind::WITHIN_LIMITS,
        reason::OVER_LIMIT,
        format!("{why} (an earlier request took the last place)"),
    );
    stop(r.deny(pass, why).await?)
}

fn created_at(request: &impl Resource) -> Timestamp {
    request
        .meta()
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::MAX, |t| t.0)
}
