//! `ozctl create exec|pod TEMPLATE`: check, create, wait, tell.
//!
//! 1. Who am I (SelfSubjectReview), does the template exist, am I in its allowedGroups, and
//!    does `--fleet-cluster` name a spoke exactly when the template is a fleet hub's? If not,
//!    say so and create nothing.
//! 2. Create the request, named `<user>-xxxxx`.
//! 3. Wait, with the current condition on stderr, until oz has decided (Ready, Denied, Failed,
//!    Expired) or the time is up.
//! 4. Print the access instructions and when access ends, or the object with `-o json|yaml`.

use std::time::Duration;

use clap::{Args, Subcommand, builder::NonEmptyStringValueParser};
use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::{SignedDuration, Timestamp},
};
use kube::api::{ObjectMeta, PostParams};
use oz_api::{
    AccessKind, AccessRequest, ApprovalConfig, ExecAccessRequest, ExecAccessRequestSpec,
    PodAccessRequest, PodAccessRequestSpec, RequestPhase,
    approval::{MAX_REASON_LENGTH, MAX_TICKET_LENGTH},
    duration::{DurationOutcome, decide_access_duration, format_go_duration, parse_go_duration},
};

use super::{
    error::CliError,
    identity::whoami,
    names,
    output::{self, ObjectFormat},
    progress::Progress,
    requests::RequestView,
    session::{Hints, Session},
    templates::{self, TemplateView},
    terminal_text::{printable, printable_line},
    timefmt, wait,
};

/// `ozctl create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    #[command(subcommand)]
    pub kind: CreateKind,
}

/// The kind of access to ask for. Oz's names for them work too.
#[derive(Subcommand, Debug)]
pub enum CreateKind {
    /// Ask to `kubectl exec` into a live pod of a template's workload
    #[command(aliases = ["ExecAccessRequest", "execaccessrequest", "execaccessrequests", "exec-access-request"])]
    Exec(CreateExecArgs),
    /// Ask for a private copy of a template's pod to debug in
    #[command(aliases = ["PodAccessRequest", "podaccessrequest", "podaccessrequests", "pod-access-request"])]
    Pod(CreateRequestArgs),
}

/// `ozctl create exec`: the common flags and a target pod.
#[derive(Args, Debug)]
pub struct CreateExecArgs {
    /// The pod of the workload to exec into [default: oz picks a running one]
    #[arg(short = 'p', long, value_name = "POD")]
    pub target_pod: Option<String>,
    #[command(flatten)]
    pub request: CreateRequestArgs,
}

/// What both kinds of request take.
#[derive(Args, Debug)]
pub struct CreateRequestArgs {
    /// The template to request access through (see the `get templates` command)
    pub template: String,
    /// How long access should last, such as 30m or 2h [default: the template's defaultDuration;
    /// longer than its maxDuration is cut to it]
    #[arg(short = 'D', long)]
    pub duration: Option<String>,
    /// When access should start, for planned work: a duration from now (such as 2h) or a time
    /// (RFC 3339, such as 2026-12-01T22:00:00Z), at most the template's maxLeadTime ahead
    /// [default: at once]
    #[arg(long, value_name = "WHEN", value_parser = start_parser)]
    pub start: Option<Timestamp>,
    #[command(flatten)]
    pub wait: WaitArgs,
    /// Print the request as json or yaml (only the object on stdout) instead of the access
    /// instructions
    #[arg(short = 'o', long, value_enum, value_name = "FORMAT")]
    pub output: Option<ObjectFormat>,
    /// The request name's prefix [default: your user name]
    #[arg(short = 'N', long, value_name = "PREFIX")]
    pub request_name: Option<String>,
    /// Why you need access, for approvers and the audit trail (required by templates whose
    /// approval says reasonRequired)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// The ticket or incident this access is for
    #[arg(long, value_name = "ID")]
    pub ticket: Option<String>,
    /// On a fleet hub: the spoke cluster to be granted access on, one of those the template
    /// covers (see `get templates`). Required by a fleet template, refused by any other
    #[arg(long, value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
    pub fleet_cluster: Option<String>,
}

/// Whether and how long to wait.
#[derive(Args, Debug, Clone)]
pub struct WaitArgs {
    /// Wait until the request is ready, denied or failed (the default)
    #[arg(long, overrides_with = "no_wait")]
    pub wait: bool,
    /// Return as soon as the request is created
    #[arg(long, overrides_with = "wait")]
    pub no_wait: bool,
    /// How long to wait, such as 90s or 5m
    #[arg(long, default_value = "2m", value_parser = timefmt::parse_positive, value_name = "DURATION")]
    pub timeout: Duration,
}

impl WaitArgs {
    /// Whether to wait: yes unless `--no-wait` came last.
    pub fn enabled(&self) -> bool {
        !self.no_wait
    }
}

/// Runs `ozctl create`.
pub async fn run(session: &Session, args: CreateArgs) -> Result<(), CliError> {
    let (kind, request, target_pod) = match args.kind {
        CreateKind::Exec(exec) => (AccessKind::Exec, exec.request, exec.target_pod),
        CreateKind::Pod(pod) => (AccessKind::Pod, pod, None),
    };
    if let Some(duration) = &request.duration {
        check_duration(kind, duration).map_err(CliError::Usage)?;
    }
    if let Some(prefix) = &request.request_name {
        names::check_prefix(prefix).map_err(CliError::Usage)?;
    }
    check_reason_and_ticket(request.reason.as_deref(), request.ticket.as_deref())
        .map_err(CliError::Usage)?;

    // 1. Who am I, and may I use the template?
    let me = whoami(session).await?;
    let template = templates::get(session, kind, &request.template)
        .await?
        .ok_or_else(|| CliError::NoTemplate {
            kind: kind.template_kind(),
            name: request.template.clone(),
            namespace: session.namespace.clone(),
            hint: session.hint("get templates"),
        })?;
    if !template.access.admits(&me.groups) {
        return Err(CliError::NotAllowed {
            user: me.username,
            groups: template.access.allowed_groups.join(", "),
        });
    }
    let fleet_warning = check_fleet_cluster(&template, request.fleet_cluster.as_deref())
        .map_err(CliError::Usage)?;
    if let Some(approval) = &template.access.approval
        && approval.reason_required
        && request.reason.is_none()
    {
        return Err(CliError::Usage(format!(
            "{} {} requires a reason: add --reason TEXT saying why you need access",
            kind.template_kind(),
            template.name
        )));
    }
    if let Some(why) = &template.not_ready_because {
        eprintln!(
            "warning: {} {} is not ready ({why}); the request may not be granted",
            kind.template_kind(),
            template.name
        );
    }
    if let Some(warning) = fleet_warning {
        // The hub's message about the spoke, and the cluster as typed: shown, never run.
        eprintln!("warning: {}", printable_line(&warning));
    }

    // 2. Create it.
    let prefix = request
        .request_name
        .clone()
        .unwrap_or_else(|| names::prefix_for(&me.username));
    let metadata = ObjectMeta {
        generate_name: Some(names::generate_name(&prefix)),
        namespace: Some(session.namespace.clone()),
        ..Default::default()
    };
    let created = match kind {
        AccessKind::Exec => {
            create_typed(session, &exec_request(metadata, &request, target_pod)).await?
        }
        AccessKind::Pod => create_typed(session, &pod_request(metadata, &request)).await?,
    };
    let on_cluster = request
        .fleet_cluster
        .as_deref()
        .map(|c| format!(", cluster {c}"))
        .unwrap_or_default();
    eprintln!(
        "Created {} {} (template {}{on_cluster}, namespace {}).",
        kind.request_kind(),
        created.name,
        created.template,
        session.namespace
    );
    if let Some(note) = clamp_note(&template, request.duration.as_deref()) {
        eprintln!("{note}");
    }
    if let Some(approval) = &template.access.approval {
        eprintln!("{}", approval_note(&session.hints, approval, &created.name));
    }
    if !request.wait.enabled() {
        return match request.output {
            Some(format) => output::print(&output::render(&created.object, format)?),
            None => output::print(&format!(
                "{}\nFollow it with: {}\n",
                created.name,
                session.hint(&format!("get requests {}", created.name))
            )),
        };
    }

    // 3. Wait for oz's decision.
    let mut progress = Progress::new(format!("Waiting for {}", created.name));
    let settled = wait::until_settled(
        session,
        kind,
        &created.name,
        request.wait.timeout,
        &mut progress,
    )
    .await;
    progress.finish();
    let view = settled?;

    // 4. Tell.
    if let Some(format) = request.output {
        output::print(&output::render(&view.object, format)?)?;
    }
    match view.phase() {
        Some(RequestPhase::Ready) => {
            if request.output.is_none() {
                output::print(&instructions(&session.hints, &view, Timestamp::now()))?;
            }
            Ok(())
        }
        Some(RequestPhase::Scheduled) => {
            if request.output.is_none() {
                output::print(&scheduled(&session.hints, &view))?;
            }
            Ok(())
        }
        Some(RequestPhase::Revoked) => Err(view
            .revoked_error(session.hint(&format!("create {} {}", kind.word(), view.template)))
            .unwrap_or_else(|| {
                CliError::Api(format!("{} {} was revoked", kind.request_kind(), view.name))
            })),
        Some(RequestPhase::Denied) => Err(CliError::Denied {
            kind: kind.request_kind(),
            name: view.name.clone(),
            reason: view.problem(),
        }),
        Some(RequestPhase::Expired) => Err(CliError::Expired {
            kind: kind.request_kind(),
            name: view.name.clone(),
            when: view
                .expires_at()
                .map_or_else(|| "already".into(), |t| timefmt::ago(Timestamp::now(), t)),
            hint: session.hint(&format!("create {} {}", kind.word(), view.template)),
        }),
        _ => Err(CliError::Failed {
            kind: kind.request_kind(),
            name: view.name.clone(),
            reason: view.problem(),
            hint: format!(
                "kubectl describe {} {} -n {}",
                kind.request_kind().to_lowercase(),
                view.name,
                session.namespace
            ),
        }),
    }
}

/// What a requester is told of a request that waits for its start.
pub fn scheduled(hints: &Hints, view: &RequestView) -> String {
    let at = |t: Option<Timestamp>| t.map(timefmt::local).unwrap_or_else(|| "?".into());
    format!(
        "{} {} is scheduled: access starts at {} and ends at {}; then run: {}\n",
        view.kind.request_kind(),
        view.name,
        at(view.starts_at()),
        at(view.expires_at()),
        hints.command(&format!("exec {}", view.name))
    )
}

/// What a requester is told when the template needs approval: who decides, and what they run.
pub fn approval_note(hints: &Hints, approval: &ApprovalConfig, name: &str) -> String {
    let required = match approval.required {
        1 => "one member".to_string(),
        n => format!("{n} members"),
    };
    format!(
        "It needs approval by {required} of {} (within {}): they see it with `{}` and approve it with `{}`.",
        approval.approver_groups.join(", "),
        approval.pending_timeout(),
        hints.command("approvals"),
        hints.command(&format!("approve {name}"))
    )
}

/// What a requester is told when `--duration` is longer than the template's maxDuration: oz
/// does not refuse the request but clamps it, as Oz did, and says so only in the request's
/// `AccessDurationsValid` condition. The decision is oz's own
/// ([`decide_access_duration`]), so the note says what oz will grant.
pub fn clamp_note(template: &TemplateView, requested: Option<&str>) -> Option<String> {
    let access = &template.access;
    let decision =
        decide_access_duration(requested, &access.default_duration, &access.max_duration).ok()?;
    if decision.outcome != DurationOutcome::ClampedToMax {
        return None;
    }
    let asked = parse_go_duration(requested?).ok()?;
    Some(format!(
        "note: you asked for {}, more than {} {}'s maxDuration ({}): oz clamps it, so access lasts {}",
        format_go_duration(asked),
        template.kind.template_kind(),
        template.name,
        format_go_duration(decision.duration),
        format_go_duration(decision.duration),
    ))
}

/// Checks `--fleet-cluster` against the template before anything is sent: a fleet template
/// grants only on the spoke clusters it covers, so its requests must name one, and any other
/// template's must name none. A cluster the template's status does not show it synced on is
/// not refused (the hub may not have listed a new cluster yet, and has the last word), but
/// returned as a warning.
pub fn check_fleet_cluster(
    template: &TemplateView,
    cluster: Option<&str>,
) -> Result<Option<String>, String> {
    let what = format!("{} {}", template.kind.template_kind(), template.name);
    let covered = template.covered_clusters();
    match (template.is_fleet(), cluster) {
        (false, None) => Ok(None),
        (false, Some(_)) => Err(format!(
            "{what} is not a fleet template (it names no clusters): leave out --fleet-cluster"
        )),
        (true, None) if covered.is_empty() => Err(format!(
            "{what} is a fleet template, granting on the spoke clusters it covers, and covers \
             none yet (its status.clusters is empty): ask its admin, then add --fleet-cluster NAME"
        )),
        (true, None) => Err(format!(
            "{what} is a fleet template, granting on the spoke clusters it covers: add \
             --fleet-cluster NAME, one of: {}",
            covered.join(", ")
        )),
        (true, Some(name)) => Ok(unsynced_warning(template, &what, name)),
    }
}

/// What to warn of when a fleet template is asked for on cluster `name`: the template's status
/// does not list it, or lists it as not synced.
fn unsynced_warning(template: &TemplateView, what: &str, name: &str) -> Option<String> {
    let covered = template.covered_clusters();
    let sync = template.cluster_sync.iter().find(|c| c.name == name);
    match sync {
        None if covered.is_empty() => Some(format!(
            "{what} lists no clusters it covers yet; the request may not be granted on {name:?}"
        )),
        None => Some(format!(
            "{what} does not list cluster {name:?} among those it covers ({}); the request may \
             not be granted",
            covered.join(", ")
        )),
        Some(sync) if !sync.synced => Some(format!(
            "{what} is not synced on cluster {name:?} ({}); the request may not be granted",
            sync.message.as_deref().unwrap_or("no reason given")
        )),
        Some(_) => None,
    }
}

/// Checks `--reason` and `--ticket` against the limits the API server applies, before anything
/// is sent.
pub fn check_reason_and_ticket(reason: Option<&str>, ticket: Option<&str>) -> Result<(), String> {
    for (flag, text, max) in [
        ("--reason", reason, MAX_REASON_LENGTH),
        ("--ticket", ticket, MAX_TICKET_LENGTH),
    ] {
        let Some(text) = text else { continue };
        if text.trim().is_empty() {
            return Err(format!("{flag} is empty: say it, or leave the flag out"));
        }
        let length = text.chars().count();
        if length > max as usize {
            return Err(format!(
                "{flag} is {length} characters long; oz takes at most {max}"
            ));
        }
    }
    Ok(())
}

/// `--start`: a Go duration from now, or an RFC 3339 time.
fn start_parser(text: &str) -> Result<Timestamp, String> {
    if let Ok(after) = parse_go_duration(text) {
        let after = SignedDuration::try_from(after.to_std().map_err(|_| {
            format!("{text:?} is in the past: give a positive duration from now, such as 2h")
        })?)
        .map_err(|e| e.to_string())?;
        return Timestamp::now()
            .checked_add(after)
            .map_err(|e| e.to_string());
    }
    text.parse::<Timestamp>().map_err(|_| {
        format!("{text:?} is neither a duration from now (2h) nor an RFC 3339 time (2026-12-01T22:00:00Z)")
    })
}

/// The ExecAccessRequest `create exec` sends: what the flags say, and no requester (oz's
/// webhook records who sent it).
pub fn exec_request(
    metadata: ObjectMeta,
    request: &CreateRequestArgs,
    target_pod: Option<String>,
) -> ExecAccessRequest {
    ExecAccessRequest {
        metadata,
        spec: ExecAccessRequestSpec {
            cluster: request.fleet_cluster.clone().map(String::into_boxed_str),
            forwarded: None,
            reason: request.reason.clone(),
            ticket: request.ticket.clone(),
            template_name: request.template.clone(),
            target_pod,
            duration: request.duration.clone(),
            requester: None,
            start_at: request.start.map(Time),
        },
        status: None,
    }
}

/// The PodAccessRequest `create pod` sends: what the flags say, and no requester.
pub fn pod_request(metadata: ObjectMeta, request: &CreateRequestArgs) -> PodAccessRequest {
    PodAccessRequest {
        metadata,
        spec: PodAccessRequestSpec {
            cluster: request.fleet_cluster.clone().map(String::into_boxed_str),
            forwarded: None,
            reason: request.reason.clone(),
            ticket: request.ticket.clone(),
            template_name: request.template.clone(),
            duration: request.duration.clone(),
            requester: None,
            start_at: request.start.map(Time),
        },
        status: None,
    }
}

/// Creates `object` and returns what the API server made of it.
async fn create_typed<R: AccessRequest>(
    session: &Session,
    object: &R,
) -> Result<RequestView, CliError> {
    let created = session
        .api::<R>()
        .create(&PostParams::default(), object)
        .await
        .map_err(|e| session.error(e))?;
    Ok(RequestView::of(&created))
}

/// Checks `--duration` before anything is sent, with the rules the API server applies: a Go
/// duration for exec requests, whole seconds, minutes or hours for pod requests (Oz's schema).
pub fn check_duration(kind: AccessKind, text: &str) -> Result<(), String> {
    match kind {
        AccessKind::Exec => match parse_go_duration(text) {
            Ok(d) if d < chrono::TimeDelta::zero() => Err(format!(
                "--duration {text:?} is negative: use a positive duration such as 30m"
            )),
            Ok(_) => Ok(()),
            Err(e) => Err(format!("--duration: {e}")),
        },
        AccessKind::Pod => {
            let digits = text.trim_end_matches(['s', 'm', 'h']);
            let unit_len = text.len() - digits.len();
            if unit_len == 1 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                Ok(())
            } else {
                Err(format!(
                    "--duration {text:?}: pod access takes whole seconds, minutes or hours with one unit, such as 90m or 2h"
                ))
            }
        }
    }
}

/// What a user is told when access is ready: Oz's banner, the access command between `---`
/// lines, when access ends, and what to do next.
pub fn instructions(hints: &Hints, view: &RequestView, now: Timestamp) -> String {
    // Rendered from the template's accessCommand, which its author wrote.
    let command = view.status.access_message.as_deref().map_or_else(
        || {
            format!(
                "(no access command: the template renders none) pod: {}",
                view.status.pod_name.as_deref().unwrap_or("?")
            )
        },
        |message| printable(message).into_owned(),
    );
    let mut text = format!(
        "Success, your access request is ready! Here are your access instructions:\n---\n{command}\n---\n"
    );
    if let Some(expires) = view.expires_at() {
        text.push_str(&format!(
            "Access ends at {} ({}).\n",
            timefmt::local(expires),
            timefmt::relative(now, expires)
        ));
    }
    match &view.cluster {
        // Granted on a spoke: the pod and the grant are there, for the user's own credentials
        // on that cluster.
        Some(cluster) => text.push_str(&format!(
            "Run it against cluster {cluster}, with your own credentials there (its kubeconfig context).\n"
        )),
        None => text.push_str(&format!(
            "Open a shell with: {}\n",
            hints.command(&format!("exec {}", view.name))
        )),
    }
    text.push_str(&format!(
        "End it early with: {}\n",
        hints.command(&format!("revoke {}", view.name))
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_a_duration_from_now_or_a_time() {
        let before = Timestamp::now();
        let in_two_hours = start_parser("2h").unwrap();
        let two_hours = SignedDuration::from_hours(2);
        assert!(in_two_hours >= before + two_hours && in_two_hours <= Timestamp::now() + two_hours);
        assert_eq!(
            start_parser("2026-12-01T22:00:00Z").unwrap(),
            "2026-12-01T22:00:00Z".parse::<Timestamp>().unwrap()
        );
        assert!(start_parser("-5m").unwrap_err().contains("in the past"));
        assert!(start_parser("tomorrow").unwrap_err().contains("RFC 3339"));
    }

    #[test]
    fn exec_durations_are_go_durations() {
        assert!(check_duration(AccessKind::Exec, "30m").is_ok());
        assert!(check_duration(AccessKind::Exec, "1h30m").is_ok());
        assert!(check_duration(AccessKind::Exec, "0").is_ok());
        assert!(
            check_duration(AccessKind::Exec, "1d")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(
            check_duration(AccessKind::Exec, "-5m")
                .unwrap_err()
                .contains("negative")
        );
    }

    #[test]
    fn instructions_show_the_command_between_dashes_and_when_access_ends() {
        let mut request = crate::fixtures::exec_request(None);
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        request.status = Some(oz_api::RequestStatus {
            access_message: Some("kubectl exec -ti -n team web-0 -- /bin/sh".into()),
            pod_name: Some("web-0".into()),
            phase: Some(RequestPhase::Ready),
            expires_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-21T12:30:00Z".parse().unwrap(),
            )),
            ..Default::default()
        });
        let hints = Hints {
            program: "ozctl".into(),
            namespace: "team".into(),
        };
        let text = instructions(&hints, &RequestView::of(&request), now);
        assert!(
            text.starts_with(
                "Success, your access request is ready! Here are your access instructions:\n---\n\
             kubectl exec -ti -n team web-0 -- /bin/sh\n---\nAccess ends at "
            ),
            "{text}"
        );
        assert!(text.contains(" (in 30m).\n"), "{text}");
        assert!(
            text.ends_with(
                "Open a shell with: ozctl exec alice-x7k2p -n team\n\
             End it early with: ozctl revoke alice-x7k2p -n team\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_fleet_grant_is_used_on_its_spoke() {
        let now = Timestamp::now();
        let mut view = RequestView::of(&crate::fixtures::exec_request(None));
        view.cluster = Some("b".into());
        view.status.access_message = Some("kubectl exec -ti -n team web-0 -- /bin/sh".into());
        let hints = Hints {
            program: "ozctl".into(),
            namespace: "team".into(),
        };
        let text = instructions(&hints, &view, now);
        assert!(
            text.contains("Run it against cluster b, with your own credentials there"),
            "{text}"
        );
        assert!(!text.contains("ozctl exec"), "{text}");
        assert!(text.contains("End it early with: ozctl revoke "), "{text}");
    }

    #[test]
    fn reasons_and_tickets_are_checked_against_the_api_limits() {
        assert!(check_reason_and_ticket(None, None).is_ok());
        assert!(check_reason_and_ticket(Some("incident 42"), Some("INC-42")).is_ok());
        let empty = check_reason_and_ticket(Some("  "), None).unwrap_err();
        assert!(empty.starts_with("--reason is empty"), "{empty}");
        let long = "x".repeat(257);
        let error = check_reason_and_ticket(None, Some(&long)).unwrap_err();
        assert_eq!(
            error,
            "--ticket is 257 characters long; oz takes at most 256"
        );
        assert!(check_reason_and_ticket(Some(&"é".repeat(1024)), None).is_ok());
        assert!(check_reason_and_ticket(Some(&"é".repeat(1025)), None).is_err());
    }

    #[test]
    fn the_approval_note_names_the_approvers_and_their_commands() {
        let approval: ApprovalConfig = serde_json::from_value(serde_json::json!(
            {"approverGroups": ["leads", "ops"], "required": 2, "pendingTimeout": "30m"}
        ))
        .unwrap();
        let hints = Hints {
            program: "ozctl".into(),
            namespace: "team".into(),
        };
        assert_eq!(
            approval_note(&hints, &approval, "alice-x7k2p"),
            "It needs approval by 2 members of leads, ops (within 30m): they see it with \
             `ozctl approvals -n team` and approve it with `ozctl approve alice-x7k2p -n team`."
        );
        let one: ApprovalConfig =
            serde_json::from_value(serde_json::json!({"approverGroups": ["leads"]})).unwrap();
        assert!(
            approval_note(&hints, &one, "alice-x7k2p")
                .starts_with("It needs approval by one member of leads (within 1h): ")
        );
    }

    #[test]
    fn a_duration_above_the_maximum_is_said_to_be_clamped() {
        let template: oz_api::ExecAccessTemplate = serde_json::from_value(serde_json::json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
            "metadata": {"name": "web-exec", "namespace": "demo"},
            "spec": {"accessConfig": {"allowedGroups": ["devs"], "defaultDuration": "1h",
                                      "maxDuration": "4h"},
                     "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        }))
        .unwrap();
        let template = TemplateView::of(&template);
        assert_eq!(
            clamp_note(&template, Some("10h")).as_deref(),
            Some(
                "note: you asked for 10h0m0s, more than ExecAccessTemplate web-exec's maxDuration \
                 (4h0m0s): oz clamps it, so access lasts 4h0m0s"
            )
        );
        // Within the maximum, the default, or a duration oz refuses: nothing to say here.
        for requested in [
            Some("4h"),
            Some("30m"),
            None,
            Some("0"),
            Some("-1h"),
            Some("1d"),
        ] {
            assert_eq!(clamp_note(&template, requested), None, "{requested:?}");
        }
    }

    #[test]
    fn a_fleet_template_needs_a_cluster_and_any_other_refuses_one() {
        use crate::fixtures::exec_template;
        let fleet = TemplateView::of(&exec_template(Some(&[
            ("east", None),
            ("west", Some("cannot reach cluster \"west\": timed out")),
        ])));
        assert_eq!(
            check_fleet_cluster(&fleet, None).unwrap_err(),
            "ExecAccessTemplate web is a fleet template, granting on the spoke clusters it \
             covers: add --fleet-cluster NAME, one of: east, west"
        );
        assert_eq!(check_fleet_cluster(&fleet, Some("east")), Ok(None));
        assert_eq!(
            check_fleet_cluster(&fleet, Some("west")),
            Ok(Some(
                "ExecAccessTemplate web is not synced on cluster \"west\" (cannot reach \
                 cluster \"west\": timed out); the request may not be granted"
                    .into()
            ))
        );
        assert_eq!(
            check_fleet_cluster(&fleet, Some("north")),
            Ok(Some(
                "ExecAccessTemplate web does not list cluster \"north\" among those it covers \
                 (east, west); the request may not be granted"
                    .into()
            ))
        );

        let unlisted = TemplateView::of(&exec_template(Some(&[])));
        let error = check_fleet_cluster(&unlisted, None).unwrap_err();
        assert!(error.contains("covers none yet"), "{error}");
        assert!(error.ends_with("add --fleet-cluster NAME"), "{error}");
        assert!(
            check_fleet_cluster(&unlisted, Some("east"))
                .unwrap()
                .is_some()
        );

        let plain = TemplateView::of(&exec_template(None));
        assert_eq!(check_fleet_cluster(&plain, None), Ok(None));
        assert_eq!(
            check_fleet_cluster(&plain, Some("east")).unwrap_err(),
            "ExecAccessTemplate web is not a fleet template (it names no clusters): leave out \
             --fleet-cluster"
        );
    }

    #[test]
    fn pod_durations_take_one_whole_unit() {
        for ok in ["90m", "2h", "45s"] {
            assert!(check_duration(AccessKind::Pod, ok).is_ok(), "{ok}");
        }
        for bad in ["1h30m", "1.5h", "m", "90", "2hh", ""] {
            assert!(check_duration(AccessKind::Pod, bad).is_err(), "{bad}");
        }
    }
}
