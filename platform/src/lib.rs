//! What oz's two servers, the admission webhooks (oz-webhooks) and the sessions API
//! (oz-sessions), stand on:
//!
//! - [`tls`]: an axum server over rustls whose certificate can be replaced while it runs, with
//!   the one crypto provider ([`crypto`]) both it and the caller checks use.
//! - [`callers`]: who may call a server: with a client CA, only the kube-apiserver (its client
//!   certificate, with an allowed name); one [`callers::CallerPolicy`] for both servers, and
//!   who called is on every audit record.
//! - [`certs`]: the CA and serving certificate, generated with rcgen and checked when read back;
//!   [`certs::secrets`] keeps both in Secrets in the operator's namespace (only the leader
//!   writes them), and a background reconciler ([`certs::rotation`]) watches the two Secrets and
//!   oz's own registrations, and keeps the served certificate and every `caBundle` in step with
//!   them, with no restart.
//! - [`registration`]: the webhook configurations and the APIService oz registers, applied
//!   server-side.
//! - [`audit_key`]: the audit file's signing key, in a Secret, and its public key, in a
//!   ConfigMap security teams can read; the file itself is [`oz_audit`]'s.
//! - [`metrics`]: what this layer counts ([`ServerMetrics`]).
#![forbid(unsafe_code)]

pub mod audit_key;
pub mod callers;
pub mod certs;
pub mod crypto;
mod error;
pub mod metrics;
pub mod registration;
pub mod tls;

pub use error::{Error, Result};
pub use metrics::ServerMetrics;
pub use registration::{FailurePolicy, Registration, WebhookEndpoint};

/// The field manager of every write this layer makes, and the `app.kubernetes.io/managed-by`
/// label of what it creates. It keeps the name of the crate this layer grew in: the objects
/// already in clusters carry it, and server-side apply owns fields by it.
pub const FIELD_MANAGER: &str = "oz-webhooks";
