//! oz's admission webhooks, served on [`oz_platform`].
//!
//! oz-manager calls [`WebhookServer::start`] with a [`WebhookConfig`]; it takes the server
//! layer from [`oz_platform`] (TLS, who may call, the certificates and their rotation, the
//! webhook registrations, the audit key) and serves on it:
//!
//! - [`admission`]: the handlers: requester stamping, request, approval and template
//!   validation, and the exec/attach/port-forward/debug audit, whose records are written
//!   through [`oz_audit::AuditLog`].
//! - [`metrics`]: what the webhooks count ([`WebhookMetrics`], with the server layer's own).
//!
//! ```no_run
//! # async fn run(client: kube::Client, leader: tokio::sync::watch::Receiver<bool>)
//! # -> oz_webhooks::Result<()> {
//! use oz_platform::WebhookEndpoint;
//! use oz_webhooks::{WebhookConfig, WebhookServer};
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
pub mod metrics;
mod server;

pub use metrics::WebhookMetrics;
pub use oz_platform::{Error, Result};
pub use server::{WebhookConfig, WebhookServer};
