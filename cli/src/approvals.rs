//! `ozctl approvals`: the requests (and the extensions of Ready ones, `ozctl extend`) waiting
//! for a decision that I may make.
//!
//! Who I am and my groups come from a SelfSubjectReview (what oz's webhook will stamp on my
//! decision); who may decide comes from each request's template (`approval.approverGroups`).
//! The choice is a pure function, [`decidable`], over the requests, the templates and me.

use clap::Args;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use oz_api::{ApprovalConfig, RequestPhase, duration::parse_go_duration};
use serde::Serialize;

use super::{
    error::CliError,
    identity::{Me, whoami},
    output::{self, TableFormat},
    requests::{self, RequestView},
    session::Session,
    table::Table,
    templates::{self, TemplateView},
    timefmt,
};

/// `ozctl approvals`.
#[derive(Args, Debug)]
pub struct ApprovalsArgs {
    /// In every namespace, not only the current one
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output format
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        value_name = "FORMAT"
    )]
    pub output: TableFormat,
}

/// Why I may decide a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Standing {
    /// Someone else's request, and I am in its template's approverGroups.
    Approver,
    /// My own request, and the template allows self-approval: my approval counts as one.
    SelfApproval,
    /// My own request, and the template allows break-glass: my approval (with a comment) grants
    /// it alone, and is announced.
    BreakGlass,
}

/// A request (or an extension of a Ready one) I may decide, with its template's approval
/// settings.
#[derive(Clone, Debug)]
pub struct Decidable<'a> {
    pub request: &'a RequestView,
    pub approval: &'a ApprovalConfig,
    pub standing: Standing,
    /// The extension ask waiting (`ozctl extend`), when that is what is decided.
    pub extension: Option<u32>,
}

impl Decidable<'_> {
    /// Approvals counted of those required, as `1/2`.
    pub fn progress(&self) -> String {
        if self.extension.is_some() {
            let counted = self.extension_record().map_or(0, |e| e.approvals.len());
            return format!("{counted}/{}", self.approval.required);
        }
        self.request
            .status
            .approval_progress
            .as_deref()
            .map_or_else(|| format!("0/{}", self.approval.required), str::to_owned)
    }

    /// The extension's record in the request's status, once oz has recorded it.
    fn extension_record(&self) -> Option<&oz_api::ExtensionRecord> {
        let number = self.extension?;
        self.request.status.extensions.get(number as usize - 1)
    }

    /// When the decision is too late: for a request, when it ends Expired (creation plus
    /// `pendingTimeout`); for an extension, when the grant ends.
    pub fn pending_until(&self) -> Option<Timestamp> {
        if self.extension.is_some() {
            return self.request.expires_at();
        }
        let created = self.request.created?;
        let timeout = parse_go_duration(self.approval.pending_timeout()).ok()?;
        let timeout = SignedDuration::try_from(timeout.to_std().ok()?).ok()?;
        created.checked_add(timeout).ok()
    }
}

/// The requests among `requests` that `me` may decide now: waiting for approval
/// (`PendingApproval`, not being deleted), through a template of `templates` that has an
/// approval block naming one of my groups, not yet approved by me, and not my own unless the
/// template allows self-approval or break-glass.
pub fn decidable<'a>(
    requests: &'a [RequestView],
    templates: &'a [TemplateView],
    me: &Me,
) -> Vec<Decidable<'a>> {
    requests
        .iter()
        .filter(|r| !r.deleting)
        .filter_map(|request| {
            let extension = match request.phase() {
                Some(RequestPhase::PendingApproval) => None,
                Some(RequestPhase::Ready) => Some(request.waiting_extension()?),
                _ => return None,
            };
            let counted = match extension {
                None => request.status.approvals.as_slice(),
                Some(number) => request
                    .status
                    .extensions
                    .get(number as usize - 1)
                    .map(|e| e.approvals.as_slice())
                    .unwrap_or_default(),
            };
            if counted.iter().any(|a| a.approver == me.username) {
                return None;
            }
            let template = templates.iter().find(|t| {
                t.kind == request.kind
                    && t.namespace == request.namespace
                    && t.name == request.template
            })?;
            let approval = template.access.approval.as_ref()?;
            let approver = approval.approving_group(&me.groups).is_some();
            // Break-glass is for a requester with no approver around: they need not be one.
            let standing = if !request.is_by(&me.username) && approver {
                Standing::Approver
            } else if !request.is_by(&me.username) {
                return None;
            } else if approval.allow_self_approval && approver {
                Standing::SelfApproval
            } else if approval.break_glass && !approval.allow_self_approval {
                Standing::BreakGlass
            } else {
                return None;
            };
            Some(Decidable {
                request,
                approval,
                standing,
                extension,
            })
        })
        .collect()
}

/// The longest reason a table cell shows; `-o json` has all of it.
const REASON_CELL: usize = 40;

/// The table: the request first, then who asked, through what, why, how far along, and how long
/// it has left; NOTE marks my own requests.
pub fn approvals_table(pending: &[Decidable], now: Timestamp) -> Table {
    let mut table = Table::new([
        "NAME",
        "KIND",
        "NAMESPACE",
        "REQUESTER",
        "TEMPLATE",
        "REASON",
        "TICKET",
        "APPROVALS",
        "AGE",
        "TIMEOUT",
        "NOTE",
    ]);
    for d in pending {
        let r = d.request;
        table.row([
            r.name.clone(),
            r.kind.word().to_string(),
            r.namespace.clone(),
            r.requester_name().to_string(),
            r.template.clone(),
            shorten(r.reason.as_deref().unwrap_or_default(), REASON_CELL),
            r.ticket.clone().unwrap_or_default(),
            d.progress(),
            r.created
                .map(|c| timefmt::compact(now.duration_since(c).unsigned_abs()))
                .unwrap_or_default(),
            d.pending_until()
                .map(|until| match timefmt::relative(now, until) {
                    left if left.starts_with("in ") => left[3..].to_string(),
                    _ => "due".to_string(),
                })
                .unwrap_or_default(),
            note(d),
        ]);
    }
    table
}

/// The NOTE cell: an extension waiting (and how much more it asks), and whether it is mine.
fn note(d: &Decidable) -> String {
    let standing = match d.standing {
        Standing::Approver => "",
        Standing::SelfApproval => "yours: self-approval allowed",
        Standing::BreakGlass => "yours: break-glass only",
    };
    let Some(number) = d.extension else {
        return standing.to_string();
    };
    let by = d
        .extension_record()
        .map(|e| format!(" (+{})", e.by))
        .unwrap_or_default();
    let extension = format!("extension {number}{by}");
    match standing {
        "" => extension,
        standing => format!("{extension}; {standing}"),
    }
}

/// `text` cut to `max` characters, ending in `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// One line of `-o json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry<'a> {
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
    requester: &'a str,
    template: &'a str,
    reason: Option<&'a str>,
    ticket: Option<&'a str>,
    approvals: String,
    approver_groups: &'a [String],
    created: Option<String>,
    pending_until: Option<String>,
    standing: Standing,
    #[serde(skip_serializing_if = "Option::is_none")]
    extension: Option<u32>,
}

/// Runs `ozctl approvals`.
pub async fn run(session: &Session, args: ApprovalsArgs) -> Result<(), CliError> {
    let me = whoami(session).await?;
    let kinds = oz_api::AccessKind::ALL;
    let requests = requests::list_in(session, &kinds, args.all_namespaces).await?;
    let templates = templates::list_in(session, &kinds, args.all_namespaces).await?;
    let pending = decidable(&requests, &templates, &me);
    match args.output {
        TableFormat::Json => {
            let entries: Vec<Entry> = pending
                .iter()
                .map(|d| Entry {
                    kind: d.request.kind.request_kind(),
                    namespace: &d.request.namespace,
                    name: &d.request.name,
                    requester: d.request.requester_name(),
                    template: &d.request.template,
                    reason: d.request.reason.as_deref(),
                    ticket: d.request.ticket.as_deref(),
                    approvals: d.progress(),
                    approver_groups: &d.approval.approver_groups,
                    created: d.request.created.map(|t| t.to_string()),
                    pending_until: d.pending_until().map(|t| t.to_string()),
                    standing: d.standing,
                    extension: d.extension,
                })
                .collect();
            output::print(&output::render(&entries, output::ObjectFormat::Json)?)
        }
        TableFormat::Table if pending.is_empty() => {
            let place = if args.all_namespaces {
                "any namespace".to_string()
            } else {
                format!("namespace {}", session.namespace)
            };
            eprintln!(
                "No requests in {place} wait for a decision of yours ({}, groups {}).",
                me.username,
                me.groups.join(", ")
            );
            Ok(())
        }
        TableFormat::Table => {
            output::print(&approvals_table(&pending, Timestamp::now()).render())?;
            eprintln!(
                "Decide with: {} (or deny REQUEST --comment WHY)",
                session.hint("approve REQUEST [--comment TEXT]")
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use oz_api::{
        AccessKind, ApprovalRecord, ExecAccessRequest, ExecAccessTemplate, PodAccessTemplate,
        RequestStatus, Requester,
    };
    use serde_json::json;

    use super::*;

    const CREATED: &str = "2026-11-21T12:00:00Z";

    fn template(name: &str, approval: serde_json::Value) -> TemplateView {
        let mut access = json!({"allowedGroups": ["devs"]});
        if !approval.is_null() {
            access["approval"] = approval;
        }
        let template: ExecAccessTemplate = serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"accessConfig": access,
                     "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        }))
        .unwrap();
        TemplateView::of(&template)
    }

    fn request(name: &str, by: &str, template: &str, phase: RequestPhase) -> RequestView {
        let mut request: ExecAccessRequest = serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
            "metadata": {"name": name, "namespace": "team", "creationTimestamp": CREATED},
            "spec": {"templateName": template, "reason": "incident 42: web is down",
                     "ticket": "INC-42"},
        }))
        .unwrap();
        request.spec.requester = Some(Requester {
            username: by.into(),
            uid: None,
            groups: vec!["devs".into()],
        });
        request.status = Some(RequestStatus {
            phase: Some(phase),
            ..Default::default()
        });
        RequestView::of(&request)
    }

    fn me(name: &str, groups: &[&str]) -> Me {
        Me {
            username: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn names(pending: &[Decidable]) -> Vec<(String, Standing)> {
        pending
            .iter()
            .map(|d| (d.request.name.clone(), d.standing))
            .collect()
    }

    #[test]
    fn approvers_see_the_extension_waiting_on_a_ready_request() {
        let templates = [template(
            "needs-leads",
            json!({"approverGroups": ["leads"]}),
        )];
        let mut asked = request("c", "alice", "needs-leads", RequestPhase::Ready);
        asked.object["metadata"]["annotations"] = json!({
            oz_api::EXTEND_ANNOTATION: r#"[{"by":"30m","askedBy":"alice"},{"by":"1h","askedBy":"alice"}]"#,
        });
        asked.status.extensions = serde_json::from_value(json!([
            {"number": 1, "by": "30m", "askedBy": "alice", "phase": "Granted", "added": "30m"},
            {"number": 2, "by": "1h", "askedBy": "alice", "phase": "PendingApproval"},
        ]))
        .unwrap();
        let dave = me("dave", &["leads"]);
        let requests = [asked.clone()];
        let pending = decidable(&requests, &templates, &dave);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].extension, Some(2));
        assert_eq!(pending[0].progress(), "0/1");
        assert_eq!(note(&pending[0]), "extension 2 (+1h)");
        // Decided by dave already, or nothing waiting: nothing for him.
        let mut decided = asked.clone();
        decided.status.extensions[1].approvals = vec![ApprovalRecord {
            approver: "dave".into(),
            at: Time(CREATED.parse().unwrap()),
            comment: None,
            name: "c-extension-2-dave".into(),
            break_glass: false,
        }];
        assert!(decidable(&[decided], &templates, &dave).is_empty());
        let mut granted = asked;
        granted.status.extensions[1].phase = oz_api::ExtensionPhase::Granted;
        assert!(decidable(&[granted], &templates, &dave).is_empty());
    }

    #[test]
    fn approvers_see_the_pending_requests_of_their_templates_only() {
        let templates = [
            template("needs-leads", json!({"approverGroups": ["leads"]})),
            template("needs-ops", json!({"approverGroups": ["ops"]})),
            template("no-approval", json!(null)),
        ];
        let requests = [
            request("a", "alice", "needs-leads", RequestPhase::PendingApproval),
            request("b", "alice", "needs-ops", RequestPhase::PendingApproval),
            request("c", "alice", "needs-leads", RequestPhase::Ready),
            request("d", "alice", "no-approval", RequestPhase::PendingApproval),
            request("e", "alice", "gone", RequestPhase::PendingApproval),
        ];
        let dave = me("dave", &["leads", "system:authenticated"]);
        assert_eq!(
            names(&decidable(&requests, &templates, &dave)),
            [("a".to_string(), Standing::Approver)]
        );
        // Not an approver anywhere: nothing.
        let carol = me("carol", &["devs"]);
        assert!(decidable(&requests, &templates, &carol).is_empty());
        // A template of the other kind, or in another namespace, with the same name does not
        // count.
        let mut pod = TemplateView::of(&serde_json::from_value::<PodAccessTemplate>(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "PodAccessTemplate",
            "metadata": {"name": "needs-ops", "namespace": "team"},
            "spec": {"accessConfig": {"allowedGroups": ["devs"], "approval": {"approverGroups": ["leads"]}},
                     "podSpec": {"containers": []}},
        })).unwrap());
        assert_eq!(pod.kind, AccessKind::Pod);
        let mut elsewhere = template("needs-ops", json!({"approverGroups": ["leads"]}));
        elsewhere.namespace = "other".into();
        assert!(
            !names(&decidable(&requests, &[pod.clone(), elsewhere], &dave))
                .iter()
                .any(|(name, _)| name == "b")
        );
        pod.kind = AccessKind::Exec;
        assert!(
            names(&decidable(&requests, &[pod], &dave))
                .iter()
                .any(|(name, _)| name == "b")
        );
    }

    #[test]
    fn my_own_requests_only_with_self_approval_or_break_glass() {
        let templates = [
            template("plain", json!({"approverGroups": ["leads"]})),
            template(
                "self",
                json!({"approverGroups": ["leads"], "allowSelfApproval": true, "breakGlass": true}),
            ),
            template(
                "glass",
                json!({"approverGroups": ["leads"], "breakGlass": true}),
            ),
        ];
        let requests = [
            request("p", "dave", "plain", RequestPhase::PendingApproval),
            request("s", "dave", "self", RequestPhase::PendingApproval),
            request("g", "dave", "glass", RequestPhase::PendingApproval),
        ];
        let dave = me("dave", &["leads"]);
        assert_eq!(
            names(&decidable(&requests, &templates, &dave)),
            [
                ("s".to_string(), Standing::SelfApproval),
                ("g".to_string(), Standing::BreakGlass)
            ]
        );
        // A requester who is no approver may still break glass, and only that.
        let dave = me("dave", &["devs"]);
        assert_eq!(
            names(&decidable(&requests, &templates, &dave)),
            [("g".to_string(), Standing::BreakGlass)]
        );
    }

    #[test]
    fn requests_i_approved_or_that_are_going_away_are_left_out() {
        let templates = [template(
            "two",
            json!({"approverGroups": ["leads"], "required": 2}),
        )];
        let mut approved = request("a", "alice", "two", RequestPhase::PendingApproval);
        approved.status.approvals = vec![ApprovalRecord {
            approver: "dave".into(),
            at: Time(CREATED.parse().unwrap()),
            comment: None,
            name: "a-dave".into(),
            break_glass: false,
        }];
        approved.status.approval_progress = Some("1/2".into());
        let mut deleting = request("b", "alice", "two", RequestPhase::PendingApproval);
        deleting.deleting = true;
        let requests = [approved, deleting];
        assert!(decidable(&requests, &templates, &me("dave", &["leads"])).is_empty());
        let erin = decidable(&requests, &templates, &me("erin", &["leads"]));
        assert_eq!(names(&erin), [("a".to_string(), Standing::Approver)]);
        assert_eq!(erin[0].progress(), "1/2");
    }

    #[test]
    fn the_table_leads_with_the_name_and_shows_what_is_left() {
        let templates = [
            template(
                "web",
                json!({"approverGroups": ["leads"], "required": 2, "pendingTimeout": "1h"}),
            ),
            template(
                "glass",
                json!({"approverGroups": ["leads"], "breakGlass": true}),
            ),
        ];
        let mut long = request("alice-x7k2p", "alice", "web", RequestPhase::PendingApproval);
        long.reason = Some("x".repeat(60));
        let requests = [
            long,
            request("dave-b2c3d", "dave", "glass", RequestPhase::PendingApproval),
        ];
        let pending = decidable(&requests, &templates, &me("dave", &["leads"]));
        let now: Timestamp = "2026-11-21T12:10:30Z".parse().unwrap();
        let reason = format!("{}…", "x".repeat(39));
        assert_eq!(
            approvals_table(&pending, now).render(),
            format!(
                "NAME          KIND   NAMESPACE   REQUESTER   TEMPLATE   REASON                                     TICKET   APPROVALS   AGE       TIMEOUT   NOTE\n\
                 alice-x7k2p   exec   team        alice       web        {reason}   INC-42   0/2         10m 30s   49m 30s\n\
                 dave-b2c3d    exec   team        dave        glass      incident 42: web is down                   INC-42   0/1         10m 30s   49m 30s   yours: break-glass only\n"
            )
        );
        let late: Timestamp = "2026-11-21T13:00:01Z".parse().unwrap();
        assert!(
            approvals_table(&pending, late)
                .render()
                .lines()
                .nth(1)
                .unwrap()
                .ends_with("   due")
        );
    }
}
