//! The verifier on a good log, and on that log after each single fault: the report names
//! exactly the entry at fault, and only it.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{report::RecordMap, *};
use crate::{AuditFile, Entry, Rotation, Signer, entry::Body};

/// A log written by [`AuditFile`] and its key.
pub(crate) struct Log {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub key_pem: String,
    pub public: PublicKey,
}

impl Log {
    pub fn writer(&self) -> AuditFile {
        let signer = Signer::from_pkcs8_pem(&self.key_pem).unwrap();
        AuditFile::open(&self.path, signer, Rotation::default()).unwrap()
    }

    pub fn lines(&self) -> Vec<String> {
        lines(&self.path)
    }

    pub fn write_lines(&self, lines: &[String]) {
        write_lines(&self.path, lines);
    }

    pub fn verify(&self) -> Report {
        verify(&[&self.path], std::slice::from_ref(&self.public)).unwrap()
    }
}

pub(crate) fn record(n: u64) -> RecordMap {
    json!({
        "time": format!("2026-11-21T10:{:02}:{:02}Z", n / 60 % 60, n % 60),
        "event": "PodExec",
        "user": "alice",
        "namespace": "shop",
        "pod": format!("web-{n}"),
        "command": ["sh", "-c", "id"],
        "allowed": true,
    })
    .as_object()
    .unwrap()
    .clone()
}

pub(crate) fn lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.split('\n').map(String::from).collect();
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

pub(crate) fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

/// `records` records with a checkpoint after every `every`, and one at the end.
pub(crate) fn good_log(records: u64, every: u64) -> Log {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let signer = Signer::generate().unwrap();
    let log = Log {
        path,
        key_pem: signer.to_pkcs8_pem(),
        public: signer.public_key(),
        _dir: dir,
    };
    let mut file = log.writer();
    for n in 1..=records {
        file.append(record(n)).unwrap();
        if n % every == 0 {
            file.checkpoint().unwrap();
        }
    }
    file.checkpoint().unwrap();
    log
}

/// The standard log: records 1-10, a checkpoint after every 4th, so seq = line:
/// records at 1-4, 6-9, 11-12; checkpoints at 5, 10, 13.
fn standard() -> Log {
    let log = good_log(10, 4);
    assert_eq!(log.lines().len(), 13);
    log
}

/// (kind, line, seq) of each problem.
fn found(report: &Report) -> Vec<(ProblemKind, u64, Option<u64>)> {
    report
        .problems
        .iter()
        .map(|p| (p.kind, p.line, p.seq))
        .collect()
}

#[test]
fn an_untouched_log_is_intact_and_every_record_verified() {
    let log = standard();
    let report = log.verify();
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.entries, 13);
    assert_eq!((report.first_seq, report.last_seq), (Some(1), Some(13)));
    assert_eq!((report.records, report.verified_records), (10, 10));
    assert_eq!((report.checkpoints, report.valid_checkpoints), (3, 3));
    assert_eq!(report.keys, [log.public.key_id().to_string()]);
    let last = report.last_valid_checkpoint.as_ref().unwrap();
    assert_eq!((last.seq, last.line), (13, 13));
    let text = report.to_string();
    assert!(text.contains("problems: none"), "{text}");
    assert!(text.contains("verified: 10 of 10 records"), "{text}");
}

#[test]
fn editing_a_field_of_a_record_names_that_record_and_only_it() {
    for line in [2, 4, 12] {
        let log = standard();
        let mut lines = log.lines();
        assert!(lines[line - 1].contains(r#""user":"alice""#));
        lines[line - 1] = lines[line - 1].replace(r#""user":"alice""#, r#""user":"bob""#);
        log.write_lines(&lines);
        let report = log.verify();
        assert_eq!(
            found(&report),
            [(ProblemKind::Edited, line as u64, Some(line as u64))],
            "{report}"
        );
        assert!(!report.is_intact(true));
    }
}

#[test]
fn editing_a_records_seq_names_that_record_and_only_it() {
    let log = standard();
    let mut lines = log.lines();
    lines[6] = lines[6].replace(r#"{"seq":7,"#, r#"{"seq":70,"#);
    log.write_lines(&lines);
    let report = log.verify();
    assert_eq!(
        found(&report),
        [(ProblemKind::Edited, 7, Some(7))],
        "{report}"
    );
    assert!(report.problems[0].detail.contains("says 70"), "{report}");
}

#[test]
fn deleting_a_line_names_the_missing_seq_and_where_it_was() {
    let log = standard();
    let mut lines = log.lines();
    lines.remove(6); // seq 7
    log.write_lines(&lines);
    let report = log.verify();
    assert_eq!(
        found(&report),
        [(ProblemKind::Removed, 7, Some(7))],
        "{report}"
    );
    let problem = &report.problems[0];
    assert_eq!(problem.last_seq, Some(7));
    assert!(
        problem.detail.contains("between seq 6") && problem.detail.contains(":6)"),
        "{problem}"
    );
    // Records before the gap are no longer vouched for by the checkpoint after it.
    assert_eq!(report.verified_records, 8);
}

#[test]
fn swapping_two_lines_names_both_as_reordered() {
    for (a, b) in [(6, 7), (2, 8)] {
        let log = standard();
        let mut lines = log.lines();
        lines.swap(a - 1, b - 1);
        log.write_lines(&lines);
        let report = log.verify();
        assert_eq!(
            found(&report),
            [
                (ProblemKind::Reordered, a as u64, Some(b as u64)),
                (ProblemKind::Reordered, b as u64, Some(a as u64)),
            ],
            "{report}"
        );
        // Nothing was edited: every record is still vouched for.
        assert_eq!(report.verified_records, 10);
    }
}

#[test]
fn a_line_moved_away_is_the_one_reordered() {
    let log = standard();
    let mut lines = log.lines();
    let moved = lines.remove(1); // seq 2
    lines.insert(8, moved); // after seq 9
    log.write_lines(&lines);
    let report = log.verify();
    assert_eq!(
        found(&report),
        [(ProblemKind::Reordered, 9, Some(2))],
        "{report}"
    );
}

#[test]
fn truncating_the_last_line_mid_way_names_it_partial() {
    let log = standard();
    let text = std::fs::read(&log.path).unwrap();
    // Drop the `\n` and half of the last line (the final checkpoint, seq 13).
    let last_start = text[..text.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let cut = last_start + (text.len() - last_start) / 2;
    std::fs::write(&log.path, &text[..cut]).unwrap();
    let report = log.verify();
    assert_eq!(
        found(&report),
        [
            (ProblemKind::UnsignedTail, 11, Some(11)),
            (ProblemKind::Partial, 13, Some(13)),
        ],
        "{report}"
    );
    assert!(!report.is_intact(true));
}

/// Rewrites the log from `from_line` on as someone without the key would have to: each
/// entry's prev recomputed, each checkpoint signed again, by `signer` under `key_id`.
fn rechain(log: &Log, from_line: usize, signer: &Signer, key_id: Option<&str>) {
    let mut lines = log.lines();
    for n in from_line - 1..lines.len() {
        let mut entry = Entry::parse(lines[n].as_bytes()).unwrap();
        if n > 0 {
            entry.prev = Hash::of(lines[n - 1].as_bytes());
        }
        if let Body::Checkpoint { time, .. } = &entry.body {
            entry = Entry::checkpoint(entry.seq, entry.prev, time.clone(), signer);
            if let (Some(id), Body::Checkpoint { key_id, .. }) = (key_id, &mut entry.body) {
                *key_id = id.to_string();
            }
        }
        lines[n] = entry.encode();
    }
    log.write_lines(&lines);
}

#[test]
fn a_checkpoint_signed_with_another_key_names_that_checkpoint_and_key() {
    let log = standard();
    let attacker = Signer::generate().unwrap();
    rechain(&log, 13, &attacker, None);
    let report = log.verify();
    assert_eq!(
        found(&report),
        [
            (ProblemKind::UnsignedTail, 11, Some(11)),
            (ProblemKind::UnknownKey, 13, Some(13)),
        ],
        "{report}"
    );
    assert_eq!(
        report.problems[1].key_id.as_deref(),
        Some(attacker.key_id().as_str())
    );
    assert_eq!(report.verified_records, 8);

    // Claiming the real key's id does not help.
    let real = log.public.key_id().to_string();
    rechain(&log, 13, &attacker, Some(&real));
    let report = log.verify();
    assert_eq!(
        found(&report),
        [
            (ProblemKind::UnsignedTail, 11, Some(11)),
            (ProblemKind::BadSignature, 13, Some(13)),
        ],
        "{report}"
    );
    assert_eq!(report.problems[1].key_id.as_deref(), Some(real.as_str()));
}

#[test]
fn an_edit_hidden_by_rechaining_shows_as_checkpoints_signed_by_another_key() {
    let log = standard();
    let mut lines = log.lines();
    lines[1] = lines[1].replace(r#""user":"alice""#, r#""user":"bob""#);
    log.write_lines(&lines);
    let attacker = Signer::generate().unwrap();
    rechain(&log, 3, &attacker, None);
    let report = log.verify();
    assert_eq!(
        found(&report),
        [
            (ProblemKind::UnsignedTail, 1, Some(1)),
            (ProblemKind::UnknownKey, 5, Some(5)),
            (ProblemKind::UnknownKey, 10, Some(10)),
            (ProblemKind::UnknownKey, 13, Some(13)),
        ],
        "{report}"
    );
    assert_eq!(report.verified_records, 0);
}

#[test]
fn entries_after_the_last_checkpoint_are_the_unsigned_tail() {
    let log = standard();
    let mut file = log.writer();
    file.append(record(11)).unwrap();
    file.append(record(12)).unwrap();
    drop(file);
    let report = log.verify();
    assert_eq!(
        found(&report),
        [(ProblemKind::UnsignedTail, 14, Some(14))],
        "{report}"
    );
    assert_eq!(report.problems[0].last_seq, Some(15));
    assert!(report.is_intact(true));
    assert!(!report.is_intact(false));
    assert_eq!((report.records, report.verified_records), (12, 10));
}

#[test]
fn an_honest_crash_acknowledged_by_a_recovered_entry_is_no_problem() {
    let log = standard();
    let partial = &Entry::record(14, Hash::GENESIS, record(11))
        .unwrap()
        .encode()[..40];
    let mut text = std::fs::read(&log.path).unwrap();
    text.extend_from_slice(partial.as_bytes());
    std::fs::write(&log.path, &text).unwrap();
    // Before recovery: the partial line is named.
    assert_eq!(found(&log.verify()), [(ProblemKind::Partial, 14, Some(14))]);

    let mut file = log.writer();
    file.append(record(11)).unwrap();
    file.checkpoint().unwrap();
    drop(file);
    let lines = log.lines();
    assert_eq!(lines[13], partial);
    let recovered = Entry::parse(lines[14].as_bytes()).unwrap();
    assert_eq!(recovered.seq, 14);
    assert_eq!(recovered.prev, Hash::of(lines[12].as_bytes()));
    assert!(
        matches!(&recovered.body, Body::Recovered { partial_line: 14, partial_sha256, .. }
            if *partial_sha256 == Hash::of(partial.as_bytes()).to_string())
    );
    let report = log.verify();
    assert!(report.is_intact(false), "{report}");
    assert_eq!((report.recovered, report.records), (1, 11));

    // A recovered entry does not cover for a different line.
    let mut lines = log.lines();
    lines[13] = partial.replace("seq", "sex");
    log.write_lines(&lines);
    let report = log.verify();
    assert_eq!(
        found(&report),
        [
            (ProblemKind::Malformed, 14, None),
            (ProblemKind::Malformed, 15, Some(14)),
        ],
        "{report}"
    );
}

#[test]
fn several_faults_are_all_reported() {
    let log = good_log(40, 5);
    let mut lines = log.lines();
    lines[2] = lines[2].replace("alice", "eve"); // seq 3 edited
    lines.swap(20, 21); // seqs 21 and 22 swapped
    lines.remove(30); // seq 31 removed
    lines.insert(10, "not json".into()); // a malformed line before seq 11
    lines.push(lines[5].clone()); // seq 6 again, at the end
    let last = lines.len() - 1;
    lines[last].truncate(30);
    log.write_lines(&lines);
    std::fs::write(
        &log.path,
        std::fs::read_to_string(&log.path).unwrap().trim_end(),
    )
    .unwrap();
    let report = log.verify();
    let kinds: Vec<ProblemKind> = report.problems.iter().map(|p| p.kind).collect();
    for kind in [
        ProblemKind::Edited,
        ProblemKind::Reordered,
        ProblemKind::Removed,
        ProblemKind::Malformed,
        ProblemKind::Partial,
    ] {
        assert!(kinds.contains(&kind), "{kind}: {report}");
    }
    let edited = report
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::Edited)
        .unwrap();
    assert_eq!((edited.line, edited.seq), (3, Some(3)), "{report}");
    let removed = report
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::Removed)
        .unwrap();
    assert_eq!(removed.seq, Some(31), "{report}");
}

#[test]
fn files_are_verified_in_chain_order_whatever_order_they_are_given_in() {
    let log = standard();
    let lines = log.lines();
    let first = log.path.with_extension("1");
    write_lines(&first, &lines[..5]);
    log.write_lines(&lines[5..]);
    for files in [[&first, &log.path], [&log.path, &first]] {
        let report = verify(&files, std::slice::from_ref(&log.public)).unwrap();
        assert!(report.is_intact(false), "{report}");
        assert_eq!(report.files[0].file, first.display().to_string());
        assert_eq!(
            (report.files[1].first_seq, report.files[1].last_seq),
            (Some(6), Some(13))
        );
    }
    // Without the first file the chain starts at seq 6: nothing is wrong with what is there.
    let report = verify(&[&log.path], std::slice::from_ref(&log.public)).unwrap();
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.first_seq, Some(6));
}

#[test]
fn verify_records_says_which_records_a_checkpoint_vouches_for() {
    let log = standard();
    let mut lines = log.lines();
    lines[1] = lines[1].replace("alice", "bob"); // seq 2: breaks the chain into seq 3
    log.write_lines(&lines);
    let mut file = log.writer();
    file.append(record(11)).unwrap(); // seq 14: unsigned
    drop(file);
    let (report, records) =
        verify_records(&[&log.path], std::slice::from_ref(&log.public)).unwrap();
    let verdicts: Vec<(u64, bool)> = records.iter().map(|r| (r.seq, r.verified)).collect();
    assert_eq!(
        verdicts,
        [
            (1, false),
            (2, false),
            (3, true),
            (4, true),
            (6, true),
            (7, true),
            (8, true),
            (9, true),
            (11, true),
            (12, true),
            (14, false),
        ]
    );
    assert_eq!(records[1].record["user"], "bob");
    assert_eq!(records[1].line, 2);
    assert_eq!(report.verified_records, 8);
    // The report as JSON names kinds in snake_case.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["problems"][0]["kind"], "edited");
    assert_eq!(json["problems"][1]["kind"], "unsigned_tail");
    assert_eq!(json["verifiedRecords"], 8);
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Random single-line mutations of a good log (delete, duplicate, swap with the next,
/// truncate, change a byte): none verifies as intact.
#[test]
fn no_single_line_mutation_of_a_good_log_verifies_as_intact() {
    let log = good_log(12, 5);
    let good = log.lines();
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    for round in 0..600 {
        let mut lines = good.clone();
        let n = random.below(lines.len());
        let what = match random.below(6) {
            // Not the first line: a chain that starts at seq 2 is one whose older files were
            // rotated away (the report gives the seq range it saw).
            0 if n > 0 => {
                lines.remove(n);
                "delete"
            }
            1 => {
                let copy = lines[n].clone();
                lines.insert(random.below(lines.len() + 1), copy);
                "duplicate"
            }
            2 if n + 1 < lines.len() => {
                lines.swap(n, n + 1);
                "swap"
            }
            3 => {
                let keep = random.below(lines[n].len());
                lines[n].truncate(keep);
                "truncate"
            }
            _ => {
                // Replace one byte with a different printable ASCII one.
                let mut bytes = lines[n].clone().into_bytes();
                let at = random.below(bytes.len());
                let mut byte = b' ' + random.below(95) as u8;
                if byte == bytes[at] {
                    byte = if byte == b'~' { b' ' } else { byte + 1 };
                }
                bytes[at] = byte;
                match String::from_utf8(bytes) {
                    Ok(text) => lines[n] = text,
                    Err(_) => continue,
                }
                "change a byte"
            }
        };
        log.write_lines(&lines);
        let report = log.verify();
        assert!(
            !report.is_intact(false),
            "round {round}: {what} at line {}: still intact\n{report}",
            n + 1
        );
    }
}
