//! The certificate reconciler: keeps the two Secrets usable, every webhook configuration's
//! `caBundle` equal to the CA, and the served certificate equal to the Secret's, without a
//! restart.
//!
//! It wakes on changes to the two Secrets and to oz's own webhook configurations (each watched
//! by name, nothing else), on a periodic check for the renewal window, and when leadership
//! changes. The leader writes; followers only read and reload.

use std::{sync::Arc, time::Duration};

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::Secret,
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use tokio::sync::{oneshot, watch};
use tracing::{debug, info, warn};

use crate::{
    Result, ServerMetrics,
    certs::{
        PemPair,
        secrets::{CertStore, Certificates},
    },
    registration::Registration,
    tls::SwappableCert,
};

const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How often a follower looks again for the leader's certificates at startup.
const FOLLOWER_POLL: Duration = Duration::from_secs(2);

pub struct CertReconciler {
    pub client: Client,
    pub namespace: String,
    pub store: CertStore,
    pub registration: Registration,
    pub certificate: Arc<SwappableCert>,
    /// What `certificate` was last loaded from.
    pub served: PemPair,
    pub leader: watch::Receiver<bool>,
    pub check_interval: Duration,
    /// Where the served certificate's expiry is exported.
    pub metrics: ServerMetrics,
}

/// The certificates to start serving with. The leader makes them if needed; a follower waits
/// until the leader has stored them (or it becomes the leader itself).
pub async fn initial_certificates(
    store: &CertStore,
    leader: &watch::Receiver<bool>,
) -> Result<Certificates> {
    let mut waiting_logged = false;
    loop {
        if *leader.borrow() {
            let now = OffsetDateTime::now_utc();
            let ca = store.ensure_ca(now).await?;
            let serving = store.ensure_serving(&ca, now).await?;
            return Ok(Certificates {
                ca_bundle: ca.bundle,
                serving,
            });
        }
        if let Some(certificates) = store.load().await? {
            return Ok(certificates);
        }
        if !waiting_logged {
            info!(secrets = ?store.names(), "waiting for the leader to store the webhook certificates");
            waiting_logged = true;
        }
        tokio::time::sleep(FOLLOWER_POLL).await;
    }
}

impl CertReconciler {
    /// One pass. The leader makes the CA usable, publishes it in every configuration, then
    /// makes the serving certificate usable; everyone then serves the stored certificate.
    pub async fn sync(&mut self) -> Result<()> {
        let leading = *self.leader.borrow_and_update();
        let certificates = if leading {
            let now = OffsetDateTime::now_utc();
            let ca = self.store.ensure_ca(now).await?;
            // The bundle goes out before a certificate signed by a new CA is served.
            self.registration.apply(&self.client, &ca.bundle).await?;
            let serving = self.store.ensure_serving(&ca, now).await?;
            Certificates {
                ca_bundle: ca.bundle,
                serving,
            }
        } else {
            match self.store.load().await? {
                Some(certificates) => certificates,
                None => return Ok(()),
            }
        };
        if certificates.serving != self.served {
            self.certificate.replace_pem(
                certificates.serving.cert.as_bytes(),
                certificates.serving.key.as_bytes(),
            )?;
            self.served = certificates.serving;
            self.metrics.serving_certificate(&self.served);
            info!(leading, "now serving the new webhook certificate");
        }
        Ok(())
    }

    /// Runs until `stop` fires. Dropping the sender leaves it running.
    pub async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let mut triggers = self.triggers();
        let mut ticks = tokio::time::interval_at(
            tokio::time::Instant::now() + self.check_interval,
            self.check_interval,
        );
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stop_pending = true;
        let mut leader_alive = true;
        let mut pending = false;
        let mut backoff = MIN_BACKOFF;
        loop {
            if pending {
                // One pass covers every change seen so far.
                while let Some(Some(())) = triggers.next().now_or_never() {}
                match self.sync().await {
                    Ok(()) => {
                        pending = false;
                        backoff = MIN_BACKOFF;
                    }
                    Err(error) => {
                        warn!(%error, retry_in = ?backoff, "webhook certificate sync failed");
                        tokio::select! {
                            result = &mut stop, if stop_pending => match result {
                                Ok(()) => return,
                                Err(_) => stop_pending = false,
                            },
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                }
            }
            tokio::select! {
                result = &mut stop, if stop_pending => match result {
                    Ok(()) => return,
                    Err(_) => stop_pending = false,
                },
                Some(()) = triggers.next() => pending = true,
                _ = ticks.tick() => pending = true,
                changed = self.leader.changed(), if leader_alive => match changed {
                    Ok(()) => pending = true,
                    Err(_) => leader_alive = false,
                },
            }
        }
    }

    /// One stream of "something changed" from watches on exactly our objects.
    fn triggers(&self) -> BoxStream<'static, ()> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let names = self.store.names();
        let mut streams = vec![
            watch_named(secrets.clone(), &names.ca),
            watch_named(secrets, &names.serving),
            watch_named(
                Api::<MutatingWebhookConfiguration>::all(self.client.clone()),
                &self.registration.requests_name(),
            ),
        ];
        for name in self.registration.validating_names() {
            streams.push(watch_named(
                Api::<ValidatingWebhookConfiguration>::all(self.client.clone()),
                &name,
            ));
        }
        if self.registration.sessions.is_some() {
            streams.push(watch_named(
                Api::<APIService>::all(self.client.clone()),
                oz_api::SESSIONS_API_SERVICE,
            ));
        }
        futures::stream::select_all(streams).boxed()
    }
}

/// Watches the one object called `name`.
fn watch_named<K>(api: Api<K>, name: &str) -> BoxStream<'static, ()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let name = name.to_string();
    watcher(api, config)
        .default_backoff()
        .map(move |event| match event {
            Ok(_) => debug!(%name, "watched object changed"),
            Err(error) => warn!(%name, %error, "watch failed; retrying"),
        })
        .boxed()
}
