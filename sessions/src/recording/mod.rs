//! Session recordings: asciicast v2 files (what asciinema plays) in a directory or an S3
//! bucket, written as the session runs and served back at
//! `/namespaces/{namespace}/recordings/{id}` for `ozctl replay`.
//!
//! A session's events are flushed as it goes: object stores have no append, so every second
//! (or once [`FLUSH_BYTES`] are buffered) the new events are written as the next numbered part,
//! `<namespace>/<id>/part-NNNNNNNN.cast`. [`Recording::finish`] writes the whole
//! `<namespace>/<id>.cast` (its header then says when and why the session ended) and deletes
//! the parts. If oz dies mid-session the parts stay, and [`Recordings::read_stream`] returns
//! them concatenated: everything up to the last flush, without an end marker.
//!
//! Nothing a session does goes unaccounted for. At most [`MAX_BUFFERED_BYTES`] per session wait
//! for the store: input waits for room there before the broker forwards it (see [`tap`]);
//! output never waits, and what finds no room is counted and digested in a marker. Each
//! recording is capped ([`limits`]): past the cap the session goes on, and its recording ends
//! with the byte count and SHA-256 of what was not recorded.
//!
//! - [`cast`]: the format, pure; [`unrecorded`]: counting and digesting what is not kept.
//! - [`limits`]: the per-session and total caps; [`tap`]: the two directions' taps.
//! - `writer`: a session's writer task; `store`: the object store and the keys;
//!   `router`: the HTTP handler.

pub mod cast;
mod digest;
mod error;
pub mod limits;
mod router;
mod store;
pub mod tap;
pub mod unrecorded;
mod writer;

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt, stream::BoxStream};
use oz_api::SessionEndReason;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};

pub use digest::RecordingDigest;
pub use error::RecordingError;
pub use router::router;
pub use store::{credentials_in_url, redact};
pub use writer::{FLUSH_BYTES, FLUSH_EVERY};

use crate::SessionInfo;
use limits::{RecordingLimits, SessionBudget, StoreUsage};
use store::Store;
use tap::{InputTap, Message, OutputTap, Queue};
use writer::Writer;

/// How many bytes of one session's events may wait for the store: input beyond that waits,
/// output beyond that is counted instead of kept, so a slow or broken store never grows oz's
/// memory without bound.
pub const MAX_BUFFERED_BYTES: usize = 256 * 1024;
/// How long [`Recording::finish`] waits for the store; the writer finishes in the background
/// after that.
pub const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// A recording's bytes as they are read from the store.
pub type RecordingBody = BoxStream<'static, Result<Bytes, RecordingError>>;

/// The recordings store: cheap to clone, shared by every session.
#[derive(Clone, Debug)]
pub struct Recordings {
    store: Store,
    errors: Counter,
    limits: RecordingLimits,
    usage: Arc<StoreUsage>,
}

impl Recordings {
    /// Opens the store at `url`, with the default [`RecordingLimits`]:
    /// - `file:///dir` or a plain path: a directory (created if missing);
    /// - `s3://bucket[/prefix][?option=value&...]`: an S3 bucket. Options are object_store's
    ///   `AmazonS3ConfigKey` names (`endpoint`, `region`, `access_key_id`, `secret_access_key`,
    ///   `allow_http`, `virtual_hosted_style_request`, ...); what the query does not set comes
    ///   from the usual `AWS_*` environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
    ///   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`,
    ///   ...), then the instance's or pod's role (web identity, ECS, IMDS).
    pub fn open(url: &str) -> Result<Self, RecordingError> {
        let store = Store::open(url)?;
        let limits = RecordingLimits::default();
        let usage = StoreUsage::new(store.used_bytes(), limits.max_total_bytes);
        Ok(Self {
            store,
            errors: Counter::default(),
            limits,
            usage,
        })
    }

    /// Caps each session's recording and, optionally, all of them together (see [`limits`]).
    pub fn with_limits(mut self, limits: RecordingLimits) -> Self {
        self.usage = StoreUsage::new(self.usage.used(), limits.max_total_bytes);
        self.limits = limits;
        self
    }

    /// Counts storage errors and dropped events in `errors` (oz_session_recording_errors_total)
    /// instead of a private counter.
    pub fn with_error_counter(mut self, errors: Counter) -> Self {
        self.errors = errors;
        self
    }

    /// Storage errors and output events not recorded for a slow store, so far.
    pub fn errors(&self) -> u64 {
        self.errors.get()
    }

    /// The bytes counted against the total cap: what was in a directory store when it was
    /// opened, and what was recorded since.
    pub fn used_bytes(&self) -> u64 {
        self.usage.used()
    }

    /// Where the recordings are, for logs (an S3 URL without its query, or a directory).
    pub fn location(&self) -> &str {
        &self.store.display
    }

    /// Starts recording a session: writes its header within [`FLUSH_EVERY`]. Never blocks and
    /// never fails (storage errors are logged and counted). Must be called within a Tokio
    /// runtime: the session's writer is a task.
    pub fn start(
        &self,
        info: &SessionInfo,
        record_input: bool,
        size: Option<(u16, u16)>,
    ) -> Recording {
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = Writer::new(
            self.store.clone(),
            &info.namespace,
            &info.id,
            self.errors.clone(),
        );
        tokio::spawn(writer.run(rx));
        let key = store::final_key(&info.namespace, &info.id);
        let budget = SessionBudget::new(self.limits.max_session_bytes, self.usage.clone());
        let queue = Queue::new(tx, MAX_BUFFERED_BYTES, budget, &key, self.errors.clone());
        queue.must(cast::header_line(info, record_input, size, None));
        Recording {
            key,
            info: info.clone(),
            record_input,
            size,
            input: InputTap::new(queue.clone(), record_input),
            output: OutputTap::new(queue.clone()),
            queue,
        }
    }

    /// A recording's bytes as they are read: the finished file, or a running (or crashed)
    /// session's parts one after the other (no end marker). `None` when there is neither.
    /// Never holds the whole file in memory.
    pub async fn read_stream(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<Option<RecordingBody>, RecordingError> {
        let display = self.store.display.clone();
        let failed = move |key: String| {
            let store = display.clone();
            move |source| RecordingError::Storage {
                store: store.clone(),
                key: key.clone(),
                source,
            }
        };
        let key = store::final_key(namespace, id);
        if let Some(file) = self
            .store
            .get_stream(&key)
            .await
            .map_err(failed(key.clone()))?
        {
            return Ok(Some(file.map_err(failed(key)).boxed()));
        }
        let parts_dir = format!("{namespace}/{id}/");
        let parts = self
            .store
            .parts(namespace, id)
            .await
            .map_err(failed(parts_dir.clone()))?;
        let Some(first) = parts.first() else {
            return Ok(None);
        };
        let Some(first) = self
            .store
            .get_stream(first)
            .await
            .map_err(failed(first.clone()))?
        else {
            // The first part deleted under us: the session just finished; read the whole file.
            let file = self
                .store
                .get_stream(&key)
                .await
                .map_err(failed(key.clone()))?;
            return Ok(file.map(|file| file.map_err(failed(key)).boxed()));
        };
        let store = self.store.clone();
        let rest = futures::stream::iter(parts.into_iter().skip(1))
            .then(move |part| {
                let store = store.clone();
                async move {
                    match store.get_stream(&part).await {
                        Ok(Some(bytes)) => Ok(bytes),
                        Ok(None) => Err(object_store::Error::Generic {
                            store: "recordings",
                            source:
                                "the session finished while its recording was read: read it again"
                                    .into(),
                        }),
                        Err(e) => Err(e),
                    }
                }
            })
            .try_flatten();
        Ok(Some(first.chain(rest).map_err(failed(parts_dir)).boxed()))
    }

    /// [`read_stream`](Recordings::read_stream), collected: for small recordings and tests.
    pub async fn read(&self, namespace: &str, id: &str) -> Result<Option<Vec<u8>>, RecordingError> {
        let Some(mut body) = self.read_stream(namespace, id).await? else {
            return Ok(None);
        };
        let mut file = Vec::new();
        while let Some(bytes) = body.try_next().await? {
            file.extend_from_slice(&bytes);
        }
        Ok((!file.is_empty()).then_some(file))
    }
}

/// One session's recording. Dropping it without [`finish`](Recording::finish) keeps what was
/// flushed, as a crash would.
#[derive(Debug)]
pub struct Recording {
    key: String,
    info: SessionInfo,
    record_input: bool,
    size: Option<(u16, u16)>,
    queue: Queue,
    input: InputTap,
    output: OutputTap,
}

impl Recording {
    /// The finished recording's key in the store (`<namespace>/<id>.cast`), as
    /// `status.sessions[].recording` names it.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The two taps, for piping each direction on its own.
    pub fn taps(&mut self) -> (&mut InputTap, &mut OutputTap) {
        (&mut self.input, &mut self.output)
    }

    /// Records bytes the pod wrote (stdout or stderr), as `"o"` events. Never waits.
    pub fn output(&mut self, bytes: &[u8]) {
        self.output.record(bytes);
    }

    /// Records bytes the user typed (stdin), as `"i"` events, when the template records input;
    /// returns once they are queued for the store.
    pub async fn input(&mut self, bytes: &[u8]) {
        self.input.stdin(bytes).await;
    }

    /// Records a terminal resize, as an `"r"` event.
    pub async fn resize(&mut self, cols: u16, rows: u16) {
        self.input.resize(cols, rows).await;
    }

    /// Ends the recording: the markers of what was not recorded, an `"m"` marker
    /// `end: <reason>`, then the whole file is written (its header with `endedAt` and
    /// `endReason`) and the parts deleted. Waits for the store at most [`FINISH_TIMEOUT`];
    /// never fails (errors are logged and counted). Returns the file's digest once written,
    /// `None` if it could not be in time.
    pub async fn finish(
        mut self,
        ended_at: DateTime<Utc>,
        reason: SessionEndReason,
    ) -> Option<RecordingDigest> {
        let t = self.queue.elapsed();
        self.output.finish_markers(t);
        self.input.finish_markers(t);
        self.queue.must(cast::end_marker(t, reason));
        let header = cast::header_line(
            &self.info,
            self.record_input,
            self.size,
            Some((ended_at, reason)),
        );
        let (done, finished) = oneshot::channel();
        self.queue.send(Message::Finish { header, done });
        match tokio::time::timeout(FINISH_TIMEOUT, finished).await {
            Ok(digest) => digest.ok().flatten(),
            Err(_) => {
                tracing::warn!(
                    recording = %self.key,
                    "the recordings store is slow; the recording is finished in the background"
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
