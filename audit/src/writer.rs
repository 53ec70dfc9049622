//! [`AuditFile`]: appends entries to the audit file, checkpoints, rotates, and recovers from a
//! crash or a failed write.

mod tail;

use std::{
    fmt,
    fs::{self, File, OpenOptions},
    io::Write,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use chrono::{DateTime, NaiveDateTime, SecondsFormat, SubsecRound, TimeDelta, Utc};
use serde_json::{Map, Value};
use tracing::warn;

use crate::{
    Error, Hash, Result, Signer,
    entry::{Body, Entry},
};
use tail::Tail;

/// After a rotation failed (the rename, say), the next attempt waits this long, so a
/// directory oz cannot rename in does not cost a checkpoint per record.
const ROTATION_RETRY: Duration = Duration::from_secs(60);

/// When the audit file is rotated, and how many rotated files are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate once the file has this many bytes. 0: never. Default 100 MiB.
    pub max_size: u64,
    /// Rotate once the file's first entry is this old. `None` (the default): never.
    pub max_age: Option<Duration>,
    /// Keep this many rotated files, deleting older ones. 0: keep them all. Default 10.
    pub max_files: usize,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            max_size: 100 * 1024 * 1024,
            max_age: None,
            max_files: 10,
        }
    }
}

/// A rotated file's name is the path, a dot and this stamp (UTC, to the millisecond).
const STAMP_FORMAT: &str = "%Y%m%dT%H%M%S%.3fZ";

/// What time it is; replaced in tests.
type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The audit file, open for appending: see the crate documentation for the format and what
/// each call writes. One writer per file: two processes appending to one file would fork the
/// chain.
pub struct AuditFile {
    path: PathBuf,
    signer: Signer,
    rotation: Rotation,
    /// The open file, or `None` when the next call must reopen the path and recover (after a
    /// failed write, or once the path names another file).
    file: Option<Open>,
    /// The next entry's seq and prev.
    next_seq: u64,
    last: Hash,
    /// Entries written since the last checkpoint.
    unsigned: u64,
    /// No rotation is tried before this, after one failed.
    rotation_retry: Option<Instant>,
    /// The stamp of the last rotation this writer made: the next one names a later time.
    last_rotation: Option<DateTime<Utc>>,
    clock: Clock,
}

/// The file being appended to.
struct Open {
    file: File,
    /// Which file it is (device, inode), to notice when the path names another.
    identity: Option<(u64, u64)>,
    /// Its size as last seen.
    size: u64,
    /// When its first entry was written: its age, for [`Rotation::max_age`].
    started: SystemTime,
}

impl fmt::Debug for AuditFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditFile")
            .field("path", &self.path)
            .field("key", self.signer.key_id())
            .field("next_seq", &self.next_seq)
            .field("unsigned", &self.unsigned)
            .finish_non_exhaustive()
    }
}

impl AuditFile {
    /// Opens `path` for appending (creating it), continuing the chain from its last complete
    /// entry, or, if it is missing or empty, from the newest rotated file (else seq 1). Any
    /// partial last line is closed with `\n` and acknowledged by a `recovered` entry.
    ///
    /// Fails if the path cannot be opened and written, or if its end is not entries of this
    /// format (a file from an older oz, say: move it away first).
    pub fn open(path: &Path, signer: Signer, rotation: Rotation) -> Result<AuditFile> {
        Self::open_with_clock(path, signer, rotation, Arc::new(SystemTime::now))
    }

    fn open_with_clock(
        path: &Path,
        signer: Signer,
        rotation: Rotation,
        clock: Clock,
    ) -> Result<AuditFile> {
        let mut file = AuditFile {
            path: path.to_path_buf(),
            signer,
            rotation,
            file: None,
            next_seq: 1,
            last: Hash::GENESIS,
            unsigned: 0,
            rotation_retry: None,
            last_rotation: None,
            clock,
        };
        file.reopen(true)?;
        Ok(file)
    }

    /// The path written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The seq the next entry will have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The signing key.
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// Appends `record` as the next entry (rotating first if the file is due) and returns its
    /// seq. On an error nothing of the record counts as written: the next call recovers first.
    pub fn append(&mut self, record: Map<String, Value>) -> Result<u64> {
        // Refused before anything is written.
        Entry::record(0, Hash::GENESIS, record.clone())?;
        self.prepare()?;
        let entry = Entry::record(self.next_seq, self.last, record)?;
        self.write(&entry)
    }

    /// Writes a checkpoint if anything was written since the last one (rotating first if the
    /// file is due), and returns its seq.
    pub fn checkpoint(&mut self) -> Result<Option<u64>> {
        if self.unsigned == 0 && self.file.is_some() && !self.rotation_due() {
            return Ok(None);
        }
        self.prepare()?;
        self.checkpoint_unsigned()
    }

    fn checkpoint_unsigned(&mut self) -> Result<Option<u64>> {
        if self.unsigned == 0 {
            return Ok(None);
        }
        let entry = Entry::checkpoint(self.next_seq, self.last, self.timestamp(), &self.signer);
        self.write(&entry).map(Some)
    }

    /// Makes the file ready for the next entry: reopens it if the path names another file (or
    /// none) or the last write failed, then rotates it if it is due.
    fn prepare(&mut self) -> Result<()> {
        if let Some(open) = &mut self.file {
            match fs::metadata(&self.path) {
                Ok(meta) if identity(&meta) == open.identity => open.size = meta.len(),
                Ok(_) | Err(_) => {
                    warn!(path = %self.path.display(), "the audit file was moved, deleted or replaced; reopening it");
                    self.file = None;
                }
            }
        }
        if self.file.is_none() {
            self.reopen(false)?;
        }
        if self.rotation_due() {
            self.rotate()?;
        }
        Ok(())
    }

    /// Opens the path (creating it), and acknowledges any partial or unreadable lines at its
    /// end with `recovered` entries. At open (`from_file`) the chain continues from the file
    /// (or the newest rotated file); later, from what this writer last wrote.
    fn reopen(&mut self, from_file: bool) -> Result<()> {
        let io = Error::io(&self.path);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&self.path)
            .map_err(Error::io(&self.path))?;
        let meta = file.metadata().map_err(Error::io(&self.path))?;
        let tail = Tail::read(&mut file, meta.len(), &self.path)?;
        if from_file {
            let continued = match &tail.last_entry {
                Some(last) => Some(last.clone()),
                None => match newest_rotated(&self.path)? {
                    Some(rotated) => {
                        let mut f = File::open(&rotated).map_err(Error::io(&rotated))?;
                        let len = f.metadata().map_err(Error::io(&rotated))?.len();
                        Tail::read(&mut f, len, &rotated)?.last_entry
                    }
                    None => None,
                },
            };
            if let Some(last) = continued {
                self.next_seq = last.seq + 1;
                self.last = last.hash;
                self.unsigned = u64::from(!last.checkpoint);
            }
        }
        let started = tail
            .first_time
            .unwrap_or_else(|| (self.clock)())
            .min((self.clock)());
        let mut open = Open {
            file,
            identity: identity(&meta),
            size: meta.len(),
            started,
        };
        if !tail.unreadable.is_empty() {
            // The `\n` that closes the partial line and every `recovered` entry, in one write.
            let mut text = String::new();
            if !tail.ends_with_newline {
                text.push('\n');
            }
            let (mut seq, mut last) = (self.next_seq, self.last);
            for line in &tail.unreadable {
                let entry = Entry {
                    seq,
                    prev: last,
                    body: Body::Recovered {
                        time: self.timestamp(),
                        partial_line: line.number,
                        partial_sha256: line.hash.to_string(),
                    },
                };
                let encoded = entry.encode();
                last = Hash::of(encoded.as_bytes());
                seq += 1;
                text.push_str(&encoded);
                text.push('\n');
            }
            open.file.write_all(text.as_bytes()).map_err(io)?;
            open.size += text.len() as u64;
            self.unsigned += seq - self.next_seq;
            (self.next_seq, self.last) = (seq, last);
        }
        self.file = Some(open);
        Ok(())
    }

    /// Writes one entry: one `write` of its line and `\n`.
    fn write(&mut self, entry: &Entry) -> Result<u64> {
        let Some(open) = &mut self.file else {
            unreachable!("prepare() opens the file before anything is written");
        };
        let mut line = entry.encode();
        let hash = Hash::of(line.as_bytes());
        line.push('\n');
        if let Err(e) = open.file.write_all(line.as_bytes()) {
            self.file = None;
            return Err(Error::Io {
                path: self.path.clone(),
                source: e,
            });
        }
        open.size += line.len() as u64;
        self.last = hash;
        self.next_seq += 1;
        self.unsigned = match entry.body {
            Body::Checkpoint { .. } => 0,
            _ => self.unsigned + 1,
        };
        Ok(entry.seq)
    }

    fn rotation_due(&self) -> bool {
        let Some(open) = &self.file else { return false };
        if open.size == 0 || self.rotation_retry.is_some_and(|at| Instant::now() < at) {
            return false;
        }
        let too_big = self.rotation.max_size > 0 && open.size >= self.rotation.max_size;
        let too_old = self.rotation.max_age.is_some_and(|max| {
            (self.clock)()
                .duration_since(open.started)
                .is_ok_and(|age| age >= max)
        });
        too_big || too_old
    }

    /// Checkpoints, renames the file to `PATH.<UTC yyyymmddTHHMMSS.mmmZ>`, starts a new one,
    /// and deletes the rotated files beyond [`Rotation::max_files`]. A failed rename is
    /// logged and tried again after [`ROTATION_RETRY`]; writing goes on in the same file.
    fn rotate(&mut self) -> Result<()> {
        self.checkpoint_unsigned()?;
        let stamp = self.next_rotation_stamp()?;
        let target = rotated_path(&self.path, stamp);
        if let Err(e) = fs::rename(&self.path, &target) {
            warn!(path = %self.path.display(), error = %e, "could not rotate the audit file; trying again later");
            self.rotation_retry = Some(Instant::now() + ROTATION_RETRY);
            return Ok(());
        }
        self.rotation_retry = None;
        self.last_rotation = Some(stamp);
        self.file = None;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(Error::io(&self.path))?;
        let meta = file.metadata().map_err(Error::io(&self.path))?;
        self.file = Some(Open {
            file,
            identity: identity(&meta),
            size: meta.len(),
            started: (self.clock)(),
        });
        if self.rotation.max_files > 0 {
            let rotated = rotated_files(&self.path).map_err(Error::io(&self.path))?;
            let excess = rotated.len().saturating_sub(self.rotation.max_files);
            for old in &rotated[..excess] {
                if let Err(e) = fs::remove_file(old) {
                    warn!(path = %old.display(), error = %e, "could not delete an old audit file");
                }
            }
        }
        Ok(())
    }

    /// The stamp of the next rotated name: now, or a millisecond after the newest rotated
    /// name (this writer's last, or the newest on disk, from before a restart) when now is not
    /// later, as when several rotations fall within one millisecond or the clock went back.
    /// So rotated names strictly increase and never repeat: they sort in the order the files
    /// were rotated, and retention, which deletes the first names, never takes the file just
    /// rotated.
    fn next_rotation_stamp(&self) -> Result<DateTime<Utc>> {
        let now = DateTime::<Utc>::from((self.clock)()).trunc_subsecs(3);
        let newest_on_disk = newest_rotated(&self.path)?.and_then(|path| rotation_stamp(&path));
        let after = self.last_rotation.max(newest_on_disk);
        Ok(after.map_or(now, |after| now.max(after + TimeDelta::milliseconds(1))))
    }

    fn timestamp(&self) -> String {
        DateTime::<Utc>::from((self.clock)()).to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

/// The rotated files of `path` (`PATH.<yyyymmddTHHMMSS.mmmZ>`), oldest first.
pub(crate) fn rotated_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(Vec::new());
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut rotated: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|stamp| parse_stamp(stamp).is_some())
        })
        .map(|e| e.path())
        .collect();
    // The stamp sorts as the time it names.
    rotated.sort();
    Ok(rotated)
}

fn newest_rotated(path: &Path) -> Result<Option<PathBuf>> {
    Ok(rotated_files(path).map_err(Error::io(path))?.pop())
}

/// `PATH.<stamp>`.
fn rotated_path(path: &Path, stamp: DateTime<Utc>) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}", stamp.format(STAMP_FORMAT)));
    PathBuf::from(name)
}

/// The time a rotated file's name gives: its last 20 characters.
fn rotation_stamp(rotated: &Path) -> Option<DateTime<Utc>> {
    let name = rotated.file_name()?.to_str()?;
    parse_stamp(name.get(name.len().checked_sub(20)?..)?)
}

/// `yyyymmddTHHMMSS.mmmZ`, exactly.
fn parse_stamp(text: &str) -> Option<DateTime<Utc>> {
    let b = text.as_bytes();
    let shaped = b.len() == 20
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'.'
        && b[16..19].iter().all(u8::is_ascii_digit)
        && b[19] == b'Z';
    shaped
        .then(|| NaiveDateTime::parse_from_str(text, STAMP_FORMAT).ok())
        .flatten()
        .map(|time| time.and_utc())
}

#[cfg(unix)]
fn identity(meta: &fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    meta.is_file().then(|| (meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(meta: &fs::Metadata) -> Option<(u64, u64)> {
    // Without inodes, a path that is still a file is taken to be the same file.
    meta.is_file().then_some((0, 0))
}

#[cfg(test)]
mod tests;
