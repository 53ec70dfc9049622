//! What a recording could not keep: the byte count and SHA-256 of the text that would have
//! been recorded, so the recording still accounts for every byte of the session even where it
//! does not hold them.

use ring::digest::{Context, SHA256};

/// Text of one stream (input or output) that was not recorded, since the last time it was
/// [taken](Unrecorded::take).
pub struct Unrecorded {
    bytes: u64,
    digest: Context,
}

impl Default for Unrecorded {
    fn default() -> Self {
        Self {
            bytes: 0,
            digest: Context::new(&SHA256),
        }
    }
}

impl std::fmt::Debug for Unrecorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unrecorded")
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Unrecorded {
    /// Counts `text` as not recorded.
    pub fn add(&mut self, text: &str) {
        self.bytes += text.len() as u64;
        self.digest.update(text.as_bytes());
    }

    /// Whether nothing is counted.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The byte count and the hex SHA-256 of what was counted, and starts over; `None` when
    /// nothing was.
    pub fn take(&mut self) -> Option<(u64, String)> {
        if self.is_empty() {
            return None;
        }
        let taken = std::mem::take(self);
        Some((taken.bytes, hex(taken.digest.finish().as_ref())))
    }
}

/// Lowercase hex, as `sha256sum` prints a digest.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_digests_what_was_added_in_order_then_starts_over() {
        let mut lost = Unrecorded::default();
        assert_eq!(lost.take(), None);
        lost.add("hello ");
        lost.add("world");
        assert_eq!(
            lost.take(),
            Some((
                11,
                // sha256sum of "hello world"
                "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9".into()
            ))
        );
        assert!(lost.is_empty());
    }
}
