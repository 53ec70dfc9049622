//! The status pass of one reconcile: what a request's status was, what it becomes, and what
//! users are told about the change. Steps record their observations on a [`Pass`];
//! [`Pass::finish`] writes the status once and publishes the Events. This is the bottom layer of
//! the request reconciler: it calls no step, no expiry and no timer.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp};
use kube::{
    Api, ResourceExt,
    runtime::{
        controller::Action,
        events::{Event, EventType},
    },
};
use oz_api::{
    AccessRequest, RequestPhase, RequestStatus, condition_type as kind,
    conditions::{self, Observation},
};

use crate::{Context, Result, apply::apply_status, time};

/// When a request is looked at again, if no watch wakes it first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Only when it, its template or its access resources change.
    OnChange,
    /// At this instant. The delay is computed as the reconcile returns, after its own API calls,
    /// so that however long they take they cannot push a grant's end past `expiresAt`.
    At(Timestamp),
}

impl Wake {
    pub fn action(self) -> Action {
        match self {
            Wake::OnChange => Action::await_change(),
            Wake::At(at) => Action::requeue(time::until(Timestamp::now(), at)),
        }
    }
}

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
        }
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
        if self.status == self.previous {
            return Ok(wake.action());
        }
        let api: Api<R> =
            Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
        match apply_status(&api, &request.name_any(), &self.status).await {
            // Deleted meanwhile (by a user, or with its template): nothing left to report on.
            Err(crate::Error::Kube(kube::Error::Api(status))) if status.code == 404 => {
                return Ok(Action::await_change());
            }
            other => other?,
        };

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
            if let Err(e) = ctx.recorder.publish(&event, &request.object_ref(&())).await {
                tracing::warn!(error = %e, "could not publish an event");
            }
        }
        Ok(wake.action())
    }
}

/// Whether the request has just entered `phase`.
pub fn became(previous: &RequestStatus, status: &RequestStatus, phase: RequestPhase) -> bool {
    status.phase == Some(phase) && previous.phase != Some(phase)
}

/// The Events a status change from `previous` to `status` publishes: the steps' own `notes`,
/// then `Created` when the access resources first exist, `Ready` when the request becomes
/// Ready, and otherwise, for a Failed request with nothing else to say, `Failed` once per
/// distinct problem rather than on every retry.
pub fn events_for(previous: &RequestStatus, status: &RequestStatus, notes: Vec<Note>) -> Vec<Note> {
    let mut events = notes;
    fn created(s: &RequestStatus) -> Option<&Condition> {
        s.conditions
            .iter()
            .find(|c| c.type_ == kind::ACCESS_RESOURCES_CREATED && c.status == "True")
    }
    if let Some(condition) = created(status)
        && created(previous).is_none()
    {
        events.push((EventType::Normal, "Created", condition.message.clone()));
    }
    if became(previous, status, RequestPhase::Ready) {
        let pod = status.pod_name.clone().unwrap_or_default();
        let until = status
            .expires_at
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default();
        events.push((
            EventType::Normal,
            "Ready",
            format!("access to pod {pod} granted until {until}"),
        ));
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
    fn becoming_ready_announces_the_resources_and_the_grant_once() {
        let before = status(RequestPhase::Pending, &[]);
        let mut ready = status(RequestPhase::Ready, &[created()]);
        ready.pod_name = Some("web-0".into());
        ready.expires_at = Some(Time(at("2026-01-01T01:00:00Z")));
        let events = events_for(&before, &ready, Vec::new());
        assert_eq!(reasons(&events), ["Created", "Ready"]);
        assert_eq!(events[0].2, "Success. Role r-1, RoleBinding r-1 created");
        assert_eq!(
            events[1].2,
            "access to pod web-0 granted until 2026-01-01T01:00:00Z"
        );
        assert!(events_for(&ready, &ready, Vec::new()).is_empty());
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
    fn becoming_is_entering_a_phase_not_staying_in_it() {
        let pending = status(RequestPhase::Pending, &[]);
        let ready = status(RequestPhase::Ready, &[]);
        assert!(became(&pending, &ready, RequestPhase::Ready));
        assert!(!became(&ready, &ready, RequestPhase::Ready));
        assert!(!became(&ready, &pending, RequestPhase::Ready));
    }
}
