//! Which keys `ozctl audit` trusts: `--public-key` files, else the ConfigMap `oz-audit` that oz
//! publishes its keys in; and what to tell a reader who can read neither.

use std::path::{Path, PathBuf};

use clap::Args;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use oz_audit::PublicKey;

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
    /// Trust this public key (a PEM file, as in the ConfigMap oz-audit); repeat for several
    /// [default: every key in the ConfigMap oz-audit]
    #[arg(long = "public-key", value_name = "PEM")]
    pub public_keys: Vec<PathBuf>,
    /// oz's namespace, where the ConfigMap oz-audit is
    #[arg(
        long,
        env = "OZ_NAMESPACE",
        default_value = "oz-system",
        value_name = "NAMESPACE"
    )]
    pub oz_namespace: String,
}

/// The keys to trust: those in the `--public-key` files, else every `<keyId>.pub` of the
/// ConfigMap `oz-audit` in `--oz-namespace`. When that cannot be read, the error says how to
/// get the key the audit `files` name.
pub async fn trusted_keys(
    args: &KeyArgs,
    cluster: &ClusterArgs,
    program: &str,
    files: &[PathBuf],
) -> Result<Vec<PublicKey>, CliError> {
    if !args.public_keys.is_empty() {
        let mut keys = Vec::new();
        for path in &args.public_keys {
            keys.extend(keys_in_file(path)?);
        }
        return Ok(keys);
    }
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
    let placeholder = ["KEYID".to_string()];
    let ids = if key_ids.is_empty() {
        &placeholder[..]
    } else {
        key_ids
    };
    let commands: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(
                "kubectl get configmap {KEYS_CONFIGMAP} -n {namespace} \
                 -o go-template='{{{{index .data \"{id}.pub\"}}}}' > {id}.pub"
            )
        })
        .collect();
    let what = if key_ids.is_empty() {
        " (KEYID: the keyId of the files' checkpoints)"
    } else {
        ""
    };
    format!(
        "pass --public-key with the key the files name, saved by someone who may read the ConfigMap: {}{what}",
        commands.join(" and ")
    )
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
