//! Test support for oz's integration tests: a real kube-apiserver and etcd (built from the
//! Kubernetes Go modules by `hack/testenv.sh`), one per test binary, with:
//!
//! - an admin client and one client per test user, each authenticated by its own client
//!   certificate, so RBAC and admission see the real user;
//! - a fresh namespace per test;
//! - Deployments, StatefulSets and DaemonSets together with their pods, which the helpers create
//!   and mark Ready themselves, because no kubelet runs.
#![forbid(unsafe_code)]

mod control_plane;
mod error;
pub mod pods;
pub mod workloads;

pub use control_plane::{ControlPlane, ControlPlaneOptions, ReadyInfo};
pub use error::{Error, Result};

/// The users every shared control plane has: alice and carol in `devs`, bob in `qa`, and
/// `oz-operator`, an identity with no permissions of its own, for running oz-manager under
/// RBAC that a test controls.
pub const USERS: &[(&str, &[&str])] = &[
    ("alice", &["devs"]),
    ("carol", &["devs"]),
    ("bob", &["qa"]),
    ("oz-operator", &["oz-operators"]),
];
