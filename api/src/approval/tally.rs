//! The tally: what a request's AccessApprovals decide, given its template's approval config.
//!
//! It is recomputed from the approval objects on every reconcile, never from the request's
//! status, so whoever can write the status cannot approve a request with it, and deleting an
//! approval withdraws it. oz's webhook refuses the decisions that would not count; the tally
//! re-checks them all, because a webhook can be bypassed or absent and a template can change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{AccessApproval, ApprovalConfig, ApprovalRecord, ApprovedKind, Decision};

/// The request whose decisions are counted.
#[derive(Clone, Copy, Debug)]
pub struct TalliedRequest<'a> {
    /// Its kind.
    pub kind: ApprovedKind,
    /// Its name (in the approvals' namespace).
    pub name: &'a str,
    /// Its uid: a decision stamped with another uid was made on an earlier request of the
    /// same name, and never carries over.
    pub uid: &'a str,
    /// Its requester's user name.
    pub requester: &'a str,
    /// The groups its grant binds besides the requester: the template's allowedGroups when it
    /// grants to AllowedGroups, else none. A member who approves it approves access of their
    /// own, which counts only where self-approval is allowed.
    pub shared_with: &'a [String],
    /// The extension ask whose decisions are counted (`spec.extension`), or `None` for the
    /// request's own: a decision on one never counts for another.
    pub extension: Option<u32>,
}

/// What the decisions on a request add up to.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    /// The approvals counted, oldest first: each approver's first valid Approve, up to the one
    /// that approved the request.
    pub records: Vec<ApprovalRecord>,
    /// How many distinct approvers the template requires.
    pub required: u32,
    /// Where the request stands.
    pub outcome: Outcome,
}

/// Where a request stands after its decisions.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Not enough approvals yet, and no Deny.
    Pending,
    /// Approved: `at` is the creationTimestamp of the approval that completed it, where the
    /// access window starts.
    Approved {
        at: Time,
        /// Approved by the requester alone, under the template's `breakGlass`.
        break_glass: bool,
    },
    /// Denied by `by`, with their comment, at `at`.
    Denied {
        by: String,
        comment: Option<String>,
        at: Time,
    },
}

impl Tally {
    /// `approvalProgress`: approvals counted of those required, as `1/2`.
    pub fn progress(&self) -> String {
        format!("{}/{}", self.records.len(), self.required)
    }

    /// The user names of the approvers counted, oldest first.
    pub fn approvers(&self) -> Vec<String> {
        self.records.iter().map(|r| r.approver.clone()).collect()
    }
}

/// One considered, valid decision, as the tally orders it.
struct Valid<'a> {
    approval: &'a AccessApproval,
    approver: &'a str,
    at: &'a Time,
    break_glass: bool,
}

/// Tallies `approvals` (any in the request's namespace; the others are ignored) for `request`
/// under `config`:
///
/// 1. only decisions naming this request (kind, name and stamped uid), with a stamped
///    approver, and not being deleted, are considered;
/// 2. only valid ones count: the approver is in `approverGroups`, and is not the requester
///    (nor, for an Approve, a member of the groups the grant also binds), unless the template
///    allows self-approval or it is the requester's break-glass Approve (stamped so, the
///    template still allows it, with a comment);
/// 3. in (creationTimestamp, name) order, each approver's first Approve counts once;
/// 4. approved when `required` distinct approvers have approved, or at the first break-glass
///    Approve;
/// 5. denied by a Deny made no later than that (a tie goes to the Deny), or at any time while
///    not approved.
pub fn tally<'a>(
    config: &ApprovalConfig,
    request: TalliedRequest<'_>,
    approvals: impl IntoIterator<Item = &'a AccessApproval>,
) -> Tally {
    let mut valid: Vec<Valid<'a>> = approvals
        .into_iter()
        .filter_map(|approval| considered(approval, request))
        .filter_map(|mut v| is_valid(config, request, &mut v).then_some(v))
        .collect();
    valid.sort_by(|a, b| {
        (a.at.0, a.approval.metadata.name.as_deref())
            .cmp(&(b.at.0, b.approval.metadata.name.as_deref()))
    });

    let mut records: Vec<ApprovalRecord> = Vec::new();
    let mut approved: Option<(Time, bool)> = None;
    for v in valid
        .iter()
        .filter(|v| v.approval.spec.decision == Decision::Approve)
    {
        if records.iter().any(|r| r.approver == v.approver) {
            continue;
        }
        records.push(ApprovalRecord {
            approver: v.approver.to_string(),
            at: v.at.clone(),
            comment: v.approval.spec.comment.clone(),
            name: v.approval.metadata.name.clone().unwrap_or_default(),
            break_glass: v.break_glass,
        });
        if v.break_glass || records.len() >= config.required as usize {
            approved = Some((v.at.clone(), v.break_glass));
            break;
        }
    }

    let deny = valid.iter().find(|v| {
        v.approval.spec.decision == Decision::Deny
            && approved.as_ref().is_none_or(|(at, _)| v.at.0 <= at.0)
    });
    let outcome = match (deny, approved) {
        (Some(deny), _) => Outcome::Denied {
            by: deny.approver.to_string(),
            comment: deny.approval.spec.comment.clone(),
            at: deny.at.clone(),
        },
        (None, Some((at, break_glass))) => Outcome::Approved { at, break_glass },
        (None, None) => Outcome::Pending,
    };
    Tally {
        records,
        required: config.required,
        outcome,
    }
}

/// The decision, if it is one on `request` that the tally considers.
fn considered<'a>(approval: &'a AccessApproval, request: TalliedRequest<'_>) -> Option<Valid<'a>> {
    let spec = &approval.spec;
    let names_it = spec.request_ref.kind == request.kind && spec.request_ref.name == request.name;
    let same_uid = spec.request_uid.as_deref() == Some(request.uid);
    let same_ask = spec.extension == request.extension;
    if !names_it || !same_uid || !same_ask || approval.metadata.deletion_timestamp.is_some() {
        return None;
    }
    Some(Valid {
        approval,
        approver: spec.approver.as_ref()?.username.as_str(),
        // Always set by the apiserver.
        at: approval.metadata.creation_timestamp.as_ref()?,
        break_glass: false,
    })
}

/// Whether a considered decision counts, marking a valid break-glass Approve as such. A
/// break-glass Approve is the requester's own, made when no approver is around: it counts
/// whether or not the requester is an approver (the requester step has already checked that
/// they may ask at all).
fn is_valid(config: &ApprovalConfig, request: TalliedRequest<'_>, v: &mut Valid<'_>) -> bool {
    let spec = &v.approval.spec;
    let groups = spec
        .approver
        .as_ref()
        .map(|a| a.groups.as_slice())
        .unwrap_or_default();
    let approver = config.approving_group(groups).is_some();
    if v.approver != request.requester {
        let beneficiary = groups.iter().any(|g| request.shared_with.contains(g));
        let approves_own_access = beneficiary && spec.decision == Decision::Approve;
        return approver && (!approves_own_access || config.allow_self_approval);
    }
    if config.allow_self_approval {
        return approver;
    }
    v.break_glass = spec.decision == Decision::Approve
        && spec.break_glass
        && config.break_glass
        && spec.has_comment();
    v.break_glass
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::{AccessApprovalSpec, ApprovalRequestRef, Requester};

    const UID: &str = "uid-1";

    fn request() -> TalliedRequest<'static> {
        TalliedRequest {
            kind: ApprovedKind::ExecAccessRequest,
            name: "r",
            uid: UID,
            requester: "alice",
            shared_with: &[],
            extension: None,
        }
    }

    fn config(required: u32) -> ApprovalConfig {
        ApprovalConfig {
            approver_groups: vec!["leads".into(), "ops".into()],
            required,
            allow_self_approval: false,
            pending_timeout: None,
            reason_required: false,
            break_glass: false,
        }
    }

    /// A decision by `who` (in leads) made `second` seconds past the hour, stamped as the
    /// webhook stamps it.
    fn decision(name: &str, who: &str, decision: Decision, second: u32) -> AccessApproval {
        let at = format!("2026-01-01T00:00:{second:02}Z").parse().unwrap();
        AccessApproval {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                creation_timestamp: Some(Time(at)),
                ..Default::default()
            },
            spec: AccessApprovalSpec {
                request_ref: ApprovalRequestRef {
                    kind: ApprovedKind::ExecAccessRequest,
                    name: "r".into(),
                },
                decision,
                comment: Some(format!("{name} says so")),
                approver: Some(Requester {
                    username: who.into(),
                    uid: None,
                    groups: vec!["system:authenticated".into(), "leads".into()],
                }),
                request_uid: Some(UID.into()),
                break_glass: false,
                extension: None,
            },
            status: None,
        }
    }

    fn approve(name: &str, who: &str, second: u32) -> AccessApproval {
        decision(name, who, Decision::Approve, second)
    }

    fn deny(name: &str, who: &str, second: u32) -> AccessApproval {
        decision(name, who, Decision::Deny, second)
    }

    fn at(second: u32) -> Time {
        Time(format!("2026-01-01T00:00:{second:02}Z").parse().unwrap())
    }

    fn outcome(config: &ApprovalConfig, approvals: &[AccessApproval]) -> Outcome {
        tally(config, request(), approvals).outcome
    }

    fn approved_at(second: u32) -> Outcome {
        Outcome::Approved {
            at: at(second),
            break_glass: false,
        }
    }

    #[test]
    fn a_decision_counts_only_for_what_it_names_the_request_or_one_extension() {
        let on_request = approve("a1", "bob", 1);
        let mut on_first = approve("a2", "carol", 2);
        on_first.spec.extension = Some(1);
        let mut denies_second = deny("d1", "dave", 3);
        denies_second.spec.extension = Some(2);
        let all = [on_request, on_first, denies_second];
        assert_eq!(outcome(&config(1), &all), approved_at(1));
        let asked = |number| TalliedRequest {
            extension: Some(number),
            ..request()
        };
        let first = tally(&config(1), asked(1), &all);
        assert_eq!(first.outcome, approved_at(2));
        assert_eq!(first.approvers(), ["carol"]);
        assert!(matches!(
            tally(&config(1), asked(2), &all).outcome,
            Outcome::Denied { .. }
        ));
        assert_eq!(tally(&config(1), asked(3), &all).outcome, Outcome::Pending);
    }

    #[test]
    fn approved_once_the_required_distinct_approvers_have_approved_at_the_last_one() {
        let approvals = [approve("a1", "bob", 1), approve("a2", "carol", 5)];
        let pending = tally(&config(2), request(), &approvals[..1]);
        assert_eq!(pending.outcome, Outcome::Pending);
        assert_eq!(pending.progress(), "1/2");
        let done = tally(&config(2), request(), &approvals);
        assert_eq!(done.outcome, approved_at(5));
        assert_eq!(done.progress(), "2/2");
        assert_eq!(done.approvers(), ["bob", "carol"]);
        assert_eq!(done.records[1].name, "a2");
        assert_eq!(done.records[1].comment.as_deref(), Some("a2 says so"));
    }

    #[test]
    fn an_approver_counts_once_however_many_approvals_they_make() {
        let approvals = [approve("a1", "bob", 1), approve("a2", "bob", 2)];
        let t = tally(&config(2), request(), &approvals);
        assert_eq!(t.outcome, Outcome::Pending);
        assert_eq!(t.approvers(), ["bob"]);
        // Their first counts: the record is the oldest.
        assert_eq!(t.records[0].name, "a1");
    }

    #[test]
    fn decisions_are_ordered_by_creation_then_name_not_by_listing_order() {
        let approvals = [
            approve("c", "dave", 9),
            approve("b", "carol", 3),
            approve("a", "bob", 3),
        ];
        let t = tally(&config(2), request(), &approvals);
        assert_eq!(t.outcome, approved_at(3));
        assert_eq!(t.approvers(), ["bob", "carol"]);
        // Only those up to the approving one are recorded.
        assert_eq!(t.records.len(), 2);
    }

    #[test]
    fn a_deny_before_or_at_approval_wins_and_one_after_it_is_ignored() {
        // Before any approval.
        let denied = outcome(&config(1), &[deny("d", "carol", 1), approve("a", "bob", 2)]);
        assert_eq!(
            denied,
            Outcome::Denied {
                by: "carol".into(),
                comment: Some("d says so".into()),
                at: at(1)
            }
        );
        // A tie: Deny wins.
        let tie = outcome(&config(1), &[approve("a", "bob", 2), deny("d", "carol", 2)]);
        assert!(matches!(tie, Outcome::Denied { .. }), "{tie:?}");
        // While still pending (after one approval of two).
        let pending = outcome(&config(2), &[approve("a", "bob", 1), deny("d", "carol", 2)]);
        assert!(matches!(pending, Outcome::Denied { .. }), "{pending:?}");
        // After approval: ignored.
        let late = outcome(&config(1), &[approve("a", "bob", 2), deny("d", "carol", 3)]);
        assert_eq!(late, approved_at(2));
    }

    #[test]
    fn a_decision_on_an_earlier_request_of_the_same_name_is_ignored() {
        let mut stale = approve("a", "bob", 1);
        stale.spec.request_uid = Some("uid-0".into());
        assert_eq!(outcome(&config(1), &[stale.clone()]), Outcome::Pending);
        // Nor one the webhook never stamped.
        stale.spec.request_uid = None;
        assert_eq!(outcome(&config(1), &[stale]), Outcome::Pending);
        let mut unstamped = approve("a", "bob", 1);
        unstamped.spec.approver = None;
        assert_eq!(outcome(&config(1), &[unstamped]), Outcome::Pending);
    }

    #[test]
    fn a_decision_on_another_request_is_ignored() {
        let mut other = approve("a", "bob", 1);
        other.spec.request_ref.name = "other".into();
        let mut pod = approve("b", "carol", 1);
        pod.spec.request_ref.kind = ApprovedKind::PodAccessRequest;
        assert_eq!(outcome(&config(1), &[other, pod]), Outcome::Pending);
    }

    #[test]
    fn an_approver_the_grant_also_binds_approves_their_own_access_only_under_self_approval() {
        // alice's request under a template that grants to its allowedGroups, devs: dave, a
        // lead who is also in devs, would be granted by the approval he gives.
        let devs = ["devs".to_string()];
        let shared = TalliedRequest {
            shared_with: &devs,
            ..request()
        };
        let mut dave = approve("dave-ok", "dave", 1);
        dave.spec.approver.as_mut().unwrap().groups = vec!["leads".into(), "devs".into()];
        let approvals = [dave.clone()];
        let tally_of = |config: &ApprovalConfig, request| tally(config, request, &approvals);
        assert_eq!(tally_of(&config(1), shared).outcome, Outcome::Pending);
        assert_eq!(tally_of(&config(1), shared).records, []);
        // Where the grant is the requester's alone, or self-approval is allowed, he counts.
        assert!(matches!(
            tally_of(&config(1), request()).outcome,
            Outcome::Approved { .. }
        ));
        let mut allowing = config(1);
        allowing.allow_self_approval = true;
        assert!(matches!(
            tally_of(&allowing, shared).outcome,
            Outcome::Approved { .. }
        ));
        // His Deny still counts: refusing access grants him nothing.
        let mut dave_says_no = deny("dave-no", "dave", 1);
        dave_says_no.spec.approver = dave.spec.approver.clone();
        assert!(matches!(
            tally(&config(1), shared, [&dave_says_no]).outcome,
            Outcome::Denied { .. }
        ));
    }

    #[test]
    fn an_approver_outside_approver_groups_is_ignored() {
        let mut outsider = approve("a", "bob", 1);
        outsider.spec.approver.as_mut().unwrap().groups = vec!["devs".into()];
        let mut denier = deny("d", "eve", 1);
        denier.spec.approver.as_mut().unwrap().groups = vec!["devs".into()];
        assert_eq!(outcome(&config(1), &[outsider, denier]), Outcome::Pending);
        // The group may be any of approverGroups.
        let mut ops = approve("a", "bob", 1);
        ops.spec.approver.as_mut().unwrap().groups = vec!["ops".into()];
        assert_eq!(outcome(&config(1), &[ops]), approved_at(1));
    }

    #[test]
    fn the_requester_approves_their_own_request_only_when_the_template_allows_it() {
        let own = [approve("a", "alice", 1)];
        assert_eq!(outcome(&config(1), &own), Outcome::Pending);
        let mut allowing = config(2);
        allowing.allow_self_approval = true;
        let t = tally(&allowing, request(), &own);
        assert_eq!(
            (&t.outcome, t.progress().as_str()),
            (&Outcome::Pending, "1/2")
        );
        // Not break-glass, even if stamped so: it counts as one of `required`.
        let mut stamped = approve("a", "alice", 1);
        stamped.spec.break_glass = true;
        allowing.break_glass = true;
        assert_eq!(outcome(&allowing, &[stamped]), Outcome::Pending);
    }

    #[test]
    fn a_break_glass_approval_grants_at_once_with_a_comment_while_the_template_allows_it() {
        let mut glass = approve("g", "alice", 4);
        glass.spec.break_glass = true;
        let mut config = config(3);
        config.break_glass = true;
        let t = tally(&config, request(), [&approve("a", "bob", 1), &glass]);
        assert_eq!(
            t.outcome,
            Outcome::Approved {
                at: at(4),
                break_glass: true
            }
        );
        assert!(t.records[1].break_glass && !t.records[0].break_glass);
        // The requester need not be an approver: break-glass is for when none is around.
        let mut outsider = glass.clone();
        outsider.spec.approver.as_mut().unwrap().groups = vec!["devs".into()];
        assert_eq!(
            outcome(&config, &[outsider]),
            Outcome::Approved {
                at: at(4),
                break_glass: true
            }
        );
        // Without a comment, or once the template no longer allows it: ignored.
        let mut silent = glass.clone();
        silent.spec.comment = Some("  ".into());
        assert_eq!(outcome(&config, &[silent]), Outcome::Pending);
        config.break_glass = false;
        assert_eq!(outcome(&config, &[glass.clone()]), Outcome::Pending);
        // Not stamped break-glass by the webhook: a self-approval, ignored.
        config.break_glass = true;
        glass.spec.break_glass = false;
        assert_eq!(outcome(&config, &[glass]), Outcome::Pending);
    }

    #[test]
    fn the_requester_cannot_deny_their_own_request() {
        assert_eq!(
            outcome(&config(1), &[deny("d", "alice", 1)]),
            Outcome::Pending
        );
    }

    #[test]
    fn a_withdrawn_approval_no_longer_counts() {
        let mut withdrawn = approve("b", "carol", 2);
        withdrawn.metadata.deletion_timestamp = Some(at(3));
        let approvals = [approve("a", "bob", 1), withdrawn];
        assert_eq!(outcome(&config(2), &approvals), Outcome::Pending);
        // Deleted outright, it is simply absent: the tally is of what exists.
        assert_eq!(outcome(&config(2), &approvals[..1]), Outcome::Pending);
        assert_eq!(
            outcome(
                &config(2),
                &[approve("a", "bob", 1), approve("b", "carol", 2)]
            ),
            approved_at(2)
        );
    }
}
