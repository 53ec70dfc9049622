//! PLACEHOLDER for helper B's recordings (branch of part B), so the broker compiles against the
//! agreed interface; the lead replaces this module with B's. It stores nothing.

use chrono::{DateTime, Utc};
use oz_api::SessionEndReason;

use crate::SessionInfo;

/// Why the recordings store could not be opened or read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RecordingError(String);

/// Where recordings go (placeholder: nowhere).
#[derive(Clone, Debug, Default)]
pub struct Recordings {}

impl Recordings {
    /// Opens the store at `url` (placeholder: any).
    pub fn open(_url: &str) -> Result<Recordings, RecordingError> {
        Ok(Self {})
    }

    /// Starts the recording of a session.
    pub fn start(
        &self,
        info: &SessionInfo,
        _record_input: bool,
        _size: Option<(u16, u16)>,
    ) -> Recording {
        Recording {
            key: format!("{}/{}.cast", info.namespace, info.id),
        }
    }

    /// A recording's bytes.
    pub fn read(&self, _namespace: &str, _id: &str) -> Result<Option<Vec<u8>>, RecordingError> {
        Ok(None)
    }
}

/// One session's recording (placeholder: discards everything).
#[derive(Debug)]
pub struct Recording {
    key: String,
}

impl Recording {
    /// What the user saw.
    pub fn output(&mut self, _data: &[u8]) {}
    /// What the user typed.
    pub fn input(&mut self, _data: &[u8]) {}
    /// A terminal resize.
    pub fn resize(&mut self, _cols: u16, _rows: u16) {}
    /// Its key in the store.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// Ends it.
    pub async fn finish(self, _ended_at: DateTime<Utc>, _reason: SessionEndReason) {}
}
