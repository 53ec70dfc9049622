//! The writer: restarts, rotation and retention, recovery; every result checked by `verify`.

use std::sync::Mutex;

use super::*;
use crate::{
    PublicKey, Report, verify,
    verify::tests::{lines, record, write_lines},
};

struct Setup {
    dir: tempfile::TempDir,
    path: PathBuf,
    key_pem: String,
    public: PublicKey,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let signer = Signer::generate().unwrap();
    Setup {
        path,
        key_pem: signer.to_pkcs8_pem(),
        public: signer.public_key(),
        dir,
    }
}

impl Setup {
    fn open(&self, rotation: Rotation) -> AuditFile {
        AuditFile::open(&self.path, self.signer(), rotation).unwrap()
    }

    fn signer(&self) -> Signer {
        Signer::from_pkcs8_pem(&self.key_pem).unwrap()
    }

    /// The rotated files, oldest first, then the current file.
    fn all_files(&self) -> Vec<PathBuf> {
        let mut files = rotated_files(&self.path).unwrap();
        files.push(self.path.clone());
        files
    }

    fn verify(&self, files: &[PathBuf]) -> Report {
        verify(files, std::slice::from_ref(&self.public)).unwrap()
    }
}

/// A clock the test moves.
fn manual_clock(start: SystemTime) -> (Clock, Arc<Mutex<SystemTime>>) {
    let now = Arc::new(Mutex::new(start));
    let read = now.clone();
    (Arc::new(move || *read.lock().unwrap()), now)
}

#[test]
fn a_restart_continues_the_chain_from_the_files_last_entry() {
    let s = setup();
    let mut file = s.open(Rotation::default());
    assert_eq!(file.append(record(1)).unwrap(), 1);
    assert_eq!(file.append(record(2)).unwrap(), 2);
    assert_eq!(file.checkpoint().unwrap(), Some(3));
    // Nothing new: no checkpoint.
    assert_eq!(file.checkpoint().unwrap(), None);
    assert_eq!(file.append(record(3)).unwrap(), 4);
    drop(file);

    let mut file = s.open(Rotation::default());
    assert_eq!(file.next_seq(), 5);
    assert_eq!(file.append(record(4)).unwrap(), 5);
    // The record before the restart was not signed yet: this checkpoint covers it.
    assert_eq!(file.checkpoint().unwrap(), Some(6));
    drop(file);
    let lines = lines(&s.path);
    let entry = Entry::parse(lines[4].as_bytes()).unwrap();
    assert_eq!(entry.prev, Hash::of(lines[3].as_bytes()));
    let report = s.verify(std::slice::from_ref(&s.path));
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.records, 4);
}

#[test]
fn records_that_would_hide_the_entry_keys_are_refused_and_nothing_is_written() {
    let s = setup();
    let mut file = s.open(Rotation::default());
    let mut bad = record(1);
    bad.insert("seq".into(), 99.into());
    assert!(matches!(file.append(bad), Err(Error::Record(_))));
    assert_eq!(file.append(record(1)).unwrap(), 1);
}

#[test]
fn the_file_rotates_at_its_size_keeps_max_files_and_the_chain_runs_through_them() {
    let s = setup();
    let rotation = Rotation {
        max_size: 2000,
        max_age: None,
        max_files: 3,
    };
    let mut file = s.open(rotation);
    for n in 1..=60 {
        file.append(record(n)).unwrap();
    }
    file.checkpoint().unwrap();
    drop(file);
    let rotated = rotated_files(&s.path).unwrap();
    assert_eq!(rotated.len(), 3, "{rotated:?}");
    for old in &rotated {
        let lines = lines(old);
        let last = Entry::parse(lines.last().unwrap().as_bytes()).unwrap();
        assert!(
            matches!(last.body, Body::Checkpoint { .. }),
            "{}: the last line before a rotation is a checkpoint",
            old.display()
        );
        assert!(std::fs::metadata(old).unwrap().len() < 2000 + 500);
    }
    // The kept files and the current one are one unbroken chain, whose start was deleted.
    let report = s.verify(&s.all_files());
    assert!(report.is_intact(false), "{report}");
    assert!(report.first_seq.unwrap() > 1, "{report}");
    assert_eq!(report.last_seq, Some(file_last_seq(&s.path)));

    // Restarting right after a rotation (an empty file) continues from the newest rotated file.
    let newest = rotated.last().unwrap();
    std::fs::write(&s.path, "").unwrap();
    let mut file = s.open(rotation);
    let entry_seq = file.append(record(61)).unwrap();
    assert_eq!(entry_seq, file_last_seq(newest) + 1);
    file.checkpoint().unwrap();
    drop(file);
    let first = Entry::parse(lines(&s.path)[0].as_bytes()).unwrap();
    assert_eq!(
        first.prev,
        Hash::of(lines(newest).last().unwrap().as_bytes())
    );
    let report = s.verify(&s.all_files());
    assert!(report.is_intact(false), "{report}");
}

/// The rotated files' names, oldest first, and the first seq each holds.
fn rotated_names_and_first_seqs(path: &Path) -> Vec<(String, u64)> {
    rotated_files(path)
        .unwrap()
        .iter()
        .map(|file| {
            let first = Entry::parse(lines(file)[0].as_bytes()).unwrap().seq;
            (
                file.file_name().unwrap().to_string_lossy().into_owned(),
                first,
            )
        })
        .collect()
}

/// The kept files and the current one are one unbroken chain up to the last entry, and the
/// rotated names, sorted, hold ever later seqs: the name order is the rotation order.
fn assert_the_kept_chain_is_whole(s: &Setup) {
    let rotated = rotated_names_and_first_seqs(&s.path);
    for pair in rotated.windows(2) {
        assert!(
            pair[0].1 < pair[1].1,
            "names out of rotation order: {rotated:?}"
        );
    }
    let report = s.verify(&s.all_files());
    assert!(report.is_intact(true), "{rotated:?}\n{report}");
    assert_eq!(report.last_seq, Some(file_last_seq(&s.path)));
}

#[test]
fn many_rotations_within_one_millisecond_lose_nothing_across_restarts() {
    let s = setup();
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    // A clock that never moves: every rotation falls within the same millisecond.
    let (clock, now) = manual_clock(start);
    let rotation = Rotation {
        max_size: 600,
        max_age: None,
        max_files: 3,
    };
    let open = || AuditFile::open_with_clock(&s.path, s.signer(), rotation, clock.clone()).unwrap();
    let mut file = open();
    let mut written = 0;
    for _ in 0..40 {
        written += 1;
        file.append(record_at(written, start)).unwrap();
    }
    drop(file);
    assert_the_kept_chain_is_whole(&s);
    let before_restart = rotated_names_and_first_seqs(&s.path);
    assert_eq!(before_restart.len(), 3, "{before_restart:?}");

    // A restart, still within that millisecond, then one with the clock set back an hour: the
    // new names still come after the newest on disk.
    for back in [Duration::ZERO, Duration::from_secs(3600)] {
        *now.lock().unwrap() = start - back;
        let mut file = open();
        for _ in 0..40 {
            written += 1;
            file.append(record_at(written, start)).unwrap();
        }
        file.checkpoint().unwrap();
        drop(file);
        assert_the_kept_chain_is_whole(&s);
    }
    let after = rotated_names_and_first_seqs(&s.path);
    assert_eq!(after.len(), 3, "{after:?}");
    assert!(
        after[0].0 > before_restart[2].0,
        "a name repeated or went back: {before_restart:?} then {after:?}"
    );
    // Signed to the end: nothing kept is outside a checkpoint's word.
    let report = s.verify(&s.all_files());
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.files.len(), 4, "{report}");
}

fn file_last_seq(path: &Path) -> u64 {
    Entry::parse(lines(path).last().unwrap().as_bytes())
        .unwrap()
        .seq
}

#[test]
fn a_missing_file_continues_from_the_newest_rotated_one() {
    let s = setup();
    let rotation = Rotation {
        max_size: 1000,
        ..Rotation::default()
    };
    let mut file = s.open(rotation);
    for n in 1..=10 {
        file.append(record(n)).unwrap();
    }
    drop(file);
    let rotated = rotated_files(&s.path).unwrap();
    assert!(!rotated.is_empty());
    // The current file is gone (say, moved away by hand), only rotated ones are left.
    std::fs::rename(&s.path, s.dir.path().join("moved.jsonl")).unwrap();
    let mut file = s.open(rotation);
    let seq = file.append(record(11)).unwrap();
    assert_eq!(seq, file_last_seq(rotated.last().unwrap()) + 1);
}

/// A record whose `time` is `time`, as the webhook writes it (jiff: nanoseconds).
fn record_at(n: u64, time: SystemTime) -> serde_json::Map<String, serde_json::Value> {
    let mut record = record(n);
    let time = DateTime::<Utc>::from(time).to_rfc3339_opts(SecondsFormat::Nanos, true);
    record.insert("time".into(), time.into());
    record
}

#[test]
fn the_file_rotates_at_its_age_counted_from_its_first_entry_across_restarts() {
    let s = setup();
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let (clock, now) = manual_clock(start);
    let rotation = Rotation {
        max_size: 0,
        max_age: Some(Duration::from_secs(3600)),
        max_files: 0,
    };
    let open = || AuditFile::open_with_clock(&s.path, s.signer(), rotation, clock.clone()).unwrap();
    let mut file = open();
    file.append(record_at(1, start)).unwrap();
    let later = start + Duration::from_secs(3599);
    *now.lock().unwrap() = later;
    file.append(record_at(2, later)).unwrap();
    drop(file);
    // A restart takes the age from the file's first entry, not from the restart.
    let mut file = open();
    assert_eq!(file.checkpoint().unwrap(), Some(3));
    assert!(rotated_files(&s.path).unwrap().is_empty());
    *now.lock().unwrap() = start + Duration::from_secs(3600);
    // The interval's checkpoint call finds the file due, and rotates it (already signed).
    assert_eq!(file.checkpoint().unwrap(), None);
    let rotated = rotated_files(&s.path).unwrap();
    assert_eq!(
        rotated
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        ["audit.jsonl.20270115T090000.000Z"]
    );
    assert_eq!(std::fs::metadata(&s.path).unwrap().len(), 0);
    assert_eq!(file.append(record_at(3, start)).unwrap(), 4);
    file.checkpoint().unwrap();
    drop(file);
    let report = s.verify(&s.all_files());
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.files.len(), 2);
}

#[test]
fn a_partial_last_line_is_closed_and_acknowledged_at_open() {
    let s = setup();
    let mut file = s.open(Rotation::default());
    file.append(record(1)).unwrap();
    file.checkpoint().unwrap();
    drop(file);
    // The process died mid-write: a complete record line but for its `\n`, after a damaged one.
    let next = Entry::record(3, Hash::GENESIS, record(2)).unwrap().encode();
    let mut text = std::fs::read_to_string(&s.path).unwrap();
    text.push_str("{\"seq\":3,\"pre\n");
    text.push_str(&next);
    std::fs::write(&s.path, &text).unwrap();

    let mut file = s.open(Rotation::default());
    assert_eq!(file.append(record(2)).unwrap(), 5);
    file.checkpoint().unwrap();
    drop(file);
    let lines = lines(&s.path);
    assert_eq!(lines[3], next);
    for (line, acknowledged) in [(4, 3), (5, 4)] {
        let entry = Entry::parse(lines[line].as_bytes()).unwrap();
        assert!(
            matches!(&entry.body, Body::Recovered { partial_line, partial_sha256, .. }
                if *partial_line == acknowledged
                    && *partial_sha256 == Hash::of(lines[acknowledged as usize - 1].as_bytes()).to_string()),
            "{}",
            lines[line]
        );
    }
    let report = s.verify(std::slice::from_ref(&s.path));
    assert!(report.is_intact(false), "{report}");
    assert_eq!((report.recovered, report.records), (2, 2));
}

#[test]
fn after_a_failed_write_the_next_entry_recovers_first() {
    let s = setup();
    let mut file = s.open(Rotation::default());
    file.append(record(1)).unwrap();
    // What a failed write leaves: part of the line, and the writer told to recover.
    let partial = &Entry::record(2, Hash::GENESIS, record(2)).unwrap().encode()[..30];
    file.file
        .as_mut()
        .unwrap()
        .file
        .write_all(partial.as_bytes())
        .unwrap();
    file.file = None;
    assert_eq!(file.append(record(2)).unwrap(), 3);
    file.checkpoint().unwrap();
    drop(file);
    let report = s.verify(std::slice::from_ref(&s.path));
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.recovered, 1);
}

#[test]
fn a_file_replaced_by_a_directory_fails_each_write_until_it_is_back() {
    let s = setup();
    let mut file = s.open(Rotation::default());
    file.append(record(1)).unwrap();
    let moved = s.dir.path().join("audit.jsonl.moved");
    std::fs::rename(&s.path, &moved).unwrap();
    std::fs::create_dir(&s.path).unwrap();
    assert!(matches!(file.append(record(2)), Err(Error::Io { .. })));
    assert!(matches!(file.append(record(2)), Err(Error::Io { .. })));
    std::fs::remove_dir(&s.path).unwrap();
    // The chain continues where this writer left it, in a new file.
    assert_eq!(file.append(record(2)).unwrap(), 2);
    file.checkpoint().unwrap();
    drop(file);
    let report = s.verify(&[moved, s.path.clone()]);
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.records, 2);
}

#[test]
fn a_file_deleted_under_the_writer_is_recreated_and_the_deletion_shows() {
    let s = setup();
    let mut file = s.open(Rotation::default());
    file.append(record(1)).unwrap();
    file.append(record(2)).unwrap();
    std::fs::remove_file(&s.path).unwrap();
    assert_eq!(file.append(record(3)).unwrap(), 3);
    file.checkpoint().unwrap();
    drop(file);
    // The new file starts at seq 3; a verifier given only it sees where the chain starts.
    let report = s.verify(std::slice::from_ref(&s.path));
    assert_eq!(report.first_seq, Some(3));
}

#[test]
fn a_file_that_does_not_end_in_entries_is_refused() {
    let s = setup();
    // An audit file from before the chain: one record per line, no seq.
    let old: Vec<String> = (1..=20)
        .map(|n| serde_json::Value::Object(record(n)).to_string())
        .collect();
    write_lines(&s.path, &old);
    let error = AuditFile::open(&s.path, s.signer(), Rotation::default()).unwrap_err();
    assert!(matches!(error, Error::NotAnAuditFile { .. }), "{error}");
    assert!(error.to_string().contains("move it away"), "{error}");
}
