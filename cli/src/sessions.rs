//! `ozctl sessions [REQUEST]`: the brokered sessions of a request (of every request in the
//! namespace without one), newest first, from the requests' `status.sessions`, which the oz
//! replica serving each session writes. Each row starts with the session's id, the name of its
//! recording.
//!
//! A request's status keeps only its newest sessions ([`MAX_SESSIONS_IN_STATUS`]); when it had
//! more, a footer says how many (`status.sessionCounts`).

use clap::Args;
use k8s_openapi::jiff::Timestamp;
use oz_api::{
    AccessKind, SessionEndReason, SessionRecord, SessionStream, session::MAX_SESSIONS_IN_STATUS,
};
use serde::Serialize;

use super::{
    error::CliError,
    kind_arg,
    output::{self, TableFormat},
    requests::{self, RequestView},
    session::Session,
    table::Table,
    timefmt,
};

/// `ozctl sessions`.
#[derive(Args, Debug)]
pub struct SessionsArgs {
    /// The request whose sessions to list [default: every request in the namespace]
    pub request: Option<String>,
    /// Which kind, when both an exec and a pod request have this name (or, without REQUEST,
    /// only requests of this kind)
    #[arg(long, value_parser = kind_arg::parser())]
    pub kind: Option<AccessKind>,
    /// In every namespace, not only the current one (without REQUEST)
    #[arg(short = 'A', long, conflicts_with = "request")]
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

/// One session of one request: a row of the table, an entry of `-o json`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry<'a> {
    pub namespace: &'a str,
    pub request: &'a str,
    pub kind: &'static str,
    #[serde(flatten)]
    pub session: &'a SessionRecord,
}

/// The sessions of `requests`, newest first (by start, then id).
pub fn entries(requests: &[RequestView]) -> Vec<SessionEntry<'_>> {
    let mut entries: Vec<SessionEntry<'_>> = requests
        .iter()
        .flat_map(|request| {
            request
                .status
                .sessions
                .iter()
                .map(move |session| SessionEntry {
                    namespace: &request.namespace,
                    request: &request.name,
                    kind: request.kind.request_kind(),
                    session,
                })
        })
        .collect();
    entries.sort_by(|a, b| {
        (b.session.started_at.0, &b.session.id).cmp(&(a.session.started_at.0, &a.session.id))
    });
    entries
}

/// The table: SESSION (the id) first, then REQUEST (`namespace/name` with `-A`), USER, POD,
/// COMMAND, STARTED, ENDED (`open` while open) and REASON; times as `when` renders them.
pub fn sessions_table(
    entries: &[SessionEntry<'_>],
    all_namespaces: bool,
    when: impl Fn(Timestamp) -> String,
) -> Table {
    let mut table = Table::new([
        "SESSION", "REQUEST", "USER", "POD", "COMMAND", "STARTED", "ENDED", "REASON",
    ]);
    for entry in entries {
        let s = entry.session;
        let request = if all_namespaces {
            format!("{}/{}", entry.namespace, entry.request)
        } else {
            entry.request.to_string()
        };
        let command = match s.stream {
            SessionStream::Attach => "(attach)".to_string(),
            SessionStream::Exec => s.command.join(" "),
        };
        let pod = match &s.container {
            Some(container) => format!("{}/{container}", s.pod),
            None => s.pod.clone(),
        };
        let ended = s
            .ended_at
            .as_ref()
            .map_or_else(|| "open".to_string(), |t| when(t.0));
        table.row([
            s.id.clone(),
            request,
            s.user.clone(),
            pod,
            command,
            when(s.started_at.0),
            ended,
            s.end_reason.map(reason_word).unwrap_or_default(),
        ]);
    }
    table
}

/// A reason as the API spells it: `Expired`, `IdleTimeout`, ...
fn reason_word(reason: SessionEndReason) -> String {
    format!("{reason:?}")
}

/// One line for each request that had more sessions than its status keeps.
pub fn footer(requests: &[RequestView]) -> Vec<String> {
    requests
        .iter()
        .filter_map(|request| {
            let counts = request.status.session_counts?;
            let kept = request.status.sessions.len();
            (counts.total as usize > kept).then(|| {
                format!(
                    "{} had {} sessions ({} open); its status keeps the newest {} (at most {MAX_SESSIONS_IN_STATUS}): the others are in oz's audit log and recordings",
                    request.name, counts.total, counts.open, kept
                )
            })
        })
        .collect()
}

/// Runs `ozctl sessions`.
pub async fn run(session: &Session, args: SessionsArgs) -> Result<(), CliError> {
    let requests = match &args.request {
        Some(name) => vec![requests::find(session, name, args.kind).await?],
        None => {
            let kinds = kind_arg::or_both(args.kind);
            requests::list_in(session, &kinds, args.all_namespaces).await?
        }
    };
    let entries = entries(&requests);
    match args.output {
        TableFormat::Json => output::print(&output::render(&entries, output::ObjectFormat::Json)?),
        TableFormat::Table if entries.is_empty() => {
            let place = match (&args.request, args.all_namespaces) {
                (Some(name), _) => format!("request {name}"),
                (None, true) => "any namespace".into(),
                (None, false) => format!("namespace {}", session.namespace),
            };
            eprintln!(
                "No brokered sessions in {place}. Only grants of a template with sessionMode: Brokered have sessions; open one with: {}",
                session.hint("exec REQUEST")
            );
            Ok(())
        }
        TableFormat::Table => {
            let table = sessions_table(&entries, args.all_namespaces, timefmt::local);
            output::print(&table.render())?;
            for line in footer(&requests) {
                eprintln!("{line}");
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use oz_api::{RequestStatus, SessionCounts};
    use serde_json::json;

    use super::*;
    use crate::fixtures::exec_request;

    fn record(id: &str, started: &str, ended: Option<(&str, &str)>) -> SessionRecord {
        let mut value = json!({
            "id": id, "user": "alice", "stream": "Exec", "pod": "web-0",
            "command": ["/bin/sh", "-c", "ls"], "startedAt": started,
        });
        if let Some((at, reason)) = ended {
            value["endedAt"] = json!(at);
            value["endReason"] = json!(reason);
        }
        serde_json::from_value(value).unwrap()
    }

    fn request(name: &str, sessions: Vec<SessionRecord>, total: u32) -> RequestView {
        let mut request = exec_request(None);
        request.metadata.name = Some(name.into());
        request.metadata.namespace = Some("team".into());
        request.status = Some(RequestStatus {
            session_counts: Some(SessionCounts {
                total,
                open: sessions.iter().filter(|s| s.ended_at.is_none()).count() as u32,
            }),
            sessions,
            ..Default::default()
        });
        RequestView::of(&request)
    }

    fn utc(t: Timestamp) -> String {
        t.strftime("%H:%M:%S").to_string()
    }

    #[test]
    fn the_table_lists_every_requests_sessions_newest_first_with_the_id_first() {
        let requests = [
            request(
                "alice-x7k2p",
                vec![
                    record(
                        "s-old",
                        "2026-11-21T10:00:00Z",
                        Some(("2026-11-21T10:05:00Z", "Exited")),
                    ),
                    record("s-open", "2026-11-21T10:30:00Z", None),
                ],
                2,
            ),
            request(
                "bob-q1w2e",
                vec![record(
                    "s-mid",
                    "2026-11-21T10:10:00Z",
                    Some(("2026-11-21T10:20:00Z", "Expired")),
                )],
                1,
            ),
        ];
        let table = sessions_table(&entries(&requests), false, utc).render();
        assert_eq!(
            table,
            "SESSION   REQUEST       USER    POD     COMMAND         STARTED    ENDED      REASON\n\
             s-open    alice-x7k2p   alice   web-0   /bin/sh -c ls   10:30:00   open\n\
             s-mid     bob-q1w2e     alice   web-0   /bin/sh -c ls   10:10:00   10:20:00   Expired\n\
             s-old     alice-x7k2p   alice   web-0   /bin/sh -c ls   10:00:00   10:05:00   Exited\n"
        );
        let all = sessions_table(&entries(&requests), true, utc).render();
        assert!(all.contains("team/alice-x7k2p"), "{all}");
        assert!(footer(&requests).is_empty());
    }

    #[test]
    fn a_request_with_more_sessions_than_its_status_keeps_gets_a_footer() {
        let requests = [request(
            "alice-x7k2p",
            vec![record("s-open", "2026-11-21T10:30:00Z", None)],
            25,
        )];
        assert_eq!(
            footer(&requests),
            [
                "alice-x7k2p had 25 sessions (1 open); its status keeps the newest 1 (at most 20): the others are in oz's audit log and recordings"
            ]
        );
    }

    #[test]
    fn json_entries_name_their_request_and_keep_the_record_fields() {
        let requests = [request(
            "alice-x7k2p",
            vec![record("s-open", "2026-11-21T10:30:00Z", None)],
            1,
        )];
        let value = serde_json::to_value(entries(&requests)).unwrap();
        assert_eq!(value[0]["id"], "s-open");
        assert_eq!(value[0]["request"], "alice-x7k2p");
        assert_eq!(value[0]["namespace"], "team");
        assert_eq!(value[0]["kind"], "ExecAccessRequest");
        assert_eq!(value[0]["startedAt"], "2026-11-21T10:30:00Z");
        assert!(value[0].get("endedAt").is_none());
    }
}
