//! Session recordings: asciicast v2 files (what asciinema plays) in a directory or an S3
//! bucket, written as the session runs and served back at
//! `/namespaces/{namespace}/recordings/{id}` for `ozctl replay`.
//!
//! A session's events are flushed as it goes: object stores have no append, so every second
//! (or once [`FLUSH_BYTES`] are buffered) the new events are written as the next numbered part,
//! `<namespace>/<id>/part-NNNNNNNN.cast`. [`Recording::finish`] writes the whole
//! `<namespace>/<id>.cast` (its header then says when and why the session ended) and deletes
//! the parts. If oz dies mid-session the parts stay, and [`Recordings::read`] returns them
//! concatenated: everything up to the last flush, without an end marker.
//!
//! Recording never holds a session up: [`Recording`]'s methods only queue a line for the
//! session's writer task. At most [`MAX_BUFFERED_BYTES`] per session wait for the store; past
//! that, events are dropped, counted as errors, and the recording gets a marker saying how
//! many were lost.
//!
//! - [`cast`]: the format, pure.
//! - `store`: the object store and the keys.
//! - `router`: the HTTP handler.

pub mod cast;
mod router;
mod store;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use oz_api::SessionEndReason;
use prometheus_client::metrics::counter::Counter;
use tokio::{
    sync::{mpsc, oneshot},
    time::Instant,
};

pub use router::router;
pub use store::credentials_in_url;

use crate::SessionInfo;
use cast::Utf8Carry;
use store::Store;

/// How often a running session's new events are written (as its next part).
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How many buffered bytes make the writer flush before the second is up.
pub const FLUSH_BYTES: usize = 64 * 1024;
/// How many bytes of one session's events may wait for the store; beyond that they are
/// dropped (and counted), so a slow or broken store never grows oz's memory without bound.
pub const MAX_BUFFERED_BYTES: usize = 1024 * 1024;
/// How long [`Recording::finish`] waits for the store; the writer finishes in the background
/// after that.
pub const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why recordings cannot be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The store's URL is wrong.
    #[error("cannot open the recordings store {url}: {reason}")]
    Config {
        /// The URL, without its query (which may hold credentials).
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The store failed.
    #[error("the recordings store {store} failed on {key}: {source}")]
    Storage {
        /// Where the store is.
        store: String,
        /// The object.
        key: String,
        /// What the store said.
        source: object_store::Error,
    },
}

/// The recordings store: cheap to clone, shared by every session.
#[derive(Clone, Debug)]
pub struct Recordings {
    store: Store,
    errors: Counter,
}

impl Recordings {
    /// Opens the store at `url`:
    /// - `file:///dir` or a plain path: a directory (created if missing);
    /// - `s3://bucket[/prefix][?option=value&...]`: an S3 bucket. Options are object_store's
    ///   `AmazonS3ConfigKey` names (`endpoint`, `region`, `access_key_id`, `secret_access_key`,
    ///   `allow_http`, `virtual_hosted_style_request`, ...); what the query does not set comes
    ///   from the usual `AWS_*` environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
    ///   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`,
    ///   ...), then the instance's or pod's role (web identity, ECS, IMDS).
    pub fn open(url: &str) -> Result<Self, RecordingError> {
        Ok(Self {
            store: Store::open(url)?,
            errors: Counter::default(),
        })
    }

    /// Counts storage errors and dropped events in `errors` (oz_session_recording_errors_total)
    /// instead of a private counter.
    pub fn with_error_counter(mut self, errors: Counter) -> Self {
        self.errors = errors;
        self
    }

    /// Storage errors and dropped events so far.
    pub fn errors(&self) -> u64 {
        self.errors.get()
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
        let buffered = Arc::new(AtomicUsize::new(0));
        let writer = Writer {
            store: self.store.clone(),
            namespace: info.namespace.clone(),
            id: info.id.clone(),
            buffered: buffered.clone(),
            errors: self.errors.clone(),
            pending: Vec::new(),
            part: 1,
        };
        tokio::spawn(writer.run(rx));
        let mut recording = Recording {
            key: store::final_key(&info.namespace, &info.id),
            info: info.clone(),
            record_input,
            size,
            started: Instant::now(),
            output: Utf8Carry::default(),
            input: Utf8Carry::default(),
            tx,
            buffered,
            dropped: 0,
            errors: self.errors.clone(),
        };
        recording.send(cast::header_line(info, record_input, size, None), true);
        recording
    }

    /// A recording's file: the finished one, or a running (or crashed) session's parts
    /// concatenated (no end marker). `None` when there is neither.
    pub async fn read(&self, namespace: &str, id: &str) -> Result<Option<Vec<u8>>, RecordingError> {
        let failed = |key: String| {
            let store = self.store.display.clone();
            move |source| RecordingError::Storage { store, key, source }
        };
        let key = store::final_key(namespace, id);
        if let Some(bytes) = self.store.get(&key).await.map_err(failed(key))? {
            return Ok(Some(bytes));
        }
        let parts = self
            .store
            .parts(namespace, id)
            .await
            .map_err(failed(format!("{namespace}/{id}/")))?;
        let mut file = Vec::new();
        for part in parts {
            // A part deleted under us means the session just finished: read the whole file.
            match self.store.get(&part).await.map_err(failed(part.clone()))? {
                Some(bytes) => file.extend_from_slice(&bytes),
                None => {
                    let key = store::final_key(namespace, id);
                    return self.store.get(&key).await.map_err(failed(key));
                }
            }
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
    started: Instant,
    output: Utf8Carry,
    input: Utf8Carry,
    tx: mpsc::UnboundedSender<Message>,
    buffered: Arc<AtomicUsize>,
    /// Events dropped since the last one queued.
    dropped: u64,
    errors: Counter,
}

#[derive(Debug)]
enum Message {
    Line(String),
    Finish {
        header: String,
        done: oneshot::Sender<()>,
    },
}

impl Recording {
    /// The finished recording's key in the store (`<namespace>/<id>.cast`), as
    /// `status.sessions[].recording` names it.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Records bytes the pod wrote (stdout or stderr), as an `"o"` event.
    pub fn output(&mut self, bytes: &[u8]) {
        if let Some(text) = self.output.push(bytes) {
            let line = cast::event_line(self.elapsed(), "o", &text);
            self.send(line, false);
        }
    }

    /// Records bytes the user typed (stdin), as an `"i"` event, when the template records
    /// input; else nothing.
    pub fn input(&mut self, bytes: &[u8]) {
        if !self.record_input {
            return;
        }
        if let Some(text) = self.input.push(bytes) {
            let line = cast::event_line(self.elapsed(), "i", &text);
            self.send(line, false);
        }
    }

    /// Records a terminal resize, as an `"r"` event.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let line = cast::event_line(self.elapsed(), "r", &format!("{cols}x{rows}"));
        self.send(line, false);
    }

    /// Ends the recording: an `"m"` marker `end: <reason>`, then the whole file is written (its
    /// header with `endedAt` and `endReason`) and the parts deleted. Waits for the store at
    /// most [`FINISH_TIMEOUT`]; never fails (errors are logged and counted).
    pub async fn finish(mut self, ended_at: DateTime<Utc>, reason: SessionEndReason) {
        let t = self.elapsed();
        if let Some(rest) = self.output.flush() {
            self.send(cast::event_line(t, "o", &rest), true);
        }
        if self.record_input
            && let Some(rest) = self.input.flush()
        {
            self.send(cast::event_line(t, "i", &rest), true);
        }
        self.send(cast::end_marker(t, reason), true);
        let header = cast::header_line(
            &self.info,
            self.record_input,
            self.size,
            Some((ended_at, reason)),
        );
        let (done, finished) = oneshot::channel();
        if self.tx.send(Message::Finish { header, done }).is_err() {
            return;
        }
        if tokio::time::timeout(FINISH_TIMEOUT, finished)
            .await
            .is_err()
        {
            tracing::warn!(
                recording = %self.key,
                "the recordings store is slow; the recording is finished in the background"
            );
        }
    }

    fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Queues `line` for the writer, unless [`MAX_BUFFERED_BYTES`] are already waiting
    /// (`always`: the header and the end, which are small and must not be lost).
    fn send(&mut self, line: String, always: bool) {
        let waiting = self.buffered.load(Ordering::Relaxed);
        if !always && waiting + line.len() > MAX_BUFFERED_BYTES {
            if self.dropped == 0 {
                tracing::warn!(
                    recording = %self.key,
                    waiting,
                    "the recordings store is too slow for this session; dropping events"
                );
            }
            self.dropped += 1;
            self.errors.inc();
            return;
        }
        if self.dropped > 0 {
            let marker = cast::event_line(
                self.elapsed(),
                "m",
                &format!(
                    "oz: {} events lost: the recordings store was too slow",
                    self.dropped
                ),
            );
            self.dropped = 0;
            self.queue(marker);
        }
        self.queue(line);
    }

    fn queue(&self, line: String) {
        self.buffered.fetch_add(line.len(), Ordering::Relaxed);
        // The writer only stops once this is dropped; if its runtime is gone, so is oz.
        let _ = self.tx.send(Message::Line(line));
    }
}

/// A session's writer task: collects its lines and writes them as parts.
struct Writer {
    store: Store,
    namespace: String,
    id: String,
    buffered: Arc<AtomicUsize>,
    errors: Counter,
    pending: Vec<u8>,
    part: u32,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = rx.recv() => match message {
                    Some(Message::Line(line)) => {
                        self.pending.extend_from_slice(line.as_bytes());
                        if self.pending.len() >= FLUSH_BYTES {
                            self.flush().await;
                        }
                    }
                    Some(Message::Finish { header, done }) => {
                        self.finish(&header).await;
                        let _ = done.send(());
                        return;
                    }
                    // Dropped without finish: keep what there is, as parts.
                    None => {
                        self.flush().await;
                        return;
                    }
                },
                _ = tick.tick() => {
                    self.flush().await;
                }
            }
        }
    }

    /// Writes what is pending as the next part; on failure keeps it for the next try.
    async fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let key = store::part_key(&self.namespace, &self.id, self.part);
        match self
            .store
            .put(&key, Bytes::copy_from_slice(&self.pending))
            .await
        {
            Ok(()) => {
                self.buffered
                    .fetch_sub(self.pending.len(), Ordering::Relaxed);
                self.pending.clear();
                self.part += 1;
                true
            }
            Err(error) => {
                self.errors.inc();
                tracing::warn!(store = %self.store.display, %key, %error, "cannot write a recording's part; retrying");
                false
            }
        }
    }

    async fn finish(&mut self, header: &str) {
        for attempt in 0..3 {
            if self.flush().await {
                break;
            }
            if attempt < 2 {
                tokio::time::sleep(FLUSH_EVERY).await;
            }
        }
        let key = store::final_key(&self.namespace, &self.id);
        let parts = match self.store.parts(&self.namespace, &self.id).await {
            Ok(parts) => parts,
            Err(error) => return self.failed(&key, error),
        };
        if let Err(error) = self.store.assemble(&key, header, &parts).await {
            return self.failed(&key, error);
        }
        for part in parts {
            if let Err(error) = self.store.delete(&part).await {
                self.failed(&part, error);
            }
        }
    }

    fn failed(&self, key: &str, error: object_store::Error) {
        self.errors.inc();
        tracing::warn!(store = %self.store.display, %key, %error, "cannot finish a recording; its parts are kept");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GrantRef;
    use oz_api::{AccessKind, SessionStream};
    use tokio::time::advance;

    fn info(id: &str) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            namespace: "team".into(),
            grant: GrantRef {
                kind: AccessKind::Pod,
                name: "bob-1".into(),
                uid: "u-2".into(),
                template: "debug".into(),
            },
            user: "bob".into(),
            groups: vec!["qa".into()],
            stream: SessionStream::Attach,
            pod: "debug-bob".into(),
            container: None,
            command: vec![],
            tty: true,
            started_at: DateTime::parse_from_rfc3339("2026-11-23T08:15:00Z")
                .unwrap()
                .with_timezone(&Utc),
            replica: "oz-1".into(),
        }
    }

    /// A small session, its clock driven by hand: returns the finished file's events.
    async fn session(record_input: bool) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let recordings = Recordings::open(dir.path().to_str().unwrap()).unwrap();
        let id = "20261123-081500-abcd1234";
        let mut recording = recordings.start(&info(id), record_input, Some((100, 30)));
        assert_eq!(recording.key(), format!("team/{id}.cast"));
        advance(Duration::from_millis(250)).await;
        recording.input(b"ls\r");
        recording.output("ls\r\nhé".as_bytes().split_last().unwrap().1);
        advance(Duration::from_millis(250)).await;
        recording.output(&"é".as_bytes()[1..]);
        recording.output(b"\r\n$ ");
        recording.resize(120, 40);
        advance(Duration::from_secs(2)).await;
        recording
            .finish(
                info(id).started_at + chrono::Duration::seconds(3),
                SessionEndReason::Expired,
            )
            .await;
        let file = String::from_utf8(recordings.read("team", id).await.unwrap().unwrap()).unwrap();
        let (header, events) = file.split_once('\n').unwrap();
        // The parts are gone once the whole file is written.
        assert!(
            std::fs::read_dir(dir.path().join("team"))
                .unwrap()
                .all(|e| e.unwrap().path().is_file())
        );
        (header.to_owned(), events.to_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn a_finished_session_is_exactly_its_events_with_the_end_marker() {
        let (header, events) = session(false).await;
        assert_eq!(
            events,
            concat!(
                "[0.250000, \"o\", \"ls\\r\\nh\"]\n",
                "[0.500000, \"o\", \"é\"]\n",
                "[0.500000, \"o\", \"\\r\\n$ \"]\n",
                "[0.500000, \"r\", \"120x40\"]\n",
                "[2.500000, \"m\", \"end: expired\"]\n",
            )
        );
        let header: serde_json::Value = serde_json::from_str(&header).unwrap();
        assert_eq!(
            (header["width"].as_u64(), header["height"].as_u64()),
            (Some(100), Some(30))
        );
        assert_eq!(header["oz"]["endReason"], "expired");
        assert_eq!(header["oz"]["endedAt"], "2026-11-23T08:15:03.000000Z");
        assert_eq!(header["oz"]["recordInput"], false);
        assert_eq!(header["title"], "team/debug-bob");
    }

    #[tokio::test(start_paused = true)]
    async fn input_is_recorded_only_when_asked() {
        let (_, events) = session(true).await;
        assert!(
            events.starts_with("[0.250000, \"i\", \"ls\\r\"]\n[0.250000, \"o\""),
            "{events}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_recording_keeps_what_was_flushed_and_a_slow_store_drops_events() {
        let dir = tempfile::tempdir().unwrap();
        let recordings = Recordings::open(dir.path().to_str().unwrap()).unwrap();
        let id = "20261123-081500-zzzz0000";
        let mut recording = recordings.start(&info(id), false, None);
        recording.output(b"before");
        // Nothing drains the queue while this task does not yield: past the bound, events drop.
        let big = vec![b'x'; 64 * 1024];
        for _ in 0..20 {
            recording.output(&big);
        }
        assert!(recordings.errors() > 0, "nothing was dropped");
        assert!(recording.buffered.load(Ordering::Relaxed) <= MAX_BUFFERED_BYTES + 4096);
        drop(recording);
        let file = loop {
            if let Some(file) = recordings.read("team", id).await.unwrap()
                && file.len() > MAX_BUFFERED_BYTES / 2
            {
                break String::from_utf8(file).unwrap();
            }
            advance(Duration::from_millis(100)).await;
        };
        assert!(file.contains("\"before\""));
        assert!(
            !file.contains("end:"),
            "a crashed recording has no end marker"
        );
    }
}
