//! oz-manager's run flags ([`RunArgs`]) and what they mean ([`ManagerConfig`]). The flag struct
//! lives here rather than in the binary so that a unit test can parse the very flags the install
//! generator writes into the Deployment ([`crate::install::manager_args`]).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::ValueEnum;
use oz_api::AccessKind;
use oz_platform::{
    FailurePolicy, Registration, WebhookEndpoint, callers::ClientCa, registration::SessionsService,
};
use oz_sessions::recording::limits::RecordingLimits;
use oz_webhooks::WebhookConfig;

use super::{leader::LeaderElection, sessions::SessionsSettings};
use crate::{
    Settings,
    install::{self, Component},
    notify::{NotifierConfig, SinkNetworks},
    scope::Scope,
};
use flag_values::{
    parse_bind, parse_checkpoint_interval, parse_max_age, parse_positive, parse_retention,
    parse_session_recording_size, parse_sink_network, parse_size,
};

/// Everything oz-manager was asked to run.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// The operator's own namespace (its Lease and certificate Secrets).
    pub namespace: String,
    /// Where the controllers look.
    pub scopes: Vec<Scope>,
    /// Which access kinds get controllers (empty: no controllers, e.g. webhooks only).
    pub kinds: Vec<AccessKind>,
    /// Leader election, if enabled.
    pub leader_election: Option<LeaderElection>,
    /// Where to serve Prometheus metrics, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Where to serve /healthz and /readyz, if anywhere.
    pub health_addr: Option<SocketAddr>,
    /// Settings the reconcilers follow.
    pub settings: Settings,
    /// The webhook server, if it runs (its `leader` is filled in here).
    pub webhooks: Option<oz_webhooks::WebhookConfig>,
    /// Whether serving unverified webhook callers was chosen (`--unverified-webhook-callers`)
    /// rather than left as the default.
    pub unverified_webhook_callers: bool,
    /// How news of requests is sent to sinks; None with `--notifications=false`.
    pub notifications: Option<NotifierConfig>,
    /// The sessions API, if it runs (`--controllers` with `sessions`; its APIService is in
    /// `webhooks.registration.sessions`).
    pub sessions: Option<SessionsSettings>,
    /// The fleet hub, if this oz is one (`--fleet-hub`).
    pub fleet_hub: Option<crate::fleet::HubSettings>,
}

/// oz-manager's run flags. Every flag also reads an environment variable (shown in --help).
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// The operator's own namespace: its Lease and certificate Secrets live there.
    #[arg(long, env = "OZ_NAMESPACE", default_value = install::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Namespaces to watch, comma-separated; empty means every namespace.
    #[arg(long, env = "OZ_WATCH_NAMESPACES", value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,

    /// What to run: exec and pod controllers, and the admission webhooks.
    #[arg(long, env = "OZ_CONTROLLERS", value_delimiter = ',', default_values = ["exec", "pod", "webhooks"])]
    pub controllers: Vec<Component>,

    /// Elect a leader through a Lease: only the leader reconciles and writes certificates;
    /// followers serve webhooks.
    #[arg(long, env = "OZ_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Seconds a leader's Lease lasts without renewal; a follower takes over after that.
    #[arg(long, env = "OZ_LEADER_ELECT_LEASE_DURATION", default_value_t = 15)]
    pub leader_elect_lease_duration: u64,

    /// The Lease's name.
    #[arg(long, env = "OZ_LEADER_ELECT_LEASE_NAME", default_value = "oz-manager")]
    pub leader_elect_lease_name: String,

    /// Where to serve Prometheus metrics (`/metrics`), e.g. `:8080`; `0` turns it off.
    #[arg(long, env = "OZ_METRICS_BIND_ADDRESS", default_value = "0")]
    pub metrics_bind_address: String,

    /// Where to serve `/healthz` and `/readyz`, e.g. `:8081`; `0` turns it off.
    #[arg(long, env = "OZ_HEALTH_PROBE_BIND_ADDRESS", default_value = "0")]
    pub health_probe_bind_address: String,

    /// The sessions API's port (with `sessions` in --controllers); the APIService names the
    /// same port on --sessions-service.
    #[arg(long, env = "OZ_SESSIONS_PORT", default_value_t = install::SESSIONS_PORT)]
    pub sessions_port: u16,

    /// The Service the sessions APIService points at, as NAMESPACE/NAME or NAMESPACE/NAME:PORT
    /// (PORT defaults to --sessions-port); default --webhook-service. Locally, an ExternalName
    /// Service whose externalName is localhost.
    #[arg(long, env = "OZ_SESSIONS_SERVICE")]
    pub sessions_service: Option<String>,

    /// Where session recordings are stored: a directory (a path or file:///DIR), or
    /// s3://BUCKET/PREFIX[?endpoint=...&region=...]. Credentials come from the AWS_*
    /// environment (a Secret) or the pod's role, never the URL: a URL that carries them is
    /// refused, since the Pod's arguments show it.
    #[arg(long, env = "OZ_SESSION_RECORDINGS", default_value = install::DEFAULT_SESSION_RECORDINGS)]
    pub session_recordings: String,

    /// The largest a session's recording may grow (a number of bytes, or with a Ki, Mi or Gi
    /// suffix; at least 64Ki). Past it the recording gets a "capped" marker and ends with the
    /// byte count and SHA-256 of what the session did after; the session itself goes on.
    #[arg(long, env = "OZ_SESSION_RECORDING_MAX_SIZE", default_value = "64Mi", value_parser = parse_session_recording_size)]
    pub session_recording_max_size: u64,

    /// The most all recordings in the store may hold together (bytes, or with a Ki, Mi or Gi
    /// suffix): for a directory, what is in it when oz-manager starts plus what it records
    /// since; for S3, what this replica recorded since it started. Once reached, recordings are
    /// capped as by --session-recording-max-size. 0: no limit. Keep it below a volume's size
    /// limit by at least one --session-recording-max-size (a finished recording is assembled
    /// next to its parts).
    #[arg(long, env = "OZ_SESSION_RECORDINGS_MAX_TOTAL_SIZE", default_value = "0", value_parser = parse_size)]
    pub session_recordings_max_total_size: u64,

    #[command(flatten)]
    pub fleet: FleetHubArgs,

    /// Log format.
    #[arg(long, env = "OZ_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,

    /// Log filter, in tracing's EnvFilter syntax (e.g. `info`, `oz=debug`).
    #[arg(long, env = "OZ_LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// The webhook server's port.
    #[arg(long, env = "OZ_WEBHOOK_PORT", default_value_t = 9443)]
    pub webhook_port: u16,

    /// In a cluster: the Service in front of the webhook server, as NAMESPACE/NAME.
    #[arg(long, env = "OZ_WEBHOOK_SERVICE", conflicts_with = "webhook_url_base")]
    pub webhook_service: Option<String>,

    /// Locally: the URL the apiserver calls, e.g. `https://127.0.0.1:9443`.
    #[arg(long, env = "OZ_WEBHOOK_URL_BASE")]
    pub webhook_url_base: Option<String>,

    /// The Secret holding the webhook CA.
    #[arg(long, env = "OZ_WEBHOOK_CA_SECRET", default_value = "oz-webhook-ca")]
    pub webhook_ca_secret: String,

    /// The Secret holding the webhook serving certificate.
    #[arg(long, env = "OZ_WEBHOOK_CERT_SECRET", default_value = "oz-webhook-tls")]
    pub webhook_cert_secret: String,

    /// Base name of the webhook configurations oz registers (`<name>-requests`, `<name>-audit`).
    #[arg(long, env = "OZ_WEBHOOK_CONFIGURATION_NAME", default_value = install::DEFAULT_NAME)]
    pub webhook_configuration_name: String,

    /// The PEM bundle of the CA that signs the client certificate the kube-apiserver presents to
    /// webhooks (its AdmissionConfiguration's WebhookAdmissionConfiguration.kubeConfigFile). With
    /// it, every webhook call must present a certificate from this CA: others are refused,
    /// counted and never recorded. Re-read every 30 s, so a rotated Secret needs no restart.
    #[arg(long, env = "OZ_WEBHOOK_CLIENT_CA_FILE")]
    pub webhook_client_ca_file: Option<PathBuf>,

    /// With --webhook-client-ca-file: the client certificate names (subject CN or DNS SAN) that
    /// may call, comma-separated; empty allows any certificate that CA signed.
    #[arg(
        long,
        env = "OZ_WEBHOOK_CLIENT_NAMES",
        value_delimiter = ',',
        requires = "webhook_client_ca_file"
    )]
    pub webhook_client_names: Vec<String>,

    /// Serve the webhooks to callers that present no certificate from a client CA: the choice
    /// for clusters whose apiserver cannot present one (EKS, GKE, AKS), made at install so that
    /// it shows in the Pod's arguments. Unverified callers are answered with nothing a caller
    /// could learn from, and their records say `unverified` (docs/security.md). Without this
    /// flag and without --webhook-client-ca-file, oz-manager runs the same but warns louder.
    #[arg(
        long,
        env = "OZ_UNVERIFIED_WEBHOOK_CALLERS",
        conflicts_with = "webhook_client_ca_file"
    )]
    pub unverified_webhook_callers: bool,

    /// Also append exec/attach/port-forward/debug audit records to this file: JSON lines in a
    /// hash chain with signed checkpoints, which `ozctl audit verify` checks. Each replica
    /// needs a file of its own.
    #[arg(long, env = "OZ_AUDIT_LOG_PATH")]
    pub audit_log_path: Option<PathBuf>,

    /// Rotate the audit file once it has this many bytes: a number, or with a Ki, Mi or Gi
    /// suffix. 0 never rotates by size.
    #[arg(long, env = "OZ_AUDIT_LOG_MAX_SIZE", default_value = "100Mi", value_parser = parse_size)]
    pub audit_log_max_size: u64,

    /// Rotate the audit file once its first entry is this old: a Go duration such as 24h.
    /// 0 never rotates by age.
    #[arg(long, env = "OZ_AUDIT_LOG_MAX_AGE", default_value = "0", value_parser = parse_max_age)]
    pub audit_log_max_age: Duration,

    /// Keep this many rotated audit files (the path, a dot, the UTC time of the rotation),
    /// deleting older ones. 0 keeps them all.
    #[arg(long, env = "OZ_AUDIT_LOG_MAX_FILES", default_value_t = 10)]
    pub audit_log_max_files: usize,

    /// Sign what was written to the audit file since the last checkpoint this often (a Go
    /// duration); also before each rotation and at shutdown. Records after the last checkpoint
    /// are not vouched for yet.
    #[arg(long, env = "OZ_AUDIT_CHECKPOINT_INTERVAL", default_value = "30s", value_parser = parse_checkpoint_interval)]
    pub audit_checkpoint_interval: Duration,

    /// Deny exec/attach/port-forward/debug without an active grant in these namespaces (off by
    /// default: the audit webhook only records). They are registered in a webhook of their own
    /// with failurePolicy Fail: while oz is down, access there is refused.
    #[arg(long, env = "OZ_AUDIT_ENFORCE_NAMESPACES", value_delimiter = ',')]
    pub audit_enforce_namespaces: Vec<String>,

    /// Groups whose members may create, change and delete templates in the
    /// --audit-enforce-namespaces; nobody else may there (`edit` and `admin` write templates
    /// elsewhere). A template decides who is granted, so where exec needs a grant, writing one
    /// is granting access: keep this to the people who decide that.
    #[arg(long, env = "OZ_TEMPLATE_ADMIN_GROUPS", value_delimiter = ',', default_values = ["system:masters"])]
    pub template_admin_groups: Vec<String>,

    /// On a fleet spoke: the user name the fleet hub's credential authenticates as here, e.g.
    /// system:serviceaccount:oz-system:oz-fleet-hub. Only it may create, change and delete the
    /// hub's templates (labelled crds.wizardofoz.co/hub-managed) and request access through
    /// them, and it may write no other template; templates are then guarded in every watched
    /// namespace by a webhook with failurePolicy Fail.
    #[arg(long, env = "OZ_FLEET_HUB_USER")]
    pub fleet_hub_user: Option<String>,

    #[command(flatten)]
    pub fleet_names: FleetNameArgs,

    /// The audit webhook's failurePolicy: `Ignore` (an oz outage never blocks an exec, which
    /// then goes unaudited) or `Fail` (while oz is down, no exec, attach, port-forward or debug
    /// anywhere in its scope, as Oz's pod exec watcher does). Enforced namespaces always fail
    /// closed.
    #[arg(long, env = "OZ_AUDIT_FAILURE_POLICY", default_value = "Ignore")]
    pub audit_failure_policy: FailurePolicy,

    /// Groups whose members may delete anyone's requests, expired ones included; everyone else
    /// may only revoke their own active requests.
    #[arg(long, env = "OZ_REQUEST_ADMIN_GROUPS", value_delimiter = ',', default_values = ["system:masters"])]
    pub request_admin_groups: Vec<String>,

    /// How many grants one user may hold at once through every template oz serves (requests
    /// waiting for approval or their start included), checked by oz's webhook. Unset: no cap.
    #[arg(long, env = "OZ_MAX_GRANTS_PER_USER", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_grants_per_user: Option<u32>,

    /// How long an expired request is kept (access revoked) for access reviews before it is
    /// deleted: a Go duration such as 168h, or days such as 7d. 0 deletes at expiry, as Oz does.
    #[arg(long, env = "OZ_HISTORY_RETENTION", default_value = "7d", value_parser = parse_retention)]
    pub history_retention: Duration,

    /// How many requests of each kind are reconciled at once (at least 1). Revocation at expiry
    /// does not wait on this: every grant has a timer of its own.
    #[arg(long, env = "OZ_MAX_CONCURRENT_RECONCILES", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,

    /// Send news of requests (pending approval, approved, denied, ready, expiring soon,
    /// expired, break-glass) to the sinks their templates and namespaces name.
    #[arg(long, env = "OZ_NOTIFICATIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub notifications: bool,

    /// Notices waiting for delivery (at least 1); past that, new ones are dropped and counted
    /// in oz_notifications_dead_lettered_total{reason="queue_full"}.
    #[arg(long, env = "OZ_NOTIFICATIONS_QUEUE_SIZE", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub notifications_queue_size: u32,

    /// How long a notice is retried, with exponential backoff, while its sink fails (a Go
    /// duration, at least 1s); then it is dead-lettered.
    #[arg(long, env = "OZ_NOTIFICATIONS_RETRY_FOR", default_value = "10m", value_parser = parse_positive)]
    pub notifications_retry_for: Duration,

    /// The longest pause between two attempts at one notice (a Go duration); pauses start at
    /// 1s and double up to it.
    #[arg(long, env = "OZ_NOTIFICATIONS_RETRY_MAX_INTERVAL", default_value = "1m", value_parser = parse_positive)]
    pub notifications_retry_max_interval: Duration,

    /// How long one POST to a sink may take (a Go duration).
    #[arg(long, env = "OZ_NOTIFICATIONS_TIMEOUT", default_value = "10s", value_parser = parse_positive)]
    pub notifications_timeout: Duration,

    /// Networks notification sinks may be in besides public addresses: `private` (RFC 1918,
    /// 100.64.0.0/10 and IPv6 ULA: in-cluster sinks) and `loopback`. Link-local addresses
    /// (cloud metadata) never: whoever writes a sink Secret chooses where oz posts.
    #[arg(long, env = "OZ_NOTIFICATIONS_ALLOW_SINKS_IN", value_delimiter = ',', value_parser = parse_sink_network)]
    pub notifications_allow_sinks_in: Vec<String>,
}

/// How oz-manager writes its logs. (No doc comments on the variants: clap would show them in
/// `--help`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    // One JSON object a line, for a log pipeline.
    Json,
    // tracing's human-readable lines.
    Text,
}

impl RunArgs {
    /// What the flags ask to run, or why they describe no run (the message names the flag).
    pub fn manager_config(&self) -> Result<ManagerConfig, String> {
        let watched = nonblank(&self.watch_namespaces);
        let scopes = if watched.is_empty() {
            vec![Scope::Cluster]
        } else {
            watched
                .iter()
                .map(|n| Scope::Namespace(n.clone()))
                .collect()
        };
        let kinds = self
            .controllers
            .iter()
            .filter_map(|c| c.access_kind())
            .collect();
        let mut webhooks = if self.controllers.contains(&Component::Webhooks) {
            Some(self.webhook_config(&watched)?)
        } else {
            None
        };
        let sessions = if self.controllers.contains(&Component::Sessions) {
            let Some(webhooks) = webhooks.as_mut() else {
                return Err(
                    "sessions serve the webhooks' certificate: add webhooks to --controllers \
                            (or leave sessions out)"
                        .into(),
                );
            };
            let service = self
                .sessions_service
                .as_deref()
                .or(self.webhook_service.as_deref())
                .ok_or(
                    "sessions need --sessions-service NAMESPACE/NAME (locally an ExternalName \
                        Service for localhost), or --webhook-service to share",
                )?;
            let service = SessionsService::parse(service, self.sessions_port)
                .map_err(|e| format!("--sessions-service: {e}"))?;
            webhooks.registration.sessions = Some(service);
            if self.session_recordings.trim().is_empty() {
                return Err("--session-recordings must name where recordings are stored".into());
            }
            let credentials = oz_sessions::recording::credentials_in_url(&self.session_recordings);
            if !credentials.is_empty() {
                return Err(format!(
                    "--session-recordings carries credentials ({}), which anyone who can read \
                     the Pod sees in its arguments: remove them from the URL and set \
                     AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from a Secret (chart \
                     sessions.recordingsCredentialsSecret), or use the pod's cloud role",
                    credentials.join(", ")
                ));
            }
            Some(SessionsSettings {
                listen: SocketAddr::from(([0, 0, 0, 0], self.sessions_port)),
                recordings: self.session_recordings.clone(),
                recording_limits: RecordingLimits {
                    max_session_bytes: self.session_recording_max_size,
                    max_total_bytes: (self.session_recordings_max_total_size > 0)
                        .then_some(self.session_recordings_max_total_size),
                },
                watch_namespaces: watched.clone(),
                replica: identity(),
            })
        } else {
            None
        };
        Ok(ManagerConfig {
            namespace: self.namespace.clone(),
            scopes,
            kinds,
            leader_election: self.leader_elect.then(|| LeaderElection {
                lease_name: self.leader_elect_lease_name.clone(),
                identity: identity(),
                lease_duration: self.leader_elect_lease_duration.max(2),
                renew_grace: (self.leader_elect_lease_duration / 3).max(1),
            }),
            metrics_addr: parse_bind("metrics-bind-address", &self.metrics_bind_address)?,
            health_addr: parse_bind("health-probe-bind-address", &self.health_probe_bind_address)?,
            settings: Settings {
                history_retention: self.history_retention,
                max_concurrent_reconciles: self.max_concurrent_reconciles,
            },
            webhooks,
            unverified_webhook_callers: self.unverified_webhook_callers,
            notifications: self.notifications.then(|| self.notifier_config()),
            sessions,
            fleet_hub: self.fleet.settings(&self.namespace, &watched)?,
        })
    }

    fn notifier_config(&self) -> NotifierConfig {
        let mut config = NotifierConfig {
            queue_size: self.notifications_queue_size as usize,
            ..NotifierConfig::default()
        };
        config.delivery.retry_for = self.notifications_retry_for;
        config.delivery.backoff.max = self.notifications_retry_max_interval;
        config.delivery.backoff.initial = config
            .delivery
            .backoff
            .initial
            .min(self.notifications_retry_max_interval);
        config.delivery.post_timeout = self.notifications_timeout;
        config.delivery.sink_networks = SinkNetworks::allowing(&self.notifications_allow_sinks_in)
            .expect("each name was checked as the flag was parsed");
        config
    }

    fn webhook_config(&self, watched: &[String]) -> Result<WebhookConfig, String> {
        let endpoint = match (&self.webhook_service, &self.webhook_url_base) {
            (Some(service), None) => {
                WebhookEndpoint::service(service, install::WEBHOOK_SERVICE_PORT)
                    .map_err(|e| format!("--webhook-service: {e}"))?
            }
            (None, Some(base)) => {
                WebhookEndpoint::url(base).map_err(|e| format!("--webhook-url-base: {e}"))?
            }
            _ => {
                return Err("the webhooks need --webhook-service NAMESPACE/NAME in a cluster, or --webhook-url-base \
                            https://127.0.0.1:PORT locally (or leave webhooks out of --controllers)"
                    .into());
            }
        };
        // A scoped operator admits and audits only its own namespaces, and may read only those:
        // the same registration the install derives.
        let registration =
            install::webhook_registration(endpoint, &self.webhook_configuration_name, watched);
        let mut config = WebhookConfig::new(&self.namespace, registration.endpoint.clone());
        config.registration = Registration {
            audit_failure_policy: self.audit_failure_policy,
            ..registration
        };
        config.listen = SocketAddr::from(([0, 0, 0, 0], self.webhook_port));
        config.secrets.ca = self.webhook_ca_secret.clone();
        config.secrets.serving = self.webhook_cert_secret.clone();
        config.audit_log_path = self.audit_log_path.clone();
        config.audit_rotation = oz_audit::Rotation {
            max_size: self.audit_log_max_size,
            max_age: (!self.audit_log_max_age.is_zero()).then_some(self.audit_log_max_age),
            max_files: self.audit_log_max_files,
        };
        config.audit_checkpoint_interval = self.audit_checkpoint_interval;
        config.request_admin_groups = nonblank(&self.request_admin_groups);
        config.max_grants_per_user = self.max_grants_per_user;
        config.enforce.namespaces = nonblank(&self.audit_enforce_namespaces)
            .into_iter()
            .collect();
        config.enforce.template_writers =
            nonblank(&self.template_admin_groups).into_iter().collect();
        config.fleet_hub_user = match self.fleet_hub_user.as_deref().map(str::trim) {
            Some("") => return Err("--fleet-hub-user must name the hub's user".into()),
            user => user.map(str::to_string),
        };
        config.fleet_names = self.fleet_names.names();
        config.watch_namespaces = watched.to_vec();
        config.client_ca = match &self.webhook_client_ca_file {
            Some(path) => Some(
                ClientCa::from_file(path, nonblank(&self.webhook_client_names))
                    .map_err(|e| format!("--webhook-client-ca-file: {e}"))?,
            ),
            None => None,
        };
        Ok(config)
    }
}

/// A comma-separated flag's values without the blanks (`--watch-namespaces=` means none).
fn nonblank(values: &[String]) -> Vec<String> {
    values.iter().filter(|v| !v.is_empty()).cloned().collect()
}

/// This replica's name in leader election: its pod's name in a cluster, else host and process.
fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    })
}

mod flag_values;
mod fleet_flags;

pub use fleet_flags::{FleetHubArgs, FleetNameArgs};
pub(crate) use fleet_flags::{parse_group_prefix, parse_user_prefix};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod notification_flag_tests {
    use clap::Parser;

    use super::*;
    use crate::manager::Command;

    fn config(args: &[&str]) -> Result<ManagerConfig, String> {
        let command = Command::try_parse_from(
            ["oz-manager", "--controllers", "exec"]
                .iter()
                .chain(args)
                .copied(),
        )
        .map_err(|e| e.to_string())?;
        command
            .run_args()
            .expect("a run, not a subcommand")
            .manager_config()
    }

    #[test]
    fn notifications_are_on_by_default_and_their_knobs_reach_the_notifier() {
        let defaults = config(&[]).unwrap().notifications.expect("on by default");
        assert_eq!(defaults.queue_size, 1024);
        assert_eq!(defaults.delivery.retry_for, Duration::from_secs(600));
        assert_eq!(defaults.delivery.post_timeout, Duration::from_secs(10));
        assert_eq!(defaults.delivery.backoff.max, Duration::from_secs(60));

        let tuned = config(&[
            "--notifications-queue-size=5",
            "--notifications-retry-for=45s",
            "--notifications-retry-max-interval=500ms",
            "--notifications-timeout=2s",
        ])
        .unwrap()
        .notifications
        .unwrap();
        assert_eq!(tuned.queue_size, 5);
        assert_eq!(tuned.delivery.retry_for, Duration::from_secs(45));
        assert_eq!(tuned.delivery.backoff.max, Duration::from_millis(500));
        assert_eq!(tuned.delivery.backoff.initial, Duration::from_millis(500));
        assert_eq!(tuned.delivery.post_timeout, Duration::from_secs(2));

        assert!(
            config(&["--notifications=false"])
                .unwrap()
                .notifications
                .is_none()
        );
        for bad in [
            "--notifications-queue-size=0",
            "--notifications-retry-for=0s",
            "--notifications-timeout=-1s",
        ] {
            assert!(config(&[bad]).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod audit_flag_tests {
    use super::*;

    #[test]
    fn audit_file_sizes_take_bytes_or_binary_suffixes_and_refuse_overflow() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4Ki"), Ok(4096));
        assert_eq!(parse_size("100Mi"), Ok(100 << 20));
        assert_eq!(parse_size("2Gi"), Ok(2 << 30));
        for bad in ["", "Mi", "1.5Mi", "10MB", "-1", "17179869184Gi"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_max_age("0"), Ok(Duration::ZERO));
        assert_eq!(parse_max_age("24h"), Ok(Duration::from_secs(24 * 3600)));
        assert!(parse_max_age("-1h").is_err());
        assert_eq!(
            parse_checkpoint_interval("30s"),
            Ok(Duration::from_secs(30))
        );
        assert!(parse_checkpoint_interval("0s").is_err());
    }
}
