//! The benchmark's one error type.

/// The benchmark's one error type: whatever went wrong, with its message.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T, E = Error> = std::result::Result<T, E>;
