//! oz's admission webhooks through the real apiserver: the webhook server itself, and the one
//! grant rule its audit webhook enforces.

pub mod grant_rule;
pub mod webhook_server;
