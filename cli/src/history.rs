//! `ozctl history`: the ended requests oz keeps (`--history-retention`, 7 days by default),
//! expired or revoked (`ozctl revoke`), for access reviews: who had access to which pod,
//! through which template, from when to when, and how it ended.

use std::time::Duration;

use clap::{Args, ValueEnum};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use oz_api::{AccessKind, RequestPhase};
use serde::Serialize;

use super::{
    csv,
    error::CliError,
    identity::whoami,
    output::{self, ObjectFormat},
    requests::{self, RequestView},
    session::Session,
    table::Table,
    terminal_text::printable_line,
    timefmt,
};

/// `ozctl history`.
#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// How far back, by when access ended: days such as 7d, or a duration such as 36h
    #[arg(long, default_value = "7d", value_parser = timefmt::parse_since, value_name = "AGE")]
    pub since: Duration,
    /// Everyone's requests, not only yours
    #[arg(long)]
    pub all: bool,
    /// Output format
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        value_name = "FORMAT"
    )]
    pub output: HistoryFormat,
}

/// How `history` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HistoryFormat {
    Table,
    Csv,
    Json,
}

/// One ended grant, as an access review needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    pub name: String,
    pub kind: String,
    pub namespace: String,
    /// Who asked (`spec.requester.username`).
    pub requester: String,
    /// Their groups when they asked.
    pub groups: Vec<String>,
    pub template: String,
    /// The pod the access was for.
    pub pod: String,
    /// When the request was created, RFC 3339.
    pub started: String,
    /// When access ended, RFC 3339.
    pub ended: String,
    /// How long access lasted.
    pub duration_seconds: i64,
    /// How it ended: `expired`, or `revoked by USER`.
    pub how: String,
}

/// The ended (expired or revoked) requests among `views` that ended within `since` of `now`,
/// made by `user` if given, oldest first.
pub fn records(
    views: &[RequestView],
    now: Timestamp,
    since: Duration,
    user: Option<&str>,
) -> Vec<HistoryRecord> {
    let since = SignedDuration::try_from(since).unwrap_or(SignedDuration::MAX);
    let cutoff = now.checked_sub(since).unwrap_or(Timestamp::MIN);
    let mut ended: Vec<(Timestamp, HistoryRecord)> = views
        .iter()
        .filter(|v| v.phase().is_some_and(RequestPhase::is_ended))
        .filter(|v| user.is_none_or(|u| v.is_by(u)))
        .filter_map(|v| {
            let end = v.ended_at()?;
            (end >= cutoff).then(|| (end, record(v, end)))
        })
        .collect();
    ended.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    ended.into_iter().map(|(_, r)| r).collect()
}

fn record(view: &RequestView, end: Timestamp) -> HistoryRecord {
    HistoryRecord {
        name: view.name.clone(),
        kind: view.kind.request_kind().to_string(),
        namespace: view.namespace.clone(),
        requester: view.requester_name().to_string(),
        groups: view
            .requester
            .as_ref()
            .map(|r| r.groups.clone())
            .unwrap_or_default(),
        template: view.template.clone(),
        pod: view.status.pod_name.clone().unwrap_or_default(),
        started: view.created.map(|t| t.to_string()).unwrap_or_default(),
        ended: end.to_string(),
        duration_seconds: view
            .created
            .map_or(0, |start| end.duration_since(start).as_secs().max(0)),
        how: match view.revocation() {
            Some((by, _)) => format!("revoked by {by}"),
            None => "expired".into(),
        },
    }
}

/// The records as CSV, with a header line.
pub fn to_csv(records: &[HistoryRecord]) -> String {
    let mut text = csv::record([
        "name",
        "kind",
        "namespace",
        "requester",
        "groups",
        "template",
        "pod",
        "started",
        "ended",
        "durationSeconds",
        "how",
    ]);
    for r in records {
        text.push_str(&csv::record([
            r.name.as_str(),
            r.kind.as_str(),
            r.namespace.as_str(),
            r.requester.as_str(),
            r.groups.join(" ").as_str(),
            r.template.as_str(),
            r.pod.as_str(),
            r.started.as_str(),
            r.ended.as_str(),
            r.duration_seconds.to_string().as_str(),
            r.how.as_str(),
        ]));
    }
    text
}

/// The records as a table, times in local time.
pub fn to_table(records: &[HistoryRecord]) -> Table {
    let mut table = Table::new([
        "NAME",
        "KIND",
        "REQUESTER",
        "TEMPLATE",
        "POD",
        "STARTED",
        "ENDED",
        "LASTED",
        "HOW",
    ]);
    let local = |text: &str| {
        text.parse::<Timestamp>()
            .map(timefmt::local_short)
            .unwrap_or_default()
    };
    for r in records {
        table.row([
            r.name.clone(),
            if r.kind == AccessKind::Pod.request_kind() {
                "pod".into()
            } else {
                "exec".into()
            },
            r.requester.clone(),
            r.template.clone(),
            r.pod.clone(),
            local(&r.started),
            local(&r.ended),
            timefmt::compact(Duration::from_secs(r.duration_seconds.max(0) as u64)),
            printable_line(&r.how).into_owned(),
        ]);
    }
    table
}

/// Runs `ozctl history`.
pub async fn run(session: &Session, args: HistoryArgs) -> Result<(), CliError> {
    let views = requests::list(session, &AccessKind::ALL).await?;
    let me = if args.all {
        None
    } else {
        Some(whoami(session).await?.username)
    };
    let records = records(&views, Timestamp::now(), args.since, me.as_deref());
    match args.output {
        HistoryFormat::Csv => output::print(&to_csv(&records)),
        HistoryFormat::Json => output::print(&output::render(&records, ObjectFormat::Json)?),
        HistoryFormat::Table if records.is_empty() => {
            eprintln!(
                "No access {}ended in namespace {} in the last {}.",
                if args.all { "" } else { "of yours " },
                session.namespace,
                timefmt::compact(args.since)
            );
            Ok(())
        }
        HistoryFormat::Table => output::print(&to_table(&records).render()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use oz_api::{ExecAccessRequest, ExecAccessRequestSpec, RequestStatus, Requester};

    use super::*;

    fn view(name: &str, user: &str, phase: RequestPhase, start: &str, end: &str) -> RequestView {
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
                    groups: vec!["devs".into(), "system:authenticated".into()],
                }),
            },
        );
        request.metadata.namespace = Some("team".into());
        request.metadata.creation_timestamp = Some(Time(start.parse().unwrap()));
        request.status = Some(RequestStatus {
            phase: Some(phase),
            pod_name: Some("web-0".into()),
            expires_at: Some(Time(end.parse().unwrap())),
            ..Default::default()
        });
        RequestView::of(&request)
    }

    fn sample() -> Vec<RequestView> {
        vec![
            view(
                "alice-new",
                "alice",
                RequestPhase::Expired,
                "2026-11-20T10:00:00Z",
                "2026-11-20T10:30:00Z",
            ),
            view(
                "alice-old",
                "alice",
                RequestPhase::Expired,
                "2026-11-01T10:00:00Z",
                "2026-11-01T11:00:00Z",
            ),
            view(
                "alice-live",
                "alice",
                RequestPhase::Ready,
                "2026-11-21T11:00:00Z",
                "2026-11-21T13:00:00Z",
            ),
            view(
                "bob-1",
                "bob",
                RequestPhase::Expired,
                "2026-11-19T09:00:00Z",
                "2026-11-19T09:05:00Z",
            ),
        ]
    }

    #[test]
    fn only_expired_requests_within_the_window() {
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let week = Duration::from_secs(7 * 86_400);
        let mine = records(&sample(), now, week, Some("alice"));
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].name, "alice-new");
        assert_eq!(mine[0].duration_seconds, 1800);
        assert_eq!(mine[0].ended, "2026-11-20T10:30:00Z");
        let everyone: Vec<String> = records(&sample(), now, week, None)
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(everyone, ["bob-1", "alice-new"], "oldest first");
        let month = Duration::from_secs(30 * 86_400);
        assert_eq!(records(&sample(), now, month, Some("alice")).len(), 2);
    }

    #[test]
    fn csv_has_a_header_and_one_line_per_grant() {
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let records = records(
            &sample(),
            now,
            Duration::from_secs(86_400 * 7),
            Some("alice"),
        );
        assert_eq!(
            to_csv(&records),
            "name,kind,namespace,requester,groups,template,pod,started,ended,durationSeconds,how\r\n\
             alice-new,ExecAccessRequest,team,alice,devs system:authenticated,web-exec,web-0,2026-11-20T10:00:00Z,2026-11-20T10:30:00Z,1800,expired\r\n"
        );
    }

    #[test]
    fn table_lists_who_had_what_and_for_how_long() {
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let records = records(&sample(), now, Duration::from_secs(86_400 * 7), None);
        let text = to_table(&records).render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME        KIND   REQUESTER   TEMPLATE   POD     STARTED"));
        assert!(lines[1].starts_with("bob-1       exec   bob         web-exec   web-0"));
        assert!(lines[1].ends_with("5m       expired"), "{}", lines[1]);
        assert!(lines[2].ends_with("30m      expired"), "{}", lines[2]);
    }

    /// A grant revoked before its end is in the history too, ended when it was revoked, with
    /// who revoked it: access reviews see every grant, not only those that ran their course.
    #[test]
    fn a_revoked_grant_is_listed_ended_at_its_revocation_by_whom() {
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let mut revoked = view(
            "alice-cut",
            "alice",
            RequestPhase::Revoked,
            "2026-11-21T10:00:00Z",
            "2026-11-21T14:00:00Z",
        );
        revoked.status.conditions.push(oz_api::Condition::new(
            oz_api::condition_type::ACCESS_STILL_VALID,
            "False",
            oz_api::condition_reason::REVOKED,
            "Access revoked by bob".into(),
            None,
            Time("2026-11-21T10:01:00Z".parse().unwrap()),
        ));
        revoked.object["metadata"]["annotations"] =
            serde_json::json!({oz_api::REVOKE_ANNOTATION: "bob"});
        let mut views = sample();
        views.push(revoked);
        let mine = records(&views, now, Duration::from_secs(2 * 86_400), Some("alice"));
        let names: Vec<&str> = mine.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["alice-new", "alice-cut"]);
        let cut = &mine[1];
        assert_eq!(cut.ended, "2026-11-21T10:01:00Z");
        assert_eq!(cut.duration_seconds, 60);
        assert_eq!(cut.how, "revoked by bob");
        let text = to_table(&mine).render();
        assert!(
            text.lines()
                .nth(2)
                .unwrap()
                .ends_with("1m       revoked by bob"),
            "{text}"
        );
    }
}
