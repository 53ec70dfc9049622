//! Test support for oz's integration tests: a real kube-apiserver and etcd (built from the
//! Kubernetes Go modules by `hack/testenv.sh`), one per test binary, with:
//!
//! - an admin client and one client per test user, each authenticated by its own client
//!   certificate, so RBAC and admission see the real user;
//! - a fresh namespace per test;
//! - the apiserver presenting a client certificate of its own to admission webhooks, whose CA,
//!   certificate and key tests read (`ControlPlane::webhook_client_ca`), as a cluster whose
//!   AdmissionConfiguration names webhook client credentials does;
//! - simulated nodes (kwok) on which pods run: the workload controllers and a binder in the
//!   control plane make and place a workload's pods, kwok makes them Ready, and `kubectl exec`,
//!   attach, logs and port-forward reach them through the apiserver (an exec runs its command as
//!   a local process);
//! - a local S3 server ([`s3::S3Server`]) for oz's session recordings;
//! - helm and promtool, and for fleets the sig-multicluster secretreader credential plugin and
//!   the ClusterProfile CRD ([`secretreader_plugin`], [`cluster_profile_crd`]), and a fleet's
//!   plumbing between control planes ([`fleet`]);
//! - Deployments, StatefulSets, DaemonSets and Argo Rollouts, created and waited for until
//!   their pods are Ready.
#![forbid(unsafe_code)]

mod control_plane;
mod crds;
mod error;
pub mod exec;
pub mod fleet;
pub mod pods;
pub mod s3;
mod tools;
pub mod workloads;

pub use control_plane::{ControlPlane, ControlPlaneOptions, DEFAULT_NODES, ReadyInfo};
pub use crds::apply_crds;
pub use error::{Error, Result};
pub use tools::{cluster_profile_crd, helm, promtool, secretreader_plugin};

/// The users every shared control plane has: alice and carol in `devs`, bob in `qa`, and
/// `oz-operator`, an identity with no permissions of its own, for running oz-manager under
/// RBAC that a test controls.
pub const USERS: &[(&str, &[&str])] = &[
    ("alice", &["devs"]),
    ("carol", &["devs"]),
    ("bob", &["qa"]),
    ("oz-operator", &["oz-operators"]),
];
