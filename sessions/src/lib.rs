//! oz's brokered sessions (`accessConfig.sessionMode: Brokered`).
//!
//! The kube-apiserver serves `sessions.wizardofoz.co` as an aggregated API: it authenticates
//! and authorizes each `pods/exec` or `pods/attach` under that group with the cluster's own
//! RBAC, then proxies it (the upgrade included) to oz with the user in front-proxy headers.
//! oz checks that the caller is the apiserver (its front-proxy client certificate), finds the
//! grant, opens the real stream to the pod with its own identity, pipes it both ways while
//! recording it, and closes it when the grant ends.
//!
//! - [`session`]: what a session is (shared by every part).
//! - [`server`]: the TLS listener ([`SessionServer`]), [`front_proxy`]: only the apiserver may
//!   call it, and who the user is; [`discovery`]: the group's discovery documents.
#![forbid(unsafe_code)]

pub mod discovery;
pub mod front_proxy;
pub mod server;
pub mod session;

pub use server::SessionServer;
pub use session::{GrantRef, Identity, SessionInfo, new_session_id};
