//! `ozctl audit`: oz's tamper-evident audit files (`docs/audit.md`). `ozctl audit verify`
//! ([`verify`]) checks their hash chain and signed checkpoints and names every problem;
//! `ozctl audit FILE...` ([`review`]) lists their records for an access review, each marked
//! verified or not. Both read the files with `oz-audit`, which does the checking.
//!
//! The keys to trust come from `--public-key` files, else from the ConfigMap `oz-audit` that
//! oz publishes its keys in ([`trusted_keys()`]); only then is the cluster asked anything. An
//! error that keeps the check from running (a file or key that cannot be read) exits 2, a
//! problem the check finds exits 1.

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
            let keys = trusted_keys(&verify.keys, cluster, program, &verify.files).await?;
            verify::run(&verify, &keys)
        }
        None => {
            let keys = trusted_keys(&args.keys, cluster, program, &args.review.files).await?;
            review::run(&args.review, cluster.namespace.clone(), &keys)
        }
    }
}
