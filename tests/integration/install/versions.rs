//! `--version` of both binaries: the workspace's version, one for the crates, the image and the
//! chart, and the commit the binary was built from (`unknown` for a plain `cargo build`).

use std::{path::Path, process::Command};

use crate::support::ozctl::ozctl_bin;

/// Checks that `binary --version` prints `program VERSION (commit COMMIT)`, and returns COMMIT:
/// `unknown`, or a commit's abbreviated hash (`-dirty` when built from a changed checkout).
pub(crate) fn version_commit(binary: &Path, program: &str) -> String {
    let output = Command::new(binary).arg("--version").output().unwrap();
    assert!(output.status.success(), "{}: {output:?}", binary.display());
    let text = String::from_utf8(output.stdout).unwrap();
    let prefix = format!("{program} {} (commit ", env!("CARGO_PKG_VERSION"));
    let commit = text
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("{} --version printed {text:?}", binary.display()));
    let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
    assert!(
        commit == "unknown" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{} --version names no commit: {text:?}",
        binary.display()
    );
    commit.to_string()
}

#[test]
fn oz_manager_names_its_version_and_commit() {
    version_commit(Path::new(env!("CARGO_BIN_EXE_oz-manager")), "oz-manager");
}

#[test]
fn ozctl_names_its_version_and_commit() {
    version_commit(ozctl_bin(), "ozctl");
}
