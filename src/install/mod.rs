//! A complete install of oz as Kubernetes objects, and as the multi-document YAML that
//! `oz-manager manifests` prints and `config/default/install.yaml` commits.
//!
//! Everything here is pure: [`install_objects`] builds the objects from [`InstallOptions`],
//! [`install_yaml`] renders them. The RBAC is least privilege and every rule carries its reason,
//! rendered as a comment above the Role or ClusterRole that holds it (`docs/rbac.md` explains
//! the design). In short:
//!
//! - **Watched namespaces** get a Role and RoleBinding each when `watch_namespaces` is set, so a
//!   cluster admin grants exactly those; with no `watch_namespaces` the same rules are one
//!   ClusterRole bound cluster-wide.
//! - **The operator's namespace** gets a Role for oz's own state: its leader-election Lease, the
//!   webhook certificate Secrets, the audit file's signing key Secret and the ConfigMap `oz-audit`
//!   publishing its public keys, by name wherever RBAC allows names.
//! - **Cluster-scoped** needs (only oz's own webhook configurations, by name) are a small
//!   ClusterRole, present only with the webhooks.
//! - **No escalation.** oz creates Roles granting exec into one pod. RBAC lets a subject create
//!   or bind a Role only with permissions it holds itself, unless it has the `escalate` or
//!   `bind` verb. oz has neither: it holds exactly what templates can grant (taken from the
//!   builders' [`EXEC_PERMISSIONS`](crate::builders::rbac::EXEC_PERMISSIONS) and
//!   [`POD_PERMISSIONS`](crate::builders::pod::POD_PERMISSIONS)), so it can never mint more.
//!
//! - **Users' roles**: ClusterRoles `<name>-view`, `-request-access`, `-template-manager` and
//!   `-approver`, labelled to aggregate into the built-in `view`, `edit` and `admin`
//!   ([`user_roles`]).
//!
//! - **Only the apiserver calls the webhooks**, when asked: `webhook_client_ca_secret` mounts
//!   the CA of the apiserver's webhook client certificate and has oz-manager require it;
//!   `webhook_ingress_cidrs` adds a NetworkPolicy admitting only the control plane to the
//!   webhook port (`docs/audit.md`, "Caller verification").
//!
//! - **A fleet hub** (`fleet_hub`) reads ClusterProfiles and the spokes' token Secrets in its
//!   fleet namespace only, through a Role there; **a fleet spoke** holds the hub's credential
//!   ([`fleet`]).
//!
//! Where each part lives: [`options`] (what to install, and the parts of oz-manager), [`rbac`]
//! (the rules and the Roles holding them), [`workload`] (Services, Deployment, webhook
//! configurations), [`network_policies`] (what may reach oz-manager, and what it may reach),
//! [`fleet_hub`] and [`fleet`] (a fleet's hub and spoke), `fleet_names.rs` (a spoke's names
//! for the hub's),
//! `objects.rs` (all of them in order, and as YAML), [`yaml`] (the rendering's helpers).

pub mod chart;
mod error;
pub mod fleet;
pub mod fleet_hub;
mod fleet_names;
mod manifest;
pub mod network_policies;
mod objects;
pub mod options;
pub mod rbac;
pub mod registration;
pub mod user_roles;
pub mod workload;
pub mod yaml;

pub use error::ManifestError;
pub use manifest::Manifest;
use manifest::{labels, meta, selector_labels};
pub use objects::{install_objects, install_yaml};
pub use options::{
    AUDIT_PUBLIC_KEYS_CONFIGMAP, AUDIT_SIGNING_KEY_SECRET, Component, DEFAULT_FLEET_NAME,
    DEFAULT_FLEET_NAMESPACE, DEFAULT_IMAGE, DEFAULT_NAME, DEFAULT_NAMESPACE,
    DEFAULT_SESSION_RECORDINGS, FleetHubOptions, HEALTH_PORT, InstallOptions, METRICS_PORT, RUN_AS,
    SESSIONS_PORT, WEBHOOK_PORT, WEBHOOK_SERVICE_PORT,
};
pub use rbac::{Rule, cluster_rules, operator_namespace_rules, watched_namespace_rules};
pub use registration::{watched_namespaces_selector, webhook_registration};
pub use user_roles::is_users_role;
pub use workload::{WEBHOOK_CLIENT_CA_DIR, WEBHOOK_CLIENT_CA_KEY, manager_args};

#[cfg(test)]
mod tests;
