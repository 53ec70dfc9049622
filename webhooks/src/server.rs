//! [`WebhookServer`]: everything oz-manager starts for its webhooks, in one call.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use oz_audit::Rotation;
use rustls::pki_types::CertificateDer;
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
};
use tracing::info;

use oz_audit::AuditLog;
use oz_platform::{
    Error, Result,
    audit_key::ensure_audit_key,
    callers::{CallerPolicy, CallerVerifier, ClientCa},
    certs::{
        CertSettings,
        rotation::{CertReconciler, initial_certificates},
        secrets::{CertStore, SecretNames},
    },
    registration::{Registration, WebhookEndpoint},
    tls::{SwappableCert, TlsError, TlsServer},
};

use crate::{
    WebhookMetrics,
    admission::{self, AdmissionState, AuditEvents, CachedLookup, EnforceSettings},
};

/// Everything that can be set about the webhook server. [`WebhookConfig::new`] gives the
/// defaults; every field is public so command-line flags map onto it directly.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// The operator's namespace, where the certificate Secrets live.
    pub namespace: String,
    /// What is registered, and how the apiserver reaches the server.
    pub registration: Registration,
    /// Where [`WebhookServer::start`] listens. Default `0.0.0.0:9443`.
    pub listen: SocketAddr,
    /// The certificate Secrets. Default `oz-webhook-ca` and `oz-webhook-tls`.
    pub secrets: SecretNames,
    /// Certificate lifetimes and renewal window.
    pub certs: CertSettings,
    /// `--audit-log-path`: audit records are also appended here, to a hash chain with signed
    /// checkpoints (oz-audit's format v1), signed with the key in the Secret
    /// `oz-audit-signing-key`.
    pub audit_log_path: Option<PathBuf>,
    /// When the audit file is rotated, and how many rotated files are kept
    /// (`--audit-log-max-size`, `--audit-log-max-age`, `--audit-log-max-files`). Default
    /// 100 MiB, never by age, 10 files.
    pub audit_rotation: Rotation,
    /// How often what was written to the audit file since the last checkpoint is signed
    /// (`--audit-checkpoint-interval`). Default 30 s.
    pub audit_checkpoint_interval: Duration,
    /// Which pod accesses are denied without a grant. Default: none. Its namespaces are
    /// registered with a webhook of their own that fails closed
    /// ([`Registration::audit_enforced_namespaces`]).
    pub enforce: EnforceSettings,
    /// Groups whose members may delete anyone's requests, expired ones included (besides the
    /// cluster's controllers and oz itself). Default `system:masters`.
    pub request_admin_groups: Vec<String>,
    /// `--max-grants-per-user`: how many grants one user may hold at once through every
    /// template served. Default: no cap.
    pub max_grants_per_user: Option<u32>,
    /// `--fleet-hub-user`: on a fleet spoke, the user its hub's credential authenticates as;
    /// only it writes hub-managed templates and requests through them
    /// ([`admission::fleet`]), and the templates webhook is registered in every namespace
    /// served ([`Registration::hub_managed_templates`]). Default: none, no hub.
    pub fleet_hub_user: Option<String>,
    /// `--fleet-user-prefix`, `--fleet-group-prefix`: on a fleet spoke, this cluster's names
    /// for the hub's users and groups, which the request webhook puts the hub's requester into
    /// ([`admission::fleet::requester_in_our_names`]). Default: the same names.
    pub fleet_names: oz_api::FleetNames,
    /// How often the certificates are checked against their renewal window, besides every
    /// change to the Secrets. Default 1 hour.
    pub check_interval: Duration,
    /// Leadership: Secrets and configurations are written only while this is `true`; followers
    /// only read and reload. `None`: always write (a single replica).
    pub leader: Option<watch::Receiver<bool>>,
    /// The namespaces oz works in (`--watch-namespaces`): the handlers' cache of requests and
    /// templates watches these alone, which is all a namespace-scoped install may read.
    /// Default: empty, all namespaces.
    pub watch_namespaces: Vec<String>,
    /// The handlers' cache lists the requests once this is true (or its sender is gone):
    /// oz-manager holds that LIST back while its own controllers list the same requests at
    /// start-up ([`CachedLookup::new`]). Until then the handlers read requests from the
    /// apiserver. Default: none, at once.
    pub requests_after: Option<watch::Receiver<bool>>,
    /// What the server counts; oz-manager registers these with its metrics.
    pub metrics: WebhookMetrics,
    /// `--webhook-client-ca-file`: the webhook paths answer only callers with a client
    /// certificate from this CA (the kube-apiserver), with one of its allowed names. Default:
    /// none, anyone who reaches the port is answered and recorded as `unverified`.
    pub client_ca: Option<ClientCa>,
    /// The owner of what the server creates in `namespace` (the certificate Secrets, the audit
    /// signing key and its public keys), so they go when it goes: oz-manager's own
    /// ServiceAccount. Default: none, they stay until deleted by hand.
    pub owner: Option<OwnerReference>,
}

impl WebhookConfig {
    /// The defaults, for an operator in `namespace` reached through `endpoint`.
    pub fn new(namespace: impl Into<String>, endpoint: WebhookEndpoint) -> Self {
        Self {
            namespace: namespace.into(),
            registration: Registration::new(endpoint),
            listen: SocketAddr::from(([0, 0, 0, 0], 9443)),
            secrets: SecretNames::default(),
            certs: CertSettings::default(),
            audit_log_path: None,
            audit_rotation: Rotation::default(),
            audit_checkpoint_interval: Duration::from_secs(30),
            enforce: EnforceSettings::default(),
            request_admin_groups: vec!["system:masters".into()],
            max_grants_per_user: None,
            fleet_hub_user: None,
            fleet_names: oz_api::FleetNames::default(),
            check_interval: Duration::from_secs(60 * 60),
            leader: None,
            watch_namespaces: Vec::new(),
            requests_after: None,
            metrics: WebhookMetrics::default(),
            client_ca: None,
            owner: None,
        }
    }

    fn validate(&self) -> Result<()> {
        self.certs.validate()?;
        if self.namespace.is_empty() || self.registration.name.is_empty() {
            return Err(Error::Config(
                "the namespace and the configuration name must not be empty".into(),
            ));
        }
        if self.secrets.ca == self.secrets.serving {
            return Err(Error::Config(
                "the CA and serving certificate need two different Secrets".into(),
            ));
        }
        if self.check_interval.is_zero() {
            return Err(Error::Config("the check interval must be positive".into()));
        }
        if self.audit_checkpoint_interval.is_zero() {
            return Err(Error::Config(
                "the audit checkpoint interval must be positive".into(),
            ));
        }
        if self
            .fleet_hub_user
            .as_deref()
            .is_some_and(|user| user.trim().is_empty())
        {
            return Err(Error::Config(
                "the fleet hub's user name must not be empty".into(),
            ));
        }
        if self.watch_namespaces.iter().any(String::is_empty) {
            return Err(Error::Config(
                "a watched namespace's name must not be empty".into(),
            ));
        }
        Ok(())
    }
}

/// The running webhook server: TLS server, certificate reconciler and registration.
///
/// Dropping it leaves everything running; [`WebhookServer::shutdown`] stops it. The
/// configurations stay registered either way (the request webhooks then fail closed, the
/// audit webhook is skipped).
///
/// The client needs: get/list/watch/create/update/delete on the two Secrets;
/// get/list/watch/patch on oz's Mutating/ValidatingWebhookConfigurations; get/list/watch on
/// the four oz kinds; list on accessapprovals (one decision per person); get on pods, and
/// list/watch on them where access is enforced (what a denial names); create/patch on
/// events.k8s.io events. With an audit file,
/// in the operator's namespace: get/create on Secrets (the signing key), get/create/patch on
/// ConfigMaps (its public key), create/patch on events.k8s.io events.
pub struct WebhookServer {
    tls: TlsServer,
    certificate: Arc<SwappableCert>,
    lookup: Arc<CachedLookup>,
    /// The lookup's watches and the AccessLock watch; they run on every replica, leader or not.
    watches: JoinHandle<()>,
    reconciler: JoinHandle<()>,
    stop: oneshot::Sender<()>,
    audit_log: AuditLog,
    /// Signs the audit file every `audit_checkpoint_interval`, if there is one.
    checkpoints: Option<JoinHandle<()>>,
}

impl WebhookServer {
    /// Binds `config.listen`, then as [`WebhookServer::start_on`].
    pub async fn start(client: Client, config: WebhookConfig) -> Result<Self> {
        let listener = std::net::TcpListener::bind(config.listen)?;
        Self::start_on(listener, client, config).await
    }

    /// Makes sure the certificates exist (a follower waits for the leader's), serves the
    /// admission handlers over TLS on `listener`, registers the webhook configurations (as
    /// leader), and keeps all of it current in the background. Returns once the server answers
    /// and, as leader, the configurations are applied.
    pub async fn start_on(
        listener: std::net::TcpListener,
        client: Client,
        config: WebhookConfig,
    ) -> Result<Self> {
        config.validate()?;
        let leader = config.leader.clone().unwrap_or_else(|| {
            // A closed channel reads `true` forever.
            watch::channel(true).1
        });
        let store = CertStore::new(
            client.clone(),
            &config.namespace,
            config.secrets.clone(),
            config.certs,
            config.registration.serving_names(),
        )
        .owned_by(config.owner.clone());
        // The audit key and the certificates at once: the webhooks are registered after both,
        // and every moment before that is one in which requests go unstamped.
        let audit_key = async {
            match &config.audit_log_path {
                Some(_) => ensure_audit_key(&client, &config.namespace, config.owner.as_ref())
                    .await
                    .map(Some),
                None => Ok(None),
            }
        };
        let (initial, audit_key) =
            tokio::try_join!(initial_certificates(&store, &leader), audit_key)?;
        let certificate = Arc::new(SwappableCert::from_pem(
            initial.serving.cert.as_bytes(),
            initial.serving.key.as_bytes(),
        )?);
        config.metrics.server.serving_certificate(&initial.serving);
        let audit_log = match (&config.audit_log_path, audit_key) {
            (Some(path), Some(key)) => AuditLog::open(
                path,
                key.signer,
                config.audit_rotation,
                admission::audit::report_unwritable_with_events(
                    config.metrics.audit_log_counters(),
                    client.clone(),
                    key.public_keys,
                ),
            )?,
            _ => AuditLog::log_only(),
        };
        let checkpoints = audit_log.path().is_some().then(|| {
            tokio::spawn(checkpoint_every(
                audit_log.clone(),
                config.audit_checkpoint_interval,
            ))
        });
        let (lookup, watches) = CachedLookup::new(
            client.clone(),
            &config.watch_namespaces,
            &config.enforce.namespaces,
            config.requests_after.clone(),
        );
        let lookup = Arc::new(lookup);
        let (locks, lock_watch) = admission::locks::Locks::watch(client.clone());
        let watches = tokio::spawn(async move {
            futures::join!(watches, lock_watch);
        });
        let state = AdmissionState {
            places: admission::places::AdmittedPlaces::capped(config.max_grants_per_user),
            lookup: lookup.clone(),
            audit_log: audit_log.clone(),
            events: Some(AuditEvents::start(client.clone(), config.metrics.clone())),
            enforce: config.enforce.clone(),
            deletes: admission::requests::DeletePolicy {
                fleet_hub_user: config.fleet_hub_user.clone(),
                ..admission::requests::DeletePolicy::new(
                    config.request_admin_groups.clone(),
                    &config.namespace,
                )
            },
            unverified_reads: admission::approvals::UnverifiedReads::default(),
            fleet_hub_user: config.fleet_hub_user.clone(),
            fleet_names: config.fleet_names.clone(),
            locks,
        };
        let verifier = (config.client_ca.as_ref())
            .map(|ca| CallerVerifier::reloading(ca, config.metrics.server.clone()))
            .transpose()
            .map_err(TlsError::from)?;
        let policy =
            CallerPolicy::for_client_ca(config.client_ca.as_ref(), config.metrics.server.clone());
        let tls = TlsServer::start_verifying(
            listener,
            admission::guarded_router(Arc::new(state), policy, config.metrics.clone()),
            certificate.clone(),
            verifier,
        )
        .await?;
        info!(address = %tls.local_addr, "webhook server listening");

        let mut reconciler = CertReconciler {
            client,
            namespace: config.namespace.clone(),
            store,
            // Enforced namespaces are registered fail-closed, and a spoke's templates guarded
            // for its hub, whoever built the config.
            registration: config
                .registration
                .clone()
                .enforcing(&config.enforce.namespaces)
                .guarding_hub_templates(config.fleet_hub_user.is_some()),
            certificate: certificate.clone(),
            served: initial.serving,
            leader,
            check_interval: config.check_interval,
            metrics: config.metrics.server.clone(),
        };
        // Registers the configurations, now that the server answers them.
        if let Err(e) = reconciler.sync().await {
            watches.abort();
            if let Some(checkpoints) = &checkpoints {
                checkpoints.abort();
            }
            let _ = tls.shutdown(Duration::ZERO).await;
            return Err(e);
        }
        let (stop, stopped) = oneshot::channel();
        let reconciler = tokio::spawn(reconciler.run(stopped));
        Ok(Self {
            tls,
            certificate,
            lookup,
            watches,
            reconciler,
            stop,
            audit_log,
            checkpoints,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.tls.local_addr
    }

    /// The leaf certificate served from the next TLS handshake on.
    pub fn served_certificate(&self) -> CertificateDer<'static> {
        self.certificate.current_leaf_der()
    }

    /// The serving certificate, kept current by the certificate reconciler: another listener
    /// (oz's sessions API) may serve it too.
    pub fn certificate(&self) -> Arc<SwappableCert> {
        self.certificate.clone()
    }

    /// The audit log the webhooks write (and, in oz-manager, the sessions API too).
    pub fn audit_log(&self) -> AuditLog {
        self.audit_log.clone()
    }

    /// Whether the handlers read requests and templates from memory yet, rather than through
    /// the apiserver: every watch has listed once.
    pub fn lookup_cache_ready(&self) -> bool {
        self.lookup.is_ready()
    }

    /// Stops the reconciler, then the server, letting open requests finish for up to `grace`,
    /// then the watches, and signs what was written to the audit file since its last
    /// checkpoint.
    pub async fn shutdown(self, grace: Duration) -> Result<()> {
        let _ = self.stop.send(());
        let _ = self.reconciler.await;
        let served = self.tls.shutdown(grace).await;
        self.watches.abort();
        if let Some(checkpoints) = self.checkpoints {
            checkpoints.abort();
            let _ = checkpoints.await;
        }
        self.audit_log.checkpoint();
        served?;
        Ok(())
    }
}

/// Signs the audit file every `interval` (skipping ticks missed while busy).
async fn checkpoint_every(audit_log: AuditLog, interval: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        audit_log.checkpoint();
    }
}
