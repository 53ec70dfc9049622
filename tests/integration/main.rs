//! Integration tests against a real kube-apiserver and etcd (see `hack/testenv.sh`). Every test
//! module shares one control plane per run of this binary, and each test works in a namespace of
//! its own.

mod api_calls;
mod approval_webhooks;
mod approvals;
mod audit_trail;
mod brokered_grants;
mod callers;
mod crds;
mod enforced_templates;
mod exec;
mod faults;
mod grant_rule;
mod harness;
mod helm;
mod hostile;
mod image;
mod install;
mod manager;
mod monitoring;
mod notifications;
mod oz_adoption;
mod ozctl;
mod ozctl_approvals;
mod ozctl_audit;
mod ozctl_sessions;
mod pod;
mod pod_squatting;
mod recordings;
mod security;
mod sessions_bounds;
mod sessions_broker;
mod sessions_end_to_end;
mod sessions_front_door;
mod sessions_plane;
mod sessions_recorded;
mod streams;
mod support;
mod targets;
mod user_roles;
mod versions;
mod webhooks;
