//! The status pass of one reconcile: what a request's status was, what it becomes, and what
//! users are told about the change. Steps record their observations on a [`Pass`];
//! [`Pass::finish`] writes the status once and publishes the Events. This is the bottom layer of
//! the request reconciler: it calls no step, no expiry and no timer.

use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{
        controller::Action,
        events::{Event, EventType},
    },
};
use oz_api::{
    AccessRequest, AccessTemplate, Condition, NotificationConfig, RequestPhase, RequestStatus,
    condition_type as kind,
    conditions::{self, Observation},
};

use super::{
    notices::{extension_notices, notice, notices_for},
    outcome::Wake,
    wording::{became, granted_message},
};
use crate::{Context, Result, apply::apply_status, notify::NoticeKind, time};

/// An Event to publish about a request: its type, reason and note.
pub type Note = (EventType, &'static str, String);

/// One reconcile's view of the status: what it was, what it becomes, and the Events to publish.
pub struct Pass {
    /// The instant this pass judges by.
    pub now: Timestamp,
    generation: Option<i64>,
    previous: RequestStatus,
    /// The status as the steps so far have decided it.
    pub status: RequestStatus,
    notes: Vec<Note>,
    /// The template's notification config, once the template step has read it (`None`: not
    /// read yet, and read by [`Pass::finish`] if there is news to send).
    sinks: Option<Option<NotificationConfig>>,
    /// Notices to send whether or not the status changes (ExpiringSoon).
    announced: Vec<(NoticeKind, String)>,
}

impl Pass {
    pub fn new<R: AccessRequest>(request: &R) -> Self {
        let previous = request.request_status().cloned().unwrap_or_default();
        Self {
            now: Timestamp::now(),
            generation: request.meta().generation,
            status: previous.clone(),
            previous,
            notes: Vec::new(),
            sinks: None,
            announced: Vec::new(),
        }
    }

    /// Records the template's notification config, for the notices this pass sends.
    pub fn notify_through(&mut self, sinks: Option<&NotificationConfig>) {
        self.sinks = Some(sinks.cloned());
    }

    /// Sends a notice with the status, whether or not it changes (the notifier drops a repeat).
    pub fn announce(&mut self, kind: NoticeKind, message: String) {
        self.announced.push((kind, message));
    }

    /// The status as it was before this pass.
    pub fn previous(&self) -> &RequestStatus {
        &self.previous
    }

    /// Records a condition.
    pub fn observe(&mut self, observation: Observation) {
        conditions::set(
            &mut self.status.conditions,
            observation,
            self.generation,
            self.now,
        );
    }

    /// Publishes an Event with the status, if the status changes.
    pub fn note(&mut self, type_: EventType, reason: &'static str, note: String) {
        self.notes.push((type_, reason, note));
    }

    /// Recomputes `ready`, writes the status if it changed, publishes what changed, and
    /// returns when to `wake`. A pass is finished once.
    pub async fn finish<R: AccessRequest>(
        &mut self,
        ctx: &Context,
        request: &R,
        wake: Wake,
    ) -> Result<Action> {
        self.status.ready = conditions::all_true(&self.status.conditions);
        let mut notices = std::mem::take(&mut self.announced);
        if self.status == self.previous {
            self.send(ctx, request, notices).await;
            return Ok(wake.action());
        }
        let api: Api<R> =
            Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
        let ours = owned_by_oz(&self.status);
        let (namespace, name) = (request.namespace().unwrap_or_default(), request.name_any());
        let before = request.meta().resource_version.as_deref();
        let applying = apply_status(&api, &name, &ours);
        let stored = match ctx.echoes.track(&namespace, &name, before, applying).await {
            // Deleted meanwhile (by a user, or with its template): nothing left to report on.
            Err(crate::Error::Kube(kube::Error::Api(status))) if status.code == 404 => {
                return Ok(Action::await_change());
            }
            other => other?,
        };
        // What the apply left behind of the fields oz no longer sets: someone else's (oz's
        // own are gone with the apply).
        let left = stored.request_status().map(owned_by_oz).unwrap_or_default();
        if let Some(clearing) = dropped_fields(&left, &ours) {
            let patching = async {
                let patch = Patch::Merge(&clearing);
                api.patch_status(&name, &PatchParams::default(), &patch)
                    .await
            };
            let stored_version = stored.meta().resource_version.as_deref();
            ctx.echoes
                .track(&namespace, &name, stored_version, patching)
                .await?;
        }

        if became(&self.previous, &self.status, RequestPhase::Ready)
            && let Some(created) = &request.meta().creation_timestamp
        {
            let seconds = time::seconds_past(Timestamp::now(), created.0).max(0.0);
            ctx.metrics.observe_time_to_ready(&R::kind(&()), seconds);
        }
        let notes = std::mem::take(&mut self.notes);
        for (type_, reason, note) in events_for(&self.previous, &self.status, notes) {
            let event = Event {
                type_,
                reason: reason.into(),
                note: Some(note),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = ctx.publish_event(&event, &request.object_ref(&())).await {
                tracing::warn!(error = %e, "could not publish an event");
            }
        }
        let changes = notices_for(&self.previous, &self.status);
        if changes.iter().any(|(k, _)| *k == NoticeKind::BreakGlass) {
            ctx.metrics.count_break_glass(&R::kind(&()));
        }
        notices.splice(0..0, changes);
        self.send(ctx, request, notices).await;
        let asks = extension_notices(&self.previous, &self.status);
        for (kind, number, message) in asks {
            self.send_about_ask(ctx, request, (kind, number), message)
                .await;
        }
        Ok(wake.action())
    }

    /// Sends `notices` about `request`, reading its template's notification config first if
    /// no step has (the expiry timer's path).
    async fn send<R: AccessRequest>(
        &mut self,
        ctx: &Context,
        request: &R,
        notices: Vec<(NoticeKind, String)>,
    ) {
        if notices.is_empty() {
            return;
        }
        let sinks = match self.sinks.take() {
            Some(sinks) => sinks,
            None => template_sinks(ctx, request).await,
        };
        for (kind, message) in notices {
            let notice = notice(kind, request, &self.status, sinks.clone(), message);
            ctx.notifier.send(notice);
        }
        self.sinks = Some(sinks);
    }
}

impl Pass {
    /// Sends a notice about extension ask `number` of `request`: known by the request's uid
    /// with the number, so that each ask is announced once.
    async fn send_about_ask<R: AccessRequest>(
        &mut self,
        ctx: &Context,
        request: &R,
        (kind, number): (NoticeKind, u32),
        message: String,
    ) {
        let sinks = match self.sinks.take() {
            Some(sinks) => sinks,
            None => template_sinks(ctx, request).await,
        };
        let mut notice = notice(kind, request, &self.status, sinks.clone(), message);
        notice.uid = format!("{}.extension-{number}", notice.uid);
        ctx.notifier.send(notice);
        self.sinks = Some(sinks);
    }
}

/// The part of `status` the controller writes: all but `sessions` and `sessionCounts`, which
/// the oz replica serving each brokered session writes (merge patches as `oz-sessions`). The
/// controller's copy of them may be stale (its cache lags), and an apply of a stale list would
/// overwrite a newer one, so it never applies them, and never clears them.
pub fn owned_by_oz(status: &RequestStatus) -> RequestStatus {
    RequestStatus {
        sessions: Vec::new(),
        session_counts: None,
        ..status.clone()
    }
}

/// The merge patch that removes the status fields `status` does not have but `left` (the
/// stored status, as oz's apply returned it) still has, if there are any. Server-side apply only
/// removes the fields oz itself set before: a field someone else wrote (an `approvedAt` or
/// `approvals` edited by hand) would otherwise stay, and the status would not say what oz
/// decided. Asking the apply's answer rather than the previous status saves a call whenever oz
/// dropped only its own fields (an `accessMessage` at expiry).
fn dropped_fields(left: &RequestStatus, status: &RequestStatus) -> Option<serde_json::Value> {
    let (Ok(serde_json::Value::Object(before)), Ok(serde_json::Value::Object(after))) =
        (serde_json::to_value(left), serde_json::to_value(status))
    else {
        return None;
    };
    let dropped: serde_json::Map<String, serde_json::Value> = before
        .keys()
        .filter(|key| !after.contains_key(*key))
        .map(|key| (key.clone(), serde_json::Value::Null))
        .collect();
    (!dropped.is_empty()).then(|| serde_json::json!({ "status": dropped }))
}

/// The notification config of `request`'s template; none if it cannot be read (the
/// namespace's sink still hears of it).
async fn template_sinks<R: AccessRequest>(
    ctx: &Context,
    request: &R,
) -> Option<NotificationConfig> {
    let api: Api<R::Template> =
        Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
    match api.get_opt(request.template_name()).await {
        Ok(template) => template?.access_config().notifications.clone(),
        Err(e) => {
            tracing::warn!(error = %e, "could not read a template's notification config");
            None
        }
    }
}

/// The Events a status change from `previous` to `status` publishes: the steps' own `notes`,
/// then `Created` when the access resources first exist (unless the request is Ready at once),
/// `Ready` when the request becomes Ready, and otherwise, for a Failed request with nothing
/// else to say, `Failed` once per distinct problem rather than on every retry.
pub fn events_for(previous: &RequestStatus, status: &RequestStatus, notes: Vec<Note>) -> Vec<Note> {
    let mut events = notes;
    fn created(s: &RequestStatus) -> Option<&Condition> {
        s.conditions
            .iter()
            .find(|c| c.type_() == kind::ACCESS_RESOURCES_CREATED && c.status() == "True")
    }
    let ready = became(previous, status, RequestPhase::Ready);
    // Made and ready in one pass (exec access always is): `Ready` says both, in one Event.
    if let Some(condition) = created(status)
        && created(previous).is_none()
        && !ready
    {
        events.push((EventType::Normal, "Created", condition.message.clone()));
    }
    if ready {
        events.push((EventType::Normal, "Ready", granted_message(status)));
    } else if events.is_empty() && status.phase == Some(RequestPhase::Failed) {
        let problems = |s: &RequestStatus| {
            conditions::failing(&s.conditions)
                .map(|c| c.message.clone())
                .collect::<Vec<_>>()
        };
        if problems(status) != problems(previous) {
            events.push((EventType::Warning, "Failed", problems(status).join("; ")));
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use oz_api::condition_reason as reason;

    use super::*;
    use crate::controllers::fixtures::{at, conditions_of};

    fn status(phase: RequestPhase, observations: &[Observation]) -> RequestStatus {
        RequestStatus {
            phase: Some(phase),
            conditions: conditions_of(observations),
            ..Default::default()
        }
    }

    fn created() -> Observation {
        Observation::yes(
            kind::ACCESS_RESOURCES_CREATED,
            reason::SUCCESS,
            "Success. Role r-1, RoleBinding r-1 created",
        )
    }

    fn no_pods() -> Observation {
        Observation::no(
            kind::ACCESS_RESOURCES_CREATED,
            reason::FAILURE,
            "ERROR: no running pods",
        )
    }

    fn reasons(events: &[Note]) -> Vec<&'static str> {
        events.iter().map(|(_, reason, _)| *reason).collect()
    }

    #[test]
    fn a_grant_made_and_ready_in_one_pass_is_announced_once() {
        let before = status(RequestPhase::Pending, &[]);
        let mut ready = status(RequestPhase::Ready, &[created()]);
        ready.pod_name = Some("web-0".into());
        ready.expires_at = Some(Time(at("2026-01-01T01:00:00Z")));
        let events = events_for(&before, &ready, Vec::new());
        assert_eq!(reasons(&events), ["Ready"]);
        assert_eq!(
            events[0].2,
            "access to pod web-0 granted until 2026-01-01T01:00:00Z"
        );
        assert!(events_for(&ready, &ready, Vec::new()).is_empty());
    }

    #[test]
    fn resources_made_before_they_are_ready_are_announced_then_the_grant() {
        let before = status(RequestPhase::Pending, &[]);
        let made = status(RequestPhase::Pending, &[created()]);
        let events = events_for(&before, &made, Vec::new());
        assert_eq!(reasons(&events), ["Created"]);
        assert_eq!(events[0].2, "Success. Role r-1, RoleBinding r-1 created");
        let mut ready = status(RequestPhase::Ready, &[created()]);
        ready.pod_name = Some("web-0".into());
        assert_eq!(reasons(&events_for(&made, &ready, Vec::new())), ["Ready"]);
    }

    #[test]
    fn a_failure_is_published_once_per_distinct_problem() {
        let pending = status(RequestPhase::Pending, &[]);
        let failed = status(RequestPhase::Failed, &[no_pods()]);
        let events = events_for(&pending, &failed, Vec::new());
        assert_eq!(reasons(&events), ["Failed"]);
        assert_eq!(events[0].0, EventType::Warning);
        assert_eq!(events[0].2, "ERROR: no running pods");
        // The same problem again: nothing new to say.
        assert!(events_for(&failed, &failed, Vec::new()).is_empty());
        // Another problem: said again.
        let other = status(
            RequestPhase::Failed,
            &[Observation::no(
                kind::ACCESS_RESOURCES_CREATED,
                reason::FAILURE,
                "ERROR: the target is missing",
            )],
        );
        assert_eq!(
            reasons(&events_for(&failed, &other, Vec::new())),
            ["Failed"]
        );
    }

    #[test]
    fn a_step_note_stands_in_for_the_generic_failure() {
        let failed = status(RequestPhase::Failed, &[no_pods()]);
        let note = (EventType::Warning, "Denied", "not allowed".to_string());
        let events = events_for(&status(RequestPhase::Pending, &[]), &failed, vec![note]);
        assert_eq!(reasons(&events), ["Denied"]);
    }

    #[test]
    fn the_controller_never_writes_the_sessions_it_does_not_keep() {
        let mut status = status(RequestPhase::Ready, &[created()]);
        status.session_mode = Some(oz_api::SessionMode::Brokered);
        status.session_counts = Some(oz_api::SessionCounts { total: 3, open: 1 });
        status.sessions = vec![
            serde_json::from_value(serde_json::json!({
                "id": "s1", "user": "alice", "stream": "Exec", "pod": "web-0",
                "startedAt": "2026-01-01T00:00:00Z"
            }))
            .unwrap(),
        ];
        let written = serde_json::to_value(owned_by_oz(&status)).unwrap();
        assert!(written.get("sessions").is_none(), "{written}");
        assert!(written.get("sessionCounts").is_none(), "{written}");
        assert_eq!(written["sessionMode"], "Brokered");
        assert_eq!(written["phase"], "Ready");
    }

    #[test]
    fn becoming_is_entering_a_phase_not_staying_in_it() {
        let pending = status(RequestPhase::Pending, &[]);
        let ready = status(RequestPhase::Ready, &[]);
        assert!(became(&pending, &ready, RequestPhase::Ready));
        assert!(!became(&ready, &ready, RequestPhase::Ready));
        assert!(!became(&ready, &pending, RequestPhase::Ready));
    }
}
