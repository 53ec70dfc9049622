//! Which keys `ozctl audit` trusts for each trail of files: the `--public-key` files labelled
//! with its cluster (`CLUSTER=PEM`); for the files without a cluster, the unlabelled
//! `--public-key` files, else the ConfigMap `oz-audit` that oz publishes its keys in. And what
//! to tell a reader who has none of them.

use std::path::{Path, PathBuf};

use clap::Args;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use oz_audit::PublicKey;

use super::trails::{Labelled, Trail, labelled_parser};
use crate::{
    error::CliError,
    session::{ClusterArgs, Session},
};

/// The ConfigMap in oz's namespace where oz publishes the audit signing keys' public halves,
/// as `<keyId>.pub`.
pub const KEYS_CONFIGMAP: &str = "oz-audit";

/// Which keys to trust.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(next_help_heading = "Keys")]
pub struct KeyArgs {
    /// Trust this public key (a PEM file, as in the ConfigMap oz-audit); as CLUSTER=PEM, only
    /// for the files labelled CLUSTER=FILE; repeat for several [default, for files without a
    /// cluster and with no --public-key at all: every key in the ConfigMap oz-audit]
    #[arg(long = "public-key", value_name = "[CLUSTER=]PEM", value_parser = labelled_parser())]
    pub public_keys: Vec<Labelled>,
    /// oz's namespace, where the ConfigMap oz-audit is
    #[arg(
        long,
        env = "OZ_NAMESPACE",
        default_value = "oz-system",
        value_name = "NAMESPACE"
    )]
    pub oz_namespace: String,
}

/// A trail and the keys it is checked with.
pub type KeyedTrail = (Trail, Vec<PublicKey>);

/// Each of `trails` with the keys to trust for it: see [`pinned_keys`]; the files without a
/// cluster, when no `--public-key` is given at all, trust every `<keyId>.pub` of the ConfigMap
/// `oz-audit` in `--oz-namespace`. When that cannot be read, the error says how to get the key
/// those files name.
pub async fn trusted_keys(
    args: &KeyArgs,
    cluster: &ClusterArgs,
    program: &str,
    trails: Vec<Trail>,
) -> Result<Vec<KeyedTrail>, CliError> {
    // Every trail's own keys first: a missing one is said before the cluster is asked anything.
    let pinned = trails
        .iter()
        .map(|trail| pinned_keys(args, trail))
        .collect::<Result<Vec<_>, _>>()?;
    let mut keyed = Vec::new();
    for (trail, pinned) in trails.into_iter().zip(pinned) {
        let keys = match pinned {
            Some(pinned) => pinned,
            None => published_keys(args, cluster, program, &trail.files).await?,
        };
        keyed.push((trail, keys));
    }
    Ok(keyed)
}

/// The `--public-key` files' keys for `trail`: those labelled with its cluster, or for the
/// files without a cluster, those without a label. `None` when the trail is the files without
/// a cluster and no `--public-key` is given at all: their keys come from the cluster. A
/// cluster's files are never checked with a key that is not labelled with that cluster, nor
/// with keys from the kubeconfig's cluster: without one, the error names the flag to pass.
pub fn pinned_keys(args: &KeyArgs, trail: &Trail) -> Result<Option<Vec<PublicKey>>, CliError> {
    if let Some(ambiguous) = args.public_keys.iter().find_map(Labelled::ambiguity) {
        return Err(ambiguous);
    }
    let own: Vec<&Labelled> = args
        .public_keys
        .iter()
        .filter(|key| key.cluster == trail.cluster)
        .collect();
    if !own.is_empty() {
        let mut keys = Vec::new();
        for key in own {
            keys.extend(keys_in_file(&key.path)?);
        }
        return Ok(Some(keys));
    }
    match &trail.cluster {
        None if args.public_keys.is_empty() => Ok(None),
        None => Err(CliError::Unverifiable(
            "no key for the files without a cluster: pass --public-key PEM (a --public-key \
             CLUSTER=PEM is only for the files labelled CLUSTER=FILE)"
                .into(),
        )),
        Some(cluster) => Err(CliError::Unverifiable(cluster_key_missing(
            cluster,
            &args.oz_namespace,
            &checkpoint_key_ids(&trail.files),
        ))),
    }
}

/// A cluster's files and no key labelled with it: which flag to pass, and how someone who may
/// read that cluster's ConfigMap saves its keys (`key_ids`: those its files' checkpoints name).
pub fn cluster_key_missing(cluster: &str, namespace: &str, key_ids: &[String]) -> String {
    format!(
        "no key for cluster {cluster}'s files: pass --public-key {cluster}=PEM with a key of \
         cluster {cluster} (a key is trusted only for the files of the cluster it is labelled \
         with, and ozctl does not take it from your kubeconfig's cluster); saved by someone who \
         may read the ConfigMap {KEYS_CONFIGMAP} on cluster {cluster}: {}",
        save_key_commands(namespace, key_ids, Some(cluster))
    )
}

/// The keys of the ConfigMap `oz-audit` in `--oz-namespace`, read with the kubeconfig; when it
/// cannot be read, the error says how to get the key the audit `files` name.
async fn published_keys(
    args: &KeyArgs,
    cluster: &ClusterArgs,
    program: &str,
    files: &[PathBuf],
) -> Result<Vec<PublicKey>, CliError> {
    let namespace = &args.oz_namespace;
    let hint = || public_key_hint(namespace, &checkpoint_key_ids(files));
    let session = Session::connect(cluster, program)
        .await
        .map_err(|e| CliError::Unverifiable(format!("{e}; or {}", hint())))?;
    let configmaps: Api<ConfigMap> = Api::namespaced(session.client.clone(), namespace);
    let configmap = configmaps
        .get_opt(KEYS_CONFIGMAP)
        .await
        .map_err(|e| keys_unreadable(namespace, session.error(e), &hint()))?
        .ok_or_else(|| {
            CliError::Unverifiable(format!(
                "there is no ConfigMap {KEYS_CONFIGMAP} in namespace {namespace} to take the audit keys from: \
                 is oz installed there (--oz-namespace), and has it written an audit file? Or {}",
                hint()
            ))
        })?;
    keys_in_configmap(&configmap, namespace, hint)
}

/// The ConfigMap of keys could not be read: for a reader without RBAC on it (most users), what
/// to ask for, and the key file that does as well.
pub fn keys_unreadable(namespace: &str, error: CliError, hint: &str) -> CliError {
    let why = match error {
        CliError::Forbidden { message } => format!(
            "{message}; ask a cluster admin for get on it (docs/audit.md, RBAC for security teams)"
        ),
        other => other.to_string(),
    };
    CliError::Unverifiable(format!(
        "cannot read the ConfigMap {KEYS_CONFIGMAP} in namespace {namespace}, where oz publishes \
         the audit keys: {why}; or {hint}"
    ))
}

/// Where a key for `--public-key` comes from: someone who may read the ConfigMap saves it, one
/// file per key id the audit files' checkpoints name (`key_ids`; KEYID when they name none).
pub fn public_key_hint(namespace: &str, key_ids: &[String]) -> String {
    format!(
        "pass --public-key with the key the files name, saved by someone who may read the ConfigMap: {}",
        save_key_commands(namespace, key_ids, None)
    )
}

/// The commands that save each key of `key_ids` (KEYID when there are none) from the
/// ConfigMap, as `ID.pub`; for a fleet `cluster`, from that cluster's context, as
/// `CLUSTER-ID.pub`.
fn save_key_commands(namespace: &str, key_ids: &[String], cluster: Option<&str>) -> String {
    let placeholder = ["KEYID".to_string()];
    let ids = if key_ids.is_empty() {
        &placeholder[..]
    } else {
        key_ids
    };
    let (context, prefix) = match cluster {
        Some(cluster) => (
            format!(" --context CONTEXT-OF-{cluster}"),
            format!("{cluster}-"),
        ),
        None => (String::new(), String::new()),
    };
    let commands: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(
                "kubectl{context} get configmap {KEYS_CONFIGMAP} -n {namespace} \
                 -o go-template='{{{{index .data \"{id}.pub\"}}}}' > {prefix}{id}.pub"
            )
        })
        .collect();
    let what = if key_ids.is_empty() {
        " (KEYID: the keyId of the files' checkpoints)"
    } else {
        ""
    };
    format!("{}{what}", commands.join(" and "))
}

/// The key ids the checkpoints of `files` name, in the order they first appear; files that
/// cannot be read and lines that are not checkpoints are passed over (the check says why).
pub fn checkpoint_key_ids(files: &[PathBuf]) -> Vec<String> {
    use std::io::BufRead;
    let mut ids: Vec<String> = Vec::new();
    for path in files {
        let Ok(file) = std::fs::File::open(path) else {
            continue;
        };
        for line in std::io::BufReader::new(file)
            .split(b'\n')
            .map_while(Result::ok)
        {
            // Only a checkpoint has a keyId: parse those lines alone.
            if !line.windows(7).any(|w| w == b"\"keyId\"") {
                continue;
            }
            if let Some(id) = oz_audit::Entry::parse(&line)
                .ok()
                .and_then(|entry| entry.key_id().map(str::to_owned))
                && !ids.contains(&id)
            {
                ids.push(id);
            }
        }
    }
    ids
}

/// Every key in a PEM file.
fn keys_in_file(path: &Path) -> Result<Vec<PublicKey>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::Unverifiable(format!("cannot read the key {}: {e}", path.display()))
    })?;
    PublicKey::all_from_pem(&text).map_err(|e| {
        CliError::Unverifiable(format!(
            "{} holds no Ed25519 public key oz could have made: {e}",
            path.display()
        ))
    })
}

/// The keys the ConfigMap publishes: each `<keyId>.pub`, which must be the key it is named
/// after. `hint` says where else a key comes from, when it publishes none.
pub fn keys_in_configmap(
    configmap: &ConfigMap,
    namespace: &str,
    hint: impl FnOnce() -> String,
) -> Result<Vec<PublicKey>, CliError> {
    let mut keys = Vec::new();
    for (name, pem) in configmap.data.iter().flatten() {
        let Some(id) = name.strip_suffix(".pub") else {
            continue;
        };
        let key = PublicKey::from_spki_pem(pem).map_err(|e| {
            CliError::Unverifiable(format!(
                "the key {name} in ConfigMap {namespace}/{KEYS_CONFIGMAP} cannot be read: {e}"
            ))
        })?;
        if key.key_id().as_str() != id {
            return Err(CliError::Unverifiable(format!(
                "ConfigMap {namespace}/{KEYS_CONFIGMAP} publishes the key {} as {name}: refusing a key \
                 under another key's name",
                key.key_id()
            )));
        }
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(CliError::Unverifiable(format!(
            "ConfigMap {namespace}/{KEYS_CONFIGMAP} holds no key (<keyId>.pub); {}",
            hint()
        )));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use oz_audit::Signer;

    use super::*;

    fn configmap(data: &[(&str, String)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn every_published_key_is_trusted_under_its_own_name_only() {
        let (a, b) = (
            Signer::generate().unwrap().public_key(),
            Signer::generate().unwrap().public_key(),
        );
        let name = |k: &PublicKey| format!("{}.pub", k.key_id());
        let both = configmap(&[
            (&name(&a), a.to_spki_pem()),
            (&name(&b), b.to_spki_pem()),
            ("current", b.key_id().to_string()),
        ]);
        let keys = keys_in_configmap(&both, "oz-system", String::new).unwrap();
        let mut ids: Vec<String> = keys.iter().map(|k| k.key_id().to_string()).collect();
        ids.sort();
        let mut want = vec![a.key_id().to_string(), b.key_id().to_string()];
        want.sort();
        assert_eq!(ids, want);

        // b's key published under a's name is refused, not trusted.
        let swapped = configmap(&[(&name(&a), b.to_spki_pem())]);
        let error = keys_in_configmap(&swapped, "oz-system", String::new).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(
            error.to_string().contains("under another key's name"),
            "{error}"
        );

        let empty = configmap(&[("current", a.key_id().to_string())]);
        let error = keys_in_configmap(&empty, "oz", || public_key_hint("oz", &[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("pass --public-key"), "{error}");
    }

    #[test]
    fn a_reader_without_the_configmap_is_told_where_a_key_comes_from() {
        let dir = tempfile::tempdir().unwrap();
        let (file, key) = crate::fixtures::audit_log(dir.path(), 1);
        let id = key.key_id().to_string();
        assert_eq!(checkpoint_key_ids(&[file]), [id.as_str()]);
        assert!(checkpoint_key_ids(&[dir.path().join("missing")]).is_empty());

        let hint = public_key_hint("oz-system", std::slice::from_ref(&id));
        assert_eq!(
            hint,
            format!(
                "pass --public-key with the key the files name, saved by someone who may read the \
                 ConfigMap: kubectl get configmap oz-audit -n oz-system -o go-template='{{{{index .data \"{id}.pub\"}}}}' > {id}.pub"
            )
        );
        let forbidden = CliError::Forbidden {
            message: "configmaps \"oz-audit\" is forbidden: User \"alice\" cannot get resource"
                .into(),
        };
        let error = keys_unreadable("oz-system", forbidden, &hint);
        assert_eq!(error.exit_code(), 2);
        let error = error.to_string();
        assert!(
            error.starts_with(
                "cannot read the ConfigMap oz-audit in namespace oz-system, where oz publishes the \
                 audit keys: configmaps \"oz-audit\" is forbidden"
            ),
            "{error}"
        );
        assert!(
            error.contains("ask a cluster admin for get on it"),
            "{error}"
        );
        assert!(error.ends_with(&format!("; or {hint}")), "{error}");
        // Files without a checkpoint yet: the placeholder, and where the id is found.
        assert!(
            public_key_hint("oz", &[]).ends_with(
                "-n oz -o go-template='{{index .data \"KEYID.pub\"}}' > KEYID.pub (KEYID: the keyId of the files' checkpoints)"
            )
        );
    }

    #[test]
    fn a_clusters_files_are_checked_only_with_keys_labelled_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let (_, b_key) = crate::fixtures::cluster_audit_log(dir.path(), "b");
        let (c_file, c_key) = crate::fixtures::cluster_audit_log(dir.path(), "c");
        let args = |keys: &[String]| KeyArgs {
            public_keys: keys
                .iter()
                .map(|k| Labelled::parse(k.into()).unwrap())
                .collect(),
            oz_namespace: "oz-system".into(),
        };
        let labelled = |cluster: &str, path: &Path| format!("{cluster}={}", path.display());
        let c = Trail {
            cluster: Some("c".into()),
            files: vec![c_file.clone()],
        };
        let c_id = checkpoint_key_ids(std::slice::from_ref(&c_file)).remove(0);
        let missing = format!(
            "no key for cluster c's files: pass --public-key c=PEM with a key of cluster c (a key \
             is trusted only for the files of the cluster it is labelled with, and ozctl does not \
             take it from your kubeconfig's cluster); saved by someone who may read the ConfigMap \
             oz-audit on cluster c: kubectl --context CONTEXT-OF-c get configmap oz-audit -n \
             oz-system -o go-template='{{{{index .data \"{c_id}.pub\"}}}}' > c-{c_id}.pub"
        );
        // b's key is b's alone; a key without a cluster is for the files without one; and with
        // no key at all, a cluster's files are not checked with the kubeconfig's cluster's.
        for keys in [
            vec![labelled("b", &b_key)],
            vec![b_key.display().to_string()],
            vec![],
        ] {
            let error = pinned_keys(&args(&keys), &c).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{keys:?}");
            assert_eq!(error.to_string(), missing, "{keys:?}");
        }
        let own = pinned_keys(&args(&[labelled("b", &b_key), labelled("c", &c_key)]), &c);
        let c_public = keys_in_file(&c_key).unwrap();
        assert_eq!(own.unwrap(), Some(c_public.clone()));

        let local = Trail {
            cluster: None,
            files: vec![c_file],
        };
        assert_eq!(
            pinned_keys(&args(&[]), &local).unwrap(),
            None,
            "the ConfigMap, as without a fleet"
        );
        assert_eq!(
            pinned_keys(&args(&[c_key.display().to_string()]), &local).unwrap(),
            Some(c_public)
        );
        let error = pinned_keys(&args(&[labelled("c", &c_key)]), &local).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert_eq!(
            error.to_string(),
            "no key for the files without a cluster: pass --public-key PEM (a --public-key \
             CLUSTER=PEM is only for the files labelled CLUSTER=FILE)"
        );
    }

    #[test]
    fn key_files_hold_one_key_or_several() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            Signer::generate().unwrap().public_key(),
            Signer::generate().unwrap().public_key(),
        );
        let one = dir.path().join("one.pub");
        std::fs::write(&one, a.to_spki_pem()).unwrap();
        let two = dir.path().join("two.pub");
        std::fs::write(&two, a.to_spki_pem() + &b.to_spki_pem()).unwrap();
        let two_keys = keys_in_file(&two).unwrap();
        assert_eq!(keys_in_file(&one).unwrap(), [a]);
        assert_eq!(two_keys.len(), 2);
        assert_eq!(two_keys[1], b);
        for bad in [dir.path().join("missing.pub"), dir.path().to_path_buf()] {
            assert_eq!(keys_in_file(&bad).unwrap_err().exit_code(), 2, "{bad:?}");
        }
        let private = dir.path().join("private.pem");
        std::fs::write(&private, Signer::generate().unwrap().to_pkcs8_pem()).unwrap();
        assert_eq!(keys_in_file(&private).unwrap_err().exit_code(), 2);
    }
}
