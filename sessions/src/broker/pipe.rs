//! The two directions of a session's pipe, each run on its own so that neither waits for the
//! other:
//! - [`forward_input`]: client to pod. Each stdin frame is recorded first, waiting for room in
//!   the recording's queue, and only then forwarded: a slow recordings store holds the user's
//!   input (backpressure), it never loses it.
//! - [`forward_output`]: pod to client. Never waits for the recording (see
//!   [`OutputTap`]), so what the user sees keeps its speed.

use std::sync::Mutex;

use axum::extract::ws::{Message, WebSocket};
use futures::{
    SinkExt, StreamExt,
    stream::{SplitSink, SplitStream},
};
use oz_api::SessionEndReason;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as UpMessage;
use tracing::warn;

use super::{
    frames::{self, Input, Output},
    streams::{Ended, Upstream},
};
use crate::{
    metrics::SessionMetrics,
    recording::tap::{InputTap, OutputTap},
};

/// The most stdin bytes forwarded in one message to the pod: a client's larger message is
/// split (the channel protocol lets stdin come in any pieces).
pub const FORWARDED_STDIN_BYTES: usize = 16 * 1024;

/// Client to pod, until either side closes. `last_input` is when the user last sent anything
/// (for the idle timeout).
pub async fn forward_input(
    down_rx: &mut SplitStream<WebSocket>,
    up_tx: &mut SplitSink<Upstream, UpMessage>,
    tap: &mut InputTap,
    metrics: &SessionMetrics,
    last_input: &Mutex<Instant>,
) -> Ended {
    loop {
        match down_rx.next().await {
            Some(Ok(Message::Binary(frame))) => {
                match frames::input(&frame) {
                    Input::Stdin(data) => {
                        touch(last_input);
                        metrics.piped("input", data.len());
                        // Recorded and forwarded a piece at a time: each piece reaches the
                        // pod once it is recorded, and a large message is never held (or
                        // buffered to send) whole a second time.
                        for piece in data.chunks(FORWARDED_STDIN_BYTES) {
                            tap.stdin(piece).await;
                            let mut message = Vec::with_capacity(piece.len() + 1);
                            message.push(frames::STDIN);
                            message.extend_from_slice(piece);
                            if up_tx.send(UpMessage::Binary(message.into())).await.is_err() {
                                return Ended::new(SessionEndReason::Failed, true, false);
                            }
                        }
                        continue;
                    }
                    Input::Resize(cols, rows) => {
                        touch(last_input);
                        tap.resize(cols, rows).await;
                    }
                    Input::Other => {}
                }
                if up_tx.send(UpMessage::Binary(frame)).await.is_err() {
                    return Ended::new(SessionEndReason::Failed, true, false);
                }
            }
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                return Ended::new(SessionEndReason::Exited, false, true);
            }
            Some(Ok(_)) => {}
        }
    }
}

/// Pod to client, until either side closes.
pub async fn forward_output(
    up_rx: &mut SplitStream<Upstream>,
    down_tx: &mut SplitSink<WebSocket, Message>,
    tap: &mut OutputTap,
    metrics: &SessionMetrics,
    session: &str,
) -> Ended {
    loop {
        match up_rx.next().await {
            Some(Ok(UpMessage::Binary(frame))) => {
                match frames::output(&frame) {
                    Output::Terminal(data) => {
                        metrics.piped("output", data.len());
                        tap.record(data);
                    }
                    Output::Status(data) => metrics.piped("output", data.len()),
                    Output::Other => {}
                }
                if down_tx.send(Message::Binary(frame)).await.is_err() {
                    return Ended::new(SessionEndReason::Exited, false, true);
                }
            }
            Some(Ok(UpMessage::Close(_))) | None => {
                return Ended::new(SessionEndReason::Exited, true, false);
            }
            Some(Err(e)) => {
                warn!(%session, error = %e, "the stream to the pod failed");
                return Ended::new(SessionEndReason::Failed, true, false);
            }
            Some(Ok(_)) => {}
        }
    }
}

fn touch(last_input: &Mutex<Instant>) {
    *last_input.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
}
