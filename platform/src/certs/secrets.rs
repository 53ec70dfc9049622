//! The CA and the serving certificate, kept in two `kubernetes.io/tls` Secrets in the operator's
//! namespace so every replica serves the same certificate.
//!
//! Only the leader writes ([`CertStore::ensure_ca`], [`CertStore::ensure_serving`]); followers
//! read ([`CertStore::load`]). Writes are race-safe: a Secret is created only if absent, and
//! replaced only at the resourceVersion it was read at. Whoever loses a race re-reads and uses
//! the winner's certificate.
//!
//! With an owner ([`CertStore::owned_by`], oz-manager's ServiceAccount), both Secrets name it,
//! so the garbage collector deletes them with the install: the leader sets it on every write,
//! keeping any other owner, and adds it to a usable Secret that lacks it (one an older
//! oz-manager made).

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString, api::core::v1::Secret, apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ObjectMeta, PostParams, Preconditions},
};
use time::OffsetDateTime;
use tracing::{debug, info};

use crate::{
    Error, Result,
    certs::{self, CertSettings, PemPair, Unusable},
};

/// The Secret type both Secrets have.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// Key of the certificate (the CA's own in the CA Secret).
pub const TLS_CRT: &str = "tls.crt";
/// Key of the private key.
pub const TLS_KEY: &str = "tls.key";
/// Key of the CA bundle the apiserver trusts: the current CA, then the previous one while it
/// is still valid, so a renewed CA never leaves a moment in which the served cert is untrusted.
pub const CA_CRT: &str = "ca.crt";

/// How many times a write may lose a race before the attempt is given up (and retried later).
const MAX_ATTEMPTS: usize = 5;

/// The names of the two Secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretNames {
    /// The CA: `tls.crt`, `tls.key` and `ca.crt`. Default `oz-webhook-ca`.
    pub ca: String,
    /// The serving certificate: `tls.crt`, `tls.key` and `ca.crt`. Default `oz-webhook-tls`.
    pub serving: String,
}

impl Default for SecretNames {
    fn default() -> Self {
        Self {
            ca: "oz-webhook-ca".into(),
            serving: "oz-webhook-tls".into(),
        }
    }
}

/// The CA as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCa {
    /// Its certificate and key.
    pub pair: PemPair,
    /// The PEM bundle to put in the webhook configurations' `caBundle`.
    pub bundle: String,
}

/// What a replica serves and publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificates {
    /// The PEM bundle for `caBundle`.
    pub ca_bundle: String,
    /// The serving certificate and key.
    pub serving: PemPair,
}

/// Reads and (as leader) maintains the two Secrets.
#[derive(Clone)]
pub struct CertStore {
    secrets: Api<Secret>,
    namespace: String,
    names: SecretNames,
    settings: CertSettings,
    serving_names: Vec<String>,
    owner: Option<OwnerReference>,
}

enum Written {
    Done,
    LostRace,
}

impl CertStore {
    /// A store for the Secrets `names` in `namespace`, whose serving certificate must name
    /// every one of `serving_names`.
    pub fn new(
        client: Client,
        namespace: &str,
        names: SecretNames,
        settings: CertSettings,
        serving_names: Vec<String>,
    ) -> Self {
        Self {
            secrets: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            names,
            settings,
            serving_names,
            owner: None,
        }
    }

    /// Makes `owner` an owner of both Secrets (none: they stay until deleted by hand).
    pub fn owned_by(mut self, owner: Option<OwnerReference>) -> Self {
        self.owner = owner;
        self
    }

    /// The Secret names.
    pub fn names(&self) -> &SecretNames {
        &self.names
    }

    /// Returns the stored CA if it is usable; otherwise generates a new one and stores it,
    /// creating the Secret if it is missing.
    pub async fn ensure_ca(&self, now: OffsetDateTime) -> Result<StoredCa> {
        let name = &self.names.ca;
        for _ in 0..MAX_ATTEMPTS {
            let existing = self.secrets.get_opt(name).await?;
            let stored = existing.as_ref().map(pair_of);
            let reason = match &stored {
                Some(Ok(pair)) => match certs::check_ca(pair, &self.settings, now) {
                    Ok(_) => {
                        if let Some(secret) = &existing
                            && let Written::LostRace = self.adopt(secret).await?
                        {
                            continue;
                        }
                        let bundle = existing
                            .as_ref()
                            .and_then(|s| text(s, CA_CRT))
                            .filter(|b| b.starts_with(pair.cert.trim_end()))
                            .unwrap_or_else(|| pair.cert.clone());
                        return Ok(StoredCa {
                            pair: pair.clone(),
                            bundle,
                        });
                    }
                    Err(reason) => reason.to_string(),
                },
                Some(Err(reason)) => reason.to_string(),
                None => "does not exist".into(),
            };
            info!(secret = %self.qualified(name), %reason, "generating a new webhook CA");
            let pair = certs::generate_ca(&self.settings, now)?;
            let mut bundle = pair.cert.clone();
            // Keep trusting the outgoing CA while it lasts, so the certificate it signed stays
            // valid until every replica serves the new one.
            if let Some(Ok(old)) = &stored
                && still_trusted(old, now)
            {
                bundle.push_str(&old.cert);
            }
            let data = BTreeMap::from([
                (TLS_CRT.to_string(), bytes(&pair.cert)),
                (TLS_KEY.to_string(), bytes(&pair.key)),
                (CA_CRT.to_string(), bytes(&bundle)),
            ]);
            match self.write(name, existing.as_ref(), data).await? {
                Written::Done => return Ok(StoredCa { pair, bundle }),
                Written::LostRace => {
                    debug!(secret = %self.qualified(name), "lost a race; re-reading")
                }
            }
        }
        Err(Error::Contended(self.qualified(name)))
    }

    /// Returns the stored serving certificate if it is usable with `ca`; otherwise issues a new
    /// one from `ca` and stores it.
    pub async fn ensure_serving(&self, ca: &StoredCa, now: OffsetDateTime) -> Result<PemPair> {
        let name = &self.names.serving;
        for _ in 0..MAX_ATTEMPTS {
            let existing = self.secrets.get_opt(name).await?;
            let reason = match existing.as_ref().map(pair_of) {
                Some(Ok(pair)) => match certs::check_serving(
                    &pair,
                    &ca.pair.cert,
                    &self.serving_names,
                    &self.settings,
                    now,
                ) {
                    Ok(_) => {
                        if let Some(secret) = &existing
                            && let Written::LostRace = self.adopt(secret).await?
                        {
                            continue;
                        }
                        return Ok(pair);
                    }
                    Err(reason) => reason.to_string(),
                },
                Some(Err(reason)) => reason.to_string(),
                None => "does not exist".into(),
            };
            info!(
                secret = %self.qualified(name), %reason, names = ?self.serving_names,
                "issuing a new webhook serving certificate"
            );
            let pair = certs::issue_serving_cert(
                &ca.pair,
                &self.serving_names,
                self.settings.cert_validity,
                now,
            )?;
            let data = BTreeMap::from([
                (TLS_CRT.to_string(), bytes(&pair.cert)),
                (TLS_KEY.to_string(), bytes(&pair.key)),
                (CA_CRT.to_string(), bytes(&ca.pair.cert)),
            ]);
            match self.write(name, existing.as_ref(), data).await? {
                Written::Done => return Ok(pair),
                Written::LostRace => {
                    debug!(secret = %self.qualified(name), "lost a race; re-reading")
                }
            }
        }
        Err(Error::Contended(self.qualified(name)))
    }

    /// Reads what the leader stored, without writing: `None` until both Secrets hold a
    /// serving certificate with its key and a CA bundle.
    pub async fn load(&self) -> Result<Option<Certificates>> {
        let Some(ca) = self.secrets.get_opt(&self.names.ca).await? else {
            return Ok(None);
        };
        let Some(serving) = self.secrets.get_opt(&self.names.serving).await? else {
            return Ok(None);
        };
        let Some(ca_bundle) = text(&ca, CA_CRT)
            .or_else(|| text(&ca, TLS_CRT))
            .filter(|b| certs::is_certificate_pem(b))
        else {
            return Ok(None);
        };
        let Ok(serving) = pair_of(&serving) else {
            return Ok(None);
        };
        if certs::inspect(&serving).is_err() {
            return Ok(None);
        }
        Ok(Some(Certificates { ca_bundle, serving }))
    }

    async fn write(
        &self,
        name: &str,
        existing: Option<&Secret>,
        data: BTreeMap<String, ByteString>,
    ) -> Result<Written> {
        let secret = |resource_version: Option<String>| Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(self.namespace.clone()),
                resource_version,
                owner_references: self.owners_with_ours(existing),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    crate::FIELD_MANAGER.to_string(),
                )])),
                ..Default::default()
            },
            type_: Some(TLS_SECRET_TYPE.into()),
            data: Some(data.clone()),
            ..Default::default()
        };
        let result = match existing {
            None => self
                .secrets
                .create(&PostParams::default(), &secret(None))
                .await
                .map(drop),
            Some(old) if old.type_.as_deref() == Some(TLS_SECRET_TYPE) => self
                .secrets
                .replace(
                    name,
                    &PostParams::default(),
                    &secret(old.metadata.resource_version.clone()),
                )
                .await
                .map(drop),
            // A Secret's type cannot change: replace it, but only the one we looked at.
            Some(old) => {
                let delete = DeleteParams {
                    preconditions: Some(Preconditions {
                        resource_version: old.metadata.resource_version.clone(),
                        uid: old.metadata.uid.clone(),
                    }),
                    ..Default::default()
                };
                match self.secrets.delete(name, &delete).await {
                    Ok(_) => self
                        .secrets
                        .create(&PostParams::default(), &secret(None))
                        .await
                        .map(drop),
                    Err(e) => Err(e),
                }
            }
        };
        match result {
            Ok(()) => Ok(Written::Done),
            Err(kube::Error::Api(status))
                if status.is_conflict() || status.is_already_exists() || status.is_not_found() =>
            {
                Ok(Written::LostRace)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Adds the owner to `secret` if it lacks it, at the resourceVersion it was read at,
    /// changing nothing else.
    async fn adopt(&self, secret: &Secret) -> Result<Written> {
        let owners = self.owners_with_ours(Some(secret));
        if owners == secret.metadata.owner_references {
            return Ok(Written::Done);
        }
        let name = secret.metadata.name.clone().unwrap_or_default();
        info!(secret = %self.qualified(&name), "adding oz-manager's ServiceAccount as its owner");
        let mut adopted = secret.clone();
        adopted.metadata.owner_references = owners;
        match self
            .secrets
            .replace(&name, &PostParams::default(), &adopted)
            .await
        {
            Ok(_) => Ok(Written::Done),
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_not_found() => {
                Ok(Written::LostRace)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The owners of `existing` (none if it is new), and ours if it is not among them.
    fn owners_with_ours(&self, existing: Option<&Secret>) -> Option<Vec<OwnerReference>> {
        let mut owners = existing
            .and_then(|s| s.metadata.owner_references.clone())
            .unwrap_or_default();
        if let Some(owner) = &self.owner
            && !owners.iter().any(|o| o.uid == owner.uid)
        {
            owners.push(owner.clone());
        }
        (!owners.is_empty()).then_some(owners)
    }

    fn qualified(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }
}

/// `tls.crt` and `tls.key` of a Secret, if both are there and UTF-8.
fn pair_of(secret: &Secret) -> Result<PemPair, Unusable> {
    let cert =
        text(secret, TLS_CRT).ok_or_else(|| Unusable::BadCertificate(format!("no {TLS_CRT}")))?;
    let key = text(secret, TLS_KEY).ok_or_else(|| Unusable::BadKey(format!("no {TLS_KEY}")))?;
    Ok(PemPair { cert, key })
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    let value = secret.data.as_ref()?.get(key)?;
    String::from_utf8(value.0.clone()).ok()
}

fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}

/// Whether an outgoing CA is still worth trusting next to its successor.
fn still_trusted(old: &PemPair, now: OffsetDateTime) -> bool {
    certs::inspect(old).is_ok_and(|info| info.is_ca && now < info.not_after)
}
