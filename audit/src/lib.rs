//! oz's audit trail, in one place: the record of one way into a pod ([`AuditRecord`]), the log
//! every record is written through ([`AuditLog`]), and the tamper-evident audit file (format
//! v1) behind it: every line a JSON entry chained to the one before it by SHA-256, with
//! Ed25519-signed checkpoints that vouch for everything before them; its writer
//! ([`AuditFile`]) and its verifier ([`verify`]). Plain Rust and std I/O: no Kubernetes here
//! (oz-platform keeps the key in a Secret; the admission webhooks and the sessions broker
//! write through [`AuditLog`]; `ozctl audit verify` reads through [`verify`]).
//!
//! # The format
//!
//! The file is JSON lines. Every line is one **entry**, an object whose first keys are
//! `"seq"` (1 for the first entry of a chain, +1 for each entry of any type) and `"prev"` (the
//! lowercase hex SHA-256 of the previous entry's exact line bytes without its `\n`; 64 zeros
//! for seq 1), then `"type"`:
//!
//! - `"record"`: an audit record, its own keys after those three.
//! - `"checkpoint"`: `time` (RFC 3339, UTC), `keyId` and `signature`, the standard base64 of
//!   the Ed25519 signature of `"oz-audit-checkpoint/v1\n{seq}\n{prev}\n{time}\n{keyId}"`
//!   ([`checkpoint_message`]). Since `prev` commits to every entry before it, a valid
//!   checkpoint vouches for all of them.
//! - `"recovered"`: `time`, `partialLine` and `partialSha256`: the line numbered `partialLine`
//!   in this file was left partial (the writer died, or a write failed, mid-line), and the
//!   writer closed it with a `\n`. That line is outside the chain: this entry's `prev` is the
//!   entry before it.
//!
//! Hashes are over the raw line bytes, so nothing is ever re-serialised to be checked. A key
//! is named by its [`KeyId`]: the first 16 hex characters of the SHA-256 of the raw 32-byte
//! public key. The private key is PKCS#8 PEM ([`Signer`]); the public key SPKI PEM
//! ([`PublicKey`]), which `openssl pkey -pubin` reads.
//!
//! # Writing
//!
//! ```no_run
//! # fn main() -> oz_audit::Result<()> {
//! use oz_audit::{AuditFile, Rotation, Signer};
//!
//! let signer = Signer::generate()?; // or Signer::from_pkcs8_pem(&pem)?
//! let mut file = AuditFile::open("/var/log/oz/audit.jsonl".as_ref(), signer, Rotation::default())?;
//! let record = serde_json::json!({"time": "2026-11-21T10:00:00Z", "user": "alice"});
//! let seq = file.append(record.as_object().unwrap().clone())?;
//! file.checkpoint()?; // every 30 s in oz, and at shutdown
//! # Ok(()) }
//! ```
//!
//! - [`AuditFile::open`] continues the chain from the last complete entry of the file, or, if
//!   the file is missing or empty, from the newest rotated file (else it starts one: seq 1). A
//!   partial last line is closed with `\n` and acknowledged by a `recovered` entry.
//! - [`AuditFile::append`] writes one record with one `write` of the whole line (`O_APPEND`);
//!   nothing is buffered in the process, nothing is fsynced. After a failed write, or when the
//!   path no longer names the open file (moved, deleted, replaced), the next call reopens the
//!   path and recovers as at open, continuing the chain from memory.
//! - [`AuditFile::checkpoint`] signs what was written since the last checkpoint (nothing if
//!   nothing was).
//! - [`Rotation`]: when the file reaches `max_size` bytes or its first entry is `max_age` old,
//!   the writer checkpoints, renames it to `PATH.<UTC yyyymmddTHHMMSS.mmmZ>` and starts a new
//!   `PATH`, keeping the newest `max_files` rotated files. The chain continues into the new
//!   file. Rotated names strictly increase, across restarts too: when now is not later than
//!   the newest rotated name (several rotations in one millisecond, a clock set back), the
//!   name is that one's time plus a millisecond, so the names sort in rotation order.
//!
//! # Verifying
//!
//! ```no_run
//! # fn main() -> oz_audit::Result<()> {
//! use oz_audit::{PublicKey, verify};
//!
//! let keys = PublicKey::all_from_pem(&std::fs::read_to_string("oz-audit.pub").unwrap())?;
//! let report = verify(&["audit.jsonl.20261121T100000.000Z", "audit.jsonl"], &keys)?;
//! println!("{report}");
//! assert!(report.is_intact(true)); // true: a live log's last entries are not signed yet
//! # Ok(()) }
//! ```
//!
//! [`verify`] takes the files in any order (they are ordered by their first seq) and the
//! trusted keys, and returns a [`Report`]: what was checked, and every [`Problem`] located
//! by file, line and seq: `edited` (an entry whose bytes no longer hash to its successor's
//! `prev`), `removed` (seqs missing), `reordered` (an entry out of seq order), `duplicate`
//! (a second entry with a seq already taken), `partial` (a line that is not a complete entry
//! and that no `recovered` entry acknowledges), `malformed`, `bad signature` or `unknown key`
//! (a checkpoint not signed by a trusted key), and the `unsigned tail`: entries after the last
//! valid checkpoint, which nothing vouches for yet. [`Report::is_intact`] says whether there is
//! no problem (allowing that tail or not). A record is *verified* when a valid checkpoint
//! after it vouches for it through an unbroken chain; [`verify_records`] returns the records
//! with that verdict.
//!
//! What this cannot show: entries deleted from the end of the newest file together with every
//! checkpoint after them, or files deleted whole from the start of the chain (the report gives
//! the seq range it saw), or records forged in the unsigned tail by someone who can write the
//! file. Checkpoints bound the first two to the interval between them; the apiserver's own
//! audit log remains the authority.
#![forbid(unsafe_code)]

pub mod entry;
mod error;
mod hash;
mod keys;
mod log;
mod record;
mod verify;
mod writer;

pub use entry::{Body, Entry, checkpoint_message};
pub use error::{Error, Result};
pub use hash::Hash;
pub use keys::{KeyId, PublicKey, Signer};
pub use log::{
    AuditLog, LogCounters, UNWRITABLE_REPORT_INTERVAL, UNWRITABLE_WARNING_INTERVAL,
    UnwritableReport,
};
pub use record::{AuditRecord, CallerKind, Grant, SessionAudit, audit_annotations};
pub use verify::{
    CheckedRecord, CheckpointAt, FileSummary, Location, Problem, ProblemKind, Report, verify,
    verify_records,
};
pub use writer::{AuditFile, Rotation};
