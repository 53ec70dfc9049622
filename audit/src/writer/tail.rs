//! [`Tail`]: what the end of an audit file says, for the writer to continue the chain from:
//! its last complete entry, and the partial or unreadable lines after it.

use std::{
    fs::File,
    io::{BufRead, BufReader, Read, Seek, SeekFrom},
    path::Path,
    time::SystemTime,
};

use serde_json::{Map, Value};

use crate::{
    Error, Hash, Result,
    entry::{Body, Entry},
};

/// How much of the end is read at first; doubled until an entry is found.
const WINDOW: u64 = 64 * 1024;

/// At most this many lines after the last entry are taken for the debris of crashes and
/// failed writes; a file with more is not an audit file of this format.
const MAX_UNREADABLE: usize = 16;

/// The end of an audit file.
#[derive(Debug, Default)]
pub(super) struct Tail {
    /// The last complete line that is an entry.
    pub last_entry: Option<LastEntry>,
    /// The lines after it: complete lines that are not entries, and a last line without its
    /// `\n` (always counted here, whatever it says).
    pub unreadable: Vec<Unreadable>,
    /// Whether the file is empty or ends with `\n`.
    pub ends_with_newline: bool,
    /// The `time` of the file's first line, if it has one.
    pub first_time: Option<SystemTime>,
}

#[derive(Clone, Debug)]
pub(super) struct LastEntry {
    pub seq: u64,
    pub hash: Hash,
    pub checkpoint: bool,
}

#[derive(Debug)]
pub(super) struct Unreadable {
    /// 1-based.
    pub number: u64,
    pub hash: Hash,
}

impl Tail {
    /// Reads the end of `file` (`len` bytes long; `path` names it in errors).
    pub fn read(file: &mut File, len: u64, path: &Path) -> Result<Tail> {
        if len == 0 {
            return Ok(Tail {
                ends_with_newline: true,
                ..Tail::default()
            });
        }
        let io = |e| Error::Io {
            path: path.to_path_buf(),
            source: e,
        };
        let mut window = WINDOW.min(len);
        loop {
            let start = len - window;
            let mut bytes = vec![0; window as usize];
            file.seek(SeekFrom::Start(start)).map_err(io)?;
            file.read_exact(&mut bytes).map_err(io)?;
            let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
            // What follows the last `\n`: empty, or a partial line.
            let partial = lines.pop().filter(|p| !p.is_empty());
            // The window's first line may have begun before it.
            let first_whole = usize::from(start > 0);
            let last_entry = lines
                .iter()
                .enumerate()
                .skip(first_whole)
                .rev()
                .take(MAX_UNREADABLE + 1)
                .find_map(|(i, line)| Entry::parse(line).ok().map(|e| (i, line, e)));
            let searched_all = start == 0 || lines.len() > MAX_UNREADABLE + first_whole;
            if last_entry.is_none() && !searched_all {
                window = (window * 2).min(len);
                continue;
            }
            let after = last_entry.as_ref().map_or(0, |(i, _, _)| i + 1);
            let mut unreadable: Vec<(usize, &[u8])> =
                (after..lines.len()).map(|i| (i, lines[i])).collect();
            if let Some(partial) = partial {
                unreadable.push((lines.len(), partial));
            }
            if unreadable.len() > MAX_UNREADABLE
                || (last_entry.is_none() && start > 0 && !unreadable.is_empty())
            {
                return Err(Error::NotAnAuditFile {
                    path: path.to_path_buf(),
                    message: "its last lines are not oz audit entries (format v1); move it away \
                              to start a new audit file"
                        .into(),
                });
            }
            let lines_before = if unreadable.is_empty() {
                0
            } else {
                count_newlines(file, start).map_err(io)?
            };
            return Ok(Tail {
                last_entry: last_entry.map(|(_, line, entry)| LastEntry {
                    seq: entry.seq,
                    hash: Hash::of(line),
                    checkpoint: matches!(entry.body, Body::Checkpoint { .. }),
                }),
                unreadable: unreadable
                    .into_iter()
                    .map(|(i, line)| Unreadable {
                        number: lines_before + i as u64 + 1,
                        hash: Hash::of(line),
                    })
                    .collect(),
                ends_with_newline: partial.is_none(),
                first_time: first_time(file).map_err(io)?,
            });
        }
    }
}

/// How many `\n` the first `end` bytes of `file` have.
fn count_newlines(file: &mut File, end: u64) -> std::io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::new(file.take(end));
    let mut count = 0;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(count);
        }
        count += buffer.iter().filter(|b| **b == b'\n').count() as u64;
        let n = buffer.len();
        reader.consume(n);
    }
}

/// The `time` of the file's first line, if it is an object with an RFC 3339 `time`.
fn first_time(file: &mut File) -> std::io::Result<Option<SystemTime>> {
    file.seek(SeekFrom::Start(0))?;
    let mut line = Vec::new();
    BufReader::new(file.take(WINDOW)).read_until(b'\n', &mut line)?;
    let time = serde_json::from_slice::<Map<String, Value>>(line.trim_ascii_end())
        .ok()
        .and_then(|object| {
            let time = object.get("time")?.as_str()?;
            chrono::DateTime::parse_from_rfc3339(time).ok()
        });
    Ok(time.map(SystemTime::from))
}
