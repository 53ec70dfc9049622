//! oz: just-in-time `kubectl exec` and debug-pod access for Kubernetes, API-compatible with Oz.
//!
//! This crate holds the controllers, builders and binaries; the CRD types and pure logic live in
//! `oz-api`, the admission webhook server in `oz-webhooks`.
//!
//! - [`controllers`]: a template reconciler and a request reconciler, each generic over the
//!   Exec and Pod kinds ([`oz_api::AccessKind`]), reading like Oz's sequence: fetch, verify the template,
//!   decide the duration, check expiry, build, report readiness.
//! - [`builders`]: the heavy lifting of a grant: the Role, RoleBinding (and Pod) a request owns.
//! - [`cache`]: what the watches keep of the objects grants are made of and stand on, and the
//!   echoes of oz's own writes they drop.
//! - [`notify`]: news of requests, POSTed to the sinks their templates name.
//! - [`fleet`]: a hub's side of fleets: its ClusterProfiles, its spokes, its templates kept there.
#![forbid(unsafe_code)]
// oz is an application, not a library others call: its docs are for the people changing it
// (`cargo doc --document-private-items`), where links to the reconcile's private steps resolve.
#![allow(rustdoc::private_intra_doc_links)]

pub mod apply;
pub mod builders;
pub mod cache;
pub mod context;
pub mod controllers;
pub mod error;
pub mod fleet;
pub mod install;
pub mod manager;
pub mod metrics;
pub mod notify;
pub mod scope;
pub mod time;

pub use context::{Context, Settings};
pub use error::{Error, Result};

/// The field manager of every server-side apply oz makes.
pub const FIELD_MANAGER: &str = "oz";
