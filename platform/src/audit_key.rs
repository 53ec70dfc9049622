//! The audit file's signing key: an Ed25519 key in the Secret [`SIGNING_KEY_SECRET`] in oz's
//! namespace, shared by every replica, and its public key in the ConfigMap
//! [`PUBLIC_KEYS_CONFIGMAP`], which security teams may read to verify the audit files
//! (`ozctl audit verify` reads it there).
//!
//! Every replica calls [`ensure_audit_key`] when it opens its audit file. The Secret is only
//! ever created, never replaced: whoever loses the race to create it reads the winner's back,
//! so all replicas sign with one key. The ConfigMap keeps every public key ever published
//! there (`<keyId>.pub`), so files signed before a key was replaced still verify; `current`
//! names the key in use.
//!
//! Both get the owner oz-manager was given (its ServiceAccount) when they are created, so they
//! go with the install. One made before owners were set keeps none: adding one later would need
//! delete on it, which oz is not granted (the key is never replaced).

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, ObjectReference, Secret},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Client, Resource,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use oz_audit::Signer;
use serde_json::json;
use tracing::info;

use crate::{Error, FIELD_MANAGER, Result};

/// The Secret that holds the signing key.
pub const SIGNING_KEY_SECRET: &str = "oz-audit-signing-key";
/// Its key: the Ed25519 private key, PKCS#8 PEM.
pub const SIGNING_KEY_FIELD: &str = "ed25519.key";
/// The ConfigMap of public keys: `<keyId>.pub` (SPKI PEM) for each, and [`CURRENT_KEY_FIELD`].
pub const PUBLIC_KEYS_CONFIGMAP: &str = "oz-audit";
/// The ConfigMap key naming the key id in use.
pub const CURRENT_KEY_FIELD: &str = "current";

/// The signing key, and the ConfigMap its public key is published in (Events about the audit
/// file go there too).
pub struct AuditKey {
    pub signer: Signer,
    pub public_keys: ObjectReference,
}

/// Reads the signing key from its Secret in `namespace`, creating the Secret with a new key if
/// there is none, and makes sure its public key is in the ConfigMap. Either one it creates is
/// owned by `owner`, if any.
///
/// The client needs, in `namespace`: get and create on Secrets, get, create and patch on
/// ConfigMaps.
pub async fn ensure_audit_key(
    client: &Client,
    namespace: &str,
    owner: Option<&OwnerReference>,
) -> Result<AuditKey> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let signer = match secrets.get_opt(SIGNING_KEY_SECRET).await? {
        Some(secret) => signer_of(&secret)?,
        None => {
            let signer = Signer::generate().map_err(key_error)?;
            match secrets
                .create(&PostParams::default(), &key_secret(&signer, owner))
                .await
            {
                Ok(_) => {
                    info!(secret = SIGNING_KEY_SECRET, key = %signer.key_id(), "created the audit signing key");
                    signer
                }
                Err(kube::Error::Api(status)) if status.is_already_exists() => {
                    signer_of(&secrets.get(SIGNING_KEY_SECRET).await?)?
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let public_keys = publish(client, namespace, &signer, owner).await?;
    Ok(AuditKey {
        signer,
        public_keys,
    })
}

fn key_error(e: oz_audit::Error) -> Error {
    Error::Config(format!("the audit signing key: {e}"))
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_string(),
        FIELD_MANAGER.to_string(),
    )])
}

fn owned_by(owner: Option<&OwnerReference>) -> Option<Vec<OwnerReference>> {
    owner.map(|owner| vec![owner.clone()])
}

fn key_secret(signer: &Signer, owner: Option<&OwnerReference>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(SIGNING_KEY_SECRET.into()),
            labels: Some(labels()),
            owner_references: owned_by(owner),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            SIGNING_KEY_FIELD.to_string(),
            ByteString(signer.to_pkcs8_pem().into_bytes()),
        )])),
        ..Secret::default()
    }
}

fn signer_of(secret: &Secret) -> Result<Signer> {
    let pem = secret
        .data
        .as_ref()
        .and_then(|d| d.get(SIGNING_KEY_FIELD))
        .ok_or_else(|| {
            Error::Config(format!(
                "Secret {SIGNING_KEY_SECRET} has no {SIGNING_KEY_FIELD}"
            ))
        })?;
    let pem = std::str::from_utf8(&pem.0).map_err(|_| {
        Error::Config(format!(
            "Secret {SIGNING_KEY_SECRET}: {SIGNING_KEY_FIELD} is not PEM"
        ))
    })?;
    Signer::from_pkcs8_pem(pem).map_err(key_error)
}

/// Adds the public key (and `current`) to the ConfigMap, creating it if missing; keys already
/// there stay. Returns a reference to it.
async fn publish(
    client: &Client,
    namespace: &str,
    signer: &Signer,
    owner: Option<&OwnerReference>,
) -> Result<ObjectReference> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let key_id = signer.key_id().to_string();
    let field = format!("{key_id}.pub");
    let pem = signer.public_key().to_spki_pem();
    let data = BTreeMap::from([
        (field.clone(), pem.clone()),
        (CURRENT_KEY_FIELD.to_string(), key_id.clone()),
    ]);
    // A merge patch adds and replaces these two keys and leaves every other key alone.
    let merge = Patch::Merge(json!({"metadata": {"labels": labels()}, "data": data}));
    let published = |cm: &ConfigMap| {
        cm.data.as_ref().is_some_and(|d| {
            d.get(&field) == Some(&pem) && d.get(CURRENT_KEY_FIELD) == Some(&key_id)
        })
    };
    let configmap = match configmaps.get_opt(PUBLIC_KEYS_CONFIGMAP).await? {
        Some(cm) if published(&cm) => cm,
        Some(_) => {
            configmaps
                .patch(PUBLIC_KEYS_CONFIGMAP, &patch_params(), &merge)
                .await?
        }
        None => {
            let new = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(PUBLIC_KEYS_CONFIGMAP.into()),
                    labels: Some(labels()),
                    owner_references: owned_by(owner),
                    ..ObjectMeta::default()
                },
                data: Some(data),
                ..ConfigMap::default()
            };
            match configmaps.create(&PostParams::default(), &new).await {
                Ok(cm) => cm,
                Err(kube::Error::Api(status)) if status.is_already_exists() => {
                    configmaps
                        .patch(PUBLIC_KEYS_CONFIGMAP, &patch_params(), &merge)
                        .await?
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    Ok(configmap.object_ref(&()))
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}
