//! `ozctl audit`: oz's tamper-evident audit files (`docs/audit.md`). `ozctl audit verify`
//! ([`verify`]) checks their hash chain and signed checkpoints and names every problem;
//! `ozctl audit FILE...` ([`review`]) lists their records for an access review, each marked
//! verified or not. Both read the files with `oz-audit`, which does the checking.
//!
//! A fleet's files may be given at once, each labelled with its cluster (`CLUSTER=FILE`): each
//! cluster's files are a [`trails::Trail`], checked with the keys labelled with that cluster
//! alone. The keys to trust come from `--public-key` files, else, for files without a
//! cluster, from the ConfigMap `oz-audit` that oz publishes its keys in ([`trusted_keys()`]);
//! only then is the cluster asked anything. An error that keeps the check from running (a
//! file or key that cannot be read, a cluster without its key) exits 2, a problem the check
//! finds exits 1.

pub mod brokered;
mod problems;
pub mod recordings;
pub mod review;
pub mod trails;
pub mod trusted_keys;
pub mod verify;

use clap::{Args, Subcommand};

use trusted_keys::trusted_keys;
pub use trusted_keys::{KEYS_CONFIGMAP, KeyArgs};

use crate::{error::CliError, session::ClusterArgs};

/// `ozctl audit`: the records of audit files, or (`verify`) a check of the files.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    #[command(flatten)]
    pub review: review::ReviewArgs,
    #[command(flatten)]
    pub keys: KeyArgs,
}

/// `ozctl audit`'s subcommands.
#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Check audit files: their hash chain and signed checkpoints; name every record edited,
    /// removed, reordered or not yet signed
    Verify(verify::VerifyArgs),
}

/// Runs `ozctl audit` or `ozctl audit verify`: the exit code, or an error that kept the check
/// from running (exit code 2).
pub async fn run(cluster: &ClusterArgs, program: &str, args: AuditArgs) -> Result<u8, CliError> {
    match args.command {
        Some(AuditCommand::Verify(verify)) => {
            let trails = trails::trails(&verify.files)?;
            let trails = trusted_keys(&verify.keys, cluster, program, trails).await?;
            verify::run(&verify, &trails)
        }
        None => {
            let trails = review::trails(&args.review)?;
            let trails = trusted_keys(&args.keys, cluster, program, trails).await?;
            review::run(&args.review, cluster.namespace.clone(), &trails)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::{Cli, Command};

    /// The whole command, up to the point where it would ask the cluster: a cluster's files
    /// without its key stop it there, exit 2, with the flag to pass.
    #[test]
    fn a_clusters_files_without_its_key_exit_2_before_the_cluster_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (b, _) = crate::fixtures::cluster_audit_log(dir.path(), "b");
        let (c, c_key) = crate::fixtures::cluster_audit_log(dir.path(), "c");
        let (b, c) = (format!("b={}", b.display()), format!("c={}", c.display()));
        let c_key = format!("c={}", c_key.display());
        // A kubeconfig that does not exist: were it read, the error would say so.
        let kubeconfig = dir.path().join("no-kubeconfig").display().to_string();
        for words in [
            &["verify", &b, &c, "--public-key", &c_key][..],
            &[&b, &c, "--public-key", &c_key],
            &[&b],
            &["--fleet-cluster", "b", &b, &c, "--public-key", &c_key],
        ] {
            let mut all = vec!["ozctl", "--kubeconfig", &kubeconfig, "audit"];
            all.extend(words);
            let cli = Cli::try_parse_from(&all).unwrap();
            let Command::Audit(args) = cli.command else {
                panic!()
            };
            let error =
                futures::executor::block_on(super::run(&cli.cluster, "ozctl", args)).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{all:?}");
            assert!(
                error
                    .to_string()
                    .starts_with("no key for cluster b's files: pass --public-key b=PEM"),
                "{all:?}: {error}"
            );
        }
    }
}
