//! What oz's watches keep, and why it can trust them.
//!
//! - [`build_caches`]: what a request controller's builder reads instead of asking the
//!   apiserver: its grants' Roles and RoleBindings ([`grant_rbac_store`], each summarised as
//!   [`grant_rbac`] says) and the workloads' selectors;
//! - [`requests`]: each request of a request controller, packed ([`packing`] is the format);
//! - [`echoes`]: the watch events of oz's own writes, dropped so they do not wake a request
//!   again.

pub mod build_caches;
pub mod echoes;
pub mod grant_rbac;
pub mod grant_rbac_store;
mod packing;
pub mod requests;

pub use build_caches::BuildCaches;
