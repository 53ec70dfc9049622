//! Step: verify the approval. A request through a template with `accessConfig.approval` is
//! granted nothing until its AccessApprovals add up (see [`oz_api::approval::tally`]); it ends
//! Denied at the first valid Deny, or when an approval it was granted on is withdrawn, and
//! Expired if no decision comes within `pendingTimeout`. The tally is recomputed from the
//! approval objects (the watch cache) on every pass: the status only reports it.
//!
//! A template without an approval block passes straight through, and nothing about approvals
//! is written to its requests' status.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{Resource, ResourceExt, runtime::controller::Action, runtime::events::EventType};
use oz_api::{
    AccessConfig, AccessRequest, ApprovalConfig, RequestPhase, RequestStatus, Requester,
    approval::{Outcome, TalliedRequest, Tally, tally},
    condition_reason as reason, condition_type as kind,
    conditions::{self, Observation},
    duration::parse_positive_duration,
};

use super::{
    outcome::{Step, Stop, Wake, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::{builders::AccessBuilder, time};

/// When the access window starts: `Some(approvedAt)` for an approved request, `None` for a
/// template without approval (the window starts at creation). Otherwise the request waits,
/// or ends Denied or Expired, and the reconcile stops here.
pub async fn verify_approval<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    config: &AccessConfig,
    requester: &Requester,
) -> Step<Option<Timestamp>> {
    let Some(approval) = &config.approval else {
        forget_approval(&mut pass.status);
        return go_on(None);
    };
    // An unfilled cache would read as approvals withdrawn.
    if r.approvals.wait_until_ready().await.is_err() {
        return stop(Stop::Leave(Action::requeue(
            std::time::Duration::from_secs(1),
        )));
    }
    let name = r.request.name_any();
    let request = TalliedRequest {
        kind: B::Request::KIND.into(),
        name: &name,
        uid: &r.grant.owner.uid,
        requester: &requester.username,
        shared_with: config.shared_with(),
        extension: None,
    };
    let cached = r.approvals.state();
    let in_namespace = cached
        .iter()
        .filter(|a| a.namespace().as_deref() == Some(r.grant.namespace.as_str()))
        .map(|a| &**a);
    let tally = tally(approval, request, in_namespace);
    pass.status.approvals = tally.records.clone();
    pass.status.approval_progress = Some(tally.progress().into());
    match &tally.outcome {
        Outcome::Approved { at, break_glass } => {
            approved(pass, &tally, at, *break_glass);
            go_on(Some(at.0))
        }
        Outcome::Denied { by, comment, .. } => {
            let message = match comment.as_deref().filter(|c| !c.trim().is_empty()) {
                Some(comment) => format!("denied by {by}: {comment}"),
                None => format!("denied by {by}"),
            };
            deny(r, pass, message).await
        }
        Outcome::Pending if was_approved(pass.previous()) => {
            let message = format!(
                "approval withdrawn: {} of {} approvals remain; the grant is revoked",
                tally.records.len(),
                tally.required
            );
            deny(r, pass, message).await
        }
        Outcome::Pending => pending(r, pass, approval, &tally).await,
    }
}

/// Records the approval; a break-glass one is announced with a Warning Event.
fn approved(pass: &mut Pass, tally: &Tally, at: &Time, break_glass: bool) {
    let (why, message) = if break_glass {
        let record = tally.records.last();
        let who = record.map(|r| r.approver.as_str()).unwrap_or_default();
        let comment = record
            .and_then(|r| r.comment.as_deref())
            .unwrap_or_default();
        (
            reason::BREAK_GLASS,
            format!("break-glass self-approval by {who}: {comment}"),
        )
    } else {
        (
            reason::SUCCESS,
            format!("approved by {}", tally.approvers().join(", ")),
        )
    };
    let entering = pass.previous().approved_at.as_ref() != Some(at)
        || !conditions::is_true(&pass.previous().conditions, kind::APPROVED);
    if break_glass && entering {
        pass.note(EventType::Warning, "BreakGlass", message.clone());
    }
    pass.observe(Observation::yes(kind::APPROVED, why, message));
    pass.status.approved_at = Some(at.clone());
}

/// Ends the request Denied, for good, and its grant if it had one.
async fn deny<B: AccessBuilder, T>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    message: String,
) -> Step<T> {
    let why = Observation::no(kind::APPROVED, reason::DENIED, message);
    stop(r.deny(pass, why).await?)
}

/// Waits for decisions, granting nothing meanwhile, until `pendingTimeout` past creation (or
/// the request's `spec.startAt`, when later); then ends the request Expired.
async fn pending<B: AccessBuilder, T>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    approval: &ApprovalConfig,
    tally: &Tally,
) -> Step<T> {
    // Nothing is granted before approval: not even what an earlier grant (a template that had
    // no approval block then) left behind.
    r.revoke().await?;
    pass.status.approved_at = None;
    pass.status.expires_at = None;
    pass.status.access_message = None;
    let created = r
        .request
        .meta()
        .creation_timestamp
        .as_ref()
        .map_or(pass.now, |t| t.0);
    let timeout = approval.pending_timeout();
    // The CRD schema only admits positive durations; an hour stands in for anything else.
    let wait = parse_positive_duration(timeout).unwrap_or(chrono::TimeDelta::hours(1));
    // A request scheduled ahead may be decided until its start: approvers have that long.
    let deadline = time::add(created, wait).max(r.request.start_at().unwrap_or(created));
    if pass.now >= deadline {
        let message = format!("no decision within pendingTimeout {timeout}");
        pass.observe(Observation::no(
            kind::APPROVED,
            reason::TIMEOUT,
            message.clone(),
        ));
        pass.status.phase = Some(RequestPhase::Expired);
        // Where its history retention counts from.
        pass.status.expires_at = Some(Time(deadline));
        pass.note(
            EventType::Normal,
            "Expired",
            format!("{message}; nothing was granted"),
        );
        return stop(Stop::Write(Wake::OnChange));
    }
    pass.observe(Observation::no(
        kind::APPROVED,
        reason::PENDING_APPROVAL,
        waiting_message(approval, tally),
    ));
    pass.status.phase = Some(RequestPhase::PendingApproval);
    stop(Stop::Write(Wake::At(deadline)))
}

/// "1 of 2 approvals; waiting for a member of leads, ops".
fn waiting_message(approval: &ApprovalConfig, tally: &Tally) -> String {
    format!(
        "{} of {} approvals; waiting for a member of {}",
        tally.records.len(),
        tally.required,
        approval.approver_groups.join(", ")
    )
}

/// Whether the request had been approved and granted (as far as its last status says): an
/// approval then withdrawn ends it Denied rather than waiting again. A status edited to look
/// approved can only end its own request.
fn was_approved(previous: &RequestStatus) -> bool {
    previous.approved_at.is_some()
        && conditions::is_true(&previous.conditions, kind::APPROVED)
        && previous.phase != Some(RequestPhase::PendingApproval)
}

/// A template whose approval block was removed: its requests are granted as any other, and
/// their status stops reporting approvals (a stale Approved=False would keep them un-ready).
fn forget_approval(status: &mut RequestStatus) {
    status.conditions.retain(|c| c.type_() != kind::APPROVED);
    status.approved_at = None;
    status.approvals.clear();
    status.approval_progress = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{at, conditions_of};

    fn config() -> ApprovalConfig {
        serde_json::from_value(serde_json::json!({
            "approverGroups": ["leads", "ops"], "required": 2
        }))
        .unwrap()
    }

    #[test]
    fn the_waiting_message_counts_and_names_who_may_decide() {
        let tally = Tally {
            records: Vec::new(),
            required: 2,
            outcome: Outcome::Pending,
        };
        assert_eq!(
            waiting_message(&config(), &tally),
            "0 of 2 approvals; waiting for a member of leads, ops"
        );
    }

    #[test]
    fn only_a_granted_approval_can_be_withdrawn() {
        let mut status = RequestStatus {
            phase: Some(RequestPhase::Ready),
            approved_at: Some(Time(at("2026-01-01T00:00:00Z"))),
            conditions: conditions_of(&[Observation::yes(
                kind::APPROVED,
                reason::SUCCESS,
                "approved by bob",
            )]),
            ..Default::default()
        };
        assert!(was_approved(&status));
        // approvedAt written by hand on a request still waiting: not an approval.
        status.phase = Some(RequestPhase::PendingApproval);
        assert!(!was_approved(&status));
        status.phase = Some(RequestPhase::Pending);
        status.approved_at = None;
        assert!(!was_approved(&status));
    }
}
