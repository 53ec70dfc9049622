//! Integration tests against a real kube-apiserver and etcd (see `hack/testenv.sh`). Every test
//! module shares one control plane per run of this binary, and each test works in a namespace of
//! its own.

mod access;
mod admission;
mod approvals;
mod audit;
mod control_plane;
mod fleet;
mod install;
mod manager;
mod notifications;
mod ozctl;
mod security;
mod sessions;
mod support;
