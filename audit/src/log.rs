//! [`AuditLog`]: where audit records are written: always the log (target `oz::audit`), and,
//! when configured, the tamper-evident audit file ([`AuditFile`]: a hash chain with signed
//! checkpoints, rotated, recovered after a crash). Both the admission webhooks and the sessions
//! broker write through one `AuditLog`, so their records share one chain.
//!
//! A record the file cannot take is never dropped silently: it is in the log like every
//! record (with `unwritten = true`), counted ([`LogCounters::unwritten`]), warned about, and
//! handed to [`LogCounters::on_unwritable`] (oz-manager publishes a Warning Event on the
//! ConfigMap that holds the audit keys), both at most once per interval, so a full disk floods
//! neither.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use prometheus_client::metrics::counter::Counter;
use serde_json::Value;
use tracing::{info, warn};

use crate::{
    error::Result,
    keys::Signer,
    record::AuditRecord,
    writer::{AuditFile, Rotation},
};

/// At most one warning in the log about the file this often.
pub const UNWRITABLE_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// At most one call of [`LogCounters::on_unwritable`] this often.
pub const UNWRITABLE_REPORT_INTERVAL: Duration = Duration::from_secs(60);

/// Told, with a sentence for people, that the audit file cannot be written.
pub type UnwritableReport = Arc<dyn Fn(String) + Send + Sync>;

/// What an [`AuditLog`] with a file counts, and whom it tells when the file fails. Cloning
/// shares the counters.
#[derive(Clone, Default)]
pub struct LogCounters {
    /// Records appended to the file.
    pub written: Counter,
    /// Records the file could not take (each is in the log).
    pub unwritten: Counter,
    /// Called at most once per [`UNWRITABLE_REPORT_INTERVAL`] while the file fails.
    pub on_unwritable: Option<UnwritableReport>,
}

/// Where audit records go: always the log, and the audit file if one is configured. Cloning
/// shares the file.
#[derive(Clone, Default)]
pub struct AuditLog {
    file: Option<Arc<FileSink>>,
}

impl fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.file.as_ref().map(|s| &s.path))
            .finish()
    }
}

/// The audit file and what reports on it.
struct FileSink {
    path: PathBuf,
    /// A write is one `write` call (a rotation, now and then, a few more), so a blocking
    /// mutex held across it costs the handler microseconds, never an await.
    file: Mutex<AuditFile>,
    counters: LogCounters,
    /// Records not written since the last warning.
    unreported: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
    last_event: Mutex<Option<Instant>>,
}

impl AuditLog {
    /// Records go to the log only.
    pub fn log_only() -> Self {
        Self { file: None }
    }

    /// Records also go to the audit file at `path` (created if missing; an existing one is
    /// continued), checkpoints signed by `signer`, rotated as `rotation` says; what is and is
    /// not written is counted in `counters`.
    pub fn open(
        path: &Path,
        signer: Signer,
        rotation: Rotation,
        counters: LogCounters,
    ) -> Result<Self> {
        let file = AuditFile::open(path, signer, rotation)?;
        info!(
            path = %path.display(), key = %file.signer().key_id(), next_seq = file.next_seq(),
            "audit file open"
        );
        Ok(Self {
            file: Some(Arc::new(FileSink {
                path: path.to_path_buf(),
                file: Mutex::new(file),
                counters,
                unreported: AtomicU64::new(0),
                last_warning: Mutex::new(None),
                last_event: Mutex::new(None),
            })),
        })
    }

    /// The audit file, if there is one.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|s| s.path.as_path())
    }

    /// Writes one record: to the file (if any), then to the log, with its seq in the file, or
    /// `unwritten = true` if the file could not take it.
    pub async fn write(&self, record: &AuditRecord) {
        let Ok(Value::Object(fields)) = serde_json::to_value(record) else {
            unreachable!("an AuditRecord serialises to a JSON object")
        };
        // The log's copy is written from the fields before the file takes them, not cloned.
        let line = serde_json::to_string(&fields).expect("a JSON object always serialises");
        let (seq, unwritten) = match &self.file {
            Some(sink) => match sink.append(fields) {
                Some(seq) => (Some(seq), false),
                None => (None, true),
            },
            None => (None, false),
        };
        info!(
            target: "oz::audit",
            event = %record.event, user = %record.user, namespace = %record.namespace,
            pod = %record.pod, allowed = record.allowed, seq, unwritten, record = %line,
            "pod access"
        );
    }

    /// Signs what was written since the last checkpoint, and rotates the file if it is due.
    /// oz calls this every `--audit-checkpoint-interval` and at shutdown.
    pub fn checkpoint(&self) {
        if let Some(sink) = &self.file {
            let done = sink.lock().checkpoint();
            if let Err(e) = done {
                sink.unwritable(&e, 0);
            }
        }
    }
}

impl FileSink {
    fn lock(&self) -> std::sync::MutexGuard<'_, AuditFile> {
        // A panic mid-write leaves nothing half-done in memory: the file recovers itself.
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a record; its seq, or `None` if it could not be written (counted, reported).
    fn append(&self, record: serde_json::Map<String, Value>) -> Option<u64> {
        let appended = self.lock().append(record);
        match appended {
            Ok(seq) => {
                self.counters.written.inc();
                Some(seq)
            }
            Err(e) => {
                self.counters.unwritten.inc();
                self.unwritable(&e, 1);
                None
            }
        }
    }

    /// Warns, and publishes the Event, each at most once per its interval.
    fn unwritable(&self, error: &crate::Error, records: u64) {
        let unwritten = self.unreported.fetch_add(records, Ordering::Relaxed) + records;
        if due(&self.last_warning, UNWRITABLE_WARNING_INTERVAL) {
            self.unreported.fetch_sub(unwritten, Ordering::Relaxed);
            warn!(
                path = %self.path.display(), error = %error, unwritten,
                "could not write the audit file: the records not written are in this log only (target oz::audit, unwritten=true)"
            );
        }
        let Some(report) = &self.counters.on_unwritable else {
            return;
        };
        if due(&self.last_event, UNWRITABLE_REPORT_INTERVAL) {
            report(format!(
                "could not write the audit file {}: {error}; records are in oz's log only until it can",
                self.path.display()
            ));
        }
    }
}

/// Whether `interval` has passed since `last` (which is then set to now). Whoever holds the
/// lock is deciding already; the others need not.
fn due(last: &Mutex<Option<Instant>>, interval: Duration) -> bool {
    let Ok(mut last) = last.try_lock() else {
        return false;
    };
    if last.is_some_and(|at| at.elapsed() < interval) {
        return false;
    }
    *last = Some(Instant::now());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(user: &str) -> AuditRecord {
        serde_json::from_value(serde_json::json!({
            "time": "2026-11-21T10:00:00Z", "event": "PodExec", "requestUid": "uid",
            "user": user, "groups": ["devs"], "namespace": "shop", "pod": "web-0",
            "operation": "CONNECT", "subresource": "exec", "command": ["id"], "tty": false,
            "stdin": false, "grant": null, "dryRun": false, "allowed": true,
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn records_the_file_cannot_take_are_counted_and_the_rest_verify() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let signer = Signer::generate().unwrap();
        let public = signer.public_key();
        let metrics = LogCounters::default();
        let log = AuditLog::open(&path, signer, Rotation::default(), metrics.clone()).unwrap();
        log.write(&record("alice")).await;
        assert_eq!(metrics.written.get(), 1);

        // The file replaced by a directory: the next record cannot be written.
        let moved = dir.path().join("moved.jsonl");
        std::fs::rename(&path, &moved).unwrap();
        std::fs::create_dir(&path).unwrap();
        log.write(&record("bob")).await;
        assert_eq!(metrics.unwritten.get(), 1);
        assert_eq!(metrics.written.get(), 1);

        std::fs::remove_dir(&path).unwrap();
        log.write(&record("carol")).await;
        log.checkpoint();
        assert_eq!(metrics.written.get(), 2);
        let report = crate::verify(&[moved, path], &[public]).unwrap();
        assert!(report.is_intact(false), "{report}");
        assert_eq!(report.records, 2);
    }
}
