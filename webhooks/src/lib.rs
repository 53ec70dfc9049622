//! oz's admission webhook server.
//!
//! oz-manager calls [`WebhookServer::start`] with a [`WebhookConfig`]; everything else here is
//! what that is made of:
//!
//! - [`certs`]: the CA and serving certificate, generated with rcgen and checked when read back;
//!   [`certs::secrets`] keeps both in Secrets in the operator's namespace (only the leader
//!   writes them), and a background reconciler (`certs::rotation`) watches the two Secrets and
//!   oz's own webhook configurations, and keeps the served certificate and every `caBundle` in
//!   step with them, with no restart.
//! - [`registration`]: the webhook configurations oz registers, applied server-side.
//! - [`admission`]: the handlers (requester stamping, request validation, exec/attach audit).
//! - [`tls`]: an axum server over rustls whose certificate can be replaced while it runs.
//! - [`audit_key`]: the audit file's signing key, in a Secret, and its public key, in a
//!   ConfigMap security teams can read; the file itself is [`oz_audit`]'s, written by
//!   [`admission::AuditLog`].
//! - [`callers`]: with a client CA, only the kube-apiserver (its client certificate) may call
//!   the webhooks; who called is on every audit record.
//!
//! ```no_run
//! # async fn run(client: kube::Client, leader: tokio::sync::watch::Receiver<bool>)
//! # -> oz_webhooks::Result<()> {
//! use oz_webhooks::{WebhookConfig, WebhookEndpoint, WebhookServer};
//!
//! // --webhook-service oz-system/oz-webhook (or WebhookEndpoint::url("https://127.0.0.1:9443"))
//! let endpoint = WebhookEndpoint::service("oz-system/oz-webhook", 443)?;
//! let mut config = WebhookConfig::new("oz-system", endpoint);
//! config.audit_log_path = Some("/var/log/oz/audit.jsonl".into());
//! config.leader = Some(leader);
//! let server = WebhookServer::start(client, config).await?;
//! // ... until the process is asked to stop:
//! server.shutdown(std::time::Duration::from_secs(5)).await?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod admission;
pub mod audit_key;
pub mod callers;
pub mod certs;
mod error;
pub mod metrics;
pub mod registration;
mod server;
pub mod tls;

pub use error::{Error, Result};
pub use metrics::WebhookMetrics;
pub use registration::{FailurePolicy, Registration, WebhookEndpoint};
pub use server::{WebhookConfig, WebhookServer};

/// The field manager of every write this crate makes, and the `app.kubernetes.io/managed-by`
/// label of what it creates.
pub const FIELD_MANAGER: &str = "oz-webhooks";
