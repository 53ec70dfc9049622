//! oz-manager: oz's controllers and admission webhooks in one process.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "oz-manager",
    version,
    about = "oz: just-in-time access for Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of the four oz kinds as YAML.
    Crds,
}

fn main() -> std::process::ExitCode {
    match Cli::parse().command {
        Command::Crds => match oz_api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("oz-manager: could not render the CRDs: {e}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}
