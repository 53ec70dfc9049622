//! [`verify`]: checks audit files against their chain and signatures, and reports every
//! problem by file, line and seq ([`Report`]).
//!
//! How single faults are told apart: hash links say which entry follows which, seqs say
//! where each belongs.
//!
//! - An entry whose `prev` is the hash of the entry before it in the file but whose `seq` is
//!   not one more was edited (its seq).
//! - Entries out of seq order in the files are the ones outside every longest run in seq
//!   order: a swapped pair is both named, one line moved away is that one line.
//! - In seq order, a gap is `removed` (unless a damaged line there is that seq), and a link
//!   whose `prev` is not the hash of the entry before names that entry `edited`: its bytes
//!   changed, or the chain would still hold.
//! - Lines that are not entries are `partial` (no `\n`) or `malformed`, unless a `recovered`
//!   entry acknowledges them by line number and hash; they are outside the chain.

mod report;
mod runs;
mod scan;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::Path,
};

pub use report::{
    CheckedRecord, CheckpointAt, FileSummary, Location, Problem, ProblemKind, Report,
};
use runs::outside_every_longest_run;
use scan::{Damaged, Item, ItemKind, Scanned, Signature};

use crate::{Hash, PublicKey, Result};

/// Verifies `files` (in any order: they are put in order by their first seq) against
/// `trusted` keys. An `Err` only when a file cannot be read; everything wrong inside the
/// files is a [`Problem`] in the report.
pub fn verify<P: AsRef<Path>>(files: &[P], trusted: &[PublicKey]) -> Result<Report> {
    Ok(check(files, trusted, false)?.0)
}

/// As [`verify`], and every record, in seq order, with whether a valid checkpoint vouches
/// for it ([`CheckedRecord::verified`]).
pub fn verify_records<P: AsRef<Path>>(
    files: &[P],
    trusted: &[PublicKey],
) -> Result<(Report, Vec<CheckedRecord>)> {
    check(files, trusted, true)
}

fn check<P: AsRef<Path>>(
    files: &[P],
    trusted: &[PublicKey],
    keep_records: bool,
) -> Result<(Report, Vec<CheckedRecord>)> {
    let keys: HashMap<String, &PublicKey> = trusted
        .iter()
        .map(|k| (k.key_id().to_string(), k))
        .collect();
    let mut scanned = Vec::new();
    for (index, path) in files.iter().enumerate() {
        scanned.push(Scanned::read(index, path.as_ref(), &keys, keep_records)?);
    }
    let mut check = Check::new(scanned);
    check.acknowledge();
    check.order_files();
    check.repair_seqs();
    check.drop_duplicates();
    check.find_reordered();
    check.walk_chain();
    Ok(check.finish())
}

/// The state of one verification.
struct Check {
    names: Vec<String>,
    /// Line counts per file (by file index).
    line_counts: Vec<u64>,
    items: Vec<Item>,
    damaged: Vec<Damaged>,
    /// File indices in chain order.
    file_order: Vec<usize>,
    /// Items in the chain, in file order (acknowledged and duplicate ones left out).
    chain: Vec<usize>,
    problems: Vec<Problem>,
    /// Items already named `edited`.
    edited: BTreeSet<usize>,
    verified: Vec<bool>,
    last_valid_checkpoint: Option<usize>,
}

impl Check {
    fn new(scanned: Vec<Scanned>) -> Check {
        let mut names = Vec::new();
        let mut line_counts = Vec::new();
        let mut items = Vec::new();
        let mut damaged = Vec::new();
        for file in scanned {
            names.push(file.name);
            line_counts.push(file.lines);
            items.extend(file.items);
            damaged.extend(file.damaged);
        }
        let verified = vec![false; items.len()];
        Check {
            names,
            line_counts,
            items,
            damaged,
            file_order: Vec::new(),
            chain: Vec::new(),
            problems: Vec::new(),
            edited: BTreeSet::new(),
            verified,
            last_valid_checkpoint: None,
        }
    }

    fn location(&self, file: usize, line: u64) -> Location {
        Location {
            file: self.names[file].clone(),
            line,
        }
    }

    fn item_location(&self, item: usize) -> Location {
        let item = &self.items[item];
        self.location(item.file, item.line)
    }

    fn problem(
        &mut self,
        kind: ProblemKind,
        at: Location,
        seq: Option<u64>,
        detail: impl Into<String>,
    ) -> &mut Problem {
        self.problems.push(Problem {
            kind,
            file: at.file,
            line: at.line,
            seq,
            last_seq: None,
            key_id: None,
            detail: detail.into(),
        });
        self.problems.last_mut().expect("just pushed")
    }

    /// Matches each `recovered` entry with the line it names: an acknowledged line is outside
    /// the chain and no problem. Every other damaged line is one.
    fn acknowledge(&mut self) {
        let mut by_line: HashMap<(usize, u64), Hash> = HashMap::new();
        for d in &self.damaged {
            by_line.insert((d.file, d.line), d.hash);
        }
        for item in &self.items {
            by_line.insert((item.file, item.line), item.hash);
        }
        let mut acknowledged: BTreeSet<(usize, u64)> = BTreeSet::new();
        let mut unmatched = Vec::new();
        for (index, item) in self.items.iter().enumerate() {
            let ItemKind::Recovered {
                partial_line,
                partial_sha256,
            } = &item.kind
            else {
                continue;
            };
            let named = (item.file, *partial_line);
            match by_line.get(&named) {
                Some(hash) if *partial_line < item.line && hash.to_string() == *partial_sha256 => {
                    acknowledged.insert(named);
                }
                Some(_) if *partial_line < item.line => {
                    unmatched.push((index, Some(*partial_line)));
                }
                _ => unmatched.push((index, None)),
            }
        }
        for (index, line) in unmatched {
            let seq = self.items[index].seq;
            let at = self.item_location(index);
            match line {
                // The damaged line itself is reported below, or (if it parses) it is in the
                // chain and judged there.
                Some(line) => {
                    let detail = format!(
                        "the recovered entry names line {line}, whose bytes have a different SHA-256"
                    );
                    self.problem(ProblemKind::Malformed, at, Some(seq), detail);
                }
                None => {
                    let detail = format!(
                        "a recovered entry that names line {}, which this file does not have before it",
                        match &self.items[index].kind {
                            ItemKind::Recovered { partial_line, .. } => *partial_line,
                            _ => 0,
                        }
                    );
                    self.problem(ProblemKind::Malformed, at, Some(seq), detail);
                }
            }
        }
        for item in &mut self.items {
            if acknowledged.contains(&(item.file, item.line)) || !item.complete {
                item.outside = true;
            }
        }
        let damaged = std::mem::take(&mut self.damaged);
        for d in &damaged {
            if acknowledged.contains(&(d.file, d.line)) {
                continue;
            }
            let at = self.location(d.file, d.line);
            let (kind, detail) = if d.complete {
                (
                    ProblemKind::Malformed,
                    format!("not an entry: {}", d.reason),
                )
            } else {
                (
                    ProblemKind::Partial,
                    "the last line has no end (no \\n), and no recovered entry acknowledges it"
                        .to_string(),
                )
            };
            self.problem(kind, at, d.seq, detail);
        }
        // A last line without `\n` that still parses is partial too: never part of the chain.
        for index in 0..self.items.len() {
            let item = &self.items[index];
            if !item.complete && !acknowledged.contains(&(item.file, item.line)) {
                let (seq, at) = (item.seq, self.item_location(index));
                self.problem(
                    ProblemKind::Partial,
                    at,
                    Some(seq),
                    "the last line has no end (no \\n), and no recovered entry acknowledges it",
                );
            }
        }
        self.damaged = damaged;
    }

    /// Puts the files in order of their first seq, and the chain's items in file order.
    fn order_files(&mut self) {
        let mut first: BTreeMap<usize, u64> = BTreeMap::new();
        for item in self.items.iter().filter(|i| !i.outside) {
            first.entry(item.file).or_insert(item.seq);
        }
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        order.sort_by_key(|f| (first.get(f).copied().unwrap_or(u64::MAX), *f));
        let rank: HashMap<usize, usize> = order.iter().enumerate().map(|(r, f)| (*f, r)).collect();
        self.file_order = order;
        let mut chain: Vec<usize> = (0..self.items.len())
            .filter(|i| !self.items[*i].outside)
            .collect();
        chain.sort_by_key(|i| (rank[&self.items[*i].file], self.items[*i].line));
        self.chain = chain;
    }

    /// An entry that follows its predecessor by hash but not by seq had its seq edited: it is
    /// named, and put back where the chain says it belongs.
    fn repair_seqs(&mut self) {
        for pair in 1..self.chain.len() {
            let (a, b) = (self.chain[pair - 1], self.chain[pair]);
            let expected = self.items[a].seq.saturating_add(1);
            if self.items[b].prev == self.items[a].hash && self.items[b].seq != expected {
                let stated = self.items[b].seq;
                self.items[b].seq = expected;
                self.edited.insert(b);
                let at = self.item_location(b);
                self.problem(
                    ProblemKind::Edited,
                    at,
                    Some(expected),
                    format!(
                        "its seq says {stated}, but its prev is the hash of seq {}",
                        expected - 1
                    ),
                );
            }
        }
    }

    /// Of several entries with one seq, the chain keeps the one the next seq's `prev` names
    /// (else the one whose `prev` is the previous seq, else the first); the others are named.
    fn drop_duplicates(&mut self) {
        let mut by_seq: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for &i in &self.chain {
            by_seq.entry(self.items[i].seq).or_default().push(i);
        }
        let mut dropped = BTreeSet::new();
        for (seq, group) in &by_seq {
            if group.len() < 2 {
                continue;
            }
            let next_prevs: Vec<Hash> = seq
                .checked_add(1)
                .and_then(|s| by_seq.get(&s))
                .map(|g| g.iter().map(|i| self.items[*i].prev).collect())
                .unwrap_or_default();
            let before: Vec<Hash> = seq
                .checked_sub(1)
                .and_then(|s| by_seq.get(&s))
                .map(|g| g.iter().map(|i| self.items[*i].hash).collect())
                .unwrap_or_default();
            let kept = group
                .iter()
                .find(|i| next_prevs.contains(&self.items[**i].hash))
                .or_else(|| {
                    group
                        .iter()
                        .find(|i| before.contains(&self.items[**i].prev))
                })
                .copied()
                .unwrap_or(group[0]);
            for &other in group.iter().filter(|i| **i != kept) {
                dropped.insert(other);
                let kept_at = self.item_location(kept);
                let detail = if self.items[other].hash == self.items[kept].hash {
                    format!("a copy of {kept_at}")
                } else {
                    format!("seq {seq} again; the chain continues from {kept_at}")
                };
                let at = self.item_location(other);
                self.problem(ProblemKind::Duplicate, at, Some(*seq), detail);
            }
        }
        for &i in &dropped {
            self.items[i].outside = true;
        }
        self.chain.retain(|i| !dropped.contains(i));
    }

    /// Names the entries that are out of seq order in the files.
    fn find_reordered(&mut self) {
        let seqs: Vec<u64> = self.chain.iter().map(|i| self.items[*i].seq).collect();
        let displaced = outside_every_longest_run(&seqs);
        for (position, &i) in self.chain.clone().iter().enumerate() {
            if !displaced[position] {
                continue;
            }
            let neighbour = |p: Option<usize>| {
                p.and_then(|p| self.chain.get(p))
                    .map(|j| (self.items[*j].seq, self.item_location(*j)))
            };
            let before = neighbour(position.checked_sub(1));
            let after = neighbour(Some(position + 1));
            let seq = self.items[i].seq;
            let detail = match (before, after) {
                (Some((s, at)), _) if s > seq => format!("seq {seq} comes after seq {s} ({at})"),
                (_, Some((s, at))) if s < seq => format!("seq {seq} comes before seq {s} ({at})"),
                (Some((s, at)), _) => {
                    format!("seq {seq} is out of place: it follows seq {s} ({at})")
                }
                (None, _) => format!("seq {seq} is out of place"),
            };
            let at = self.item_location(i);
            self.problem(ProblemKind::Reordered, at, Some(seq), detail);
        }
    }

    /// Walks the chain in seq order: gaps, broken links, checkpoints, and what each valid
    /// checkpoint vouches for.
    fn walk_chain(&mut self) {
        let mut in_seq = self.chain.clone();
        in_seq.sort_by_key(|i| self.items[*i].seq);
        // Seqs that a damaged line says it had: not "removed", already named.
        let damaged_seqs: BTreeSet<u64> = self.damaged.iter().filter_map(|d| d.seq).collect();
        let mut pending: Vec<usize> = Vec::new();
        for (n, &b) in in_seq.iter().enumerate() {
            if let Some(&a) = n.checked_sub(1).and_then(|p| in_seq.get(p)) {
                let (a_seq, b_seq) = (self.items[a].seq, self.items[b].seq);
                if b_seq > a_seq + 1 {
                    self.removed(a, b, &damaged_seqs);
                    pending.clear();
                } else if self.items[b].prev != self.items[a].hash {
                    if self.edited.insert(a) {
                        let at = self.item_location(a);
                        let detail = format!(
                            "its bytes no longer hash to the prev of seq {b_seq} ({})",
                            self.item_location(b)
                        );
                        self.problem(ProblemKind::Edited, at, Some(a_seq), detail);
                    }
                    pending.clear();
                }
            } else if self.items[b].seq == 1 && self.items[b].prev != Hash::GENESIS {
                let at = self.item_location(b);
                self.edited.insert(b);
                self.problem(
                    ProblemKind::Edited,
                    at,
                    Some(1),
                    "seq 1, but its prev is not 64 zeros",
                );
            }
            match &self.items[b].kind {
                ItemKind::Checkpoint {
                    signature: Signature::Valid,
                    ..
                } => {
                    for &p in &pending {
                        self.verified[p] = true;
                    }
                    self.verified[b] = true;
                    pending.clear();
                    self.last_valid_checkpoint = Some(b);
                }
                ItemKind::Checkpoint { signature, key_id } => {
                    let (kind, detail) = match signature {
                        Signature::Bad => (
                            ProblemKind::BadSignature,
                            format!("the signature is not key {key_id}'s over this checkpoint"),
                        ),
                        _ => (
                            ProblemKind::UnknownKey,
                            format!("signed by key {key_id}, which is not a trusted key"),
                        ),
                    };
                    let key_id = key_id.clone();
                    let (seq, at) = (self.items[b].seq, self.item_location(b));
                    self.problem(kind, at, Some(seq), detail).key_id = Some(key_id);
                    pending.push(b);
                }
                _ => pending.push(b),
            }
        }
        if let (Some(&first), Some(&last)) = (pending.first(), pending.last()) {
            let records = pending
                .iter()
                .filter(|i| matches!(self.items[**i].kind, ItemKind::Record(_)))
                .count();
            let after = match self.last_valid_checkpoint {
                Some(c) => format!(
                    "after the last valid checkpoint (seq {}, {})",
                    self.items[c].seq,
                    self.item_location(c)
                ),
                None => "and no valid checkpoint after them".into(),
            };
            let detail = format!(
                "{} entries ({records} records) not vouched for by a signature yet: {after}",
                pending.len()
            );
            let (seq, last_seq, at) = (
                self.items[first].seq,
                self.items[last].seq,
                self.item_location(first),
            );
            self.problem(ProblemKind::UnsignedTail, at, Some(seq), detail)
                .last_seq = Some(last_seq);
        }
    }

    /// Names the seqs missing between `a` and `b` (`b`'s seq more than one after `a`'s).
    fn removed(&mut self, a: usize, b: usize, damaged_seqs: &BTreeSet<u64>) {
        let (a_seq, b_seq) = (self.items[a].seq, self.items[b].seq);
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut seq = a_seq + 1;
        // A damaged line at the end or beginning of a gap names its seq; what is left of the
        // gap, run by run, is missing.
        while seq < b_seq {
            if damaged_seqs.contains(&seq) {
                seq += 1;
                continue;
            }
            let start = seq;
            while seq < b_seq && !damaged_seqs.contains(&seq) {
                seq += 1;
            }
            runs.push((start, seq - 1));
        }
        let (a_at, b_at) = (self.item_location(a), self.item_location(b));
        for (first, last) in runs {
            let what = if first == last {
                format!("seq {first} is missing")
            } else {
                format!("seqs {first}-{last} are missing")
            };
            let detail = format!("{what}: between seq {a_seq} ({a_at}) and seq {b_seq} ({b_at})");
            self.problem(ProblemKind::Removed, b_at.clone(), Some(first), detail)
                .last_seq = Some(last);
        }
    }

    fn finish(mut self) -> (Report, Vec<CheckedRecord>) {
        let rank: HashMap<usize, usize> = self
            .file_order
            .iter()
            .enumerate()
            .map(|(r, f)| (*f, r))
            .collect();
        let name_rank: HashMap<&str, usize> = self
            .file_order
            .iter()
            .map(|f| (self.names[*f].as_str(), rank[f]))
            .collect();
        self.problems.sort_by(|x, y| {
            (name_rank.get(x.file.as_str()), x.line, x.kind).cmp(&(
                name_rank.get(y.file.as_str()),
                y.line,
                y.kind,
            ))
        });
        let in_chain: Vec<usize> = {
            let mut c = self.chain.clone();
            c.sort_by_key(|i| self.items[*i].seq);
            c
        };
        let mut files = Vec::new();
        for &f in &self.file_order {
            let seqs: Vec<u64> = self
                .items
                .iter()
                .filter(|i| i.file == f && !i.outside)
                .map(|i| i.seq)
                .collect();
            files.push(FileSummary {
                file: self.names[f].clone(),
                lines: self.line_counts[f],
                entries: seqs.len() as u64,
                first_seq: seqs.iter().min().copied(),
                last_seq: seqs.iter().max().copied(),
            });
        }
        let mut report = Report {
            files,
            entries: in_chain.len() as u64,
            first_seq: in_chain.first().map(|i| self.items[*i].seq),
            last_seq: in_chain.last().map(|i| self.items[*i].seq),
            last_valid_checkpoint: self.last_valid_checkpoint.map(|c| CheckpointAt {
                seq: self.items[c].seq,
                file: self.names[self.items[c].file].clone(),
                line: self.items[c].line,
            }),
            problems: std::mem::take(&mut self.problems),
            ..Report::default()
        };
        let mut keys = BTreeSet::new();
        let mut records = Vec::new();
        for &i in &in_chain {
            let item = &mut self.items[i];
            match &mut item.kind {
                ItemKind::Record(record) => {
                    report.records += 1;
                    report.verified_records += u64::from(self.verified[i]);
                    if let Some(record) = record.take() {
                        records.push(CheckedRecord {
                            file: self.names[item.file].clone(),
                            line: item.line,
                            seq: item.seq,
                            verified: self.verified[i],
                            record,
                        });
                    }
                }
                ItemKind::Checkpoint { signature, key_id } => {
                    report.checkpoints += 1;
                    if *signature == Signature::Valid {
                        report.valid_checkpoints += 1;
                        keys.insert(key_id.clone());
                    }
                }
                ItemKind::Recovered { .. } => report.recovered += 1,
            }
        }
        report.keys = keys.into_iter().collect();
        (report, records)
    }
}

#[cfg(test)]
pub(crate) mod tests;
