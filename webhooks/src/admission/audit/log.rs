//! [`AuditLog`]: where audit records are written.

use std::{
    io,
    path::{Path, PathBuf},
};

use tokio::{fs::File, io::AsyncWriteExt, sync::Mutex};
use tracing::{info, warn};

use super::AuditRecord;

/// Where audit records go: always the log, and a JSON-lines file if one is configured.
#[derive(Debug, Default)]
pub struct AuditLog {
    file: Option<(PathBuf, Mutex<File>)>,
}

impl AuditLog {
    /// Records go to the log only.
    pub fn log_only() -> Self {
        Self { file: None }
    }

    /// Records also go to `path`, appended one JSON object per line; created if missing.
    pub async fn open(path: &Path) -> io::Result<Self> {
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .await?;
        Ok(Self {
            file: Some((path.to_path_buf(), Mutex::new(file))),
        })
    }

    /// Writes one record. A failed file write is logged; the record is still in the log.
    pub async fn write(&self, record: &AuditRecord) {
        let line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(e) => {
                warn!(error = %e, "could not encode an audit record");
                return;
            }
        };
        info!(
            target: "oz::audit",
            event = %record.event, user = %record.user, namespace = %record.namespace,
            pod = %record.pod, allowed = record.allowed, record = %line,
            "pod access"
        );
        if let Some((path, file)) = &self.file {
            let mut file = file.lock().await;
            let written = async {
                file.write_all(format!("{line}\n").as_bytes()).await?;
                file.flush().await
            };
            if let Err(e) = written.await {
                warn!(path = %path.display(), error = %e, "could not write the audit log file");
            }
        }
    }
}
