//! What a session pipes between, and how the pipe ends: the stream to the pod as kube opens
//! it ([`Upstream`]), and [`Ended`], which `pipe.rs` returns and `session.rs` acts on.

use hyper_util::rt::TokioIo;
use oz_api::SessionEndReason;
use tokio_tungstenite::WebSocketStream;

/// The stream to the pod, as kube opens it.
pub type Upstream = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// How a session's pipe ended.
pub struct Ended {
    pub reason: SessionEndReason,
    /// Whether the client is still there to be told.
    pub client_open: bool,
    /// Whether the pod's side is still open, to be closed.
    pub upstream_open: bool,
}

impl Ended {
    pub fn new(reason: SessionEndReason, client_open: bool, upstream_open: bool) -> Self {
        Self {
            reason,
            client_open,
            upstream_open,
        }
    }
}
