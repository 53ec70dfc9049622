//! `ozctl audit verify FILE...`: checks oz's audit files (their hash chain and every signed
//! checkpoint, with `oz_audit::verify`) and says what it verified and what is wrong, each
//! problem as `FILE:LINE (seq N): what`. With `--recordings DIR`, also checks each session's
//! recording against the SHA-256 its session-end record carries ([`super::recordings`]).
//! Exit status 0 when intact, 1 on any problem.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use oz_audit::{ProblemKind, PublicKey, Report};

use super::{
    problems::{problem_line, unreadable},
    recordings::{self, RecordingCheck},
    trusted_keys::KeyArgs,
};
use crate::{error::CliError, output, terminal_text::printable_line};

/// `ozctl audit verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// oz's audit files (--audit-log-path and its rotated PATH.* files), in any order
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
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
    let mut text = String::from("files, in chain order:\n");
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
    text.push_str(&if counted == 0 {
        "intact\n".to_string()
    } else {
        format!(
            "NOT INTACT: {counted} problem{}\n",
            if counted == 1 { "" } else { "s" }
        )
    });
    text
}

/// The report as JSON, with `intact` (whether the command exits 0).
pub fn to_json(
    report: &Report,
    allow_unsigned_tail: bool,
    checks: &[RecordingCheck],
) -> Result<String, CliError> {
    let mut value = serde_json::to_value(report).map_err(|e| CliError::Output(e.to_string()))?;
    value["intact"] = (exit_code(report, allow_unsigned_tail, checks) == 0).into();
    value["recordings"] =
        serde_json::to_value(checks).map_err(|e| CliError::Output(e.to_string()))?;
    value["unsignedTailAllowed"] = allow_unsigned_tail.into();
    serde_json::to_string_pretty(&value)
        .map(|text| text + "\n")
        .map_err(|e| CliError::Output(e.to_string()))
}

/// Runs `ozctl audit verify` with these trusted keys.
pub fn run(args: &VerifyArgs, keys: &[PublicKey]) -> Result<u8, CliError> {
    let report = oz_audit::verify(&args.files, keys).map_err(unreadable)?;
    let checks = if args.recordings.is_empty() {
        Vec::new()
    } else {
        recordings::check(&args.files, &args.recordings)?
    };
    let allow = args.allow_unsigned_tail;
    match args.output {
        VerifyFormat::Text => output::print(&to_text(&report, allow, &checks))?,
        VerifyFormat::Json => output::print(&to_json(&report, allow, &checks)?)?,
    }
    Ok(exit_code(&report, allow, &checks))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use oz_audit::Signer;

    use super::*;
    use crate::fixtures::audit_log as log;

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
        assert_eq!(run(&args(&[&path], &[]), &[key]).unwrap(), 0);
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

    #[test]
    fn a_file_that_cannot_be_read_exits_2() {
        let dir = tempfile::tempdir().unwrap();
        let key = Signer::generate().unwrap().public_key();
        let missing = dir.path().join("missing.jsonl");
        let error = run(&args(&[&missing], &[]), &[key]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("missing.jsonl"), "{error}");
    }
}
