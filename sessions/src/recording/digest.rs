//! What a finished recording is checked by.

/// A finished recording file's SHA-256 (lowercase hex) and length in bytes, as the
/// `session-end` audit record carries them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordingDigest {
    /// SHA-256 of the whole file, in lowercase hex (as `sha256sum` prints it).
    pub sha256: String,
    /// Its length in bytes.
    pub bytes: u64,
}
