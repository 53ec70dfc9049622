//! [`Scanned`]: one file read line by line into entries ([`Item`]) and lines that are not
//! entries ([`Damaged`]), with each checkpoint's signature checked.

use std::{
    collections::HashMap,
    fs::File,
    io::{BufRead, BufReader},
    path::Path,
};

use super::report::RecordMap;
use crate::{
    Error, Hash, PublicKey, Result,
    entry::{Body, Entry, leading_seq},
};

pub(super) struct Scanned {
    pub name: String,
    pub lines: u64,
    pub items: Vec<Item>,
    pub damaged: Vec<Damaged>,
}

/// A line that is an entry.
pub(super) struct Item {
    pub file: usize,
    pub line: u64,
    /// As written; an entry found to have an edited seq gets the one the chain gives it.
    pub seq: u64,
    pub prev: Hash,
    pub hash: Hash,
    /// Whether the line ended with `\n`.
    pub complete: bool,
    /// Not part of the chain: acknowledged by a `recovered` entry, partial, or a duplicate.
    pub outside: bool,
    pub kind: ItemKind,
}

pub(super) enum ItemKind {
    /// The record, if the caller wants records.
    Record(Option<RecordMap>),
    Checkpoint {
        signature: Signature,
        key_id: String,
    },
    Recovered {
        partial_line: u64,
        partial_sha256: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Signature {
    Valid,
    Bad,
    UnknownKey,
}

/// A line that is not an entry.
pub(super) struct Damaged {
    pub file: usize,
    pub line: u64,
    pub hash: Hash,
    pub complete: bool,
    pub reason: String,
    /// The seq its beginning still says, if it does.
    pub seq: Option<u64>,
}

impl Scanned {
    pub fn read(
        file: usize,
        path: &Path,
        keys: &HashMap<String, &PublicKey>,
        keep_records: bool,
    ) -> Result<Scanned> {
        let io = Error::io(path);
        let mut reader = BufReader::new(File::open(path).map_err(Error::io(path))?);
        let mut scanned = Scanned {
            name: path.display().to_string(),
            lines: 0,
            items: Vec::new(),
            damaged: Vec::new(),
        };
        let mut bytes = Vec::new();
        let read = loop {
            bytes.clear();
            match reader.read_until(b'\n', &mut bytes) {
                Ok(0) => break Ok(()),
                Ok(_) => {}
                Err(e) => break Err(e),
            }
            scanned.lines += 1;
            let line = scanned.lines;
            let complete = bytes.last() == Some(&b'\n');
            let text = if complete {
                &bytes[..bytes.len() - 1]
            } else {
                &bytes[..]
            };
            let hash = Hash::of(text);
            match Entry::parse(text) {
                Ok(entry) => scanned.items.push(Item {
                    file,
                    line,
                    seq: entry.seq,
                    prev: entry.prev,
                    hash,
                    complete,
                    outside: false,
                    kind: kind(entry, keys, keep_records),
                }),
                Err(reason) => scanned.damaged.push(Damaged {
                    file,
                    line,
                    hash,
                    complete,
                    reason,
                    seq: leading_seq(text),
                }),
            }
        };
        read.map_err(io)?;
        Ok(scanned)
    }
}

fn kind(entry: Entry, keys: &HashMap<String, &PublicKey>, keep_records: bool) -> ItemKind {
    let signature = keys.get(entry.key_id().unwrap_or_default()).map(|key| {
        if entry.signed_by(key) == Some(true) {
            Signature::Valid
        } else {
            Signature::Bad
        }
    });
    match entry.body {
        Body::Record(record) => ItemKind::Record(keep_records.then_some(record)),
        Body::Checkpoint { key_id, .. } => ItemKind::Checkpoint {
            signature: signature.unwrap_or(Signature::UnknownKey),
            key_id,
        },
        Body::Recovered {
            partial_line,
            partial_sha256,
            ..
        } => ItemKind::Recovered {
            partial_line,
            partial_sha256,
        },
    }
}
