//! `ozctl audit verify --recordings DIR`: each `session-end` record names its session's
//! recording and carries the file's SHA-256 and length; this finds the file under DIR and
//! compares. A recording edited, cut short or replaced after the session is a mismatch.
//!
//! DIR is a copy of oz's recordings store (`<namespace>/<id>.cast`, as the recordings volume or
//! an S3 sync holds them) or a folder of files saved by `ozctl replay --output` as `<id>.cast`.
//! Files are read a piece at a time, never whole.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
};

use oz_audit::Hash;
use serde::Serialize;
use serde_json::Value;

use crate::error::CliError;

/// One session-end record's recording, checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordingCheck {
    /// The audit file and line of the record.
    pub file: String,
    pub line: usize,
    /// The record's seq, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The recording's key, `<namespace>/<id>.cast`.
    pub recording: String,
    /// What the record says.
    pub sha256: String,
    pub bytes: Option<u64>,
    /// What was found.
    pub outcome: Outcome,
}

/// What the file under DIR is, against its record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum Outcome {
    /// Same SHA-256 and length.
    Matches { path: String },
    /// Another file than the one the session left.
    Differs {
        path: String,
        sha256: String,
        bytes: u64,
    },
    /// No such file under any DIR.
    NotFound,
}

impl RecordingCheck {
    /// Whether it is a problem (a mismatch: a missing file is only reported).
    pub fn differs(&self) -> bool {
        matches!(self.outcome, Outcome::Differs { .. })
    }

    /// The check as one line: `FILE:LINE (seq N): recording KEY matches|differs|not found`.
    pub fn line(&self) -> String {
        let seq = self.seq.map(|s| format!(" (seq {s})")).unwrap_or_default();
        let what = match &self.outcome {
            Outcome::Matches { path } => format!("matches {path}"),
            Outcome::Differs {
                path,
                sha256,
                bytes,
            } => format!(
                "DIFFERS: {path} has sha256 {sha256} ({bytes} bytes), the record says {}{}",
                self.sha256,
                self.bytes
                    .map(|b| format!(" ({b} bytes)"))
                    .unwrap_or_default()
            ),
            Outcome::NotFound => "not found under the --recordings directories".into(),
        };
        format!(
            "{}:{}{seq}: recording {}: {what}",
            self.file, self.line, self.recording
        )
    }
}

/// Checks the recording of every session-end record in `audit_files` that carries a digest
/// against the files under `dirs`.
pub fn check(audit_files: &[PathBuf], dirs: &[PathBuf]) -> Result<Vec<RecordingCheck>, CliError> {
    let mut checks = Vec::new();
    for audit_file in audit_files {
        let unreadable =
            |e: std::io::Error| CliError::Unverifiable(format!("{}: {e}", audit_file.display()));
        let reader = BufReader::new(std::fs::File::open(audit_file).map_err(unreadable)?);
        for (n, line) in reader.lines().enumerate() {
            let line = line.map_err(unreadable)?;
            let Some((recording, sha256, bytes, seq)) = session_end_digest(&line) else {
                continue;
            };
            let outcome = match find(dirs, &recording) {
                None => Outcome::NotFound,
                Some(path) => {
                    let file = std::fs::File::open(&path)
                        .map_err(|e| CliError::Unverifiable(format!("{}: {e}", path.display())))?;
                    let (hash, length) = Hash::of_reader(file)
                        .map_err(|e| CliError::Unverifiable(format!("{}: {e}", path.display())))?;
                    let path = path.display().to_string();
                    if hash.to_string() == sha256 && bytes.is_none_or(|b| b == length) {
                        Outcome::Matches { path }
                    } else {
                        Outcome::Differs {
                            path,
                            sha256: hash.to_string(),
                            bytes: length,
                        }
                    }
                }
            };
            checks.push(RecordingCheck {
                file: audit_file.display().to_string(),
                line: n + 1,
                seq,
                recording,
                sha256,
                bytes,
                outcome,
            });
        }
    }
    Ok(checks)
}

/// A session-end record's recording key, SHA-256, length and seq; `None` for any other line.
fn session_end_digest(line: &str) -> Option<(String, String, Option<u64>, Option<u64>)> {
    // Only session-end records can carry a digest: skip the rest unparsed.
    if !line.contains("\"recordingSha256\"") {
        return None;
    }
    let entry: Value = serde_json::from_str(line).ok()?;
    if entry["type"] != "record" || entry["event"] != "session-end" {
        return None;
    }
    let session = &entry["session"];
    Some((
        session["recording"].as_str()?.to_owned(),
        session["recordingSha256"].as_str()?.to_owned(),
        session["recordingBytes"].as_u64(),
        entry["seq"].as_u64(),
    ))
}

/// The file for `recording` (`<namespace>/<id>.cast`) under the first of `dirs` that has it,
/// as the store keeps it or as `<id>.cast`. Keys that would leave the directory are never
/// followed.
fn find(dirs: &[PathBuf], recording: &str) -> Option<PathBuf> {
    let (namespace, file) = recording.split_once('/')?;
    let safe =
        |part: &str| !part.is_empty() && !part.contains(['/', '\\']) && part != "." && part != "..";
    if !safe(namespace) || !safe(file) {
        return None;
    }
    dirs.iter().find_map(|dir| {
        [dir.join(namespace).join(file), dir.join(file)]
            .into_iter()
            .find(|path| Path::is_file(path))
    })
}

#[cfg(test)]
mod tests {
    use oz_audit::{AuditFile, Rotation, Signer};
    use serde_json::json;

    use super::*;

    /// An audit file with a session-start record and a session-end record for a recording of
    /// `content`, and the recording saved under `dir/team/`.
    fn session(dir: &Path, content: &[u8]) -> PathBuf {
        let path = dir.join("audit.jsonl");
        let mut file =
            AuditFile::open(&path, Signer::generate().unwrap(), Rotation::default()).unwrap();
        let key = "team/20261123-081500-k3x9qa7m.cast";
        let (hash, length) = Hash::of_reader(content).unwrap();
        for (event, digest) in [("session-start", None), ("session-end", Some(hash))] {
            let mut session =
                json!({"id": "20261123-081500-k3x9qa7m", "recording": key, "replica": "oz-0"});
            if let Some(hash) = digest {
                session["recordingSha256"] = hash.to_string().into();
                session["recordingBytes"] = length.into();
            }
            file.append(
                json!({"event": event, "user": "alice", "session": session})
                    .as_object()
                    .unwrap()
                    .clone(),
            )
            .unwrap();
        }
        std::fs::create_dir_all(dir.join("team")).unwrap();
        std::fs::write(dir.join(key), content).unwrap();
        path
    }

    #[test]
    fn a_recording_as_the_session_left_it_matches_and_an_edited_one_differs() {
        let dir = tempfile::tempdir().unwrap();
        let audit = session(dir.path(), b"{\"version\":2}\n[0.1, \"o\", \"hi\"]\n");
        let recordings = dir.path().to_path_buf();
        let checks = check(
            std::slice::from_ref(&audit),
            std::slice::from_ref(&recordings),
        )
        .unwrap();
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert!(!checks[0].differs(), "{checks:?}");
        assert!(
            checks[0]
                .line()
                .contains(":2 (seq 2): recording team/20261123-081500-k3x9qa7m.cast: matches "),
            "{}",
            checks[0].line()
        );

        let cast = dir.path().join("team/20261123-081500-k3x9qa7m.cast");
        std::fs::write(&cast, b"{\"version\":2}\n[0.1, \"o\", \"ho\"]\n").unwrap();
        let checks = check(
            std::slice::from_ref(&audit),
            std::slice::from_ref(&recordings),
        )
        .unwrap();
        assert!(checks[0].differs());
        assert!(
            checks[0].line().contains(": DIFFERS: "),
            "{}",
            checks[0].line()
        );

        // Saved by `ozctl replay --output` as <id>.cast in another folder: found too.
        let saved = tempfile::tempdir().unwrap();
        std::fs::write(
            saved.path().join("20261123-081500-k3x9qa7m.cast"),
            b"{\"version\":2}\n[0.1, \"o\", \"hi\"]\n",
        )
        .unwrap();
        let checks = check(std::slice::from_ref(&audit), &[saved.path().to_path_buf()]).unwrap();
        assert!(
            matches!(checks[0].outcome, Outcome::Matches { .. }),
            "{checks:?}"
        );

        let empty = tempfile::tempdir().unwrap();
        let checks = check(&[audit], &[empty.path().to_path_buf()]).unwrap();
        assert_eq!(checks[0].outcome, Outcome::NotFound);
        assert!(!checks[0].differs());
    }

    #[test]
    fn keys_that_would_leave_the_directory_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        for key in [
            "../x.cast",
            "team/../x.cast",
            "/etc/passwd",
            "team/",
            "x.cast",
        ] {
            assert_eq!(find(&[dir.path().to_path_buf()], key), None, "{key}");
        }
    }
}
