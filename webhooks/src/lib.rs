//! oz's admission webhook server.
//!
//! - [`tls`]: an axum server over rustls whose certificate can be replaced while it runs.
#![forbid(unsafe_code)]

pub mod tls;
