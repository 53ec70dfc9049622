//! [`Report`]: what a verification checked and found, as text ([`fmt::Display`]) or JSON
//! (serde).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A record as read, before verification.
pub type RecordMap = Map<String, Value>;

/// A line of a file.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    /// The file, as it was given.
    pub file: String,
    /// 1-based.
    pub line: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// What is wrong. In JSON, snake_case (`bad_signature`); as text, words (`bad signature`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The entry's bytes no longer hash to what its successor's `prev` says (or its seq is
    /// not the one its own `prev` puts it at).
    Edited,
    /// Seqs missing: `seq` to `last_seq`, where the problem is located.
    Removed,
    /// The entry is out of seq order in the files.
    Reordered,
    /// A second entry with a seq already taken (a copied line, or an inserted one).
    Duplicate,
    /// A last line without its `\n` that no `recovered` entry acknowledges.
    Partial,
    /// A line that is not an entry of this format, or a `recovered` entry that does not match
    /// the line it names.
    Malformed,
    /// A checkpoint whose signature is not its key's.
    BadSignature,
    /// A checkpoint signed by a key that is not trusted.
    UnknownKey,
    /// Entries after the last valid checkpoint: nothing vouches for them yet. A live log
    /// always has some; [`Report::is_intact`] may allow them.
    UnsignedTail,
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Edited => "edited",
            Self::Removed => "removed",
            Self::Reordered => "reordered",
            Self::Duplicate => "duplicate",
            Self::Partial => "partial",
            Self::Malformed => "malformed",
            Self::BadSignature => "bad signature",
            Self::UnknownKey => "unknown key",
            Self::UnsignedTail => "unsigned tail",
        })
    }
}

/// One problem, where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub kind: ProblemKind,
    /// The file, as it was given.
    pub file: String,
    /// The 1-based line: the entry or line at fault; for `removed`, the line after the gap;
    /// for the unsigned tail, its first entry.
    pub line: u64,
    /// The seq of the entry at fault (for a damaged line: the seq it still begins with, if
    /// it does); for a range, its first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// For a range (`removed`, `unsigned tail`): its last seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// For `bad signature` and `unknown key`: the key the checkpoint names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// What exactly, in a sentence.
    pub detail: String,
}

impl Problem {
    /// Where it is.
    pub fn location(&self) -> Location {
        Location {
            file: self.file.clone(),
            line: self.line,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.file, self.line)?;
        match (self.seq, self.last_seq) {
            (Some(first), Some(last)) if last != first => write!(f, "seq {first}-{last}: ")?,
            (Some(seq), _) => write!(f, "seq {seq}: ")?,
            (None, _) => {}
        }
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

/// One file, as the chain saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSummary {
    pub file: String,
    pub lines: u64,
    /// Entries in the chain (acknowledged partial lines and duplicates are not).
    pub entries: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
}

/// A checkpoint, where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointAt {
    pub seq: u64,
    pub file: String,
    pub line: u64,
}

/// What [`verify`](super::verify) checked and found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The files, in chain order (by first seq).
    pub files: Vec<FileSummary>,
    /// Entries in the chain, of every type.
    pub entries: u64,
    /// The seq range seen. A chain whose first seq is above 1 starts in files not given
    /// (rotated away, or left out).
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub records: u64,
    /// Records a valid checkpoint vouches for through an unbroken chain.
    pub verified_records: u64,
    pub checkpoints: u64,
    /// Checkpoints signed by a trusted key.
    pub valid_checkpoints: u64,
    /// `recovered` entries: lines left partial by a crash or a failed write, acknowledged.
    pub recovered: u64,
    /// The keys that signed the valid checkpoints.
    pub keys: Vec<String>,
    pub last_valid_checkpoint: Option<CheckpointAt>,
    /// In file order.
    pub problems: Vec<Problem>,
}

impl Report {
    /// The problems that count: all of them, or all but the unsigned tail.
    pub fn problems(&self, allow_unsigned_tail: bool) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(move |p| !(allow_unsigned_tail && p.kind == ProblemKind::UnsignedTail))
    }

    /// Whether nothing is wrong (allowing entries after the last checkpoint, or not).
    pub fn is_intact(&self, allow_unsigned_tail: bool) -> bool {
        self.problems(allow_unsigned_tail).next().is_none()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "files, in chain order:")?;
        for file in &self.files {
            write!(f, "  {}: {} lines", file.file, file.lines)?;
            match (file.first_seq, file.last_seq) {
                (Some(first), Some(last)) => writeln!(f, ", seq {first}-{last}")?,
                _ => writeln!(f, ", no entries")?,
            }
        }
        match (self.first_seq, self.last_seq) {
            (Some(first), Some(last)) => writeln!(
                f,
                "entries: {} (seq {first}-{last}): {} records, {} checkpoints, {} recovered lines",
                self.entries, self.records, self.checkpoints, self.recovered
            )?,
            _ => writeln!(f, "entries: none")?,
        }
        if let Some(first) = self.first_seq.filter(|s| *s > 1) {
            writeln!(
                f,
                "note: the chain starts at seq {first}; the entries before it are not in these files"
            )?;
        }
        write!(
            f,
            "verified: {} of {} records are vouched for by a valid checkpoint",
            self.verified_records, self.records
        )?;
        match &self.last_valid_checkpoint {
            Some(c) => writeln!(f, " (the last: seq {}, {}:{})", c.seq, c.file, c.line)?,
            None => writeln!(f)?,
        }
        writeln!(
            f,
            "checkpoints: {} of {} signed by a trusted key{}{}",
            self.valid_checkpoints,
            self.checkpoints,
            if self.keys.is_empty() { "" } else { ": " },
            self.keys.join(", ")
        )?;
        if self.problems.is_empty() {
            writeln!(f, "problems: none")
        } else {
            writeln!(f, "problems: {}", self.problems.len())?;
            for problem in &self.problems {
                writeln!(f, "  {problem}")?;
            }
            Ok(())
        }
    }
}

/// A record and its verdict, from [`verify_records`](super::verify_records).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckedRecord {
    pub file: String,
    pub line: u64,
    pub seq: u64,
    /// Whether a valid checkpoint vouches for it through an unbroken chain.
    pub verified: bool,
    /// The record's own keys (without `seq`, `prev` and `type`).
    pub record: RecordMap,
}
