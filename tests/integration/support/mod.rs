//! What the integration tests share, one theme a module.

pub mod admission;
pub mod cluster;
pub mod fixture;
pub mod fleet;
pub mod grant_audit;
pub mod install;
pub mod manifests;
pub mod operator;
pub mod ozctl;
pub mod polling;
pub mod rbac;
pub mod requests;
pub mod revocation;
pub mod timing;
pub mod users;
pub mod webhook_server;
