//! `ozctl get` (or `list`): requests, yours by default, or templates, as a table or as objects.

use clap::{Args, ValueEnum, builder::NonEmptyStringValueParser};
use k8s_openapi::jiff::Timestamp;
use oz_api::{AccessKind, RequestPhase};

use super::{
    error::CliError,
    identity::{Me, whoami},
    kind_arg,
    output::{self, ObjectFormat},
    requests::{self, RequestView},
    session::Session,
    table::Table,
    templates::{self, TemplateView},
    terminal_text::printable_line,
    timefmt,
};

/// `ozctl get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// What to list: requests or templates (Oz's kind names, such as execaccessrequests, work
    /// too)
    #[arg(default_value = "requests", value_name = "RESOURCE")]
    pub resource: String,
    /// Only this one, by name (whoever made it)
    pub name: Option<String>,
    /// Everyone's requests, not only yours
    #[arg(long)]
    pub all: bool,
    /// On a fleet hub: only the requests for this spoke cluster
    #[arg(long, value_name = "NAME", conflicts_with = "name",
          value_parser = NonEmptyStringValueParser::new())]
    pub fleet_cluster: Option<String>,
    /// Output format
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        value_name = "FORMAT"
    )]
    pub output: ListFormat,
}

/// How `get` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
    Yaml,
}

/// What `get` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// Requests, of one kind or both.
    Requests(Option<AccessKind>),
    /// Templates, of one kind or both.
    Templates(Option<AccessKind>),
}

/// Reads `get`'s RESOURCE: `requests` or `templates` (singular, or short: `req`, `tpl`), or
/// one of Oz's kinds by any of the names kubectl knows it by (`ExecAccessRequest`,
/// `execaccessrequests`, `execreq`, `execaccessrequests.crds.wizardofoz.co`, ...).
pub fn parse_resource(text: &str) -> Result<Resource, String> {
    let word = text.to_ascii_lowercase();
    let word = word.strip_suffix(".crds.wizardofoz.co").unwrap_or(&word);
    let word = word.replace('-', "");
    let resource = match word.as_str() {
        "requests" | "request" | "req" | "reqs" => Resource::Requests(None),
        "templates" | "template" | "tpl" | "tpls" => Resource::Templates(None),
        "execaccessrequests" | "execaccessrequest" | "execreq" => {
            Resource::Requests(Some(AccessKind::Exec))
        }
        "podaccessrequests" | "podaccessrequest" | "podreq" => {
            Resource::Requests(Some(AccessKind::Pod))
        }
        "execaccesstemplates" | "execaccesstemplate" | "exectpl" => {
            Resource::Templates(Some(AccessKind::Exec))
        }
        "podaccesstemplates" | "podaccesstemplate" | "podtpl" => {
            Resource::Templates(Some(AccessKind::Pod))
        }
        _ => {
            return Err(format!(
                "cannot list {text:?}: say requests or templates (or an oz kind, such as execaccessrequests)"
            ));
        }
    };
    Ok(resource)
}

/// Runs `ozctl get`.
pub async fn run(session: &Session, args: GetArgs) -> Result<(), CliError> {
    match parse_resource(&args.resource).map_err(CliError::Usage)? {
        Resource::Requests(kind) => get_requests(session, &args, kind).await,
        Resource::Templates(_) if args.fleet_cluster.is_some() => Err(CliError::Usage(
            "--fleet-cluster selects requests; `get templates` shows the clusters each fleet \
             template is on"
                .into(),
        )),
        Resource::Templates(kind) => get_templates(session, &args, kind).await,
    }
}

async fn get_requests(
    session: &Session,
    args: &GetArgs,
    kind: Option<AccessKind>,
) -> Result<(), CliError> {
    let (views, hidden) = match &args.name {
        Some(name) => (vec![requests::find(session, name, kind).await?], 0),
        None => {
            let views = requests::list(session, &kind_arg::or_both(kind)).await?;
            let me = if args.all {
                None
            } else {
                Some(whoami(session).await?.username)
            };
            current_requests(views, me.as_deref(), args.fleet_cluster.as_deref())
        }
    };
    match object_format(args.output) {
        Some(format) => print_objects(views.iter().map(|v| v.object.clone()), args, format),
        None => {
            if let ([view], Some(_)) = (views.as_slice(), &args.name) {
                output::print(&request_details(view, Timestamp::now()))?;
            } else if views.is_empty() {
                eprintln!(
                    "No {}requests{} in namespace {}; ask for access with: {}",
                    if args.all { "" } else { "current " },
                    args.fleet_cluster
                        .as_deref()
                        .map(|c| format!(" for cluster {}", printable_line(c)))
                        .unwrap_or_default(),
                    session.namespace,
                    session.hint("create exec TEMPLATE")
                );
            } else {
                let show_requester = args.all || args.name.is_some();
                output::print(&requests_table(&views, Timestamp::now(), show_requester).render())?;
            }
            if hidden > 0 {
                eprintln!(
                    "({hidden} ended not shown; see them with: {})",
                    session.hint("history")
                );
            }
            Ok(())
        }
    }
}

async fn get_templates(
    session: &Session,
    args: &GetArgs,
    kind: Option<AccessKind>,
) -> Result<(), CliError> {
    let views = match &args.name {
        Some(name) => {
            let mut found = Vec::new();
            for kind in kind_arg::or_both(kind) {
                found.extend(templates::get(session, kind, name).await?);
            }
            if found.is_empty() {
                return Err(CliError::NoTemplate {
                    kind: kind.map_or("template", AccessKind::template_kind),
                    name: name.clone(),
                    namespace: session.namespace.clone(),
                    hint: session.hint("get templates"),
                });
            }
            found
        }
        None => templates::list(session, &kind_arg::or_both(kind)).await?,
    };
    match object_format(args.output) {
        Some(format) => print_objects(views.iter().map(|v| v.object.clone()), args, format),
        None => {
            if views.is_empty() {
                eprintln!(
                    "No templates in namespace {}; an admin creates them (ExecAccessTemplate, PodAccessTemplate)",
                    session.namespace
                );
                return Ok(());
            }
            let me = whoami(session).await?;
            output::print(&templates_table(&views, &me).render())
        }
    }
}

fn object_format(format: ListFormat) -> Option<ObjectFormat> {
    match format {
        ListFormat::Table => None,
        ListFormat::Json => Some(ObjectFormat::Json),
        ListFormat::Yaml => Some(ObjectFormat::Yaml),
    }
}

/// One object as itself, several (or none) as a kubectl-style List.
fn print_objects(
    objects: impl Iterator<Item = serde_json::Value>,
    args: &GetArgs,
    format: ObjectFormat,
) -> Result<(), CliError> {
    let mut objects: Vec<_> = objects.collect();
    let value = if args.name.is_some() && objects.len() == 1 {
        objects.remove(0)
    } else {
        output::list_json(objects)
    };
    output::print(&output::render(&value, format)?)
}

/// Which listed requests `get` shows: those of `requester` (everyone's without one), for
/// spoke `cluster` if one is given, and not ended; and how many ended ones it left out.
pub fn current_requests(
    mut views: Vec<RequestView>,
    requester: Option<&str>,
    cluster: Option<&str>,
) -> (Vec<RequestView>, usize) {
    if let Some(requester) = requester {
        views.retain(|v| v.is_by(requester));
    }
    if let Some(cluster) = cluster {
        views.retain(|v| v.cluster.as_deref() == Some(cluster));
    }
    // Ended (expired or revoked) requests are kept for access reviews: `history` shows them.
    let before = views.len();
    views.retain(|v| !v.phase().is_some_and(RequestPhase::is_ended));
    let hidden = before - views.len();
    (views, hidden)
}

/// The requests table: name, kind, template, the spoke cluster when any request names one,
/// pod, phase, time until expiry, and who asked.
pub fn requests_table(views: &[RequestView], now: Timestamp, show_requester: bool) -> Table {
    let show_cluster = views.iter().any(|v| v.cluster.is_some());
    let mut headers = vec!["NAME", "KIND", "TEMPLATE"];
    if show_cluster {
        headers.push("CLUSTER");
    }
    headers.extend(["POD", "PHASE", "EXPIRES"]);
    if show_requester {
        headers.push("REQUESTER");
    }
    let mut table = Table::new(headers);
    for view in views {
        let mut row = vec![
            view.name.clone(),
            view.kind.word().to_string(),
            view.template.clone(),
        ];
        if show_cluster {
            row.push(view.cluster.clone().unwrap_or_default());
        }
        row.extend([
            view.status.pod_name.clone().unwrap_or_default(),
            phase_cell(view),
            view.expires_at()
                .map(|t| timefmt::relative(now, t))
                .unwrap_or_default(),
        ]);
        if show_requester {
            row.push(view.requester_name().to_string());
        }
        table.row(row);
    }
    table
}

/// The PHASE cell: the phase, and while it waits for approval, how far along (`PendingApproval
/// 1/2`).
fn phase_cell(view: &RequestView) -> String {
    match (view.phase(), &view.status.approval_progress) {
        (Some(RequestPhase::PendingApproval), Some(progress)) if !view.deleting => {
            format!("{} {progress}", view.phase_word())
        }
        _ => view.phase_word(),
    }
}

/// One request in full, one field a line: who asked for what and why, where it stands (with
/// its approvals, when its template needs them), and when its access ends.
pub fn request_details(view: &RequestView, now: Timestamp) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("Name", view.name.clone()),
        ("Kind", view.kind.request_kind().to_string()),
        ("Namespace", view.namespace.clone()),
        ("Template", view.template.clone()),
    ];
    if let Some(cluster) = &view.cluster {
        fields.push(("Cluster", cluster.clone()));
    }
    fields.push(("Requester", view.requester_name().to_string()));
    if let Some(reason) = &view.reason {
        fields.push(("Reason", reason.clone()));
    }
    if let Some(ticket) = &view.ticket {
        fields.push(("Ticket", ticket.clone()));
    }
    if let Some(created) = view.created {
        fields.push(("Created", local_and_relative(now, created)));
    }
    let phase = match &view.status.approval_progress {
        Some(progress) => format!("{} ({progress} approvals)", view.phase_word()),
        None => view.phase_word(),
    };
    fields.push(("Phase", phase));
    if !matches!(
        view.phase(),
        Some(RequestPhase::Ready | RequestPhase::Expired | RequestPhase::Revoked)
    ) {
        fields.push(("Status", view.progress()));
    }
    if let Some(approved) = &view.status.approved_at {
        fields.push(("Approved", timefmt::local(approved.0)));
    }
    if let Some(pod) = &view.status.pod_name {
        fields.push(("Pod", pod.clone()));
    }
    // oz's duration decision, in its words: the default, the duration asked for, or the maximum
    // when more was asked for.
    if let Some(decided) = view.status.conditions.iter().find(|c| {
        c.type_() == oz_api::condition_type::ACCESS_DURATIONS_VALID && c.status() == "True"
    }) {
        fields.push(("Duration", decided.message.clone()));
    }
    if let Some(expires) = view.expires_at() {
        fields.push(("Expires", local_and_relative(now, expires)));
    }
    if let Some((by, at)) = view.revocation() {
        fields.push((
            "Revoked",
            format!("by {by}, {}", local_and_relative(now, at)),
        ));
    }
    if let Some(message) = &view.status.access_message {
        fields.push(("Access", message.clone()));
    }
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 3;
    let mut text = String::new();
    for (key, value) in fields {
        let value = printable_line(&value);
        text.push_str(&format!("{:width$}{value}\n", format!("{key}:")));
    }
    if !view.status.approvals.is_empty() {
        text.push_str("Approvals:\n");
        let mut table = Table::new(["APPROVER", "WHEN", "COMMENT", "BREAK-GLASS", "APPROVAL"]);
        for a in &view.status.approvals {
            table.row([
                a.approver.clone(),
                timefmt::local_short(a.at.0),
                a.comment.clone().unwrap_or_default(),
                yes_no(a.break_glass).to_string(),
                a.name.clone(),
            ]);
        }
        for line in table.render().lines() {
            text.push_str(&format!("  {line}\n"));
        }
    }
    text
}

/// The templates table: what each grants, for how long, to whom, whether `me` may use it, and
/// when any is a fleet template, the spoke clusters each is on (last: its messages are long).
pub fn templates_table(views: &[TemplateView], me: &Me) -> Table {
    let show_clusters = views.iter().any(TemplateView::is_fleet);
    let mut headers = vec![
        "NAME",
        "KIND",
        "TARGET",
        "DEFAULT",
        "MAX",
        "ALLOWED GROUPS",
        "READY",
        "YOU MAY USE",
    ];
    if show_clusters {
        headers.push("CLUSTERS");
    }
    let mut table = Table::new(headers);
    for view in views {
        let mut row = vec![
            view.name.clone(),
            view.kind.word().to_string(),
            view.target.clone(),
            view.access.default_duration.clone(),
            view.access.max_duration.clone(),
            view.access.allowed_groups.join(","),
            yes_no(view.ready).into(),
            yes_no(view.access.admits(&me.groups)).into(),
        ];
        if show_clusters {
            row.push(view.clusters_summary().unwrap_or_default());
        }
        table.row(row);
    }
    table
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// `t` in local time, and how far it is from `now`: `2026-11-21 10:00 (2h ago)`.
fn local_and_relative(now: Timestamp, t: Timestamp) -> String {
    format!("{} ({})", timefmt::local(t), timefmt::relative(now, t))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use oz_api::{
        AccessConfig, ExecAccessRequest, ExecAccessRequestSpec, ExecAccessTemplate,
        ExecAccessTemplateSpec, PodAccessTemplate, PodAccessTemplateSpec, RequestStatus, Requester,
    };

    use super::*;

    #[test]
    fn resources_by_any_name() {
        use AccessKind::*;
        assert_eq!(parse_resource("requests"), Ok(Resource::Requests(None)));
        assert_eq!(parse_resource("req"), Ok(Resource::Requests(None)));
        assert_eq!(parse_resource("Templates"), Ok(Resource::Templates(None)));
        assert_eq!(
            parse_resource("ExecAccessRequest"),
            Ok(Resource::Requests(Some(Exec)))
        );
        assert_eq!(
            parse_resource("exec-access-request"),
            Ok(Resource::Requests(Some(Exec)))
        );
        assert_eq!(
            parse_resource("podaccessrequests.crds.wizardofoz.co"),
            Ok(Resource::Requests(Some(Pod)))
        );
        assert_eq!(parse_resource("podtpl"), Ok(Resource::Templates(Some(Pod))));
        let error = parse_resource("pods").unwrap_err();
        assert!(error.contains("say requests or templates"), "{error}");
    }

    fn request(name: &str, user: &str, phase: Option<RequestPhase>) -> RequestView {
        let mut request = ExecAccessRequest::new(
            name,
            ExecAccessRequestSpec {
                start_at: None,
                cluster: None,
                forwarded: None,
                reason: None,
                ticket: None,
                template_name: "web-exec".into(),
                target_pod: None,
                duration: None,
                requester: Some(Requester {
                    username: user.into(),
                    uid: None,
                    groups: vec![],
                }),
            },
        );
        request.status = Some(RequestStatus {
            phase,
            pod_name: phase.map(|_| "web-0".into()),
            expires_at: phase.map(|_| Time("2026-11-21T12:29:58Z".parse().unwrap())),
            ..Default::default()
        });
        RequestView::of(&request)
    }

    #[test]
    fn requests_table_shows_time_until_expiry() {
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let views = [
            request("alice-x7k2p", "alice", Some(RequestPhase::Ready)),
            request("bob-aaaaa", "bob", None),
        ];
        assert_eq!(
            requests_table(&views, now, false).render(),
            "NAME          KIND   TEMPLATE   POD     PHASE     EXPIRES\n\
             alice-x7k2p   exec   web-exec   web-0   Ready     in 29m 58s\n\
             bob-aaaaa     exec   web-exec           Pending\n"
        );
        let with_requester = requests_table(&views, now, true).render();
        assert!(
            with_requester
                .lines()
                .next()
                .unwrap()
                .ends_with("REQUESTER")
        );
        assert!(with_requester.lines().nth(2).unwrap().ends_with("bob"));

        let mut waiting = request("carol-bbbbb", "carol", Some(RequestPhase::PendingApproval));
        waiting.status.approval_progress = Some("1/2".into());
        let row = requests_table(&[waiting], now, false).render();
        assert!(
            row.lines()
                .nth(1)
                .unwrap()
                .contains("   PendingApproval 1/2   "),
            "{row}"
        );
    }

    fn on_cluster(mut view: RequestView, cluster: &str) -> RequestView {
        view.cluster = Some(cluster.into());
        view
    }

    #[test]
    fn requests_on_spoke_clusters_get_a_cluster_column() {
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let views = [
            on_cluster(
                request("alice-x7k2p", "alice", Some(RequestPhase::Ready)),
                "east",
            ),
            request("bob-aaaaa", "bob", None),
        ];
        assert_eq!(
            requests_table(&views, now, true).render(),
            "NAME          KIND   TEMPLATE   CLUSTER   POD     PHASE     EXPIRES      REQUESTER\n\
             alice-x7k2p   exec   web-exec   east      web-0   Ready     in 29m 58s   alice\n\
             bob-aaaaa     exec   web-exec                     Pending                bob\n"
        );
        let text = request_details(&views[0], now);
        assert!(
            text.contains("Template:   web-exec\nCluster:    east\nRequester:  alice\n"),
            "{text}"
        );
        assert!(!request_details(&views[1], now).contains("Cluster"));
    }

    #[test]
    fn the_listing_keeps_the_current_requests_of_me_and_of_a_cluster() {
        let views = vec![
            on_cluster(
                request("a-east", "alice", Some(RequestPhase::Ready)),
                "east",
            ),
            on_cluster(request("a-west", "alice", None), "west"),
            on_cluster(request("b-east", "bob", None), "east"),
            on_cluster(
                request("a-old", "alice", Some(RequestPhase::Expired)),
                "east",
            ),
            request("a-here", "alice", None),
        ];
        let names = |(shown, hidden): (Vec<RequestView>, usize)| {
            let names: Vec<String> = shown.into_iter().map(|v| v.name).collect();
            (names.join(" "), hidden)
        };
        assert_eq!(
            names(current_requests(views.clone(), Some("alice"), None)),
            ("a-east a-west a-here".into(), 1)
        );
        assert_eq!(
            names(current_requests(views.clone(), Some("alice"), Some("east"))),
            ("a-east".into(), 1)
        );
        assert_eq!(
            names(current_requests(views.clone(), None, Some("east"))),
            ("a-east b-east".into(), 1)
        );
        assert_eq!(
            names(current_requests(views, None, Some("north"))),
            (String::new(), 0)
        );
    }

    #[test]
    fn one_request_shows_why_and_who_approved() {
        use oz_api::ApprovalRecord;
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let mut pending = request("alice-x7k2p", "alice", Some(RequestPhase::PendingApproval));
        pending.reason = Some("INC-42: the migration is stuck".into());
        pending.ticket = Some("INC-42".into());
        pending.status.pod_name = None;
        pending.status.expires_at = None;
        pending.status.approval_progress = Some("1/2".into());
        pending.status.conditions = vec![oz_api::Condition::new(
            "Approved",
            "False",
            "PendingApproval",
            "1 of 2 approvals; waiting for a member of leads, ops".into(),
            None,
            Time(now),
        )];
        pending.status.approvals = vec![ApprovalRecord {
            approver: "dave".into(),
            at: Time(now),
            comment: Some("ok for an hour".into()),
            name: "alice-x7k2p-dave".into(),
            break_glass: false,
        }];
        let text = request_details(&pending, now);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Name:       alice-x7k2p");
        assert!(
            lines.contains(&"Reason:     INC-42: the migration is stuck"),
            "{text}"
        );
        assert!(lines.contains(&"Ticket:     INC-42"), "{text}");
        assert!(
            lines.contains(&"Phase:      PendingApproval (1/2 approvals)"),
            "{text}"
        );
        assert!(
            lines.contains(
                &"Status:     Approved: 1 of 2 approvals; waiting for a member of leads, ops"
            ),
            "{text}"
        );
        assert_eq!(
            lines[lines.len() - 2]
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["APPROVER", "WHEN", "COMMENT", "BREAK-GLASS", "APPROVAL"]
        );
        let approval = lines[lines.len() - 1];
        assert!(approval.starts_with("  dave   "), "{text}");
        assert!(
            approval.contains("   ok for an hour   no            alice-x7k2p-dave"),
            "{text}"
        );
        assert!(!text.contains("Expires"), "{text}");

        // Without approvals: no Approvals section, and Ready shows the pod, how oz decided its
        // duration, and the end.
        let mut ready = request("bob-aaaaa", "bob", Some(RequestPhase::Ready));
        ready.status.conditions = vec![oz_api::Condition::new(
            "AccessDurationsValid",
            "True",
            "Success",
            "Access requested duration (10h0m0s) larger than template maximum duration (4h0m0s)"
                .into(),
            None,
            Time(now),
        )];
        let text = request_details(&ready, now);
        assert!(
            !text.contains("Approvals") && !text.contains("Reason"),
            "{text}"
        );
        assert!(text.contains("Pod:        web-0\n"), "{text}");
        assert!(
            text.contains(
                "Duration:   Access requested duration (10h0m0s) larger than template maximum duration (4h0m0s)\n"
            ),
            "{text}"
        );
        assert!(text.contains("(in 29m 58s)"), "{text}");
    }

    #[test]
    fn what_others_wrote_is_shown_escaped() {
        use oz_api::ApprovalRecord;
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let mut view = request("alice-x7k2p", "alice", Some(RequestPhase::Ready));
        view.reason = Some("INC-42\u{1b}]0;owned\u{7}".into());
        view.ticket = Some("T\u{1b}[2J".into());
        view.status.approvals = vec![ApprovalRecord {
            approver: "dave".into(),
            at: Time(now),
            comment: Some("fine\u{1b}[8m".into()),
            name: "alice-x7k2p-dave".into(),
            break_glass: false,
        }];
        let text = request_details(&view, now);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(
            text.contains("Reason:     INC-42\\u{1b}]0;owned\\u{7}\n"),
            "{text}"
        );
        assert!(text.contains("Ticket:     T\\u{1b}[2J\n"), "{text}");
        assert!(text.contains("fine\\u{1b}[8m"), "{text}");
    }

    fn access_config(groups: &[&str]) -> AccessConfig {
        serde_json::from_value(serde_json::json!({"allowedGroups": groups})).unwrap()
    }

    #[test]
    fn templates_table_says_whether_i_may_use_each() {
        let exec = ExecAccessTemplate::new(
            "web-exec",
            ExecAccessTemplateSpec {
                clusters: None,
                access_config: access_config(&["devs"]),
                controller_target_ref: serde_json::from_value(serde_json::json!(
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
                ))
                .unwrap(),
            },
        );
        let pod = PodAccessTemplate::new(
            "scratch",
            PodAccessTemplateSpec {
                clusters: None,
                access_config: access_config(&["admins", "sre"]),
                controller_target_ref: None,
                controller_target_mutation_config: None,
                pod_spec: Some(Default::default()),
                max_cpu: None,
                max_memory: None,
                max_storage: None,
            },
        );
        let views = [TemplateView::of(&exec), TemplateView::of(&pod)];
        let me = Me {
            username: "alice".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
        };
        assert_eq!(
            templates_table(&views, &me).render(),
            "NAME       KIND   TARGET           DEFAULT   MAX   ALLOWED GROUPS   READY   YOU MAY USE\n\
             web-exec   exec   Deployment/web   1h        24h   devs             no      yes\n\
             scratch    pod    podSpec          1h        24h   admins,sre       no      no\n"
        );
    }

    #[test]
    fn fleet_templates_show_the_clusters_they_are_on() {
        use crate::fixtures::exec_template;
        let me = Me {
            username: "alice".into(),
            groups: vec!["devs".into()],
        };
        let fleet = TemplateView::of(&exec_template(Some(&[
            ("east", None),
            ("west", Some("namespace \"team\" is missing there")),
        ])));
        let mut unlisted = TemplateView::of(&exec_template(Some(&[])));
        unlisted.name = "db".into();
        let mut plain = TemplateView::of(&exec_template(None));
        plain.name = "local".into();
        let table = templates_table(&[fleet, unlisted, plain.clone()], &me).render();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].ends_with("   YOU MAY USE   CLUSTERS"), "{table}");
        assert!(
            lines[1].ends_with(
                "   yes           east, west (not synced: namespace \"team\" is missing there)"
            ),
            "{table}"
        );
        assert!(lines[2].ends_with("   yes           none yet"), "{table}");
        assert!(lines[3].ends_with("   yes"), "{table}");
        // Without a fleet template, no column.
        assert!(!templates_table(&[plain], &me).render().contains("CLUSTERS"));
    }
}
