//! The ozctl binary, built for this run, and what it printed.

use std::{
    path::{Path, PathBuf},
    process::Output,
    sync::OnceLock,
};

use serde_json::Value;

/// ozctl, as built for this run. ozctl is a package of its own, and cargo tells an
/// integration test only where its own package's binaries are (`CARGO_BIN_EXE_*`), so the first
/// caller asks cargo to build ozctl, with the profile this test was built with, and takes the
/// path cargo reports: nearly free once `make test` (or `cargo build -p ozctl`) has built it,
/// and never stale, however these tests are run. Cargo releases its build lock before it runs
/// tests, so this does not wait on the cargo that started us.
pub fn ozctl_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_ozctl)
}

fn build_ozctl() -> PathBuf {
    // oz-manager's directory is named after the profile: `debug` for dev, else its own name.
    let profile = match Path::new(env!("CARGO_BIN_EXE_oz-manager"))
        .parent()
        .and_then(Path::file_name)
        .and_then(|dir| dir.to_str())
    {
        Some("debug") | None => "dev".to_string(),
        Some(dir) => dir.to_string(),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut build = std::process::Command::new(cargo);
    build
        .args(["build", "--package", "ozctl", "--bin", "ozctl"])
        .args(["--profile", &profile])
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(std::process::Stdio::inherit());
    // Cargo runs us with our package's variables (CARGO_MANIFEST_DIR, CARGO_PKG_*). A build
    // script that watches one (ring watches CARGO_MANIFEST_DIR) would be rebuilt whenever this
    // build and a developer's own alternate, so this build gets the developer's environment.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_") || key.starts_with("CARGO_MANIFEST_") {
            build.env_remove(key.as_ref());
        }
    }
    let output = build.output().expect("cannot run cargo to build ozctl");
    assert!(output.status.success(), "cargo build -p ozctl failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["target"]["name"] == "ozctl")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .expect("cargo built ozctl but did not say where")
}

/// Runs ozctl in namespace `ns` with `kubeconfig` in KUBECONFIG.
pub async fn ozctl_with(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(ozctl_bin())
        .args(["--namespace", ns])
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the command succeeded, showing everything it said if not.
#[track_caller]
pub fn assert_ok(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}
