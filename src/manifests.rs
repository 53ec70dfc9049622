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
//! - **The operator's namespace** gets a Role for oz's own state: its leader-election Lease and
//!   the webhook certificate Secrets, by name wherever RBAC allows names.
//! - **Cluster-scoped** needs (only oz's own webhook configurations, by name) are a small
//!   ClusterRole, present only with the webhooks.
//! - **No escalation.** oz creates Roles granting exec into one pod. RBAC lets a subject create
//!   or bind a Role only with permissions it holds itself, unless it has the `escalate` or
//!   `bind` verb. oz has neither: it holds exactly what templates can grant (taken from the
//!   builders' [`EXEC_PERMISSIONS`] and [`POD_PERMISSIONS`]), so it can never mint more.

use std::{collections::BTreeMap, fmt, str::FromStr};

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{
            Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, Namespace,
            ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
            ResourceRequirements, SeccompProfile, SecurityContext, Service, ServiceAccount,
            ServicePort, ServiceSpec,
        },
        rbac::v1::{
            ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
        },
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{LabelSelector, LabelSelectorRequirement},
        util::intstr::IntOrString,
    },
};
use kube::api::{DynamicObject, ObjectMeta};
use oz_webhooks::{Registration, WebhookEndpoint};
use serde::Serialize;

use crate::builders::{pod::POD_PERMISSIONS, rbac::EXEC_PERMISSIONS};

/// The image of the default install: a placeholder until oz publishes images. Build your own
/// with the `Dockerfile` and pass `--image`.
pub const DEFAULT_IMAGE: &str = "ghcr.io/oz-rs/oz:latest";
/// The operator's namespace in the default install.
pub const DEFAULT_NAMESPACE: &str = "oz-system";
/// The base name of the default install (see [`InstallOptions::name`]).
pub const DEFAULT_NAME: &str = "oz";

/// Where oz-manager serves Prometheus metrics in the Deployment.
pub const METRICS_PORT: i32 = 8080;
/// Where oz-manager serves `/healthz` and `/readyz` in the Deployment.
pub const HEALTH_PORT: i32 = 8081;
/// The webhook server's container port.
pub const WEBHOOK_PORT: i32 = 9443;
/// The webhook Service's port, which the webhook configurations name.
pub const WEBHOOK_SERVICE_PORT: u16 = 443;
/// The non-root user and group the container runs as (distroless `nonroot`).
pub const RUN_AS: i64 = 65532;

const CRD_GROUP: &str = oz_api::GROUP;
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const CONTAINER: &str = "manager";
/// The label every Namespace carries with its own name, which the webhooks' namespaceSelector
/// matches when the install is scoped.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// One part of oz-manager, as named by `--controllers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Controller {
    /// ExecAccessTemplate and ExecAccessRequest.
    Exec,
    /// PodAccessTemplate and PodAccessRequest.
    Pod,
    /// The admission webhooks (requester stamping, request validation, exec/attach audit).
    Webhooks,
}

impl Controller {
    /// Every part, in flag order.
    pub const ALL: [Controller; 3] = [Controller::Exec, Controller::Pod, Controller::Webhooks];

    /// The name `--controllers` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Controller::Exec => "exec",
            Controller::Pod => "pod",
            Controller::Webhooks => "webhooks",
        }
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Controller {
    type Err = ManifestError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Controller::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .ok_or_else(|| {
                ManifestError::Invalid(format!(
                    "unknown controller {text:?}: want exec, pod or webhooks"
                ))
            })
    }
}

/// What to install. [`InstallOptions::default`] is the default install: namespace `oz-system`,
/// every namespace watched, every controller, the placeholder [`DEFAULT_IMAGE`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallOptions {
    /// The operator's namespace: its Deployment, Services, Lease and certificate Secrets.
    pub namespace: String,
    /// The namespaces oz works in, each getting a Role; empty means all, with a ClusterRole.
    /// Watched namespaces must already exist.
    pub watch_namespaces: Vec<String>,
    /// The parts of oz-manager to run (and to grant permissions for).
    pub controllers: Vec<Controller>,
    /// The oz-manager image.
    pub image: String,
    /// Base name of everything oz installs: `<name>-manager` (ServiceAccount, Deployment,
    /// Roles and ClusterRoles), `<name>-webhook` (Service), `<name>-requests` and
    /// `<name>-audit` (webhook configurations). Installs with different names can share a
    /// cluster. Default `oz`.
    pub name: String,
    /// Replicas of the Deployment; more than one run as leader and hot standbys.
    pub replicas: i32,
    /// Whether the four CRDs are included. `config/default` leaves them out, because it
    /// includes `config/crd`.
    pub crds: bool,
}

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            namespace: DEFAULT_NAMESPACE.into(),
            watch_namespaces: Vec::new(),
            controllers: Controller::ALL.to_vec(),
            image: DEFAULT_IMAGE.into(),
            name: DEFAULT_NAME.into(),
            replicas: 1,
            crds: true,
        }
    }
}

impl InstallOptions {
    /// The options `config/default/install.yaml` is generated with: the defaults, without the
    /// CRDs (the kustomization takes those from `config/crd`).
    pub fn committed() -> Self {
        Self {
            crds: false,
            ..Self::default()
        }
    }

    /// The `oz-manager manifests` command line that prints this install.
    pub fn command_line(&self) -> String {
        let defaults = Self::default();
        let mut line = String::from("oz-manager manifests");
        if self.namespace != defaults.namespace {
            line.push_str(&format!(" --namespace {}", self.namespace));
        }
        let watched = self.watched();
        if !watched.is_empty() {
            line.push_str(&format!(" --watch-namespaces {}", watched.join(",")));
        }
        if self.parts() != defaults.parts() {
            line.push_str(&format!(" --controllers {}", join(&self.parts())));
        }
        if self.image != defaults.image {
            line.push_str(&format!(" --image {}", self.image));
        }
        if self.name != defaults.name {
            line.push_str(&format!(" --name {}", self.name));
        }
        if self.replicas != defaults.replicas {
            line.push_str(&format!(" --replicas {}", self.replicas));
        }
        if !self.crds {
            line.push_str(" --no-crds");
        }
        line
    }

    /// What oz registers with the apiserver when the webhooks run in this install: the
    /// configurations named after [`InstallOptions::name`], reached through the webhook
    /// Service, and (when scoped) limited to the watched namespaces. oz-manager should register
    /// exactly this, so what it applies agrees with what was installed.
    pub fn webhook_registration(&self) -> Registration {
        let mut registration = Registration::new(WebhookEndpoint::Service {
            namespace: self.namespace.clone(),
            name: self.webhook_service_name(),
            port: WEBHOOK_SERVICE_PORT,
        });
        registration.name = self.name.clone();
        let watched = self.watched();
        if !watched.is_empty() {
            let selector = watched_namespaces_selector(&watched);
            registration.request_namespace_selector = Some(selector.clone());
            registration.audit_namespace_selector = Some(selector);
        }
        registration
    }

    /// The watched namespaces without blanks and repeats, in the order given.
    fn watched(&self) -> Vec<String> {
        let mut watched: Vec<String> = Vec::new();
        for namespace in &self.watch_namespaces {
            if !namespace.is_empty() && !watched.contains(namespace) {
                watched.push(namespace.clone());
            }
        }
        watched
    }

    /// The selected parts without repeats, in flag order.
    fn parts(&self) -> Vec<Controller> {
        Controller::ALL
            .into_iter()
            .filter(|c| self.controllers.contains(c))
            .collect()
    }

    fn runs(&self, controller: Controller) -> bool {
        self.controllers.contains(&controller)
    }

    fn manager_name(&self) -> String {
        format!("{}-manager", self.name)
    }

    fn webhook_service_name(&self) -> String {
        format!("{}-webhook", self.name)
    }

    fn lease_name(&self) -> String {
        self.manager_name()
    }

    fn secret_names(&self) -> [String; 2] {
        [
            format!("{}-webhook-ca", self.name),
            format!("{}-webhook-tls", self.name),
        ]
    }

    fn validate(&self) -> Result<(), ManifestError> {
        check_dns_label("namespace", &self.namespace)?;
        for namespace in self.watched() {
            check_dns_label("watched namespace", &namespace)?;
        }
        // `<name>-webhook-tls` is the longest name derived from it, and must stay a label.
        check_dns_label("name", &self.name)?;
        if self.name.len() > 63 - "-webhook-tls".len() {
            return Err(ManifestError::Invalid(format!(
                "name {:?} is too long: at most {} characters",
                self.name,
                63 - "-webhook-tls".len()
            )));
        }
        if self.parts().is_empty() {
            return Err(ManifestError::Invalid(
                "no controllers: choose some of exec, pod and webhooks".into(),
            ));
        }
        if self.image.trim().is_empty() || self.image.chars().any(char::is_whitespace) {
            return Err(ManifestError::Invalid(format!(
                "image {:?} is not an image reference",
                self.image
            )));
        }
        if self.replicas < 1 {
            return Err(ManifestError::Invalid(format!(
                "replicas must be at least 1, not {}",
                self.replicas
            )));
        }
        Ok(())
    }
}

/// What can go wrong building an install.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The options describe no valid install.
    #[error("invalid install options: {0}")]
    Invalid(String),
    /// An object could not be turned into YAML.
    #[error("could not render the install as YAML: {0}")]
    Yaml(#[from] serde_saphyr::ser::Error),
    /// An object could not be turned into JSON (it never can fail for these types).
    #[error("could not serialise a {kind}: {source}")]
    Json {
        kind: String,
        #[source]
        source: serde_json::Error,
    },
}

/// One object of the install and the comment rendered above it: what it is for and, for RBAC,
/// why each rule exists.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// Comment lines, without the `# `.
    pub comment: Vec<String>,
    /// The object, with `apiVersion` and `kind`.
    pub object: DynamicObject,
}

/// A PolicyRule and why oz needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The rule as it goes into the Role or ClusterRole.
    pub rule: PolicyRule,
    /// Why, one reason per part of oz that needs it: who, and for what.
    pub why: Vec<String>,
}

/// The install as YAML: a comment header with the command that prints it, then one document
/// per object of [`install_objects`], each with its comment.
pub fn install_yaml(options: &InstallOptions) -> Result<String, ManifestError> {
    let manifests = install_objects(options)?;
    let mut out = format!(
        "# oz: just-in-time kubectl exec and debug-pod access for Kubernetes.\n\
         # Generated by `{}`; do not edit by hand.\n\
         # The reason for every RBAC rule is written above its Role or ClusterRole; see docs/rbac.md.\n",
        options.command_line()
    );
    for manifest in manifests {
        out.push_str("---\n");
        for line in &manifest.comment {
            if line.is_empty() {
                out.push_str("#\n");
                continue;
            }
            let text = line.trim_start();
            let indent = &line[..line.len() - text.len()];
            for wrapped in wrap(text, COMMENT_WIDTH, indent, indent) {
                out.push_str(&format!("# {wrapped}\n"));
            }
        }
        out.push_str(&serde_saphyr::to_string(&manifest.object)?);
    }
    Ok(out)
}

/// Every object of the install, in the order to apply them: the Namespace, the CRDs (if
/// wanted), the ServiceAccount, RBAC, Services, the Deployment, and the webhook configurations
/// (if the webhooks run).
pub fn install_objects(options: &InstallOptions) -> Result<Vec<Manifest>, ManifestError> {
    options.validate()?;
    let o = options;
    let mut out = Vec::new();
    let mut push = |comment: Vec<String>, object: &dyn ErasedObject| -> Result<(), ManifestError> {
        out.push(Manifest {
            comment,
            object: object.to_dynamic()?,
        });
        Ok(())
    };

    push(
        vec!["The operator's namespace.".into()],
        &Namespace {
            metadata: meta(o, &o.namespace, None),
            ..Default::default()
        },
    )?;
    if o.crds {
        for crd in oz_api::all_crds() {
            push(vec![], &crd)?;
        }
    }
    push(
        vec!["The identity oz-manager runs as; the RBAC below is all it may do.".into()],
        &ServiceAccount {
            metadata: meta(o, &o.manager_name(), Some(&o.namespace)),
            ..Default::default()
        },
    )?;

    let watched = o.watched();
    let rules = watched_namespace_rules(o);
    if watched.is_empty() {
        let mut comment = vec![
            "What oz does in the namespaces it works in: all of them (no --watch-namespaces)."
                .into(),
        ];
        comment.extend(no_escalation_note());
        comment.extend(rule_comments(&rules));
        push(
            comment,
            &ClusterRole {
                metadata: meta(o, &o.manager_name(), None),
                rules: Some(rules.iter().map(|r| r.rule.clone()).collect()),
                aggregation_rule: None,
            },
        )?;
        push(
            vec!["Grants it in every namespace.".into()],
            &ClusterRoleBinding {
                metadata: meta(o, &o.manager_name(), None),
                role_ref: role_ref("ClusterRole", &o.manager_name()),
                subjects: Some(vec![service_account(o)]),
            },
        )?;
    } else {
        for namespace in &watched {
            let mut comment = vec![format!(
                "What oz does in watched namespace {namespace}; a Role per watched namespace, so oz gets nothing elsewhere."
            )];
            comment.extend(no_escalation_note());
            comment.extend(rule_comments(&rules));
            push(
                comment,
                &Role {
                    metadata: meta(o, &o.manager_name(), Some(namespace)),
                    rules: Some(rules.iter().map(|r| r.rule.clone()).collect()),
                },
            )?;
            push(
                vec![format!("Grants it in {namespace}.")],
                &RoleBinding {
                    metadata: meta(o, &o.manager_name(), Some(namespace)),
                    role_ref: role_ref("Role", &o.manager_name()),
                    subjects: Some(vec![service_account(o)]),
                },
            )?;
        }
    }

    let state = operator_namespace_rules(o);
    let state_name = format!("{}-state", o.manager_name());
    let mut comment = vec![format!(
        "oz's own state in its namespace {}: the leader-election Lease{}.",
        o.namespace,
        if o.runs(Controller::Webhooks) {
            " and the webhook certificate Secrets"
        } else {
            ""
        }
    )];
    comment.extend(rule_comments(&state));
    push(
        comment,
        &Role {
            metadata: meta(o, &state_name, Some(&o.namespace)),
            rules: Some(state.iter().map(|r| r.rule.clone()).collect()),
        },
    )?;
    push(
        vec![format!("Grants it in {}.", o.namespace)],
        &RoleBinding {
            metadata: meta(o, &state_name, Some(&o.namespace)),
            role_ref: role_ref("Role", &state_name),
            subjects: Some(vec![service_account(o)]),
        },
    )?;

    let cluster = cluster_rules(o);
    if !cluster.is_empty() {
        let webhooks_name = format!("{}-webhooks", o.manager_name());
        let mut comment = vec![
            "The only cluster-scoped objects oz touches: its own webhook configurations.".into(),
        ];
        comment.extend(rule_comments(&cluster));
        push(
            comment,
            &ClusterRole {
                metadata: meta(o, &webhooks_name, None),
                rules: Some(cluster.iter().map(|r| r.rule.clone()).collect()),
                aggregation_rule: None,
            },
        )?;
        push(
            vec!["Grants it (the rules name their objects).".into()],
            &ClusterRoleBinding {
                metadata: meta(o, &webhooks_name, None),
                role_ref: role_ref("ClusterRole", &webhooks_name),
                subjects: Some(vec![service_account(o)]),
            },
        )?;
    }

    push(
        vec![format!(
            "Prometheus metrics of oz-manager (plain HTTP, /metrics on port {METRICS_PORT})."
        )],
        &service(o, &format!("{}-metrics", o.name), METRICS_PORT, "metrics"),
    )?;
    if o.runs(Controller::Webhooks) {
        push(
            vec![format!(
                "The apiserver reaches the admission webhooks through this Service (443 -> {WEBHOOK_PORT})."
            )],
            &service(
                o,
                &o.webhook_service_name(),
                i32::from(WEBHOOK_SERVICE_PORT),
                "webhook",
            ),
        )?;
    }
    push(
        vec![format!(
            "oz-manager: the controllers{} in one process; with --leader-elect only the leader reconciles.",
            if o.runs(Controller::Webhooks) {
                " and the webhook server"
            } else {
                ""
            }
        )],
        &deployment(o),
    )?;

    if o.runs(Controller::Webhooks) {
        let registration = o.webhook_registration();
        let note =
            "No caBundle: oz-manager makes its own CA, keeps it in a Secret and injects it here.";
        let mut mutating = registration.mutating_configuration("");
        add_labels(o, &mut mutating.metadata);
        for webhook in mutating.webhooks.iter_mut().flatten() {
            webhook.client_config.ca_bundle = None;
        }
        push(
            vec![
                "Stamps spec.requester on new requests with the user who creates them; until oz-manager runs, requests are refused (failurePolicy Fail).".into(),
                note.into(),
            ],
            &mutating,
        )?;
        for mut validating in registration.validating_configurations("") {
            add_labels(o, &mut validating.metadata);
            for webhook in validating.webhooks.iter_mut().flatten() {
                webhook.client_config.ca_bundle = None;
            }
            let what = if validating.metadata.name == Some(registration.audit_name()) {
                "Audits exec, attach, port-forward and debug into pods (failurePolicy Ignore: an oz outage never blocks kubectl exec)."
            } else {
                "Validates requests: the template exists and the requester may use it; until oz-manager runs, requests are refused (failurePolicy Fail)."
            };
            push(vec![what.into(), note.into()], &validating)?;
        }
    }
    Ok(out)
}

/// The namespaceSelector of a scoped install's webhooks: exactly the watched namespaces, by the
/// name label the apiserver sets on every Namespace.
pub fn watched_namespaces_selector(namespaces: &[String]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.into(),
            operator: "In".into(),
            values: Some(namespaces.to_vec()),
        }]),
        match_labels: None,
    }
}

/// What oz needs in each namespace it works in (a Role there, or a ClusterRole bound
/// cluster-wide when it watches them all).
pub fn watched_namespace_rules(options: &InstallOptions) -> Vec<Rule> {
    let mut rules = RuleSet::default();
    let exec = options.runs(Controller::Exec);
    let pod = options.runs(Controller::Pod);
    let mut kinds = Vec::new();
    if exec {
        kinds.push(("execaccesstemplates", "execaccessrequests"));
    }
    if pod {
        kinds.push(("podaccesstemplates", "podaccessrequests"));
    }
    let templates: Vec<&str> = kinds.iter().map(|k| k.0).collect();
    let requests: Vec<&str> = kinds.iter().map(|k| k.1).collect();
    let sub = |resources: &[&str], subresource: &str| -> Vec<String> {
        resources
            .iter()
            .map(|r| format!("{r}/{subresource}"))
            .collect()
    };

    if exec || pod {
        rules.add(
            CRD_GROUP,
            &templates,
            &["get", "list", "watch"],
            "controllers: the template controller watches templates to keep their status current; \
             the request controller reads the template a request names, and watches templates to wake their requests",
        );
        rules.add(
            CRD_GROUP,
            &sub(&templates, "status"),
            &["patch"],
            "controllers: a template's status (conditions, ready) is written by server-side apply",
        );
        rules.add(
            CRD_GROUP,
            &sub(&templates, "finalizers"),
            &["update"],
            "controllers: lets a request's owner reference to its template carry blockOwnerDeletion where the \
             OwnerReferencesPermissionEnforcement admission plugin is on; CRDs serve no finalizers subresource, so it allows nothing else",
        );
        rules.add(
            CRD_GROUP,
            &requests,
            &["get", "list", "watch", "patch", "delete"],
            "controllers: the request controller watches requests; patch makes the template the request's controller owner \
             (server-side apply of ownerReferences), so deleting a template deletes its requests; \
             delete removes an expired request once --history-retention has passed",
        );
        rules.add(
            CRD_GROUP,
            &sub(&requests, "status"),
            &["patch"],
            "controllers: a request's status (phase, conditions, expiresAt, podName) is written by server-side apply",
        );
        rules.add(
            CRD_GROUP,
            &sub(&requests, "finalizers"),
            &["update"],
            "controllers: the same for the owner references of the Roles, RoleBindings and Pods a request owns",
        );
        rules.add(
            "apps",
            &["deployments", "statefulsets", "daemonsets"],
            &["get", "list", "watch"],
            "controllers: a template's controllerTargetRef: read for its pod selector and pod template, \
             watched so a template becomes ready as soon as its target appears",
        );
        rules.add(
            "argoproj.io",
            &["rollouts"],
            &["get", "list", "watch"],
            "controllers: Argo Rollouts as controllerTargetRef; allows nothing where Argo Rollouts is not installed",
        );
        rules.add(
            RBAC_GROUP,
            &["roles", "rolebindings"],
            &["get", "list", "watch", "create", "patch", "delete"],
            "controllers: each grant is a Role and a RoleBinding, applied by server-side apply (patch, and create when new), \
             watched by label (app.kubernetes.io/managed-by=oz) to undo edits, read back to find the granted pod, \
             and deleted when access ends or is denied; no escalate, no bind (see the pods/... rules)",
        );
        rules.add(
            "events.k8s.io",
            &["events"],
            &["create", "patch"],
            "controllers: Events about templates and requests (TemplateReady, Created, Ready, Denied, Expired, Failed); \
             kube-runtime's Recorder writes events.k8s.io/v1 Events (create, then patch as a series when repeated), \
             never core v1 events, which is all Oz's RBAC grants",
        );
    }
    if exec {
        rules.add(
            "",
            &["pods"],
            &["get", "list"],
            "exec controller: reads the requested pod, and lists the target's pods to pick a running one",
        );
    }
    if pod {
        rules.add(
            "",
            &["pods"],
            &["get", "list", "watch", "create", "delete"],
            "pod controller: creates the access pod, watches the pods it owns (by label), deletes the access pod when access ends",
        );
    }
    // What templates can grant, from the builders themselves: holding it is what lets oz create
    // and bind the grant's Role without `escalate` or `bind`.
    let mut grantable: Vec<(&str, &[&str])> = Vec::new();
    if exec {
        grantable.extend(EXEC_PERMISSIONS.iter().map(|p| (p.resource, p.verbs)));
    }
    if pod {
        grantable.extend(POD_PERMISSIONS.iter().map(|p| (p.resource, p.verbs)));
    }
    for (resource, verbs) in grantable {
        rules.add(
            "",
            &[resource],
            verbs,
            &format!(
                "grantable: the Roles oz creates grant {resource} {} on one pod; RBAC lets oz create and bind \
                 such a Role only while it holds that itself, since oz has neither escalate nor bind{}",
                verbs.join(", "),
                if resource == "pods" { "" } else { "; oz never uses it itself" }
            ),
        );
    }

    if options.runs(Controller::Webhooks) {
        rules.add(
            CRD_GROUP,
            &["execaccesstemplates", "podaccesstemplates"],
            &["get", "list", "watch"],
            "webhooks: the request webhooks check that the template a new request names exists and admits the requester (from a watch cache; a GET when it is not there yet)",
        );
        rules.add(
            CRD_GROUP,
            &["execaccessrequests", "podaccessrequests"],
            &["list", "watch"],
            "webhooks: the audit webhook tells whether an exec or attach is covered by an active grant, from a watch cache of requests (a LIST when it finds none)",
        );
        rules.add(
            "",
            &["pods"],
            &["get"],
            "webhooks: the audit webhook reads the pod an exec or attach goes into, for its record",
        );
        rules.add(
            "events.k8s.io",
            &["events"],
            &["create", "patch"],
            "webhooks: the audit webhook records each exec, attach, port-forward and debug as an Event on the pod",
        );
    }
    rules.into_rules()
}

/// What oz needs in its own namespace: the leader-election Lease and, with the webhooks, the
/// two certificate Secrets.
pub fn operator_namespace_rules(options: &InstallOptions) -> Vec<Rule> {
    let mut rules = RuleSet::default();
    let lease = options.lease_name();
    rules.add_named(
        "coordination.k8s.io",
        &["leases"],
        &[lease.as_str()],
        &["get", "patch"],
        "leader election (--leader-elect, kube-lease-manager): reads the Lease, takes and renews it by patch",
    );
    rules.add(
        "coordination.k8s.io",
        &["leases"],
        &["create"],
        "leader election: creates the Lease the first time; RBAC cannot limit create by name, so this is any Lease, \
         in this namespace only",
    );
    if options.runs(Controller::Webhooks) {
        let [ca, tls] = options.secret_names();
        rules.add_named(
            "",
            &["secrets"],
            &[ca.as_str(), tls.as_str()],
            &["get", "list", "watch", "update", "delete"],
            "webhooks: the webhook CA and serving certificate: read, and watched by name (a metadata.name field \
             selector, which RBAC checks against resourceNames), renewed by update, replaced (delete, create) if unusable",
        );
        rules.add(
            "",
            &["secrets"],
            &["create"],
            "webhooks: creates the two Secrets the first time; RBAC cannot limit create by name, so this is any Secret, \
             in this namespace only (oz can read none but its own)",
        );
    }
    rules.into_rules()
}

/// The cluster-scoped rules: with the webhooks, oz's own webhook configurations, by name.
pub fn cluster_rules(options: &InstallOptions) -> Vec<Rule> {
    let mut rules = RuleSet::default();
    if options.runs(Controller::Webhooks) {
        let registration = options.webhook_registration();
        rules.add_named(
            "admissionregistration.k8s.io",
            &["mutatingwebhookconfigurations"],
            &[registration.requests_name().as_str()],
            &["get", "list", "watch", "patch"],
            "webhooks: keeps the caBundle of its own configuration current by server-side apply, watching it by name",
        );
        let validating = registration.validating_names();
        let validating: Vec<&str> = validating.iter().map(String::as_str).collect();
        rules.add_named(
            "admissionregistration.k8s.io",
            &["validatingwebhookconfigurations"],
            &validating,
            &["get", "list", "watch", "patch"],
            "webhooks: the same for its validating configurations",
        );
        rules.add(
            "admissionregistration.k8s.io",
            &[
                "mutatingwebhookconfigurations",
                "validatingwebhookconfigurations",
            ],
            &["create"],
            "webhooks: re-creates its configurations if they are deleted (server-side apply of a missing object needs create); \
             RBAC cannot limit create by name, and it allows no more than patch on oz's own configurations already does",
        );
    }
    rules.into_rules()
}

/// Rules keyed by (group, resources, resourceNames), their verbs merged and their reasons kept.
#[derive(Default)]
struct RuleSet {
    rules: Vec<(PolicyRule, Vec<String>)>,
}

/// The order verbs are written in.
const VERB_ORDER: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

impl RuleSet {
    fn add(&mut self, group: &str, resources: &[impl AsRef<str>], verbs: &[&str], why: &str) {
        self.add_named(group, resources, &[] as &[&str], verbs, why);
    }

    fn add_named(
        &mut self,
        group: &str,
        resources: &[impl AsRef<str>],
        names: &[impl AsRef<str>],
        verbs: &[&str],
        why: &str,
    ) {
        if resources.is_empty() {
            return;
        }
        fn strings(items: &[impl AsRef<str>]) -> Vec<String> {
            items.iter().map(|s| s.as_ref().to_string()).collect()
        }
        let rule = PolicyRule {
            api_groups: Some(vec![group.into()]),
            resources: Some(strings(resources)),
            resource_names: (!names.is_empty()).then(|| strings(names)),
            verbs: Vec::new(),
            non_resource_urls: None,
        };
        let index = match self.rules.iter().position(|(r, _)| {
            (&r.api_groups, &r.resources, &r.resource_names)
                == (&rule.api_groups, &rule.resources, &rule.resource_names)
        }) {
            Some(index) => index,
            None => {
                self.rules.push((rule, Vec::new()));
                self.rules.len() - 1
            }
        };
        let (rule, reasons) = &mut self.rules[index];
        for verb in verbs {
            assert!(VERB_ORDER.contains(verb), "unexpected verb {verb}");
            if !rule.verbs.iter().any(|v| v == verb) {
                rule.verbs.push(verb.to_string());
            }
        }
        rule.verbs
            .sort_by_key(|v| VERB_ORDER.iter().position(|o| o == v));
        if !reasons.iter().any(|r| r == why) {
            reasons.push(why.to_string());
        }
    }

    fn into_rules(self) -> Vec<Rule> {
        self.rules
            .into_iter()
            .map(|(rule, reasons)| Rule { rule, why: reasons })
            .collect()
    }
}

/// Why oz cannot grant more than exec into a pod, above the rules that make it so.
fn no_escalation_note() -> Vec<String> {
    vec![
        String::new(),
        "oz creates a Role and RoleBinding per grant. RBAC lets a subject create a Role only with \
         permissions it holds itself (or with the escalate verb), and bind one only if it holds its \
         permissions (or the bind verb). oz has neither verb: it holds exactly what templates can grant \
         (the grantable rules), so it can never mint a Role beyond them."
            .into(),
    ]
}

/// The comment lines documenting `rules`, one per rule, in order.
fn rule_comments(rules: &[Rule]) -> Vec<String> {
    let mut lines = vec![
        String::new(),
        "Rules, in order, and why each exists:".to_string(),
    ];
    for (index, rule) in rules.iter().enumerate() {
        let group = match rule.rule.api_groups.as_deref() {
            Some([group]) if group.is_empty() => "core".to_string(),
            Some(groups) => groups.join(","),
            None => String::new(),
        };
        let names = match &rule.rule.resource_names {
            Some(names) => format!(" named {}", names.join(",")),
            None => String::new(),
        };
        lines.push(format!(
            "{index:>2}. {group} {}{names} [{}]",
            rule.rule.resources.as_deref().unwrap_or_default().join(","),
            rule.rule.verbs.join(",")
        ));
        for why in &rule.why {
            lines.extend(wrap(why, COMMENT_WIDTH, "    - ", "      "));
        }
    }
    lines
}

/// Comment lines stay under this width (after the `# `).
const COMMENT_WIDTH: usize = 96;

/// `text` wrapped at word boundaries into lines of at most `width` characters (a longer word
/// gets a line of its own), the first prefixed with `first`, the rest with `rest`.
fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    lines.push(line);
    lines
}

fn labels(options: &InstallOptions) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "oz".to_string()),
        (
            "app.kubernetes.io/instance".to_string(),
            options.name.clone(),
        ),
    ])
}

/// The labels the Deployment's pods carry and the Services select.
fn selector_labels(options: &InstallOptions) -> BTreeMap<String, String> {
    let mut labels = labels(options);
    labels.insert("app.kubernetes.io/component".into(), "manager".into());
    labels
}

fn add_labels(options: &InstallOptions, metadata: &mut ObjectMeta) {
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(labels(options));
}

fn meta(options: &InstallOptions, name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some(labels(options)),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn service_account(options: &InstallOptions) -> Subject {
    Subject {
        api_group: None,
        kind: "ServiceAccount".into(),
        name: options.manager_name(),
        namespace: Some(options.namespace.clone()),
    }
}

fn service(options: &InstallOptions, name: &str, port: i32, target: &str) -> Service {
    Service {
        metadata: meta(options, name, Some(&options.namespace)),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector_labels(options)),
            ports: Some(vec![ServicePort {
                name: Some(target.into()),
                port,
                target_port: Some(IntOrString::String(target.into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// oz-manager's command-line flags in the Deployment.
fn manager_args(options: &InstallOptions) -> Vec<String> {
    let mut args = vec![format!("--namespace={}", options.namespace)];
    let watched = options.watched();
    if !watched.is_empty() {
        args.push(format!("--watch-namespaces={}", watched.join(",")));
    }
    args.push(format!("--controllers={}", join(&options.parts())));
    args.push("--leader-elect".into());
    if options.lease_name() != "oz-manager" {
        args.push(format!(
            "--leader-elect-lease-name={}",
            options.lease_name()
        ));
    }
    args.push(format!("--metrics-bind-address=:{METRICS_PORT}"));
    args.push(format!("--health-probe-bind-address=:{HEALTH_PORT}"));
    if options.runs(Controller::Webhooks) {
        args.push(format!("--webhook-port={WEBHOOK_PORT}"));
        args.push(format!(
            "--webhook-service={}/{}",
            options.namespace,
            options.webhook_service_name()
        ));
        if options.name != DEFAULT_NAME {
            let [ca, tls] = options.secret_names();
            args.push(format!("--webhook-ca-secret={ca}"));
            args.push(format!("--webhook-cert-secret={tls}"));
            args.push(format!("--webhook-configuration-name={}", options.name));
        }
    }
    args.push("--log-format=json".into());
    args
}

fn deployment(options: &InstallOptions) -> Deployment {
    let field_env = |name: &str, path: &str| EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                api_version: None,
            }),
            ..Default::default()
        }),
    };
    let probe = |path: &str, initial_delay: i32, period: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(HEALTH_PORT),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        ..Default::default()
    };
    let port = |name: &str, port: i32| ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])
    };
    let mut ports = vec![port("metrics", METRICS_PORT), port("health", HEALTH_PORT)];
    if options.runs(Controller::Webhooks) {
        ports.push(port("webhook", WEBHOOK_PORT));
    }
    let container = Container {
        name: CONTAINER.into(),
        image: Some(options.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(manager_args(options)),
        env: Some(vec![
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
        ]),
        ports: Some(ports),
        liveness_probe: Some(probe("/healthz", 15, 20)),
        readiness_probe: Some(probe("/readyz", 5, 10)),
        resources: Some(ResourceRequirements {
            requests: Some(quantities("10m", "64Mi")),
            limits: Some(quantities("500m", "256Mi")),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    Deployment {
        metadata: meta(options, &options.manager_name(), Some(&options.namespace)),
        spec: Some(DeploymentSpec {
            replicas: Some(options.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(options)),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector_labels(options)),
                    annotations: Some(BTreeMap::from([(
                        "kubectl.kubernetes.io/default-container".to_string(),
                        CONTAINER.to_string(),
                    )])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(options.manager_name()),
                    containers: vec![container],
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(RUN_AS),
                        run_as_group: Some(RUN_AS),
                        seccomp_profile: Some(runtime_default()),
                        ..Default::default()
                    }),
                    node_selector: Some(BTreeMap::from([(
                        "kubernetes.io/os".to_string(),
                        "linux".to_string(),
                    )])),
                    // Room to finish in-flight reconciles and release the Lease on SIGTERM.
                    termination_grace_period_seconds: Some(30),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        localhost_profile: None,
    }
}

fn join(parts: &[Controller]) -> String {
    parts
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn check_dns_label(what: &str, value: &str) -> Result<(), ManifestError> {
    let valid = !value.is_empty()
        && value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(ManifestError::Invalid(format!(
            "{what} {value:?} is not a valid name: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit"
        )))
    }
}

/// A typed object that can be turned into a [`DynamicObject`].
trait ErasedObject {
    fn to_dynamic(&self) -> Result<DynamicObject, ManifestError>;
}

impl<K: kube::Resource<DynamicType = ()> + Serialize> ErasedObject for K {
    fn to_dynamic(&self) -> Result<DynamicObject, ManifestError> {
        let json = |source| ManifestError::Json {
            kind: K::kind(&()).to_string(),
            source,
        };
        let mut value = serde_json::to_value(self).map_err(json)?;
        // Typed objects leave apiVersion and kind to the client; a manifest needs them.
        value["apiVersion"] = K::api_version(&()).into();
        value["kind"] = K::kind(&()).into();
        serde_json::from_value(value).map_err(json)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };

    use super::*;

    fn kind(manifest: &Manifest) -> &str {
        manifest
            .object
            .types
            .as_ref()
            .map(|t| t.kind.as_str())
            .unwrap_or_default()
    }

    fn typed<K: serde::de::DeserializeOwned>(manifest: &Manifest) -> K {
        serde_json::from_value(serde_json::to_value(&manifest.object).unwrap()).unwrap()
    }

    fn of_kind<'a>(manifests: &'a [Manifest], wanted: &str) -> Vec<&'a Manifest> {
        manifests.iter().filter(|m| kind(m) == wanted).collect()
    }

    fn scoped() -> InstallOptions {
        InstallOptions {
            namespace: "oz-ops".into(),
            watch_namespaces: vec!["a".into(), "".into(), "b".into(), "a".into()],
            ..InstallOptions::default()
        }
    }

    /// Every rule of every Role and ClusterRole in the install.
    fn all_rules(manifests: &[Manifest]) -> Vec<PolicyRule> {
        let mut rules = Vec::new();
        for manifest in manifests {
            match kind(manifest) {
                "Role" => rules.extend(typed::<Role>(manifest).rules.unwrap()),
                "ClusterRole" => rules.extend(typed::<ClusterRole>(manifest).rules.unwrap()),
                _ => {}
            }
        }
        rules
    }

    fn covers(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
        rules.iter().any(|r| {
            r.resource_names.is_none()
                && r.api_groups.as_deref() == Some(&[group.to_string()][..])
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    }

    #[test]
    fn committed_install_matches_the_generator() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/default/install.yaml");
        let generated = install_yaml(&InstallOptions::committed()).unwrap();
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "config/default/install.yaml is out of date with src/manifests.rs: run `make manifests` and commit the result"
        );
    }

    #[test]
    fn a_scoped_install_has_a_role_in_each_watched_namespace_and_no_namespaced_cluster_role() {
        let manifests = install_objects(&scoped()).unwrap();
        let roles: Vec<(Option<String>, Option<String>)> = of_kind(&manifests, "Role")
            .iter()
            .map(|m| {
                (
                    m.object.metadata.namespace.clone(),
                    m.object.metadata.name.clone(),
                )
            })
            .collect();
        let expected = |ns: &str, name: &str| (Some(ns.to_string()), Some(name.to_string()));
        assert_eq!(
            roles,
            [
                expected("a", "oz-manager"),
                expected("b", "oz-manager"),
                expected("oz-ops", "oz-manager-state"),
            ]
        );
        for binding in of_kind(&manifests, "RoleBinding") {
            let binding: RoleBinding = typed(binding);
            assert_eq!(binding.role_ref.kind, "Role");
            assert_eq!(
                binding.role_ref.name,
                binding.metadata.name.clone().unwrap()
            );
            let subject = &binding.subjects.unwrap()[0];
            assert_eq!(
                (
                    subject.kind.as_str(),
                    subject.name.as_str(),
                    subject.namespace.as_deref()
                ),
                ("ServiceAccount", "oz-manager", Some("oz-ops"))
            );
        }
        // The only ClusterRole is the webhook one, and it holds only webhook configurations,
        // by name (create cannot be named).
        let cluster_roles = of_kind(&manifests, "ClusterRole");
        assert_eq!(cluster_roles.len(), 1);
        let cluster_role: ClusterRole = typed(cluster_roles[0]);
        assert_eq!(
            cluster_role.metadata.name.as_deref(),
            Some("oz-manager-webhooks")
        );
        for rule in cluster_role.rules.unwrap() {
            assert_eq!(
                rule.api_groups.as_deref(),
                Some(&["admissionregistration.k8s.io".to_string()][..])
            );
            assert!(
                rule.resource_names.is_some() || rule.verbs == ["create"],
                "{rule:?}"
            );
        }
        // The Deployment watches exactly the two namespaces; the webhooks see only them.
        let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
        let args = deployment.spec.unwrap().template.spec.unwrap().containers[0]
            .args
            .clone()
            .unwrap();
        assert!(
            args.contains(&"--watch-namespaces=a,b".to_string()),
            "{args:?}"
        );
        for validating in of_kind(&manifests, "ValidatingWebhookConfiguration") {
            let validating: ValidatingWebhookConfiguration = typed(validating);
            for webhook in validating.webhooks.unwrap() {
                assert_eq!(
                    webhook.namespace_selector,
                    Some(watched_namespaces_selector(&["a".into(), "b".into()]))
                );
            }
        }
    }

    #[test]
    fn a_cluster_wide_install_binds_one_cluster_role() {
        let manifests = install_objects(&InstallOptions::default()).unwrap();
        let names: Vec<_> = of_kind(&manifests, "ClusterRole")
            .iter()
            .map(|m| m.object.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["oz-manager", "oz-manager-webhooks"]);
        let roles = of_kind(&manifests, "Role");
        assert_eq!(roles.len(), 1, "only the operator namespace's own Role");
        assert_eq!(of_kind(&manifests, "ClusterRoleBinding").len(), 2);
        assert_eq!(of_kind(&manifests, "CustomResourceDefinition").len(), 4);
        assert!(
            of_kind(
                &install_objects(&InstallOptions::committed()).unwrap(),
                "CustomResourceDefinition"
            )
            .is_empty()
        );
    }

    #[test]
    fn no_rule_escalates_binds_impersonates_or_uses_wildcards() {
        for options in [
            InstallOptions::default(),
            scoped(),
            InstallOptions {
                controllers: vec![Controller::Exec],
                ..scoped()
            },
        ] {
            let manifests = install_objects(&options).unwrap();
            let rules = all_rules(&manifests);
            assert!(!rules.is_empty());
            for rule in rules {
                for verb in &rule.verbs {
                    assert!(
                        !["escalate", "bind", "impersonate", "*"].contains(&verb.as_str()),
                        "{rule:?}"
                    );
                }
                let fields = [
                    rule.api_groups.clone().unwrap_or_default(),
                    rule.resources.clone().unwrap_or_default(),
                    rule.resource_names.clone().unwrap_or_default(),
                ];
                assert!(
                    fields.iter().flatten().all(|f| !f.contains('*')),
                    "{rule:?}"
                );
                assert!(rule.non_resource_urls.is_none(), "{rule:?}");
                assert!(
                    !rule.resources.iter().flatten().any(|r| r == "secrets")
                        || rule.resource_names.is_some()
                        || rule.verbs == ["create"],
                    "secrets are readable only by name: {rule:?}"
                );
            }
        }
    }

    #[test]
    fn oz_holds_exactly_what_its_roles_grant_so_creating_them_needs_no_escalate() {
        let options = InstallOptions::default();
        let rules: Vec<PolicyRule> = watched_namespace_rules(&options)
            .into_iter()
            .map(|r| r.rule)
            .collect();
        for permission in EXEC_PERMISSIONS.iter().chain(POD_PERMISSIONS) {
            for verb in permission.verbs {
                assert!(
                    covers(&rules, "", permission.resource, verb),
                    "oz must hold {verb} {} to grant it",
                    permission.resource
                );
            }
        }
        // And nothing on pod subresources beyond that.
        for rule in &rules {
            for resource in rule.resources.iter().flatten() {
                if let Some(sub) = resource.strip_prefix("pods/") {
                    assert!(
                        ["exec", "attach"].contains(&sub),
                        "unexpected pod subresource {resource}"
                    );
                    assert_eq!(rule.verbs, ["get", "create"]);
                }
            }
        }
        // Exec alone never grants attach.
        let exec_only = watched_namespace_rules(&InstallOptions {
            controllers: vec![Controller::Exec],
            ..options
        });
        let exec_only: Vec<PolicyRule> = exec_only.into_iter().map(|r| r.rule).collect();
        assert!(covers(&exec_only, "", "pods/exec", "create"));
        assert!(!covers(&exec_only, "", "pods/attach", "create"));
        assert!(!covers(&exec_only, "", "pods", "create"));
    }

    #[test]
    fn events_are_granted_in_the_events_k8s_io_group_not_core() {
        let rules: Vec<PolicyRule> = watched_namespace_rules(&InstallOptions::default())
            .into_iter()
            .map(|r| r.rule)
            .collect();
        assert!(covers(&rules, "events.k8s.io", "events", "create"));
        assert!(covers(&rules, "events.k8s.io", "events", "patch"));
        assert!(!covers(&rules, "", "events", "create"));
    }

    #[test]
    fn every_rule_has_a_reason_in_the_yaml() {
        let yaml = install_yaml(&InstallOptions::default()).unwrap();
        // The comments, unwrapped.
        let comments = yaml
            .lines()
            .filter_map(|l| l.strip_prefix('#'))
            .flat_map(str::split_whitespace)
            .collect::<Vec<_>>()
            .join(" ");
        for line in yaml.lines() {
            assert!(line.len() <= 100 || !line.starts_with('#'), "{line}");
        }
        for rule in watched_namespace_rules(&InstallOptions::default())
            .iter()
            .chain(&operator_namespace_rules(&InstallOptions::default()))
            .chain(&cluster_rules(&InstallOptions::default()))
        {
            assert!(!rule.why.is_empty());
            for why in &rule.why {
                assert!(comments.contains(why.as_str()), "{why}");
            }
        }
    }

    #[test]
    fn the_deployment_runs_non_root_read_only_without_privileges() {
        let manifests = install_objects(&InstallOptions::default()).unwrap();
        let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
        let spec = deployment.spec.unwrap();
        assert_eq!(spec.replicas, Some(1));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some("oz-manager"));
        let pod_security = pod.security_context.unwrap();
        assert_eq!(pod_security.run_as_non_root, Some(true));
        assert_eq!(pod_security.run_as_user, Some(65532));
        assert_eq!(
            pod_security.seccomp_profile.unwrap().type_,
            "RuntimeDefault"
        );
        let container = &pod.containers[0];
        let security = container.security_context.clone().unwrap();
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(security.run_as_user, Some(65532));
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.privileged, Some(false));
        assert_eq!(
            security.capabilities.unwrap().drop,
            Some(vec!["ALL".to_string()])
        );
        assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
        assert_eq!(container.image.as_deref(), Some(DEFAULT_IMAGE));

        let args = container.args.clone().unwrap();
        assert_eq!(
            args,
            [
                "--namespace=oz-system",
                "--controllers=exec,pod,webhooks",
                "--leader-elect",
                "--metrics-bind-address=:8080",
                "--health-probe-bind-address=:8081",
                "--webhook-port=9443",
                "--webhook-service=oz-system/oz-webhook",
                "--log-format=json",
            ]
        );
        let env: Vec<_> = container
            .env
            .iter()
            .flatten()
            .map(|e| {
                (
                    e.name.as_str(),
                    e.value_from
                        .as_ref()
                        .unwrap()
                        .field_ref
                        .as_ref()
                        .unwrap()
                        .field_path
                        .as_str(),
                )
            })
            .collect();
        assert_eq!(
            env,
            [
                ("POD_NAME", "metadata.name"),
                ("POD_NAMESPACE", "metadata.namespace")
            ]
        );
        for (probe, path) in [
            (container.liveness_probe.clone(), "/healthz"),
            (container.readiness_probe.clone(), "/readyz"),
        ] {
            let get = probe.unwrap().http_get.unwrap();
            assert_eq!(
                (get.path.as_deref(), get.port),
                (Some(path), IntOrString::Int(8081))
            );
        }
        let resources = container.resources.clone().unwrap();
        assert!(resources.requests.is_some() && resources.limits.is_some());
    }

    #[test]
    fn every_object_is_in_the_right_namespace() {
        let options = scoped();
        let cluster_scoped = [
            "Namespace",
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ];
        for manifest in install_objects(&options).unwrap() {
            let namespace = manifest.object.metadata.namespace.as_deref();
            let name = manifest.object.metadata.name.clone().unwrap();
            match kind(&manifest) {
                k if cluster_scoped.contains(&k) => assert_eq!(namespace, None, "{k} {name}"),
                "Role" | "RoleBinding" if name == "oz-manager" => {
                    assert!(matches!(namespace, Some("a" | "b")), "{name}")
                }
                k => assert_eq!(namespace, Some("oz-ops"), "{k} {name}"),
            }
        }
    }

    #[test]
    fn webhook_configurations_come_only_with_the_webhooks_and_carry_no_ca_bundle() {
        let without = install_objects(&InstallOptions {
            controllers: vec![Controller::Exec, Controller::Pod],
            ..scoped()
        })
        .unwrap();
        for gone in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
            "ClusterRole",
            "ClusterRoleBinding",
        ] {
            assert!(of_kind(&without, gone).is_empty(), "{gone}");
        }
        let services: Vec<_> = of_kind(&without, "Service")
            .iter()
            .map(|m| m.object.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(services, ["oz-metrics"]);
        let state = operator_namespace_rules(&InstallOptions {
            controllers: vec![Controller::Exec],
            ..scoped()
        });
        assert!(
            state
                .iter()
                .all(|r| r.rule.resources.as_deref() == Some(&["leases".to_string()][..])),
            "no Secrets without the webhooks"
        );

        let with = install_objects(&InstallOptions::default()).unwrap();
        let mutating: MutatingWebhookConfiguration =
            typed(of_kind(&with, "MutatingWebhookConfiguration")[0]);
        assert_eq!(mutating.metadata.name.as_deref(), Some("oz-requests"));
        let validating: Vec<ValidatingWebhookConfiguration> =
            of_kind(&with, "ValidatingWebhookConfiguration")
                .into_iter()
                .map(typed)
                .collect();
        let names: Vec<_> = validating
            .iter()
            .map(|v| v.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["oz-requests", "oz-audit"]);
        let registration = InstallOptions::default().webhook_registration();
        let mut expected = registration.mutating_configuration("");
        let webhook = &mutating.webhooks.unwrap()[0];
        assert_eq!(webhook.client_config.ca_bundle, None);
        let service = webhook.client_config.service.clone().unwrap();
        assert_eq!(
            (
                service.namespace.as_str(),
                service.name.as_str(),
                service.port
            ),
            ("oz-system", "oz-webhook", Some(443))
        );
        let expected = &mut expected.webhooks.as_mut().unwrap()[0];
        expected.client_config.ca_bundle = None;
        assert_eq!(webhook, expected);
        for v in &validating {
            for webhook in v.webhooks.iter().flatten() {
                assert_eq!(webhook.client_config.ca_bundle, None);
            }
        }
        let service: Service = typed(
            of_kind(&with, "Service")
                .into_iter()
                .find(|m| m.object.metadata.name.as_deref() == Some("oz-webhook"))
                .unwrap(),
        );
        let port = &service.spec.unwrap().ports.unwrap()[0];
        assert_eq!(
            (port.port, port.target_port.clone()),
            (443, Some(IntOrString::String("webhook".into())))
        );
    }

    #[test]
    fn another_name_renames_every_shared_object_and_tells_oz_manager() {
        let options = InstallOptions {
            name: "team-a".into(),
            ..scoped()
        };
        for manifest in install_objects(&options).unwrap() {
            let name = manifest.object.metadata.name.clone().unwrap();
            if !["Namespace", "CustomResourceDefinition"].contains(&kind(&manifest)) {
                assert!(name.starts_with("team-a-"), "{} {name}", kind(&manifest));
            }
        }
        let args = manager_args(&options);
        for flag in [
            "--leader-elect-lease-name=team-a-manager",
            "--webhook-service=oz-ops/team-a-webhook",
            "--webhook-ca-secret=team-a-webhook-ca",
            "--webhook-cert-secret=team-a-webhook-tls",
            "--webhook-configuration-name=team-a",
        ] {
            assert!(args.contains(&flag.to_string()), "{flag} in {args:?}");
        }
        assert_eq!(
            options.command_line(),
            "oz-manager manifests --namespace oz-ops --watch-namespaces a,b --name team-a"
        );
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            InstallOptions {
                namespace: "".into(),
                ..Default::default()
            },
            InstallOptions {
                watch_namespaces: vec!["Not_A_Namespace".into()],
                ..Default::default()
            },
            InstallOptions {
                controllers: vec![],
                ..Default::default()
            },
            InstallOptions {
                image: "".into(),
                ..Default::default()
            },
            InstallOptions {
                replicas: 0,
                ..Default::default()
            },
            InstallOptions {
                name: "x".repeat(60),
                ..Default::default()
            },
        ] {
            assert!(
                matches!(install_objects(&bad), Err(ManifestError::Invalid(_))),
                "{bad:?}"
            );
        }
        assert_eq!("pod".parse::<Controller>().unwrap(), Controller::Pod);
        assert!("pods".parse::<Controller>().is_err());
    }

    #[test]
    fn controllers_parse_as_a_comma_separated_flag() {
        let command = clap::Command::new("oz-manager").arg(
            clap::Arg::new("controllers")
                .long("controllers")
                .value_delimiter(',')
                .value_parser(clap::value_parser!(Controller)),
        );
        let matches = command
            .clone()
            .try_get_matches_from(["oz-manager", "--controllers", "exec,webhooks"])
            .unwrap();
        let parsed: Vec<Controller> = matches
            .get_many::<Controller>("controllers")
            .unwrap()
            .copied()
            .collect();
        assert_eq!(parsed, [Controller::Exec, Controller::Webhooks]);
        assert!(
            command
                .try_get_matches_from(["oz-manager", "--controllers", "exec,nope"])
                .is_err()
        );
        assert_eq!(
            InstallOptions::default().command_line(),
            "oz-manager manifests"
        );
    }

    #[test]
    fn the_yaml_is_one_document_per_object_and_reads_back() {
        let options = scoped();
        let yaml = install_yaml(&options).unwrap();
        assert!(yaml.starts_with("# oz: "));
        let documents: Vec<&str> = yaml.split("\n---\n").skip(1).collect();
        let objects = install_objects(&options).unwrap();
        assert_eq!(documents.len(), objects.len());
        for (document, manifest) in documents.iter().zip(&objects) {
            let value: serde_json::Value = serde_saphyr::from_str(document).unwrap();
            assert_eq!(value, serde_json::to_value(&manifest.object).unwrap());
        }
    }
}
