//! Step, on a fleet hub, in place of building: a request through a fleet template is granted
//! by the spoke it names. Once the hub has checked the requester, counted the approvals and
//! decided the window (the steps before), it creates the same request on the spoke, as the
//! hub's credential, with `spec.forwarded` attesting the requester and the approvals, and the
//! time left of the window as its duration; the spoke's oz grants it, times it by its own
//! clock and revokes it, even with the hub gone. The hub's request then shows the spoke's:
//! its phase, pod, access command and sessions, followed by a watch of the spoke.
//!
//! Nothing is half-granted: the spoke's request is one object, created once (a spoke
//! unreachable or refusing leaves the hub's request Pending with the reason, and it is tried
//! again); the hub holds no access itself. A spoke request that disappears is never made
//! again: the hub's request is then Revoked.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, Resource, ResourceExt,
    api::{DynamicObject, Patch, PatchParams, PostParams},
    runtime::controller::Action,
};
use oz_api::{
    AccessRequest, AccessTemplate, Forwarded, ForwardedApproval, HUB_MANAGED_LABEL, RequestPhase,
    RequestStatus, Requester, condition_reason as reason, condition_type as kind,
    conditions::Observation,
};
use serde_json::json;

use super::{
    outcome::{Stop, Wake},
    reconciling::Reconciling,
    status::Pass,
};
use crate::{
    Context, Result,
    builders::AccessBuilder,
    fleet::{SpokeError, copies::FIELD_MANAGER, explain_spoke_error, spokes::request_resource},
};

/// The finalizer a hub's forwarded request carries: its deletion withdraws the spoke's.
pub const FORWARDED_FINALIZER: &str = "crds.wizardofoz.co/fleet-forwarded";

/// How soon a request whose spoke cannot be reached (or has not been listed) is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Forwards the request to its spoke, or follows it there; `expires_at` is the window the hub
/// decided.
pub async fn forward<B: AccessBuilder, T: AccessTemplate>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    template: &T,
    requester: &Requester,
    expires_at: Timestamp,
) -> Result<Stop> {
    let (Some(hub), Some(clusters)) = (r.ctx.fleet.as_ref(), template.clusters()) else {
        unreachable!("the template step lets only a fleet hub's fleet templates through here");
    };
    let Some(cluster) = r.request.cluster() else {
        let why = Observation::no(
            kind::ACCESS_RESOURCES_CREATED,
            reason::BAD_REQUEST,
            format!(
                "spec.cluster: {} {:?} grants access on spoke clusters; name one of them: {}",
                T::KIND.template_kind(),
                template.name_any(),
                hub.covered(clusters).join(", ")
            ),
        );
        return r.withdraw(pass, why).await;
    };
    let spoke = match hub.spoke(cluster, clusters).await {
        Ok(spoke) => spoke,
        // Out of the inventory: whatever was granted there was withdrawn as it left.
        Err(SpokeError::NotInInventory(_)) if was_forwarded(pass.previous()) => {
            return gone(r, pass, cluster).await;
        }
        Err(SpokeError::NotInInventory(why) | SpokeError::NotCovered(why)) => {
            let why = Observation::no(kind::ACCESS_RESOURCES_CREATED, reason::BAD_REQUEST, why);
            return r.withdraw(pass, why).await;
        }
        Err(SpokeError::Unreachable(why)) => {
            return not_yet(pass, reason::SPOKE_UNREACHABLE, why);
        }
    };
    let (namespace, name) = (&r.grant.namespace, r.request.name_any());
    let held = match spoke.request(B::Request::KIND, namespace, &name) {
        Ok(held) => held,
        Err(why) => {
            let why = format!("cluster {cluster:?}: {why}");
            return not_yet(pass, reason::SPOKE_UNREACHABLE, why);
        }
    };
    let uid = r.request.meta().uid.clone().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(
        spoke.client.clone(),
        namespace,
        &request_resource(B::Request::KIND),
    );
    let held = match held {
        Some(held) => Some(held),
        // Forwarded, and not in the watch's cache: perhaps gone, perhaps not delivered yet (a
        // pass woken by the hub's own write right after the create). The spoke says which.
        None if was_forwarded(pass.previous()) => match api.get_opt(&name).await {
            Ok(found) => found.map(std::sync::Arc::new),
            Err(error) => {
                return not_yet(
                    pass,
                    reason::SPOKE_UNREACHABLE,
                    refused(cluster, namespace, error),
                );
            }
        },
        None => None,
    };
    let Some(held) = held else {
        if was_forwarded(pass.previous()) {
            return gone(r, pass, cluster).await;
        }
        let left = expires_at.duration_since(pass.now).as_secs().max(0) as u64;
        if left < 1 {
            // The window ended before the spoke was reached: nothing to forward.
            return Ok(Stop::Write(Wake::At(expires_at)));
        }
        keep_finalizer(r).await?;
        let forwarded = Forwarded {
            hub: hub.settings.name.clone(),
            cluster: cluster.to_string(),
            request_name: name.clone(),
            request_uid: uid,
            // The spoke's webhook records the hub's names for the requester there.
            requester: None,
            approvers: pass
                .status
                .approvals
                .iter()
                .map(|a| ForwardedApproval {
                    approver: a.approver.clone(),
                    at: a.at.clone(),
                    break_glass: a.break_glass,
                })
                .collect(),
        };
        let body =
            spoke_request::<B::Request>(r.request, &hub.settings.name, requester, &forwarded, left);
        let object: DynamicObject =
            serde_json::from_value(body).map_err(|source| crate::Error::Serialization {
                what: "a spoke request",
                source,
            })?;
        return match api.create(&PostParams::default(), &object).await {
            Ok(_) => {
                tracing::info!(%namespace, %name, %cluster, "forwarded a request to its spoke");
                pass.observe(Observation::yes(
                    kind::ACCESS_RESOURCES_CREATED,
                    reason::FORWARDED,
                    format!("forwarded to cluster {cluster:?}, whose oz grants it"),
                ));
                pass.status.phase = Some(RequestPhase::Pending);
                Ok(Stop::Write(Wake::OnChange))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                // Made by an earlier pass whose answer was lost, or another's: the watch tells.
                Ok(Stop::Write(Wake::At(pass.now + RETRY)))
            }
            Err(error) => {
                if matches!(&error, kube::Error::Api(status) if status.code == 401) {
                    hub.refused(cluster).await;
                }
                not_yet(
                    pass,
                    reason::SPOKE_UNREACHABLE,
                    refused(cluster, namespace, error),
                )
            }
        };
    };
    let attested = held
        .data
        .pointer("/spec/forwarded/requestUid")
        .and_then(|v| v.as_str());
    if attested != r.request.meta().uid.as_deref() {
        let why = Observation::no(
            kind::ACCESS_RESOURCES_CREATED,
            reason::CONFLICT,
            format!(
                "cluster {cluster:?} has another request named {name:?} in namespace {namespace:?}; \
                 create this request again under another name"
            ),
        );
        return r.withdraw(pass, why).await;
    }
    let spoke_status: RequestStatus = held
        .data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default();
    Ok(follow(pass, cluster, &spoke_status))
}

/// The spoke request's JSON: the hub's spec (but `cluster`), the attested requester and what
/// the hub attests, and `left` seconds of access.
fn spoke_request<R: AccessRequest>(
    request: &R,
    hub: &str,
    requester: &Requester,
    forwarded: &Forwarded,
    left: u64,
) -> serde_json::Value {
    let mut spec = serde_json::to_value(request)
        .ok()
        .and_then(|mut v| v.get_mut("spec").map(serde_json::Value::take))
        .unwrap_or_default();
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("cluster");
        spec.insert("duration".into(), json!(format!("{left}s")));
        spec.insert("requester".into(), json!(requester));
        spec.insert("forwarded".into(), json!(forwarded));
    }
    json!({
        "apiVersion": R::api_version(&()),
        "kind": R::kind(&()),
        "metadata": {
            "name": request.name_any(),
            "namespace": request.namespace(),
            "labels": { HUB_MANAGED_LABEL: hub },
        },
        "spec": spec,
    })
}

/// The hub's request shows its spoke's: phase, pod, access command, sessions; the spoke's
/// `expiresAt` (its own clock) in the condition's message.
fn follow(pass: &mut Pass, cluster: &str, spoke: &RequestStatus) -> Stop {
    pass.observe(Observation::yes(
        kind::ACCESS_RESOURCES_CREATED,
        reason::FORWARDED,
        format!("forwarded to cluster {cluster:?}, whose oz grants it"),
    ));
    let status = &mut pass.status;
    status.pod_name = spoke.pod_name.clone();
    status.access_message = spoke.access_message.clone();
    status.session_mode = spoke.session_mode;
    status.sessions = spoke.sessions.clone();
    status.session_counts = spoke.session_counts;
    let spoke_expiry = spoke
        .expires_at
        .as_ref()
        .map(|t| format!(", until {} by the spoke's clock", t.0))
        .unwrap_or_default();
    let (observation, phase) = match spoke.phase {
        Some(RequestPhase::Ready) => (
            Observation::yes(
                kind::ACCESS_RESOURCES_READY,
                reason::SUCCESS,
                format!("granted on cluster {cluster:?}{spoke_expiry}"),
            ),
            RequestPhase::Ready,
        ),
        Some(phase @ (RequestPhase::Denied | RequestPhase::Failed)) => (
            Observation::no(
                kind::ACCESS_RESOURCES_READY,
                reason::FAILURE,
                format!(
                    "cluster {cluster:?} did not grant it ({phase:?}): {}",
                    spoke_reason(spoke)
                ),
            ),
            RequestPhase::Failed,
        ),
        Some(phase @ (RequestPhase::Expired | RequestPhase::Revoked)) => (
            Observation::no(
                kind::ACCESS_RESOURCES_READY,
                reason::FAILURE,
                format!("cluster {cluster:?} ended the grant ({phase:?}){spoke_expiry}"),
            ),
            phase,
        ),
        _ => (
            Observation::no(
                kind::ACCESS_RESOURCES_READY,
                reason::NOT_YET_READY,
                format!("waiting for cluster {cluster:?} to grant it"),
            ),
            RequestPhase::Pending,
        ),
    };
    pass.observe(observation);
    pass.status.phase = Some(phase);
    Stop::Write(Wake::OnChange)
}

/// The first false condition's message on the spoke: why it did not grant.
fn spoke_reason(spoke: &RequestStatus) -> String {
    spoke
        .conditions
        .iter()
        .find(|c| c.status() == "False")
        .map(|c| c.message.to_string())
        .unwrap_or_else(|| "no reason given".into())
}

/// Whether an earlier pass forwarded the request (so a spoke without it has dropped it).
fn was_forwarded(previous: &RequestStatus) -> bool {
    previous.conditions.iter().any(|c| {
        c.type_() == kind::ACCESS_RESOURCES_CREATED
            && c.reason() == reason::FORWARDED
            && c.status() == "True"
    })
}

/// The spoke no longer has the request it granted: ended there (deleted, or removed after
/// its history retention). The hub's request ends too, and is never forwarded again.
async fn gone<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    cluster: &str,
) -> Result<Stop> {
    pass.observe(Observation::no(
        kind::ACCESS_STILL_VALID,
        reason::REVOKED,
        format!("its request on cluster {cluster:?} is gone: the grant there has ended"),
    ));
    pass.status.phase = Some(RequestPhase::Revoked);
    pass.status.access_message = None;
    r.revoke().await?;
    Ok(Stop::Ended(pass.now))
}

/// Pending, for `why`; tried again soon.
fn not_yet(pass: &mut Pass, why_reason: &'static str, why: String) -> Result<Stop> {
    if was_forwarded(pass.previous()) {
        // Granted there already, and the spoke's oz keeps it (and ends it) without the hub:
        // the hub's view of it is only stale.
        tracing::debug!(%why, "a spoke with a forwarded request is out of reach");
        return Ok(Stop::Write(Wake::At(pass.now + RETRY)));
    }
    pass.observe(Observation::no(
        kind::ACCESS_RESOURCES_CREATED,
        why_reason,
        why,
    ));
    pass.status.phase = Some(RequestPhase::Pending);
    Ok(Stop::Write(Wake::At(pass.now + RETRY)))
}

/// A spoke's refusal of the request in `namespace`, in words for the status.
fn refused(cluster: &str, namespace: &str, error: kube::Error) -> String {
    format!(
        "cluster {cluster:?}: {}",
        explain_spoke_error(namespace, error)
    )
}

/// Puts [`FORWARDED_FINALIZER`] on the hub's request before anything exists on a spoke.
async fn keep_finalizer<B: AccessBuilder>(r: &Reconciling<'_, B>) -> Result<()> {
    if r.request
        .finalizers()
        .iter()
        .any(|f| f == FORWARDED_FINALIZER)
    {
        return Ok(());
    }
    let api: Api<B::Request> = Api::namespaced(r.ctx.client.clone(), &r.grant.namespace);
    let patch = json!({
        "apiVersion": B::Request::api_version(&()),
        "kind": B::Request::kind(&()),
        "metadata": {"name": r.request.name_any(), "finalizers": [FORWARDED_FINALIZER]},
    });
    api.patch(
        &r.request.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// A hub request being deleted: its spoke's request is withdrawn, then the finalizer goes.
pub async fn finish_deletion<R: AccessRequest>(ctx: &Context, request: &R) -> Result<Action> {
    if !request
        .finalizers()
        .iter()
        .any(|f| f == FORWARDED_FINALIZER)
    {
        return Ok(Action::await_change());
    }
    if let Some(hub) = &ctx.fleet {
        hub.withdraw(request).await?;
    }
    let api: Api<R> = Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": R::api_version(&()),
        "kind": R::kind(&()),
        "metadata": {"name": request.name_any(), "finalizers": []},
    });
    api.patch(
        &request.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use oz_api::ExecAccessRequest;

    use super::*;

    fn hub_request() -> ExecAccessRequest {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
            "metadata": {"name": "alice-web", "namespace": "shop", "uid": "hub-uid"},
            "spec": {"templateName": "web", "cluster": "b", "reason": "incident 7",
                     "duration": "1h", "requester": {"username": "mallory", "groups": []}},
        }))
        .unwrap()
    }

    fn alice() -> Requester {
        Requester {
            username: "alice".into(),
            uid: None,
            groups: vec!["devs".into()],
        }
    }

    #[test]
    fn the_spoke_request_carries_the_attested_requester_and_the_time_left() {
        let forwarded = Forwarded {
            hub: "hub".into(),
            cluster: "b".into(),
            request_name: "alice-web".into(),
            request_uid: "hub-uid".into(),
            requester: None,
            approvers: Vec::new(),
        };
        let body = spoke_request(&hub_request(), "hub", &alice(), &forwarded, 1799);
        assert_eq!(body["metadata"]["labels"][HUB_MANAGED_LABEL], "hub");
        assert_eq!(body["metadata"]["namespace"], "shop");
        assert_eq!(body["spec"]["templateName"], "web");
        assert_eq!(body["spec"]["reason"], "incident 7");
        assert_eq!(body["spec"]["duration"], "1799s");
        assert_eq!(body["spec"]["requester"]["username"], "alice");
        assert_eq!(body["spec"]["forwarded"]["requestUid"], "hub-uid");
        assert_eq!(body["spec"].get("cluster"), None);
        // It is a request the spoke can read.
        let spoke: ExecAccessRequest = serde_json::from_value(body).unwrap();
        assert_eq!(spoke.forwarded(), Some(&forwarded));
    }

    fn pass_over(status: RequestStatus) -> Pass {
        let mut request = hub_request();
        request.status = Some(status);
        Pass::new(&request)
    }

    #[test]
    fn the_hub_shows_the_spokes_grant() {
        let mut pass = pass_over(RequestStatus::default());
        let spoke = RequestStatus {
            phase: Some(RequestPhase::Ready),
            pod_name: Some("web-0".into()),
            access_message: Some("kubectl exec -n shop web-0 -- sh".into()),
            expires_at: Some(Time(Timestamp::UNIX_EPOCH)),
            ..Default::default()
        };
        follow(&mut pass, "b", &spoke);
        assert_eq!(pass.status.phase, Some(RequestPhase::Ready));
        assert_eq!(pass.status.pod_name.as_deref(), Some("web-0"));
        assert_eq!(pass.status.access_message, spoke.access_message);
        assert!(was_forwarded(&pass.status));
        let ready = pass
            .status
            .conditions
            .iter()
            .find(|c| c.type_() == kind::ACCESS_RESOURCES_READY)
            .unwrap();
        assert!(
            ready.message.contains("granted on cluster \"b\""),
            "{}",
            ready.message
        );
        assert!(
            ready.message.contains("by the spoke's clock"),
            "{}",
            ready.message
        );
    }

    #[test]
    fn a_spoke_that_refuses_fails_the_hub_request_with_its_reason() {
        let mut pass = pass_over(RequestStatus::default());
        let mut spoke = pass_over(RequestStatus::default());
        spoke.observe(Observation::no(
            kind::REQUESTER_ALLOWED,
            reason::NOT_ALLOWED,
            "user \"alice\" is not in any of the template's allowedGroups",
        ));
        let spoke = RequestStatus {
            phase: Some(RequestPhase::Denied),
            ..spoke.status
        };
        follow(&mut pass, "b", &spoke);
        assert_eq!(pass.status.phase, Some(RequestPhase::Failed));
        assert!(spoke_reason(&spoke).contains("allowedGroups"));
    }

    #[test]
    fn an_unreachable_spoke_leaves_a_forwarded_grant_as_it_was() {
        let mut forwarded = pass_over(RequestStatus::default());
        follow(
            &mut forwarded,
            "b",
            &RequestStatus {
                phase: Some(RequestPhase::Ready),
                ..Default::default()
            },
        );
        let mut pass = pass_over(forwarded.status.clone());
        not_yet(&mut pass, reason::SPOKE_UNREACHABLE, "down".into()).unwrap();
        assert_eq!(pass.status, forwarded.status);
        let mut fresh = pass_over(RequestStatus::default());
        not_yet(&mut fresh, reason::SPOKE_UNREACHABLE, "down".into()).unwrap();
        assert_eq!(fresh.status.phase, Some(RequestPhase::Pending));
    }
}
