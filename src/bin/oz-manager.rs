//! oz-manager: oz's controllers and admission webhooks in one process. The flags and what they
//! run live in the library (`oz::manager`), where a unit test can parse them.

fn main() -> std::process::ExitCode {
    oz::manager::Command::parse_and_run()
}
