//! `ozctl audit FILE...`: the records of oz's audit files for an access review (who went into
//! which pod, when, with which command, under which grant), each marked verified or not.
//! The files are verified first (`oz_audit::verify_records`); a record that no valid
//! checkpoint vouches for is shown, marked, never hidden, and stderr says how many and why.

use std::{path::PathBuf, time::Duration};

use clap::Args;
use k8s_openapi::jiff::{SignedDuration, Timestamp, Unit};
use oz_audit::{CheckedRecord, ProblemKind, PublicKey, Report};
use serde_json::Value;

use super::{
    brokered,
    problems::{problem_line, unreadable},
};
use crate::{
    error::CliError,
    output::{self, ObjectFormat, TableFormat},
    table::Table,
    timefmt,
};

/// `ozctl audit [FILE...]`.
#[derive(Args, Debug)]
pub struct ReviewArgs {
    /// oz's audit files (--audit-log-path and its rotated PATH.* files), in any order
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Only records from this far back: days such as 7d, or a duration such as 1h or 36h
    #[arg(long, value_parser = timefmt::parse_since, value_name = "AGE")]
    pub since: Option<Duration>,
    /// Only this user's records (the user name the apiserver authenticated)
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Only records about this pod (by name; with -n, in that namespace)
    #[arg(long, value_name = "POD")]
    pub pod: Option<String>,
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

/// What a record says, by key: `""` when it has no such text field.
fn text<'a>(record: &'a CheckedRecord, key: &str) -> &'a str {
    record.record.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The items of a record's array field: none when it has no such array.
fn items<'a>(record: &'a CheckedRecord, key: &str) -> impl Iterator<Item = &'a Value> {
    record
        .record
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// When oz saw it, if its `time` reads as a time.
fn time(record: &CheckedRecord) -> Option<Timestamp> {
    text(record, "time").parse().ok()
}

/// Which records to show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Records at or after this time only. A record whose time cannot be read is kept: it is
    /// evidence of something, and hiding it would be worse than showing too much.
    pub after: Option<Timestamp>,
    pub user: Option<String>,
    pub pod: Option<String>,
    pub namespace: Option<String>,
}

impl Filter {
    /// The filter of the command line, `since` counted back from `now`.
    pub fn new(args: &ReviewArgs, namespace: Option<String>, now: Timestamp) -> Filter {
        let after = args.since.map(|since| {
            let since = SignedDuration::try_from(since).unwrap_or(SignedDuration::MAX);
            now.checked_sub(since).unwrap_or(Timestamp::MIN)
        });
        Filter {
            after,
            user: args.user.clone(),
            pod: args.pod.clone(),
            namespace,
        }
    }

    /// Whether `record` is one to show.
    pub fn admits(&self, record: &CheckedRecord) -> bool {
        let matches = |wanted: &Option<String>, key: &str| {
            wanted.as_deref().is_none_or(|w| text(record, key) == w)
        };
        let recent = match (self.after, time(record)) {
            (Some(after), Some(time)) => time >= after,
            _ => true,
        };
        // A brokered stream is its session's user's too, once attributed.
        let users = self.user.as_deref().is_none_or(|wanted| {
            text(record, "user") == wanted || brokered::session_user(record) == Some(wanted)
        });
        recent && users && matches(&self.pod, "pod") && matches(&self.namespace, "namespace")
    }
}

/// The records `filter` admits, in the order given (`oz_audit::verify_records` gives them in
/// seq order).
pub fn select(records: Vec<CheckedRecord>, filter: &Filter) -> Vec<CheckedRecord> {
    records.into_iter().filter(|r| filter.admits(r)).collect()
}

/// The event in a word: `exec`, `attach`, `port-forward` or `debug` (oz's Event reasons
/// `PodExec`, ...), with `(denied)` when oz refused it, `(brokered)` when oz opened it for a
/// session.
fn event_word(record: &CheckedRecord) -> String {
    let event = text(record, "event");
    let word = match event {
        "PodExec" => "exec",
        "PodAttach" => "attach",
        "PodPortForward" => "port-forward",
        "PodDebug" => "debug",
        other => other,
    };
    if record.record.get("allowed").and_then(Value::as_bool) == Some(false) {
        format!("{word} (denied)")
    } else if brokered::is_stream(record) {
        format!("{word} (brokered)")
    } else {
        word.to_string()
    }
}

/// The grant in a word: `exec/NAME` or `pod/NAME` for an ExecAccessRequest or
/// PodAccessRequest, `none` without one.
fn grant_word(record: &CheckedRecord) -> String {
    let grant = brokered::session_grant(record).or_else(|| record.record.get("grant"));
    match grant.and_then(Value::as_object) {
        Some(grant) => {
            let text = |key: &str| grant.get(key).and_then(Value::as_str).unwrap_or("?");
            let kind = match text("kind") {
                "ExecAccessRequest" => "exec",
                "PodAccessRequest" => "pod",
                other => other,
            };
            format!("{kind}/{}", text("name"))
        }
        None => "none".into(),
    }
}

/// The command as one cell: its words joined by spaces, each quoted when it holds a space or a
/// quote, so `sh -c 'echo hi'` reads back as it was typed; for port-forward, the ports.
fn command_cell(record: &CheckedRecord) -> String {
    let words: Vec<String> = items(record, "command")
        .filter_map(Value::as_str)
        .map(|word| {
            if word.is_empty() || word.contains([' ', '\'', '"', '\t']) {
                format!("'{}'", word.replace('\'', r"'\''"))
            } else {
                word.to_string()
            }
        })
        .collect();
    if !words.is_empty() {
        return words.join(" ");
    }
    let ports: Vec<String> = items(record, "ports").map(Value::to_string).collect();
    if ports.is_empty() {
        String::new()
    } else {
        format!("ports {}", ports.join(","))
    }
}

/// The records as a table: TIME (UTC, to the second, as the apiserver's audit log has it),
/// USER, EVENT, POD (namespace/name), COMMAND, GRANT, CALLER and VERIFIED. A brokered stream
/// shows its session's user and grant ([`brokered::attribute`]).
pub fn to_table(records: &[CheckedRecord]) -> Table {
    let mut table = Table::new([
        "TIME", "USER", "EVENT", "POD", "COMMAND", "GRANT", "CALLER", "VERIFIED",
    ]);
    for r in records {
        table.row([
            time(r)
                .and_then(|t| t.round(Unit::Second).ok())
                .map_or_else(|| text(r, "time").to_string(), |t| t.to_string()),
            brokered::session_user(r)
                .unwrap_or_else(|| text(r, "user"))
                .to_string(),
            event_word(r),
            format!("{}/{}", text(r, "namespace"), text(r, "pod")),
            command_cell(r),
            grant_word(r),
            match text(r, "caller") {
                "" => "-".to_string(),
                caller => caller.to_string(),
            },
            if r.verified { "yes" } else { "NO" }.to_string(),
        ]);
    }
    table
}

/// What stderr says about the records shown that are not verified, or nothing when all are.
/// `why` is the verification's own account of what is wrong (the unsigned tail, an edited
/// entry, ...), one problem a line.
pub fn unverified_note(records: &[CheckedRecord], why: &[String]) -> Option<String> {
    let unverified = records.iter().filter(|r| !r.verified).count();
    if unverified == 0 {
        return None;
    }
    let mut note = format!(
        "{unverified} of the {} records shown {} not verified (VERIFIED NO): no valid checkpoint vouches for {}.",
        records.len(),
        if unverified == 1 { "is" } else { "are" },
        if unverified == 1 { "it" } else { "them" },
    );
    for reason in why {
        note.push_str("\n  ");
        note.push_str(reason);
    }
    Some(note)
}

/// The exit code of a review: 0 when the files are intact but for the unsigned tail (a live
/// log always has one; its records are shown marked), 1 when the verification found anything
/// else. Whether any record matched does not count.
pub fn exit_code(report: &Report) -> u8 {
    if report.is_intact(true) { 0 } else { 1 }
}

/// Why records are not verified: each problem of the files, one a line, and a note when the
/// chain starts after seq 1.
pub fn reasons(report: &Report) -> Vec<String> {
    let mut why: Vec<String> = report.problems.iter().map(problem_line).collect();
    if report
        .problems
        .iter()
        .any(|p| p.kind == ProblemKind::UnsignedTail)
    {
        why.push(
            "(the unsigned tail is normal in a live log: oz signs it at its next checkpoint, \
             --audit-checkpoint-interval, and when it stops)"
                .into(),
        );
    }
    why
}

/// Runs `ozctl audit FILE...` with these trusted keys; `namespace` is `-n`, if given.
pub fn run(
    args: &ReviewArgs,
    namespace: Option<String>,
    keys: &[PublicKey],
) -> Result<u8, CliError> {
    let (report, mut records) = oz_audit::verify_records(&args.files, keys).map_err(unreadable)?;
    brokered::attribute(&mut records);
    let filter = Filter::new(args, namespace, Timestamp::now());
    let shown = select(records, &filter);
    match args.output {
        TableFormat::Json => output::print(&output::render(&shown, ObjectFormat::Json)?)?,
        TableFormat::Table if shown.is_empty() => {
            eprintln!(
                "No records match, of the {} in these files.",
                report.records
            )
        }
        TableFormat::Table => output::print(&to_table(&shown).render())?,
    }
    if let Some(note) = unverified_note(&shown, &reasons(&report)) {
        eprintln!("{note}");
    } else if !report.is_intact(true) {
        eprintln!(
            "The files have problems outside the records shown; see: ozctl audit verify FILE..."
        );
        for reason in reasons(&report) {
            eprintln!("  {reason}");
        }
    }
    Ok(exit_code(&report))
}

#[cfg(test)]
mod tests {
    use oz_audit::Signer;
    use serde_json::json;

    use super::*;

    fn record(seq: u64, verified: bool, fields: Value) -> CheckedRecord {
        CheckedRecord {
            file: "audit.jsonl".into(),
            line: seq,
            seq,
            verified,
            record: fields.as_object().unwrap().clone(),
        }
    }

    fn exec(seq: u64, time: &str, user: &str, ns: &str, pod: &str) -> CheckedRecord {
        record(
            seq,
            true,
            json!({
                "time": time, "event": "PodExec", "user": user, "namespace": ns, "pod": pod,
                "command": ["sh", "-c", "echo it's me"], "allowed": true,
                "grant": {"kind": "ExecAccessRequest", "name": format!("{user}-x7k2p"), "template": "web"},
                "caller": "apiserver",
            }),
        )
    }

    fn sample() -> Vec<CheckedRecord> {
        vec![
            exec(1, "2026-11-21T09:00:00Z", "alice", "team", "web-1"),
            exec(2, "2026-11-21T11:00:00Z", "bob", "team", "web-0"),
            exec(3, "2026-11-21T11:30:00Z", "alice", "team", "web-0"),
            exec(4, "2026-11-21T11:45:00Z", "alice", "other", "web-0"),
        ]
    }

    fn seqs(records: &[CheckedRecord]) -> Vec<u64> {
        records.iter().map(|r| r.seq).collect()
    }

    fn parse(args: &[&str]) -> ReviewArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Test {
            #[command(flatten)]
            review: ReviewArgs,
        }
        let mut all = vec!["audit"];
        all.extend(args);
        Test::try_parse_from(all).unwrap().review
    }

    #[test]
    fn filters_by_user_pod_namespace_and_age() {
        let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
        let filter = |args: &[&str], ns: Option<&str>| {
            let mut all = vec!["audit.jsonl"];
            all.extend(args);
            Filter::new(&parse(&all), ns.map(String::from), now)
        };
        assert_eq!(seqs(&select(sample(), &filter(&[], None))), [1, 2, 3, 4]);
        assert_eq!(
            seqs(&select(sample(), &filter(&["--user", "alice"], None))),
            [1, 3, 4]
        );
        assert_eq!(
            seqs(&select(sample(), &filter(&["--pod", "web-0"], None))),
            [2, 3, 4]
        );
        assert_eq!(
            seqs(&select(
                sample(),
                &filter(&["--pod", "web-0"], Some("team"))
            )),
            [2, 3]
        );
        assert_eq!(
            seqs(&select(sample(), &filter(&["--since", "1h"], None))),
            [2, 3, 4],
            "11:00 is exactly one hour back: kept"
        );
        assert_eq!(
            seqs(&select(
                sample(),
                &filter(&["--since", "20m", "--user", "alice"], None)
            )),
            [4]
        );
        assert!(select(sample(), &filter(&["--user", "carol"], None)).is_empty());
        // A record whose time cannot be read is shown rather than hidden by --since.
        let odd = record(9, false, json!({"time": "yesterday", "user": "alice"}));
        assert_eq!(
            seqs(&select(vec![odd], &filter(&["--since", "1h"], None))),
            [9]
        );
    }

    #[test]
    fn since_takes_days_or_durations_and_refuses_the_rest() {
        use clap::Parser;
        #[derive(Parser, Debug)]
        struct Test {
            #[command(flatten)]
            review: ReviewArgs,
        }
        let since = |text: &str| parse(&["f", "--since", text]).since;
        assert_eq!(since("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(since("90m"), Some(Duration::from_secs(5400)));
        assert_eq!(since("2d"), Some(Duration::from_secs(2 * 86_400)));
        assert_eq!(parse(&["f"]).since, None);
        for bad in ["1w", "0s", "-1h", "soon", "1.5d"] {
            assert!(
                Test::try_parse_from(["audit", "f", "--since", bad]).is_err(),
                "{bad}"
            );
        }
        assert!(
            Test::try_parse_from(["audit"]).is_err(),
            "at least one file is needed"
        );
    }

    /// oz's own exec for carol's brokered session reads as carol's, under her grant, marked
    /// brokered, and `--user carol` finds it.
    #[test]
    fn a_brokered_exec_shows_the_sessions_user_and_grant() {
        let oz = "system:serviceaccount:oz-system:oz-manager";
        let mut records = vec![
            record(
                1,
                true,
                json!({"time": "2026-11-21T09:00:00.1Z", "event": "PodExec", "user": oz,
                       "namespace": "team", "pod": "web-0", "command": ["sh"], "allowed": true,
                       "brokered": true, "grant": null, "caller": "apiserver"}),
            ),
            record(
                2,
                true,
                json!({"time": "2026-11-21T09:00:00.2Z", "event": "session-start", "user": "carol",
                       "namespace": "team", "pod": "web-0", "command": ["sh"], "allowed": true,
                       "brokered": true, "caller": "apiserver",
                       "grant": {"kind": "ExecAccessRequest", "name": "carol-web", "template": "web"},
                       "session": {"id": "s1", "replica": "oz-0"}}),
            ),
        ];
        brokered::attribute(&mut records);
        let carols = Filter {
            user: Some("carol".into()),
            ..Filter::default()
        };
        let shown = select(records, &carols);
        assert_eq!(seqs(&shown), [1, 2]);
        let text = to_table(&shown[..1]).render();
        let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "2026-11-21T09:00:00Z",
                "carol",
                "exec",
                "(brokered)",
                "team/web-0",
                "sh",
                "exec/carol-web",
                "apiserver",
                "yes"
            ]
        );
    }

    #[test]
    fn the_table_says_who_did_what_where_under_which_grant_and_whether_it_is_verified() {
        let mut records = select(sample(), &Filter::default());
        records[3].verified = false;
        records[3]
            .record
            .insert("caller".into(), json!("unverified"));
        records[3].record.insert("allowed".into(), json!(false));
        records[3].record.insert("grant".into(), Value::Null);
        let text = to_table(&records).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "TIME", "USER", "EVENT", "POD", "COMMAND", "GRANT", "CALLER", "VERIFIED"
            ]
        );
        assert_eq!(
            lines[1],
            "2026-11-21T09:00:00Z   alice   exec            team/web-1    sh -c 'echo it'\\''s me'   exec/alice-x7k2p   apiserver    yes"
        );
        assert!(
            lines[4].ends_with("exec (denied)   other/web-0   sh -c 'echo it'\\''s me'   none               unverified   NO"),
            "{}",
            lines[4]
        );
        let port_forward = record(
            5,
            true,
            json!({"time": "2026-11-21T11:50:00Z", "event": "PodPortForward", "user": "bob",
                   "namespace": "team", "pod": "db-0", "command": [], "ports": [5432], "grant": null}),
        );
        let text = to_table(&[port_forward]).render();
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .ends_with("bob    port-forward   team/db-0   ports 5432   none    -        yes"),
            "{text}"
        );
    }

    #[test]
    fn a_review_exits_1_only_when_the_files_have_problems_beyond_the_unsigned_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (path, key) = crate::fixtures::audit_log(dir.path(), 2);
        let (report, records) =
            oz_audit::verify_records(&[&path], std::slice::from_ref(&key)).unwrap();
        assert_eq!(exit_code(&report), 0, "a live log's unsigned tail");
        let verified: Vec<(String, bool)> = records
            .iter()
            .map(|r| (text(r, "user").to_string(), r.verified))
            .collect();
        assert_eq!(
            verified,
            [
                ("alice".to_string(), true),
                ("bob".to_string(), true),
                ("alice".to_string(), true),
                ("carol".to_string(), false),
                ("carol".to_string(), false),
            ]
        );
        let why = reasons(&report);
        assert!(why[0].contains("(seq 5-6): unsigned tail"), "{why:?}");
        assert!(why[1].contains("normal in a live log"), "{why:?}");

        let log = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        let swapped = [lines[1], lines[0], lines[2], lines[3], lines[4], lines[5]];
        std::fs::write(&path, swapped.join("\n") + "\n").unwrap();
        let (report, records) =
            oz_audit::verify_records(&[&path], std::slice::from_ref(&key)).unwrap();
        assert_eq!(exit_code(&report), 1, "two records swapped");
        // Their bytes and places in the chain are still what the checkpoint signed: only the
        // file's order is wrong, which the report names.
        assert!(records.iter().take(3).all(|r| r.verified), "{records:?}");

        std::fs::write(&path, log.replacen("\"bob\"", "\"eve\"", 1)).unwrap();
        let (report, records) = oz_audit::verify_records(&[&path], &[key]).unwrap();
        assert_eq!(exit_code(&report), 1, "a record edited");
        let edited = records.iter().find(|r| r.seq == 2).unwrap();
        assert_eq!((text(edited, "user"), edited.verified), ("eve", false));
        let args = parse(&[&path.display().to_string()]);
        assert_eq!(
            run(&args, None, &[Signer::generate().unwrap().public_key()]).unwrap(),
            1,
            "a key not trusted"
        );
        let missing = parse(&[&dir.path().join("nope").display().to_string()]);
        assert_eq!(run(&missing, None, &[]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn unverified_records_are_counted_with_the_reasons() {
        let mut records = sample();
        assert_eq!(unverified_note(&records, &[]), None);
        records[0].verified = false;
        records[1].verified = false;
        let note = unverified_note(
            &records,
            &["audit.jsonl:7 (seq 7): unsigned tail: 2 entries after the last checkpoint".into()],
        )
        .unwrap();
        assert_eq!(
            note,
            "2 of the 4 records shown are not verified (VERIFIED NO): no valid checkpoint vouches for them.\n  \
             audit.jsonl:7 (seq 7): unsigned tail: 2 entries after the last checkpoint"
        );
    }
}
