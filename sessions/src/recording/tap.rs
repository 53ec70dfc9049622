//! A session's two taps on its recording, one per direction, so the broker can pipe each
//! direction on its own:
//! - [`InputTap`]: what the user sends (stdin, resizes). It waits for room in the session's
//!   queue to the store, and the broker forwards a frame to the pod only once it is recorded:
//!   input is held, never dropped, while the store catches up.
//! - [`OutputTap`]: what the pod writes. It never waits, so a slow store never slows what the
//!   user sees; output that finds no room is counted and digested instead, and a marker says
//!   how many bytes, their SHA-256 and why.
//!
//! Both cut what they are given into events of at most [`MAX_EVENT_TEXT_BYTES`] (and an
//! incomplete character carried over), and both stop at the
//! session's cap ([`super::limits`]): from there on their text is counted and digested, and
//! `finish_markers` says so at the end.

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot},
    time::Instant,
};

use super::{
    RecordingDigest,
    cast::{self, MAX_EVENT_TEXT_BYTES, Utf8Carry},
    limits::{Cap, SessionBudget},
    unrecorded::Unrecorded,
};

/// What a session's writer task receives.
#[derive(Debug)]
pub(super) enum Message {
    /// A line to append, with the room it takes in the queue (released once it is stored).
    Line {
        line: String,
        room: Option<OwnedSemaphorePermit>,
    },
    /// The end: write the whole file under `header`, and say what was written.
    Finish {
        header: String,
        done: oneshot::Sender<Option<RecordingDigest>>,
    },
}

/// What a session's taps share: the way to its writer, the room left in its queue, its budget.
#[derive(Clone, Debug)]
pub(super) struct Queue {
    tx: mpsc::UnboundedSender<Message>,
    room: Arc<Semaphore>,
    budget: Arc<Mutex<SessionBudget>>,
    started: Instant,
    key: Arc<str>,
    errors: Counter,
}

impl Queue {
    pub(super) fn new(
        tx: mpsc::UnboundedSender<Message>,
        room_bytes: usize,
        budget: SessionBudget,
        key: &str,
        errors: Counter,
    ) -> Self {
        Self {
            tx,
            room: Arc::new(Semaphore::new(room_bytes)),
            budget: Arc::new(Mutex::new(budget)),
            started: Instant::now(),
            key: key.into(),
            errors,
        }
    }

    /// Seconds since the session started, as events say it.
    pub(super) fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn budget(&self) -> std::sync::MutexGuard<'_, SessionBudget> {
        self.budget.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the recording was capped.
    fn capped(&self) -> bool {
        self.budget().capped().is_some()
    }

    /// Takes the budget for a line of `len` bytes, or says the recording is capped (writing
    /// the capped marker the first time).
    fn admit(&self, len: usize) -> Result<(), Cap> {
        let taken = self.budget().take(len as u64);
        match taken {
            Ok(()) => Ok(()),
            Err((cap, first)) => {
                if first {
                    tracing::warn!(recording = %self.key, cause = cap.cause(), "the recording is capped; the session goes on, counted but not recorded");
                    let marker = cast::event_line(
                        self.elapsed(),
                        "m",
                        &format!(
                            "oz: capped: {}; from here on the session is counted, not recorded",
                            cap.cause()
                        ),
                    );
                    self.must(marker);
                }
                Err(cap)
            }
        }
    }

    /// Queues a line the recording must have (a marker, the end), from the reserve.
    pub(super) fn must(&self, line: String) {
        self.budget().take_reserved(line.len() as u64);
        self.send(Message::Line { line, room: None });
    }

    pub(super) fn send(&self, message: Message) {
        // The writer only stops once every sender is dropped; if its runtime is gone, so is oz.
        let _ = self.tx.send(message);
    }

    /// Waits for room for `len` bytes in the queue to the store.
    async fn room(&self, len: usize) -> OwnedSemaphorePermit {
        Arc::clone(&self.room)
            .acquire_many_owned(len as u32)
            .await
            .expect("the queue's room is never closed")
    }

    /// Room for `len` bytes now, if there is.
    fn room_now(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.room)
            .try_acquire_many_owned(len as u32)
            .ok()
    }
}

/// The user's side: stdin as `"i"` events (when the template records input) and resizes as
/// `"r"` events.
#[derive(Debug)]
pub struct InputTap {
    queue: Queue,
    record_input: bool,
    carry: Utf8Carry,
    after_cap: Unrecorded,
}

impl InputTap {
    pub(super) fn new(queue: Queue, record_input: bool) -> Self {
        Self {
            queue,
            record_input,
            carry: Utf8Carry::default(),
            after_cap: Unrecorded::default(),
        }
    }

    /// Records what the user typed; returns once it is queued for the store (waiting for
    /// room), so the caller forwards it only after. Nothing when the template does not record
    /// input.
    pub async fn stdin(&mut self, bytes: &[u8]) {
        if !self.record_input {
            return;
        }
        let t = self.queue.elapsed();
        // A piece at a time: a large frame is never copied or escaped whole.
        for chunk in bytes.chunks(MAX_EVENT_TEXT_BYTES) {
            if let Some(piece) = self.carry.push(chunk) {
                let line = cast::event_line(t, "i", &piece);
                if self.queue.admit(line.len()).is_err() {
                    self.after_cap.add(&piece);
                    continue;
                }
                let room = self.queue.room(line.len()).await;
                self.queue.send(Message::Line {
                    line,
                    room: Some(room),
                });
            }
        }
    }

    /// Records a terminal resize (not once capped: it carries nothing typed).
    pub async fn resize(&mut self, cols: u16, rows: u16) {
        let line = cast::event_line(self.queue.elapsed(), "r", &format!("{cols}x{rows}"));
        if self.queue.admit(line.len()).is_ok() {
            let room = self.queue.room(line.len()).await;
            self.queue.send(Message::Line {
                line,
                room: Some(room),
            });
        }
    }

    /// At the end: what is still carried, and the marker for what was not recorded after
    /// the cap.
    pub(super) fn finish_markers(&mut self, t: f64) {
        if !self.record_input {
            return;
        }
        if let Some(rest) = self.carry.flush() {
            if self.queue.capped() {
                self.after_cap.add(&rest);
            } else {
                self.queue.must(cast::event_line(t, "i", &rest));
            }
        }
        if let Some((bytes, sha256)) = self.after_cap.take() {
            let cause = self.queue.budget().capped().map_or("", Cap::cause);
            self.queue
                .must(cast::unrecorded_marker(t, "input", bytes, &sha256, cause));
        }
    }
}

/// The pod's side: stdout and stderr as `"o"` events. Never waits.
#[derive(Debug)]
pub struct OutputTap {
    queue: Queue,
    carry: Utf8Carry,
    /// Output that found the queue full, since the last marker.
    slow: Unrecorded,
    after_cap: Unrecorded,
}

/// Why output is dropped when the queue is full.
const SLOW_STORE: &str = "the recordings store was too slow";

impl OutputTap {
    pub(super) fn new(queue: Queue) -> Self {
        Self {
            queue,
            carry: Utf8Carry::default(),
            slow: Unrecorded::default(),
            after_cap: Unrecorded::default(),
        }
    }

    /// Records bytes the pod wrote. Output that finds no room in the queue is counted,
    /// digested and named by a marker once there is room again.
    pub fn record(&mut self, bytes: &[u8]) {
        let t = self.queue.elapsed();
        // A piece at a time: a large frame is never copied or escaped whole.
        for chunk in bytes.chunks(MAX_EVENT_TEXT_BYTES) {
            let Some(piece) = self.carry.push(chunk) else {
                continue;
            };
            let piece = piece.as_str();
            if self.queue.capped() {
                self.after_cap.add(piece);
                continue;
            }
            let line = cast::event_line(t, "o", piece);
            let Some(room) = self.queue.room_now(line.len()) else {
                if self.slow.is_empty() {
                    tracing::warn!(recording = %self.queue.key, "the recordings store is too slow for this session's output; counting what is not recorded");
                }
                self.queue.errors.inc();
                self.slow.add(piece);
                continue;
            };
            self.report_slow(t);
            if self.queue.admit(line.len()).is_err() {
                self.after_cap.add(piece);
                continue;
            }
            self.queue.send(Message::Line {
                line,
                room: Some(room),
            });
        }
    }

    fn report_slow(&mut self, t: f64) {
        if let Some((bytes, sha256)) = self.slow.take() {
            self.queue.must(cast::unrecorded_marker(
                t, "output", bytes, &sha256, SLOW_STORE,
            ));
        }
    }

    /// At the end: what is still carried, and the markers for what was not recorded.
    pub(super) fn finish_markers(&mut self, t: f64) {
        if let Some(rest) = self.carry.flush() {
            if self.queue.capped() {
                self.after_cap.add(&rest);
            } else {
                self.queue.must(cast::event_line(t, "o", &rest));
            }
        }
        self.report_slow(t);
        if let Some((bytes, sha256)) = self.after_cap.take() {
            let cause = self.queue.budget().capped().map_or("", Cap::cause);
            self.queue
                .must(cast::unrecorded_marker(t, "output", bytes, &sha256, cause));
        }
    }
}
