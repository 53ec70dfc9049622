//! `ozctl approve REQUEST` and `ozctl deny REQUEST --comment WHY`: one AccessApproval, my
//! decision, then what it did to the request.
//!
//! The AccessApproval is named `<request>-<me>` (so `kubectl get approvals` reads as who
//! decided what), with a generated name when that one is taken. oz's admission webhook records
//! who I am and refuses a decision the template does not allow; its message, which names the
//! fix, is shown as it is.

use std::time::Duration;

use clap::Args;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
    runtime::wait::await_condition,
};
use oz_api::{
    AccessApproval, AccessApprovalSpec, AccessKind, AccessRequest, ApprovalRequestRef, Decision,
    ExecAccessRequest, ExtensionPhase, PodAccessRequest, RequestPhase,
};

use super::{
    error::CliError,
    identity::{Me, whoami},
    kind_arg, names, output,
    requests::{self, RequestView},
    session::Session,
    templates,
    terminal_text::printable_line,
    timefmt,
};

/// `ozctl approve`.
#[derive(Args, Debug)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub decision: DecisionArgs,
    /// Why (shown to the requester and kept in the audit trail)
    #[arg(long, value_name = "TEXT")]
    pub comment: Option<String>,
    /// Approve your own request alone, under the template's breakGlass: it is granted at once
    /// and announced to everyone watching (needs --comment saying why)
    #[arg(long, requires = "comment")]
    pub break_glass: bool,
}

/// `ozctl deny`.
#[derive(Args, Debug)]
pub struct DenyArgs {
    #[command(flatten)]
    pub decision: DecisionArgs,
    /// Why (required: the requester is told)
    #[arg(long, value_name = "TEXT")]
    pub comment: String,
}

/// What both decisions take.
#[derive(Args, Debug)]
pub struct DecisionArgs {
    /// The request to decide on (see the `approvals` command)
    pub request: String,
    /// Which kind, when both an exec and a pod request have this name
    #[arg(long, value_parser = kind_arg::parser())]
    pub kind: Option<AccessKind>,
    /// How long to wait for oz to count the decision before saying where the request stands
    #[arg(long, default_value = "30s", value_parser = timefmt::parse_positive, value_name = "DURATION")]
    pub timeout: Duration,
    /// Decide on this extension of a Ready request (`ozctl extend`) rather than the request;
    /// the default for a Ready request with an extension waiting for approval
    #[arg(long, value_name = "NUMBER", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub extension: Option<u32>,
}

/// The extension a decision on `view` is about: the one named, else the one waiting on a Ready
/// request ([`RequestView::waiting_extension`]), else none (the request).
pub fn extension_decided(view: &RequestView, named: Option<u32>) -> Option<u32> {
    named.or_else(|| view.waiting_extension())
}

/// The longest object name the apiserver takes (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The AccessApproval's name: the request's, `-`, and the approver's user name made into a DNS
/// label (as request names are, [`names::prefix_for`]), cut to fit.
pub fn approval_name(request: &str, username: &str) -> String {
    let mut name = format!("{request}-{}", names::prefix_for(username));
    name.truncate(MAX_NAME);
    while name.ends_with(['-', '.']) {
        name.pop();
    }
    name
}

/// The client-side checks: a comment is not blank, and approving my own request where that is
/// break-glass needs `--break-glass` (and `--break-glass` is only for that).
pub fn check(
    decision: Decision,
    comment: Option<&str>,
    break_glass: bool,
    own_break_glass: Option<bool>,
    hint: &str,
) -> Result<(), String> {
    if let Some(comment) = comment {
        if comment.trim().is_empty() {
            return Err("--comment is empty: say why".into());
        }
        let length = comment.chars().count();
        let max = oz_api::approval::MAX_REASON_LENGTH as usize;
        if length > max {
            return Err(format!(
                "--comment is {length} characters long; oz takes at most {max}"
            ));
        }
    }
    match (decision, own_break_glass, break_glass) {
        (Decision::Approve, Some(true), false) => Err(format!(
            "this is your own request, and approving it is break-glass: it is granted at once and announced; if you mean it, run: {hint} --break-glass --comment WHY"
        )),
        (_, Some(false) | None, true) => Err(
            "--break-glass is only for approving your own request through a template that allows break-glass"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// Runs `ozctl approve`.
pub async fn approve(session: &Session, args: ApproveArgs) -> Result<(), CliError> {
    decide(
        session,
        args.decision,
        Decision::Approve,
        args.comment,
        args.break_glass,
    )
    .await
}

/// Runs `ozctl deny`.
pub async fn deny(session: &Session, args: DenyArgs) -> Result<(), CliError> {
    decide(
        session,
        args.decision,
        Decision::Deny,
        Some(args.comment),
        false,
    )
    .await
}

async fn decide(
    session: &Session,
    args: DecisionArgs,
    decision: Decision,
    comment: Option<String>,
    break_glass: bool,
) -> Result<(), CliError> {
    let view = requests::find(session, &args.request, args.kind).await?;
    let extension = extension_decided(&view, args.extension);
    let me = whoami(session).await?;
    let own_break_glass = own_break_glass(session, &view, &me).await;
    let hint = session.hint(&format!("approve {}", view.name));
    check(
        decision,
        comment.as_deref(),
        break_glass,
        own_break_glass,
        &hint,
    )
    .map_err(CliError::Usage)?;

    let created = create(session, &view, &me, (decision, extension), comment).await?;
    let verb = match decision {
        Decision::Approve if break_glass => "Approved (break-glass)",
        Decision::Approve => "Approved",
        Decision::Deny => "Denied",
    };
    let what = extension
        .map(|n| format!("extension {n} of "))
        .unwrap_or_default();
    output::print(&format!(
        "{verb} {what}{} {} as {} (AccessApproval {}).\n",
        view.kind.request_kind(),
        view.name,
        me.username,
        created
    ))?;

    let counting = (created.as_str(), extension);
    let now = match view.kind {
        AccessKind::Exec => {
            counted::<ExecAccessRequest>(session, &view, counting, args.timeout).await
        }
        AccessKind::Pod => {
            counted::<PodAccessRequest>(session, &view, counting, args.timeout).await
        }
    };
    if let (Some(number), Some(now)) = (extension, &now) {
        return output::print(&extension_standing(now, number));
    }
    output::print(&match now {
        Some(now) => standing(&now),
        None => format!(
            "oz has not counted it yet; follow the request with: {}\n",
            session.hint(&format!("get requests {}", view.name))
        ),
    })
}

/// Whether approving `view` is my break-glass: my own request, through a template that allows
/// break-glass and not self-approval. `None` when the template cannot be read (the webhook
/// decides then).
async fn own_break_glass(session: &Session, view: &RequestView, me: &Me) -> Option<bool> {
    if !view.is_by(&me.username) {
        return Some(false);
    }
    let template = templates::get(session, view.kind, &view.template)
        .await
        .ok()??;
    let approval = template.access.approval?;
    Some(approval.break_glass && !approval.allow_self_approval)
}

/// Creates my AccessApproval on `view` and returns its name: `<request>-<me>`, else (when that
/// name is taken) a generated one.
async fn create(
    session: &Session,
    view: &RequestView,
    me: &Me,
    (decision, extension): (Decision, Option<u32>),
    comment: Option<String>,
) -> Result<String, CliError> {
    let api: Api<AccessApproval> = session.api();
    let decided = match extension {
        Some(number) => format!("{}-extension-{number}", view.name),
        None => view.name.clone(),
    };
    let name = approval_name(&decided, &me.username);
    let approval = |metadata: ObjectMeta| AccessApproval {
        metadata,
        spec: AccessApprovalSpec {
            request_ref: ApprovalRequestRef {
                kind: view.kind.into(),
                name: view.name.clone(),
            },
            decision,
            comment: comment.clone(),
            // Stamped by oz's webhook from who I am; whatever is sent is replaced.
            approver: None,
            request_uid: None,
            break_glass: false,
            extension,
        },
        status: None,
    };
    let named = approval(ObjectMeta {
        name: Some(name.clone()),
        ..Default::default()
    });
    let created = match api.create(&PostParams::default(), &named).await {
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let generated = approval(ObjectMeta {
                generate_name: Some(names::generate_name(&name)),
                ..Default::default()
            });
            api.create(&PostParams::default(), &generated).await
        }
        other => other,
    };
    match created {
        Ok(approval) => Ok(approval.metadata.name.unwrap_or(name)),
        Err(e) => Err(refusal(session, e)),
    }
}

/// A refused decision. oz's webhook says why and what to do, and [`CliError::from_kube`] shows
/// its message as it is (not as an RBAC problem, though the apiserver answers 403 for both).
fn refusal(session: &Session, error: kube::Error) -> CliError {
    match error {
        kube::Error::Api(status) if status.code == 404 => CliError::NotInstalled {
            kind: "AccessApproval",
        },
        other => session.error(other),
    }
}

/// Waits up to `timeout` until oz has counted approval `approval` on `view` (it is among the
/// request's `status.approvals`, or the extension's it decides) or what it decides no longer
/// waits (decided, expired, or gone), and returns the request as it then is; `None` if oz has
/// not done either in time.
async fn counted<R: AccessRequest>(
    session: &Session,
    view: &RequestView,
    (approval, extension): (&str, Option<u32>),
    timeout: Duration,
) -> Option<RequestView> {
    let api: Api<R> = session.api();
    let condition = |request: Option<&R>| {
        request.is_none_or(|request| {
            let status = request.request_status();
            let phase = status.and_then(|s| s.phase);
            if let Some(number) = extension {
                let ask = status.and_then(|s| s.extensions.get(number as usize - 1));
                let listed = ask.is_some_and(|a| a.approvals.iter().any(|a| a.name == approval));
                let waiting = ask.is_none_or(|a| a.phase == ExtensionPhase::PendingApproval);
                return listed || !waiting || phase != Some(RequestPhase::Ready);
            }
            let listed = status.is_some_and(|s| s.approvals.iter().any(|a| a.name == approval));
            let waiting = phase == Some(RequestPhase::PendingApproval);
            listed || (!waiting && phase.is_some())
        })
    };
    let found = tokio::time::timeout(timeout, await_condition(api, &view.name, condition))
        .await
        .ok()?
        .ok()?;
    Some(found.map_or_else(
        || RequestView {
            deleting: true,
            ..view.clone()
        },
        |r| RequestView::of(&r),
    ))
}

/// Where extension `number` of a request stands after a decision, in a line.
pub fn extension_standing(view: &RequestView, number: u32) -> String {
    let ask = view.status.extensions.get(number as usize - 1);
    let until = view.expires_at().map(timefmt::local).unwrap_or_default();
    let line = match ask.map(|a| a.phase) {
        _ if view.phase() != Some(RequestPhase::Ready) => format!(
            "{} {} is {}: its grant has ended.",
            view.kind.request_kind(),
            view.name,
            view.phase_word()
        ),
        Some(ExtensionPhase::Granted) => format!(
            "extension {number} of {} granted: access now ends at {until}.",
            view.name
        ),
        Some(ExtensionPhase::Denied) => format!(
            "extension {number} of {} denied: access still ends at {until}.",
            view.name
        ),
        _ => format!(
            "extension {number} of {} still waits for approval; access ends at {until} unless \
             it is approved first.",
            view.name
        ),
    };
    format!("{}\n", printable_line(&line))
}

/// Where a request stands after a decision, in a line.
pub fn standing(view: &RequestView) -> String {
    let progress = view
        .status
        .approval_progress
        .as_deref()
        .map(|p| format!("{p} approvals, "))
        .unwrap_or_default();
    let next = match view.phase() {
        _ if view.deleting => "it is gone (revoked?)".to_string(),
        Some(RequestPhase::PendingApproval) => "still waiting for approval".into(),
        Some(RequestPhase::Ready) => format!("{} can use it now", view.requester_name()),
        Some(RequestPhase::Pending) => "oz is granting it".into(),
        Some(RequestPhase::Scheduled) => format!(
            "it starts at {}",
            view.starts_at().map(timefmt::local).unwrap_or_default()
        ),
        Some(RequestPhase::Denied) => format!("denied: {}", view.problem()),
        Some(RequestPhase::Expired) => "expired".into(),
        Some(RequestPhase::Revoked) => "revoked".into(),
        Some(RequestPhase::Failed) => format!("failed: {}", view.problem()),
        None => "oz has not looked at it yet".into(),
    };
    let line = format!(
        "{} {}: {progress}phase {}; {next}.",
        view.kind.request_kind(),
        view.name,
        view.phase_word()
    );
    // `next` may quote a condition's message.
    format!("{}\n", printable_line(&line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_names_are_the_request_and_the_approver() {
        assert_eq!(approval_name("alice-x7k2p", "dave"), "alice-x7k2p-dave");
        assert_eq!(
            approval_name("alice-x7k2p", "Dave.Lead@example.com"),
            "alice-x7k2p-dave-lead"
        );
        assert_eq!(
            approval_name("alice-x7k2p", "system:serviceaccount:ops:bot"),
            "alice-x7k2p-system-serviceaccount-ops-bot"
        );
        assert_eq!(approval_name("r", "日本"), "r-request");
        let long = approval_name(&format!("{}-a", "r".repeat(250)), "dave");
        assert_eq!(long.len(), 252, "{long}");
        assert!(!long.ends_with('-'));
    }

    #[test]
    fn break_glass_is_said_on_purpose_and_only_where_it_applies() {
        let hint = "ozctl approve dave-b2c3d -n team";
        let ok = |d, c, b, own| check(d, c, b, own, hint);
        assert!(ok(Decision::Approve, None, false, Some(false)).is_ok());
        assert!(ok(Decision::Approve, Some("go"), true, Some(true)).is_ok());
        let forgot = ok(Decision::Approve, Some("go"), false, Some(true)).unwrap_err();
        assert!(
            forgot.ends_with("run: ozctl approve dave-b2c3d -n team --break-glass --comment WHY"),
            "{forgot}"
        );
        // A deny of my own request is no break-glass.
        assert!(ok(Decision::Deny, Some("no"), false, Some(true)).is_ok());
        assert!(ok(Decision::Approve, Some("go"), true, Some(false)).is_err());
        assert!(ok(Decision::Approve, Some("go"), true, None).is_err());
        // The template could not be read: the webhook decides.
        assert!(ok(Decision::Approve, None, false, None).is_ok());
        assert_eq!(
            ok(Decision::Deny, Some(" "), false, Some(false)).unwrap_err(),
            "--comment is empty: say why"
        );
    }

    #[test]
    fn standing_says_what_the_decision_did() {
        let mut request = crate::fixtures::exec_request(Some(oz_api::Requester {
            username: "alice".into(),
            uid: None,
            groups: vec![],
        }));
        request.status = Some(oz_api::RequestStatus {
            phase: Some(RequestPhase::Ready),
            approval_progress: Some("1/1".into()),
            ..Default::default()
        });
        assert_eq!(
            standing(&RequestView::of(&request)),
            "ExecAccessRequest alice-x7k2p: 1/1 approvals, phase Ready; alice can use it now.\n"
        );
        request.status.as_mut().unwrap().phase = Some(RequestPhase::PendingApproval);
        request.status.as_mut().unwrap().approval_progress = Some("1/2".into());
        assert_eq!(
            standing(&RequestView::of(&request)),
            "ExecAccessRequest alice-x7k2p: 1/2 approvals, phase PendingApproval; still waiting for approval.\n"
        );
    }
}
