//! `ozctl audit verify FILE...`: checks oz's audit files (their hash chain and every signed
//! checkpoint, with `oz_audit::verify`) and says what it verified and what is wrong, each
//! problem as `FILE:LINE (seq N): what`. With `--recordings DIR`, also checks each session's
//! recording against the SHA-256 its session-end record carries ([`super::recordings`]).
//! A fleet's files, labelled with their clusters, get a report per cluster, each checked with
//! that cluster's keys. Exit status 0 when intact, 1 on any problem.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use oz_audit::{ProblemKind, Report};

use super::{
    problems::{problem_line, unreadable},
    recordings::{self, RecordingCheck},
    trails::{self, Labelled, labelled_parser},
    trusted_keys::{KeyArgs, KeyedTrail},
};
use crate::{error::CliError, output, terminal_text::printable_line};

/// `ozctl audit verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// oz's audit files (--audit-log-path and its rotated PATH.* files), in any order; as
    /// CLUSTER=FILE, a fleet cluster's, checked only with the keys labelled CLUSTER
    #[arg(value_name = "[CLUSTER=]FILE", required = true, value_parser = labelled_parser())]
    pub files: Vec<Labelled>,
    /// Accept entries after the last checkpoint (a live log always has some: they are signed
    /// at the next checkpoint)
    #[arg(long)]
    pub allow_unsigned_tail: bool,
    /// Also check each brokered session's recording against its session-end record: DIR holds
    /// recordings as oz stores them (NAMESPACE/ID.cast, a copy of the recordings volume or
    /// bucket) or as `ozctl replay --output` saves them (ID.cast); repeat for several
    #[arg(long, value_name = "DIR")]
    pub recordings: Vec<PathBuf>,
    /// Output format
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub output: VerifyFormat,
    #[command(flatten)]
    pub keys: KeyArgs,
}

/// How `audit verify` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VerifyFormat {
    Text,
    Json,
}

/// The exit code for `report` and the recordings checked: 0 when nothing is wrong (the
/// unsigned tail aside, if allowed), else 1.
pub fn exit_code(report: &Report, allow_unsigned_tail: bool, checks: &[RecordingCheck]) -> u8 {
    if report.is_intact(allow_unsigned_tail) && !checks.iter().any(RecordingCheck::differs) {
        0
    } else {
        1
    }
}

/// The report as text: what was verified, then every problem in file order, then the verdict.
pub fn to_text(report: &Report, allow_unsigned_tail: bool, checks: &[RecordingCheck]) -> String {
    let (body, counted) = body_text(report, allow_unsigned_tail, checks);
    format!("files, in chain order:\n{body}{}\n", verdict(counted))
}

/// `intact`, or how many problems.
fn verdict(counted: usize) -> String {
    if counted == 0 {
        "intact".to_string()
    } else {
        format!(
            "NOT INTACT: {counted} problem{}",
            if counted == 1 { "" } else { "s" }
        )
    }
}

/// The report's lines after its heading, and the number of problems that count.
fn body_text(
    report: &Report,
    allow_unsigned_tail: bool,
    checks: &[RecordingCheck],
) -> (String, usize) {
    let mut text = String::new();
    let width = report
        .files
        .iter()
        .map(|f| f.file.chars().count())
        .max()
        .unwrap_or(0);
    for file in &report.files {
        let seqs = match (file.first_seq, file.last_seq) {
            (Some(first), Some(last)) => format!("seq {first}-{last}"),
            _ => "no entries".into(),
        };
        text.push_str(&format!(
            "  {:width$}   {} lines, {seqs}\n",
            file.file, file.lines
        ));
    }
    match (report.first_seq, report.last_seq) {
        (Some(first), Some(last)) => {
            text.push_str(&format!(
                "entries:      {} (seq {first}-{last})\n",
                report.entries
            ));
            if first > 1 {
                text.push_str(&format!(
                    "              the chain starts at seq {first}: the entries before it are in files not given (rotated away, or left out)\n"
                ));
            }
        }
        _ => text.push_str("entries:      none\n"),
    }
    text.push_str(&format!(
        "records:      {}, {} verified (vouched for by a valid checkpoint)\n",
        report.records, report.verified_records
    ));
    text.push_str(&format!(
        "checkpoints:  {}, {} signed by a trusted key{}\n",
        report.checkpoints,
        report.valid_checkpoints,
        if report.keys.is_empty() {
            String::new()
        } else {
            format!(": {}", report.keys.join(", "))
        }
    ));
    if let Some(last) = &report.last_valid_checkpoint {
        text.push_str(&format!(
            "              the last valid one: seq {}, {}:{}\n",
            last.seq, last.file, last.line
        ));
    }
    if report.recovered > 0 {
        text.push_str(&format!(
            "recovered:    {} partial line{} left by a crash or a failed write, acknowledged\n",
            report.recovered,
            if report.recovered == 1 { "" } else { "s" }
        ));
    }
    let differing = checks.iter().filter(|c| c.differs()).count();
    let counted = report.problems(allow_unsigned_tail).count() + differing;
    text.push_str(&format!("problems:     {}\n", report.problems.len()));
    for problem in &report.problems {
        text.push_str(&problem_line(problem));
        if allow_unsigned_tail && problem.kind == ProblemKind::UnsignedTail {
            text.push_str(" (allowed)");
        }
        text.push('\n');
    }
    if !checks.is_empty() {
        let missing = checks
            .iter()
            .filter(|c| c.outcome == recordings::Outcome::NotFound)
            .count();
        text.push_str(&format!(
            "recordings:   {} named by session-end records: {} match, {differing} differ, {missing} not found\n",
            checks.len(),
            checks.len() - differing - missing
        ));
        for check in checks {
            text.push_str(&printable_line(&check.line()));
            text.push('\n');
        }
    }
    (text, counted)
}

/// One trail checked: whose files, what their verification found, and their recordings.
#[derive(Debug)]
pub struct TrailCheck {
    /// The fleet cluster, or `None` for the files without one.
    pub cluster: Option<String>,
    pub report: Report,
    pub recordings: Vec<RecordingCheck>,
}

impl TrailCheck {
    fn problems(&self, allow_unsigned_tail: bool) -> usize {
        self.report.problems(allow_unsigned_tail).count()
            + self.recordings.iter().filter(|c| c.differs()).count()
    }

    fn name(&self) -> String {
        trails::name(self.cluster.as_deref())
    }
}

/// The exit code for a fleet's trails: 1 when any has a problem that counts, else 0.
pub fn fleet_exit_code(checked: &[TrailCheck], allow_unsigned_tail: bool) -> u8 {
    let code = |c: &TrailCheck| exit_code(&c.report, allow_unsigned_tail, &c.recordings);
    checked.iter().map(code).max().unwrap_or(0)
}

/// A fleet's trails as text: each cluster's report, its heading and verdict naming the
/// cluster, then the verdict for them all.
pub fn fleet_to_text(checked: &[TrailCheck], allow_unsigned_tail: bool) -> String {
    let mut text = String::new();
    for check in checked {
        let (body, counted) = body_text(&check.report, allow_unsigned_tail, &check.recordings);
        let name = check.name();
        text.push_str(&format!(
            "{name}: files, in chain order:\n{body}{name}: {}\n\n",
            verdict(counted)
        ));
    }
    let failing: Vec<String> = checked
        .iter()
        .filter(|c| c.problems(allow_unsigned_tail) > 0)
        .map(TrailCheck::name)
        .collect();
    let counted: usize = checked
        .iter()
        .map(|c| c.problems(allow_unsigned_tail))
        .sum();
    text.push_str(&verdict(counted));
    if !failing.is_empty() {
        text.push_str(&format!(", in {}", failing.join(", ")));
    }
    text.push('\n');
    text
}

/// A report as JSON: `oz_audit`'s report with `intact` (whether it has no problem that counts)
/// and the recordings checked.
fn report_value(
    report: &Report,
    allow_unsigned_tail: bool,
    checks: &[RecordingCheck],
) -> Result<serde_json::Value, CliError> {
    let mut value = serde_json::to_value(report).map_err(|e| CliError::Output(e.to_string()))?;
    value["intact"] = (exit_code(report, allow_unsigned_tail, checks) == 0).into();
    value["recordings"] =
        serde_json::to_value(checks).map_err(|e| CliError::Output(e.to_string()))?;
    Ok(value)
}

fn pretty(value: &serde_json::Value) -> Result<String, CliError> {
    serde_json::to_string_pretty(value)
        .map(|text| text + "\n")
        .map_err(|e| CliError::Output(e.to_string()))
}

/// The report as JSON, with `intact` (whether the command exits 0).
pub fn to_json(
    report: &Report,
    allow_unsigned_tail: bool,
    checks: &[RecordingCheck],
) -> Result<String, CliError> {
    let mut value = report_value(report, allow_unsigned_tail, checks)?;
    value["unsignedTailAllowed"] = allow_unsigned_tail.into();
    pretty(&value)
}

/// A fleet's trails as JSON: `clusters`, each a report as [`to_json`] gives it with its
/// `cluster` (null for the files without one), and `intact` for them all.
pub fn fleet_to_json(
    checked: &[TrailCheck],
    allow_unsigned_tail: bool,
) -> Result<String, CliError> {
    let mut clusters = Vec::new();
    for check in checked {
        let mut value = report_value(&check.report, allow_unsigned_tail, &check.recordings)?;
        value["cluster"] = check.cluster.clone().into();
        clusters.push(value);
    }
    pretty(&serde_json::json!({
        "clusters": clusters,
        "intact": fleet_exit_code(checked, allow_unsigned_tail) == 0,
        "unsignedTailAllowed": allow_unsigned_tail,
    }))
}

/// Checks each trail with its own trusted keys, and, given `recording_dirs` (`--recordings`),
/// the recordings its session-end records name.
pub fn check(
    trails: &[KeyedTrail],
    recording_dirs: &[PathBuf],
) -> Result<Vec<TrailCheck>, CliError> {
    let mut checked = Vec::new();
    for (trail, keys) in trails {
        checked.push(TrailCheck {
            cluster: trail.cluster.clone(),
            report: oz_audit::verify(&trail.files, keys).map_err(unreadable)?,
            recordings: if recording_dirs.is_empty() {
                Vec::new()
            } else {
                recordings::check(&trail.files, recording_dirs)?
            },
        });
    }
    Ok(checked)
}

/// Runs `ozctl audit verify`, each trail with its own trusted keys. Without a labelled file,
/// one report as ever; with, a report per cluster.
pub fn run(args: &VerifyArgs, trails: &[KeyedTrail]) -> Result<u8, CliError> {
    let checked = check(trails, &args.recordings)?;
    let allow = args.allow_unsigned_tail;
    let fleet = checked.iter().any(|c| c.cluster.is_some());
    match (args.output, &checked[..]) {
        (VerifyFormat::Text, [one]) if !fleet => {
            output::print(&to_text(&one.report, allow, &one.recordings))?
        }
        (VerifyFormat::Json, [one]) if !fleet => {
            output::print(&to_json(&one.report, allow, &one.recordings)?)?
        }
        (VerifyFormat::Text, _) => output::print(&fleet_to_text(&checked, allow))?,
        (VerifyFormat::Json, _) => output::print(&fleet_to_json(&checked, allow)?)?,
    }
    Ok(fleet_exit_code(&checked, allow))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use oz_audit::Signer;

    use super::*;
    use crate::{
        audit::{trails::Trail, trusted_keys::pinned_keys},
        fixtures::{audit_log as log, cluster_audit_log},
    };

    fn args(files: &[&Path], extra: &[&str]) -> VerifyArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Test {
            #[command(flatten)]
            verify: VerifyArgs,
        }
        let mut all: Vec<String> = vec!["verify".into()];
        all.extend(files.iter().map(|f| f.display().to_string()));
        all.extend(extra.iter().map(|e| e.to_string()));
        Test::try_parse_from(all).unwrap().verify
    }

    #[test]
    fn an_intact_log_exits_0_and_says_what_was_verified() {
        let dir = tempfile::tempdir().unwrap();
        let (path, key) = log(dir.path(), 0);
        let report = oz_audit::verify(&[&path], std::slice::from_ref(&key)).unwrap();
        assert_eq!(exit_code(&report, false, &[]), 0);
        let text = to_text(&report, false, &[]);
        let name = path.display().to_string();
        for line in [
            format!("  {name}   4 lines, seq 1-4"),
            "entries:      4 (seq 1-4)".into(),
            "records:      3, 3 verified (vouched for by a valid checkpoint)".into(),
            format!(
                "checkpoints:  1, 1 signed by a trusted key: {}",
                key.key_id()
            ),
            format!("              the last valid one: seq 4, {name}:4"),
            "problems:     0".into(),
            "intact".into(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
        let trail = Trail {
            cluster: None,
            files: vec![path.clone()],
        };
        assert_eq!(run(&args(&[&path], &[]), &[(trail, vec![key])]).unwrap(), 0);
    }

    #[test]
    fn an_edited_record_is_named_by_file_line_and_seq_and_exits_1() {
        let dir = tempfile::tempdir().unwrap();
        let (path, key) = log(dir.path(), 0);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen("\"bob\"", "\"eve\"", 1)).unwrap();
        let report = oz_audit::verify(&[&path], &[key]).unwrap();
        assert_eq!(exit_code(&report, true, &[]), 1);
        let text = to_text(&report, true, &[]);
        let problems: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&path.display().to_string()))
            .collect();
        assert_eq!(problems.len(), 1, "{text}");
        assert!(
            problems[0].starts_with(&format!("{}:2 (seq 2): edited: ", path.display())),
            "{text}"
        );
        assert!(text.ends_with("NOT INTACT: 1 problem\n"), "{text}");
    }

    #[test]
    fn the_unsigned_tail_fails_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, key) = log(dir.path(), 2);
        let report = oz_audit::verify(&[&path], &[key]).unwrap();
        assert_eq!(exit_code(&report, false, &[]), 1);
        assert_eq!(exit_code(&report, true, &[]), 0);
        let strict = to_text(&report, false, &[]);
        let tail = format!("{}:5 (seq 5-6): unsigned tail: ", path.display());
        assert!(strict.contains(&tail), "{strict}");
        assert!(strict.ends_with("NOT INTACT: 1 problem\n"), "{strict}");
        let allowed = to_text(&report, true, &[]);
        assert!(allowed.contains(" (allowed)\n"), "{allowed}");
        assert!(allowed.ends_with("\nintact\n"), "{allowed}");
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&report, true, &[]).unwrap()).unwrap();
        assert_eq!(json["intact"], true);
        assert_eq!(json["records"], 5);
        assert_eq!(json["verifiedRecords"], 3);
        assert_eq!(json["problems"][0]["kind"], "unsigned_tail");
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&report, false, &[]).unwrap()).unwrap();
        assert_eq!(json["intact"], false);
    }

    #[test]
    fn a_checkpoint_by_a_key_not_trusted_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = log(dir.path(), 0);
        let other = Signer::generate().unwrap().public_key();
        let report = oz_audit::verify(&[&path], &[other]).unwrap();
        assert_eq!(exit_code(&report, true, &[]), 1);
        let text = to_text(&report, true, &[]);
        assert!(
            text.contains(&format!("{}:4 (seq 4): unknown key: ", path.display())),
            "{text}"
        );
        assert!(text.contains("records:      3, 0 verified"), "{text}");
    }

    fn parse(words: &[String]) -> VerifyArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Test {
            #[command(flatten)]
            verify: VerifyArgs,
        }
        Test::try_parse_from(std::iter::once("verify").chain(words.iter().map(String::as_str)))
            .unwrap()
            .verify
    }

    /// The trails of the command line, each with the keys it gives for it.
    fn keyed(args: &VerifyArgs) -> Result<Vec<KeyedTrail>, CliError> {
        trails::trails(&args.files)?
            .into_iter()
            .map(|trail| {
                let keys = pinned_keys(&args.keys, &trail)?.expect("keys are given");
                Ok((trail, keys))
            })
            .collect()
    }

    #[test]
    fn each_clusters_files_verify_with_that_clusters_own_keys() {
        let dir = tempfile::tempdir().unwrap();
        let (b, b_key) = cluster_audit_log(dir.path(), "b");
        let (c, c_key) = cluster_audit_log(dir.path(), "c");
        let labelled = |cluster: &str, path: &Path| format!("{cluster}={}", path.display());
        let args = parse(&[
            labelled("b", &b),
            labelled("c", &c),
            "--public-key".into(),
            labelled("b", &b_key),
            "--public-key".into(),
            labelled("c", &c_key),
        ]);
        let trails = keyed(&args).unwrap();
        assert_eq!(run(&args, &trails).unwrap(), 0);
        let checked = check(&trails, &[]).unwrap();
        let text = fleet_to_text(&checked, false);
        for (cluster, file) in [("b", &b), ("c", &c)] {
            let file = file.display();
            for line in [
                format!("cluster {cluster}: files, in chain order:"),
                format!("  {file}   4 lines, seq 1-4"),
                format!("              the last valid one: seq 4, {file}:4"),
                format!("cluster {cluster}: intact"),
            ] {
                assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
            }
        }
        assert!(text.ends_with("\n\nintact\n"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&fleet_to_json(&checked, false).unwrap()).unwrap();
        assert_eq!(json["intact"], true);
        assert_eq!(json["clusters"][0]["cluster"], "b");
        assert_eq!(json["clusters"][1]["cluster"], "c");
        assert_eq!(json["clusters"][1]["verifiedRecords"], 3);
    }

    /// b's key, labelled as c's too, does not vouch for c's file: c is not intact, b still is.
    #[test]
    fn a_key_of_one_cluster_does_not_vouch_for_anothers_file() {
        let dir = tempfile::tempdir().unwrap();
        let (b, b_key) = cluster_audit_log(dir.path(), "b");
        let (c, _) = cluster_audit_log(dir.path(), "c");
        let labelled = |cluster: &str, path: &Path| format!("{cluster}={}", path.display());
        let args = parse(&[
            labelled("b", &b),
            labelled("c", &c),
            "--public-key".into(),
            labelled("b", &b_key),
            "--public-key".into(),
            labelled("c", &b_key),
        ]);
        let trails = keyed(&args).unwrap();
        assert_eq!(run(&args, &trails).unwrap(), 1);
        let checked = check(&trails, &[]).unwrap();
        assert_eq!(fleet_exit_code(&checked, true), 1);
        let text = fleet_to_text(&checked, true);
        let c_section = text.split("cluster c: files").nth(1).unwrap();
        assert!(
            c_section.contains(&format!("{}:4 (seq 4): unknown key: ", c.display())),
            "{text}"
        );
        assert!(c_section.contains("records:      3, 0 verified"), "{text}");
        assert!(text.contains("\ncluster b: intact\n"), "{text}");
        assert!(
            text.contains("\ncluster c: NOT INTACT: 1 problem\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\nNOT INTACT: 1 problem, in cluster c\n"),
            "{text}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&fleet_to_json(&checked, true).unwrap()).unwrap();
        assert_eq!(json["intact"], false);
        assert_eq!(json["clusters"][0]["intact"], true);
        assert_eq!(json["clusters"][1]["intact"], false);

        // Keys without a cluster vouch for no cluster's file: the check cannot run.
        let unlabelled = parse(&[
            labelled("b", &b),
            "--public-key".into(),
            b_key.display().to_string(),
        ]);
        let error = keyed(&unlabelled).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(
            error
                .to_string()
                .starts_with("no key for cluster b's files: pass --public-key b=PEM"),
            "{error}"
        );
    }

    #[test]
    fn a_file_that_cannot_be_read_exits_2() {
        let dir = tempfile::tempdir().unwrap();
        let key = Signer::generate().unwrap().public_key();
        let missing = dir.path().join("missing.jsonl");
        let trail = Trail {
            cluster: None,
            files: vec![missing.clone()],
        };
        let error = run(&args(&[&missing], &[]), &[(trail, vec![key])]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("missing.jsonl"), "{error}");
    }
}
