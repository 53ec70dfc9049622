//! What `oz-manager --version` and `ozctl --version` say: the workspace's version (one for the
//! crates, the image and the chart) and the commit the binary was built from.

/// The environment variable holding the commit a build is made from. `hack/image.sh` sets it
/// for the image's and the release's binaries; a plain `cargo build` leaves it unset.
pub const COMMIT_VARIABLE: &str = "OZ_GIT_COMMIT";

/// `VERSION (commit COMMIT)`, the text after the program's name in `--version`. `commit` is
/// what the binary was compiled with ([`COMMIT_VARIABLE`]); none, or an empty one, reads
/// `unknown`, which is what a build outside `make image` and `make release` says.
pub fn version_text(commit: Option<&str>) -> String {
    let commit = commit.map(str::trim).filter(|c| !c.is_empty());
    format!(
        "{} (commit {})",
        env!("CARGO_PKG_VERSION"),
        commit.unwrap_or("unknown")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_commit_or_says_it_is_unknown() {
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            version_text(Some("2f7fb3f")),
            format!("{version} (commit 2f7fb3f)")
        );
        for unknown in [None, Some(""), Some(" \n")] {
            assert_eq!(version_text(unknown), format!("{version} (commit unknown)"));
        }
    }
}
