//! `ozctl audit FILE...`: the records of oz's audit files for an access review (who went into
//! which pod, when, with which command, under which grant), each marked verified or not.
//! The files are verified first (`oz_audit::verify_records`); a record that no valid
//! checkpoint vouches for is shown, marked, never hidden, and stderr says how many and why.
//! A fleet's files, labelled with their clusters ([`super::trails`]), are verified each with
//! its own cluster's keys, and each record shows its cluster.

use std::time::Duration;

use clap::{Args, builder::NonEmptyStringValueParser};
use k8s_openapi::jiff::{SignedDuration, Timestamp, Unit};
use oz_audit::{CheckedRecord, ProblemKind, PublicKey, Report};
use serde::Serialize;
use serde_json::Value;

use super::{
    brokered,
    problems::{problem_line, unreadable},
    trails::{self, Labelled, Trail, labelled_parser},
    trusted_keys::KeyedTrail,
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
    /// oz's audit files (--audit-log-path and its rotated PATH.* files), in any order; as
    /// CLUSTER=FILE, a fleet cluster's, verified only with the keys labelled CLUSTER
    #[arg(value_name = "[CLUSTER=]FILE", required = true, value_parser = labelled_parser())]
    pub files: Vec<Labelled>,
    /// Only records from this far back: days such as 7d, or a duration such as 1h or 36h
    #[arg(long, value_parser = timefmt::parse_since, value_name = "AGE")]
    pub since: Option<Duration>,
    /// Only this user's records (the user name the apiserver authenticated)
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Only records about this pod (by name; with -n, in that namespace)
    #[arg(long, value_name = "POD")]
    pub pod: Option<String>,
    /// Only this fleet cluster's records: the files labelled NAME=FILE (the others are not read)
    #[arg(long, value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
    pub fleet_cluster: Option<String>,
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

/// A record shown, with the fleet cluster whose files it is in. As JSON, the record as
/// `oz_audit` checked it, with `cluster` when its file was labelled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterRecord {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(flatten)]
    pub checked: CheckedRecord,
}

impl From<CheckedRecord> for ClusterRecord {
    /// A record of files without a cluster.
    fn from(checked: CheckedRecord) -> ClusterRecord {
        ClusterRecord {
            cluster: None,
            checked,
        }
    }
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
/// USER, EVENT, CLUSTER (when any record is a fleet cluster's; `-` for files without one), POD
/// (namespace/name), COMMAND, GRANT, CALLER and VERIFIED. A brokered stream shows its
/// session's user and grant ([`brokered::attribute`]).
pub fn to_table(records: &[ClusterRecord]) -> Table {
    let show_cluster = records.iter().any(|r| r.cluster.is_some());
    let mut headers = vec!["TIME", "USER", "EVENT"];
    if show_cluster {
        headers.push("CLUSTER");
    }
    headers.extend(["POD", "COMMAND", "GRANT", "CALLER", "VERIFIED"]);
    let mut table = Table::new(headers);
    for ClusterRecord {
        cluster,
        checked: r,
    } in records
    {
        let mut row = vec![
            time(r)
                .and_then(|t| t.round(Unit::Second).ok())
                .map_or_else(|| text(r, "time").to_string(), |t| t.to_string()),
            brokered::session_user(r)
                .unwrap_or_else(|| text(r, "user"))
                .to_string(),
            event_word(r),
        ];
        if show_cluster {
            row.push(cluster.clone().unwrap_or_else(|| "-".into()));
        }
        row.extend([
            format!("{}/{}", text(r, "namespace"), text(r, "pod")),
            command_cell(r),
            grant_word(r),
            match text(r, "caller") {
                "" => "-".to_string(),
                caller => caller.to_string(),
            },
            if r.verified { "yes" } else { "NO" }.to_string(),
        ]);
        table.row(row);
    }
    table
}

/// What stderr says about the records shown that are not verified, or nothing when all are.
/// `why` is the verification's own account of what is wrong (the unsigned tail, an edited
/// entry, ...), one problem a line.
pub fn unverified_note(records: &[ClusterRecord], why: &[String]) -> Option<String> {
    let unverified = records.iter().filter(|r| !r.checked.verified).count();
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

/// [`reasons`] for a trail's report: a fleet cluster's say whose files they are in.
pub fn trail_reasons(trail: &Trail, report: &Report) -> Vec<String> {
    let reasons = reasons(report).into_iter();
    match trail.cluster.as_deref() {
        Some(cluster) => {
            let name = trails::name(Some(cluster));
            reasons.map(|r| format!("{name}: {r}")).collect()
        }
        None => reasons.collect(),
    }
}

/// The trails to review: every cluster's files, or with `--fleet-cluster` that cluster's
/// alone (the others are not read, so they need no key).
pub fn trails(args: &ReviewArgs) -> Result<Vec<Trail>, CliError> {
    let trails = trails::trails(&args.files)?;
    match &args.fleet_cluster {
        Some(cluster) => trails::only(trails, cluster),
        None => Ok(trails),
    }
}

/// One trail reviewed: its verification, and the records `filter` admits, each with the
/// trail's cluster. Each trail's brokered streams are joined with its own sessions.
pub fn review(
    trail: &Trail,
    keys: &[PublicKey],
    filter: &Filter,
) -> Result<(Report, Vec<ClusterRecord>), CliError> {
    let (report, mut records) = oz_audit::verify_records(&trail.files, keys).map_err(unreadable)?;
    brokered::attribute(&mut records);
    let shown = select(records, filter)
        .into_iter()
        .map(|checked| ClusterRecord {
            cluster: trail.cluster.clone(),
            checked,
        })
        .collect();
    Ok((report, shown))
}

/// Runs `ozctl audit FILE...`, each trail verified with its own trusted keys; `namespace` is
/// `-n`, if given.
pub fn run(
    args: &ReviewArgs,
    namespace: Option<String>,
    trails: &[KeyedTrail],
) -> Result<u8, CliError> {
    let filter = Filter::new(args, namespace, Timestamp::now());
    let mut shown = Vec::new();
    let (mut records, mut code, mut why) = (0, 0, Vec::new());
    for (trail, keys) in trails {
        let (report, trail_shown) = review(trail, keys, &filter)?;
        shown.extend(trail_shown);
        records += report.records;
        code = code.max(exit_code(&report));
        why.extend(trail_reasons(trail, &report));
    }
    match args.output {
        TableFormat::Json => output::print(&output::render(&shown, ObjectFormat::Json)?)?,
        TableFormat::Table if shown.is_empty() => {
            eprintln!("No records match, of the {records} in these files.")
        }
        TableFormat::Table => output::print(&to_table(&shown).render())?,
    }
    if let Some(note) = unverified_note(&shown, &why) {
        eprintln!("{note}");
    } else if code != 0 {
        eprintln!(
            "The files have problems outside the records shown; see: ozctl audit verify FILE..."
        );
        for reason in &why {
            eprintln!("  {reason}");
        }
    }
    Ok(code)
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

    fn unlabelled(records: &[CheckedRecord]) -> Vec<ClusterRecord> {
        records.iter().cloned().map(ClusterRecord::from).collect()
    }

    fn trail(cluster: Option<&str>, file: &std::path::Path) -> Trail {
        Trail {
            cluster: cluster.map(String::from),
            files: vec![file.to_path_buf()],
        }
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
        let text = to_table(&unlabelled(&shown[..1])).render();
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
        let text = to_table(&unlabelled(&records)).render();
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
        let text = to_table(&[port_forward.into()]).render();
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
        let other = Signer::generate().unwrap().public_key();
        assert_eq!(
            run(&args, None, &[(trail(None, &path), vec![other])]).unwrap(),
            1,
            "a key not trusted"
        );
        let nope = dir.path().join("nope");
        let missing = parse(&[&nope.display().to_string()]);
        let error = run(&missing, None, &[(trail(None, &nope), vec![])]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
    }

    /// Cluster b's and c's audit files in `dir`, each signed by a key of its own, reviewed as
    /// the command line `words` says (`@b` and `@c` stand for their files, labelled with their
    /// cluster), each trail with the key of the cluster `keys` names for it.
    fn fleet(
        dir: &std::path::Path,
        words: &[&str],
        keys: &[(&str, &str)],
    ) -> Result<(ReviewArgs, Vec<KeyedTrail>), CliError> {
        let mut files = std::collections::BTreeMap::new();
        for cluster in ["b", "c"] {
            let (file, key) = crate::fixtures::cluster_audit_log(dir, cluster);
            let key = PublicKey::all_from_pem(&std::fs::read_to_string(key).unwrap()).unwrap();
            files.insert(cluster, (file, key));
        }
        let words: Vec<String> = words
            .iter()
            .map(
                |w| match w.strip_prefix('@').and_then(|c| files.get_key_value(c)) {
                    Some((cluster, (file, _))) => format!("{cluster}={}", file.display()),
                    None => w.to_string(),
                },
            )
            .collect();
        let args = parse(&words.iter().map(String::as_str).collect::<Vec<_>>());
        let keyed = trails(&args)?
            .into_iter()
            .map(|trail| {
                let cluster = trail.cluster.as_deref().unwrap();
                let of = keys.iter().find(|(c, _)| *c == cluster).unwrap().1;
                let keys = files[of].1.clone();
                (trail, keys)
            })
            .collect();
        Ok((args, keyed))
    }

    fn reviewed(keyed: &[KeyedTrail]) -> Vec<ClusterRecord> {
        keyed
            .iter()
            .flat_map(|(trail, keys)| review(trail, keys, &Filter::default()).unwrap().1)
            .collect()
    }

    /// Each record shows its cluster, and its mark is its own cluster's keys' verdict.
    #[test]
    fn a_fleets_records_show_their_cluster_each_verified_with_its_own_key() {
        let dir = tempfile::tempdir().unwrap();
        let (args, keyed) = fleet(dir.path(), &["@b", "@c"], &[("b", "b"), ("c", "c")]).unwrap();
        assert_eq!(run(&args, None, &keyed).unwrap(), 0);
        let shown = reviewed(&keyed);
        let text = to_table(&shown).render();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "TIME", "USER", "EVENT", "CLUSTER", "POD", "COMMAND", "GRANT", "CALLER", "VERIFIED"
            ]
        );
        let marks: Vec<(&str, &str, &str)> = rows[1..].iter().map(|r| (r[3], r[1], r[8])).collect();
        assert_eq!(
            marks,
            [
                ("b", "alice", "yes"),
                ("b", "bob", "yes"),
                ("b", "alice", "yes"),
                ("c", "alice", "yes"),
                ("c", "bob", "yes"),
                ("c", "alice", "yes"),
            ]
        );
        let json = serde_json::to_value(&shown[3]).unwrap();
        assert_eq!(json["cluster"], "c");
        assert_eq!(json["record"]["user"], "alice");
        assert_eq!(json["verified"], true);
        let unlabelled = ClusterRecord::from(shown[0].checked.clone());
        assert!(
            serde_json::to_value(unlabelled)
                .unwrap()
                .get("cluster")
                .is_none()
        );

        // b's key given as c's: c's records are not verified, and the reasons say whose.
        let dir = tempfile::tempdir().unwrap();
        let (args, keyed) = fleet(dir.path(), &["@b", "@c"], &[("b", "b"), ("c", "b")]).unwrap();
        assert_eq!(run(&args, None, &keyed).unwrap(), 1);
        let shown = reviewed(&keyed);
        let verified: Vec<(Option<&str>, bool)> = shown
            .iter()
            .map(|r| (r.cluster.as_deref(), r.checked.verified))
            .collect();
        assert_eq!(
            verified,
            [
                (Some("b"), true),
                (Some("b"), true),
                (Some("b"), true),
                (Some("c"), false),
                (Some("c"), false),
                (Some("c"), false),
            ]
        );
        let (c, keys) = &keyed[1];
        let report = oz_audit::verify(&c.files, keys).unwrap();
        let why = trail_reasons(c, &report);
        assert!(why.iter().all(|r| r.starts_with("cluster c: ")), "{why:?}");
        let unknown = format!(
            "cluster c: {}:4 (seq 4): unknown key: ",
            c.files[0].display()
        );
        assert!(why.iter().any(|r| r.starts_with(&unknown)), "{why:?}");
    }

    /// `--fleet-cluster c` reviews c's files alone: b's are not read, and need no key.
    #[test]
    fn fleet_cluster_reviews_that_clusters_files_alone() {
        let dir = tempfile::tempdir().unwrap();
        let words = ["@b", "@c", "--fleet-cluster", "c"];
        let (args, keyed) = fleet(dir.path(), &words, &[("c", "c")]).unwrap();
        assert_eq!(args.fleet_cluster.as_deref(), Some("c"));
        assert_eq!(keyed.len(), 1);
        assert_eq!(run(&args, None, &keyed).unwrap(), 0);
        let shown = reviewed(&keyed);
        assert_eq!(shown.len(), 3);
        let text = to_table(&shown).render();
        assert!(
            text.lines()
                .skip(1)
                .all(|l| l.split_whitespace().nth(3) == Some("c")),
            "{text}"
        );

        let dir = tempfile::tempdir().unwrap();
        let error = fleet(dir.path(), &["@b", "@c", "--fleet-cluster", "d"], &[]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert_eq!(
            error.to_string(),
            "no file is labelled with cluster d: give its files as d=PATH"
        );
        let unlabelled = parse(&["audit.jsonl", "--fleet-cluster", "b"]);
        assert_eq!(trails(&unlabelled).unwrap_err().exit_code(), 2);
    }

    /// Files without a cluster among a fleet's: `-` in the CLUSTER column.
    #[test]
    fn a_record_of_files_without_a_cluster_shows_a_dash_beside_a_fleets() {
        let mut records = unlabelled(&sample()[..2]);
        records[1].cluster = Some("b".into());
        let text = to_table(&records).render();
        let clusters: Vec<&str> = text
            .lines()
            .map(|l| l.split_whitespace().nth(3).unwrap())
            .collect();
        assert_eq!(clusters, ["CLUSTER", "-", "b"]);
    }

    #[test]
    fn unverified_records_are_counted_with_the_reasons() {
        let mut records = unlabelled(&sample());
        assert_eq!(unverified_note(&records, &[]), None);
        records[0].checked.verified = false;
        records[1].checked.verified = false;
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
