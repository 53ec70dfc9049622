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
//! - [`broker`]: the exec/attach routes: grant lookup, the pipe to the pod, closing ([`closing`]),
//!   the request's `status.sessions` ([`status`]), audit records ([`audit`]), [`metrics`]; grants
//!   from [`grants`].
//! - [`recording`]: session recordings (asciicast v2 in a directory or S3) and their route.
//! - [`server`]: the TLS listener ([`SessionServer`]), [`front_proxy`]: only the apiserver may
//!   call it, and who the user is; [`discovery`]: the group's discovery documents.
#![forbid(unsafe_code)]

pub mod audit;
pub mod broker;
pub mod closing;
pub mod discovery;
pub mod front_proxy;
pub mod grants;
pub mod metrics;
pub mod recording;
pub mod server;
pub mod session;
pub mod status;

pub use broker::{Broker, BrokerConfig};
pub use metrics::SessionMetrics;
pub use server::SessionServer;
pub use session::{GrantRef, Identity, SessionInfo, new_session_id};
