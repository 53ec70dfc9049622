//! What to install ([`InstallOptions`]), the parts of oz-manager ([`Component`], named by
//! `--controllers` both when installing and when running), and the names derived from them.

use std::{fmt, str::FromStr};

use oz_api::{AccessKind, FleetNames};
use oz_platform::{Registration, WebhookEndpoint};

use super::{ManifestError, registration::webhook_registration};

/// The image of the default install: `oz`, tagged with this version, as `make image` builds
/// it. No registry publishes it: load the image into the cluster's nodes, or push it to a
/// registry of your own and pass `--image` (`docs/install.md`).
pub const DEFAULT_IMAGE: &str = concat!("oz:", env!("CARGO_PKG_VERSION"));
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
/// The sessions API's container port (`--sessions-port`), and the webhook Service's port
/// `sessions` the APIService names: the same number, so that an `ExternalName` Service
/// (`make run`) reaches oz on it too.
pub const SESSIONS_PORT: u16 = 9444;
/// Where the sessions API stores recordings unless `--session-recordings` says otherwise: a
/// directory (in the Deployment, a volume of its own).
pub const DEFAULT_SESSION_RECORDINGS: &str = "/var/lib/oz/recordings";
/// The Secret holding the audit file's checkpoint signing key, in the operator's namespace.
pub const AUDIT_SIGNING_KEY_SECRET: &str = oz_platform::audit_key::SIGNING_KEY_SECRET;
/// The ConfigMap publishing the audit signing keys' public halves, in the operator's namespace.
pub const AUDIT_PUBLIC_KEYS_CONFIGMAP: &str = oz_platform::audit_key::PUBLIC_KEYS_CONFIGMAP;
/// The non-root user and group the container runs as (distroless `nonroot`).
pub const RUN_AS: i64 = 65532;
/// A fleet hub's name unless `--fleet-name` says otherwise: oz-manager's own default.
pub const DEFAULT_FLEET_NAME: &str = "hub";
/// Where an install's fleet hub reads ClusterProfiles and their token Secrets unless told
/// otherwise: a namespace of its own, so that reading the tokens reads no other Secret.
pub const DEFAULT_FLEET_NAMESPACE: &str = "oz-fleet";

/// A fleet hub (`docs/fleet.md`): oz-manager runs with `--fleet-hub`, reads the ClusterProfiles
/// and the spokes' token Secrets in [`Self::namespace`], and reaches the spokes through the
/// secretreader plugin the image carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetHubOptions {
    /// The hub's name (`--fleet-name`), a label value on everything it keeps on spokes.
    pub name: String,
    /// The fleet namespace (`--fleet-namespace`): the ClusterProfiles, and a Secret per spoke
    /// holding the hub's token there. It must already exist, as watched namespaces must.
    pub namespace: String,
}

impl Default for FleetHubOptions {
    fn default() -> Self {
        Self {
            name: DEFAULT_FLEET_NAME.into(),
            namespace: DEFAULT_FLEET_NAMESPACE.into(),
        }
    }
}

/// One part of oz-manager, as named by `--controllers`: of `oz-manager` (what to run) and of
/// `oz-manager manifests` (what to install and grant permissions for).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// ExecAccessTemplate and ExecAccessRequest.
    Exec,
    /// PodAccessTemplate and PodAccessRequest.
    Pod,
    /// The admission webhooks (requester stamping, request validation, exec/attach audit).
    Webhooks,
    /// Brokered sessions: the aggregated API `sessions.wizardofoz.co` (needs the webhooks,
    /// whose certificate it serves). Opt-in: while its APIService is unavailable, discovery
    /// is degraded for every kubectl user.
    Sessions,
}

impl Component {
    /// Every part, in flag order.
    pub const ALL: [Component; 4] = [
        Component::Exec,
        Component::Pod,
        Component::Webhooks,
        Component::Sessions,
    ];

    /// The parts run and installed unless `--controllers` says otherwise: all but sessions.
    pub const DEFAULT: [Component; 3] = [Component::Exec, Component::Pod, Component::Webhooks];

    /// The name `--controllers` uses: an access kind's own word, `webhooks` or `sessions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Webhooks => "webhooks",
            Component::Sessions => "sessions",
            Component::Exec | Component::Pod => self
                .access_kind()
                .expect("exec and pod are access kinds")
                .word(),
        }
    }

    /// The access kind whose controllers this part is, if it is one (not the webhooks).
    pub fn access_kind(self) -> Option<AccessKind> {
        match self {
            Component::Exec => Some(AccessKind::Exec),
            Component::Pod => Some(AccessKind::Pod),
            Component::Webhooks | Component::Sessions => None,
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `oz-manager --controllers` parses with: clap lists the possible values in its help and
/// errors. Written by hand rather than derived, so the variants' doc comments stay out of
/// `--help`.
impl clap::ValueEnum for Component {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

/// What `oz-manager manifests --controllers` parses with (its error names the choices itself).
impl FromStr for Component {
    type Err = ManifestError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Component::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .ok_or_else(|| {
                ManifestError::Invalid(format!(
                    "unknown controller {text:?}: want exec, pod, webhooks or sessions"
                ))
            })
    }
}

/// What to install. [`InstallOptions::default`] is the default install: namespace `oz-system`,
/// every namespace watched, every controller, the image `make image` builds ([`DEFAULT_IMAGE`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallOptions {
    /// The operator's namespace: its Deployment, Services, Lease and certificate Secrets.
    pub namespace: String,
    /// The namespaces oz works in, each getting a Role; empty means all, with a ClusterRole.
    /// Watched namespaces must already exist.
    pub watch_namespaces: Vec<String>,
    /// The parts of oz-manager to run (and to grant permissions for).
    pub controllers: Vec<Component>,
    /// The oz-manager image.
    pub image: String,
    /// Base name of everything oz installs: `<name>-manager` (ServiceAccount, Deployment,
    /// Roles and ClusterRoles), `<name>-webhook` (Service), `<name>-requests` and
    /// `<name>-audit` (webhook configurations). Installs with different names can share a
    /// cluster. Default `oz`.
    pub name: String,
    /// Replicas of the Deployment; more than one run as leader and hot standbys.
    pub replicas: i32,
    /// Whether the five CRDs are included. `config/default` leaves them out, because it
    /// includes `config/crd`.
    pub crds: bool,
    /// A Secret in the operator's namespace whose `ca.crt` is the CA that signs the client
    /// certificate the kube-apiserver presents to webhooks. When set, the Deployment mounts it
    /// and runs oz-manager with `--webhook-client-ca-file`, so only the apiserver may call the
    /// webhooks (docs/audit.md, "Caller verification"). Needs the webhooks.
    pub webhook_client_ca_secret: Option<String>,
    /// The address ranges (CIDRs) the control plane calls webhooks from. When set, a
    /// NetworkPolicy admits traffic to the webhook port from these only; metrics and health
    /// probes stay reachable. Empty: no NetworkPolicy. Needs the webhooks.
    pub webhook_ingress_cidrs: Vec<String>,
    /// Serve webhook callers that present no client certificate: chosen for clusters whose
    /// apiserver cannot present one (EKS, GKE, AKS). `oz-manager manifests` and the chart make
    /// an install with webhooks choose this or [`Self::webhook_client_ca_secret`]
    /// ([`Self::caller_choice`]). Needs the webhooks.
    pub unverified_webhook_callers: bool,
    /// The address ranges (CIDRs) oz-manager may connect to: the apiserver's and every
    /// notification sink's. When set, a NetworkPolicy allows egress to these and to name
    /// servers only ([`super::network_policies`]). Empty: no egress policy.
    pub egress_cidrs: Vec<String>,
    /// Where session recordings go (`--session-recordings`), e.g. `s3://BUCKET/PREFIX`;
    /// `None`: the pod's `emptyDir`, capped below its size limit. Never with credentials in
    /// it: those come from [`Self::session_recordings_secret`]. Needs sessions.
    pub session_recordings: Option<String>,
    /// A Secret in the operator's namespace whose keys become oz-manager's environment
    /// (`envFrom`): `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, ... for the
    /// recordings store. Needs sessions.
    pub session_recordings_secret: Option<String>,
    /// Run as a fleet hub: the provider file in a ConfigMap, mounted, and the hub's RBAC in
    /// the fleet namespace ([`super::fleet_hub`]).
    pub fleet_hub: Option<FleetHubOptions>,
    /// Run as a fleet spoke: the hub's credential ([`super::fleet`]) and oz-manager's
    /// `--fleet-hub-user` naming it. Needs the webhooks, which check the hub's writes.
    pub fleet_spoke: bool,
    /// A fleet spoke's names for its hub's users and groups (oz-manager's
    /// `--fleet-user-prefix`, `--fleet-group-prefix`); the default maps nothing. Needs
    /// [`Self::fleet_spoke`].
    pub fleet_names: FleetNames,
}

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            namespace: DEFAULT_NAMESPACE.into(),
            watch_namespaces: Vec::new(),
            controllers: Component::DEFAULT.to_vec(),
            image: DEFAULT_IMAGE.into(),
            name: DEFAULT_NAME.into(),
            replicas: 1,
            crds: true,
            webhook_client_ca_secret: None,
            webhook_ingress_cidrs: Vec::new(),
            unverified_webhook_callers: false,
            egress_cidrs: Vec::new(),
            session_recordings: None,
            session_recordings_secret: None,
            fleet_hub: None,
            fleet_spoke: false,
            fleet_names: FleetNames::default(),
        }
    }
}

impl InstallOptions {
    /// The options `config/default/install.yaml` is generated with: the defaults, without the
    /// CRDs (the kustomization takes those from `config/crd`).
    pub fn committed() -> Self {
        Self {
            crds: false,
            // The one choice that works on every cluster; docs/security.md says how to verify
            // the apiserver instead where the cluster allows it.
            unverified_webhook_callers: true,
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
        if let Some(secret) = &self.webhook_client_ca_secret {
            line.push_str(&format!(" --webhook-client-ca-secret {secret}"));
        }
        if !self.webhook_ingress_cidrs.is_empty() {
            line.push_str(&format!(
                " --webhook-ingress-cidrs {}",
                self.webhook_ingress_cidrs.join(",")
            ));
        }
        if self.unverified_webhook_callers {
            line.push_str(" --unverified-webhook-callers");
        }
        if !self.egress_cidrs.is_empty() {
            line.push_str(&format!(" --egress-cidrs {}", self.egress_cidrs.join(",")));
        }
        if let Some(url) = &self.session_recordings {
            line.push_str(&format!(" --session-recordings {url}"));
        }
        if let Some(secret) = &self.session_recordings_secret {
            line.push_str(&format!(" --session-recordings-secret {secret}"));
        }
        if self.fleet_spoke {
            line.push_str(" --fleet-spoke-install");
        }
        for (flag, value) in super::fleet_names::name_flags(&self.fleet_names) {
            line.push_str(&format!(" {flag} {value}"));
        }
        if let Some(hub) = &self.fleet_hub {
            line.push_str(" --fleet-hub");
            if hub.name != DEFAULT_FLEET_NAME {
                line.push_str(&format!(" --fleet-name {}", hub.name));
            }
            if hub.namespace != DEFAULT_FLEET_NAMESPACE {
                line.push_str(&format!(" --fleet-namespace {}", hub.namespace));
            }
        }
        line
    }

    /// Refuses an install with webhooks that has not said how their callers are checked: by
    /// the apiserver's client certificate ([`Self::webhook_client_ca_secret`]) or not at all
    /// ([`Self::unverified_webhook_callers`]). Neither is a safe default for every cluster, so
    /// the installer says which (`oz-manager manifests` and the chart both ask).
    pub fn caller_choice(&self) -> Result<(), ManifestError> {
        let chosen = self.webhook_client_ca_secret.is_some() || self.unverified_webhook_callers;
        if self.runs(Component::Webhooks) && !chosen {
            return Err(ManifestError::Invalid(
                "choose how the webhooks' callers are checked: --webhook-client-ca-secret SECRET \
                 (only the apiserver may call them; for clusters whose apiserver presents a \
                 client certificate) or --unverified-webhook-callers (managed clusters such as \
                 EKS, GKE and AKS: callers are not verified, so keep the webhook port closed \
                 with --webhook-ingress-cidrs); see docs/security.md"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The Service the sessions APIService names: the webhook Service's `sessions` port.
    pub fn sessions_service(&self) -> oz_platform::registration::SessionsService {
        oz_platform::registration::SessionsService {
            namespace: self.namespace.clone(),
            name: self.webhook_service_name(),
            port: SESSIONS_PORT,
        }
    }

    /// What oz registers with the apiserver when the webhooks run in this install: the
    /// configurations named after [`InstallOptions::name`], reached through the webhook
    /// Service, and (when scoped) limited to the watched namespaces. oz-manager, run with the
    /// Deployment's flags, registers exactly this (both derive it with [`webhook_registration`]).
    pub fn webhook_registration(&self) -> Registration {
        let mut registration = webhook_registration(
            WebhookEndpoint::Service {
                namespace: self.namespace.clone(),
                name: self.webhook_service_name(),
                port: WEBHOOK_SERVICE_PORT,
            },
            &self.name,
            &self.watched(),
        );
        registration.sessions = self
            .runs(Component::Sessions)
            .then(|| self.sessions_service());
        registration
    }

    /// The watched namespaces without blanks and repeats, in the order given.
    pub(crate) fn watched(&self) -> Vec<String> {
        let mut watched: Vec<String> = Vec::new();
        for namespace in &self.watch_namespaces {
            if !namespace.is_empty() && !watched.contains(namespace) {
                watched.push(namespace.clone());
            }
        }
        watched
    }

    /// The selected parts without repeats, in flag order.
    pub(super) fn parts(&self) -> Vec<Component> {
        Component::ALL
            .into_iter()
            .filter(|c| self.controllers.contains(c))
            .collect()
    }

    /// Whether `component` is one of the selected parts.
    pub(crate) fn runs(&self, component: Component) -> bool {
        self.controllers.contains(&component)
    }

    /// The access kinds whose controllers run, in flag order.
    pub(crate) fn access_kinds(&self) -> Vec<AccessKind> {
        self.parts()
            .into_iter()
            .filter_map(Component::access_kind)
            .collect()
    }

    pub(super) fn manager_name(&self) -> String {
        format!("{}-manager", self.name)
    }

    pub(super) fn webhook_service_name(&self) -> String {
        format!("{}-webhook", self.name)
    }

    pub(crate) fn lease_name(&self) -> String {
        self.manager_name()
    }

    pub(crate) fn secret_names(&self) -> [String; 2] {
        [
            format!("{}-webhook-ca", self.name),
            format!("{}-webhook-tls", self.name),
        ]
    }

    pub(super) fn validate(&self) -> Result<(), ManifestError> {
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
        if let Some(secret) = &self.webhook_client_ca_secret {
            check_dns_subdomain("webhook client CA Secret", secret)?;
        }
        for cidr in self.webhook_ingress_cidrs.iter().chain(&self.egress_cidrs) {
            check_cidr(cidr)?;
        }
        if let Some(secret) = &self.session_recordings_secret {
            check_dns_subdomain("session recordings Secret", secret)?;
        }
        if let Some(url) = &self.session_recordings {
            let credentials = oz_sessions::recording::credentials_in_url(url);
            if url.trim().is_empty() || !credentials.is_empty() {
                return Err(ManifestError::Invalid(format!(
                    "--session-recordings {:?}: name a directory or s3://BUCKET/PREFIX without \
                     credentials ({}); put them in a Secret and pass \
                     --session-recordings-secret NAME",
                    oz_sessions::recording::redact(url),
                    credentials.join(", ")
                )));
            }
        }
        let recordings_options =
            self.session_recordings.is_some() || self.session_recordings_secret.is_some();
        if recordings_options && !self.runs(Component::Sessions) {
            return Err(ManifestError::Invalid(
                "--session-recordings and --session-recordings-secret are about brokered \
                 sessions: add sessions to --controllers, or leave them out"
                    .into(),
            ));
        }
        if self.runs(Component::Sessions) && !self.runs(Component::Webhooks) {
            return Err(ManifestError::Invalid(
                "sessions serve the webhooks' certificate: add webhooks to --controllers".into(),
            ));
        }
        if self.webhook_client_ca_secret.is_some() && self.unverified_webhook_callers {
            return Err(ManifestError::Invalid(
                "--webhook-client-ca-secret verifies the webhooks' callers and \
                 --unverified-webhook-callers does not: choose one"
                    .into(),
            ));
        }
        if let Some(hub) = &self.fleet_hub {
            // The hub watches fleet templates in every namespace (`crate::fleet`).
            if !self.watched().is_empty() {
                return Err(ManifestError::Invalid(
                    "a fleet hub reads fleet templates in every namespace: leave out \
                     --watch-namespaces"
                        .into(),
                ));
            }
            check_dns_label("fleet namespace", &hub.namespace)?;
            let name = hub.name.trim();
            if name.is_empty() || name.len() > 63 || name != hub.name {
                return Err(ManifestError::Invalid(format!(
                    "fleet name {:?}: 1 to 63 characters, no spaces around: it is a label value on spokes",
                    hub.name
                )));
            }
        }
        if self.fleet_spoke && !self.runs(Component::Webhooks) {
            return Err(ManifestError::Invalid(
                "a fleet spoke's webhooks are what limit the hub's credential there: add webhooks \
                 to --controllers"
                    .into(),
            ));
        }
        super::fleet_names::check_names(self.fleet_spoke, &self.fleet_names)?;
        let caller_options = self.webhook_client_ca_secret.is_some()
            || !self.webhook_ingress_cidrs.is_empty()
            || self.unverified_webhook_callers;
        if caller_options && !self.runs(Component::Webhooks) {
            return Err(ManifestError::Invalid(
                "--webhook-client-ca-secret, --unverified-webhook-callers and \
                 --webhook-ingress-cidrs are about the webhooks: add webhooks to --controllers, \
                 or leave them out"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The parts as `--controllers` writes them.
pub(super) fn join(parts: &[Component]) -> String {
    parts
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Refuses `value` unless it is a DNS subdomain (RFC 1123), as Secret names must be.
fn check_dns_subdomain(what: &str, value: &str) -> Result<(), ManifestError> {
    let valid = !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if valid {
        Ok(())
    } else {
        Err(ManifestError::Invalid(format!(
            "{what} {value:?} is not a valid name: lowercase letters, digits, '-' and '.', at most 253"
        )))
    }
}

/// Refuses `value` unless it is a CIDR as a NetworkPolicy's `ipBlock.cidr` takes it: an IPv4 or
/// IPv6 address, `/`, and a prefix length that fits it (`10.0.0.0/16`, `fd00::/64`).
pub(crate) fn check_cidr(value: &str) -> Result<(), ManifestError> {
    let invalid = || {
        ManifestError::Invalid(format!(
            "webhook ingress CIDR {value:?} is not a CIDR such as 10.0.0.0/16 or fd00::/64"
        ))
    };
    let (address, prefix) = value.split_once('/').ok_or_else(invalid)?;
    let address: std::net::IpAddr = address.parse().map_err(|_| invalid())?;
    let bits = if address.is_ipv4() { 32 } else { 128 };
    // Digits only: `u8::from_str` would also take "+8".
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    match prefix.parse::<u32>() {
        Ok(length) if length <= bits => Ok(()),
        _ => Err(invalid()),
    }
}

/// Refuses `value` unless it is a DNS label, as Namespace and object names must be.
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
