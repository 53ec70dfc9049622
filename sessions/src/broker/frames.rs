//! The channel protocol of `v4.channel.k8s.io`/`v5.channel.k8s.io`: each binary websocket
//! message's first byte is its channel. The broker passes frames on unchanged; it only looks at
//! the channel to tap the recording, count bytes and notice input.

/// stdin (client to pod).
pub const STDIN: u8 = 0;
/// stdout (pod to client).
pub const STDOUT: u8 = 1;
/// stderr (pod to client).
pub const STDERR: u8 = 2;
/// error: the Status JSON that ends an exec (pod to client).
pub const ERROR: u8 = 3;
/// resize: `{"Width":W,"Height":H}` (client to pod).
pub const RESIZE: u8 = 4;
/// v5 only: close the channel named by the next byte (client to pod).
pub const CLOSE: u8 = 255;

/// The subprotocols the broker speaks, best first.
pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// The first of the protocols a client offered (`Sec-WebSocket-Protocol` values, each may be a
/// comma-separated list) that the broker speaks.
pub fn choose_protocol<'a>(offered: impl IntoIterator<Item = &'a str>) -> Option<&'static str> {
    offered
        .into_iter()
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .find_map(|p| PROTOCOLS.iter().find(|known| **known == p).copied())
}

/// What a frame from the client is, for the tap.
#[derive(Debug, PartialEq, Eq)]
pub enum Input<'a> {
    /// Bytes for the process's stdin.
    Stdin(&'a [u8]),
    /// A terminal resize: columns, rows.
    Resize(u16, u16),
    /// Anything else (a v5 close, an unparsable resize, an unknown channel).
    Other,
}

/// Reads a client frame.
pub fn input(frame: &[u8]) -> Input<'_> {
    match frame.split_first() {
        Some((&STDIN, data)) => Input::Stdin(data),
        Some((&RESIZE, data)) => resize(data).map_or(Input::Other, |(w, h)| Input::Resize(w, h)),
        _ => Input::Other,
    }
}

/// What a frame from the pod is, for the tap.
#[derive(Debug, PartialEq, Eq)]
pub enum Output<'a> {
    /// stdout or stderr bytes: what the user sees.
    Terminal(&'a [u8]),
    /// The Status that ends the stream.
    Status(&'a [u8]),
    /// Anything else.
    Other,
}

/// Reads a pod frame.
pub fn output(frame: &[u8]) -> Output<'_> {
    match frame.split_first() {
        Some((&STDOUT | &STDERR, data)) => Output::Terminal(data),
        Some((&ERROR, data)) => Output::Status(data),
        _ => Output::Other,
    }
}

fn resize(data: &[u8]) -> Option<(u16, u16)> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Size {
        width: u16,
        height: u16,
    }
    let size: Size = serde_json::from_slice(data).ok()?;
    Some((size.width, size.height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_first_offer_that_is_spoken_wins() {
        assert_eq!(
            choose_protocol(["v4.channel.k8s.io, v5.channel.k8s.io"]),
            Some("v4.channel.k8s.io")
        );
        assert_eq!(
            choose_protocol(["channel.k8s.io", "v5.channel.k8s.io"]),
            Some("v5.channel.k8s.io")
        );
        assert_eq!(choose_protocol(["base64.channel.k8s.io"]), None);
    }

    #[test]
    fn frames_are_routed_by_their_channel_byte() {
        assert_eq!(input(b"\x00ls\n"), Input::Stdin(b"ls\n"));
        assert_eq!(
            input(b"\x04{\"Width\":80,\"Height\":24}"),
            Input::Resize(80, 24)
        );
        assert_eq!(input(b"\x04garbage"), Input::Other);
        assert_eq!(input(&[CLOSE, STDIN]), Input::Other);
        assert_eq!(input(b""), Input::Other);
        assert_eq!(output(b"\x01hi"), Output::Terminal(b"hi"));
        assert_eq!(output(b"\x02oops"), Output::Terminal(b"oops"));
        assert_eq!(output(b"\x03{}"), Output::Status(b"{}"));
        assert_eq!(output(b"\x07"), Output::Other);
    }
}
