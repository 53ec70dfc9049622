//! A session's writer task: collects its lines and writes them as numbered parts (every
//! [`FLUSH_EVERY`], or once [`FLUSH_BYTES`] are pending), then, at the end, the whole file. The
//! room each line took in the session's queue is released only once the line is stored.

use std::time::Duration;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::{RecordingDigest, store, store::Store, tap::Message};

/// How often a running session's new events are written (as its next part).
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How many buffered bytes make the writer flush before the second is up.
pub const FLUSH_BYTES: usize = 64 * 1024;

pub(super) struct Writer {
    pub(super) store: Store,
    pub(super) namespace: String,
    pub(super) id: String,
    pub(super) errors: Counter,
    pending: Vec<u8>,
    /// The room `pending` takes in the session's queue.
    rooms: Vec<OwnedSemaphorePermit>,
    part: u32,
}

impl Writer {
    pub(super) fn new(store: Store, namespace: &str, id: &str, errors: Counter) -> Self {
        Self {
            store,
            namespace: namespace.to_owned(),
            id: id.to_owned(),
            errors,
            pending: Vec::new(),
            rooms: Vec::new(),
            part: 1,
        }
    }

    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = rx.recv() => match message {
                    Some(Message::Line { line, room }) => {
                        self.pending.extend_from_slice(line.as_bytes());
                        self.rooms.extend(room);
                        if self.pending.len() >= FLUSH_BYTES {
                            self.flush().await;
                        }
                    }
                    Some(Message::Finish { header, done }) => {
                        let _ = done.send(self.finish(&header).await);
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
        let bytes = Bytes::from(std::mem::take(&mut self.pending));
        match self.store.put(&key, bytes.clone()).await {
            Ok(()) => {
                self.rooms.clear();
                self.part += 1;
                true
            }
            Err(error) => {
                self.pending = Vec::from(bytes);
                self.errors.inc();
                tracing::warn!(store = %self.store.display, %key, %error, "cannot write a recording's part; retrying");
                false
            }
        }
    }

    async fn finish(&mut self, header: &str) -> Option<RecordingDigest> {
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
        let digest = match self.store.assemble(&key, header, &parts).await {
            Ok(digest) => digest,
            Err(error) => return self.failed(&key, error),
        };
        for part in parts {
            if let Err(error) = self.store.delete(&part).await {
                self.failed(&part, error);
            }
        }
        Some(digest)
    }

    fn failed(&self, key: &str, error: object_store::Error) -> Option<RecordingDigest> {
        self.errors.inc();
        tracing::warn!(store = %self.store.display, %key, %error, "cannot finish a recording; its parts are kept");
        None
    }
}
