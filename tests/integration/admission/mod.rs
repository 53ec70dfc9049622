//! oz's admission webhooks through the real apiserver: the webhook server itself, the one
//! grant rule its audit webhook enforces, and what its denials tell the user to do.

pub mod denial_hints;
pub mod grant_rule;
pub mod webhook_server;
