//! Approvals: decided by the request controller, and guarded by the approval webhooks.

pub mod controller;
pub mod webhooks;
