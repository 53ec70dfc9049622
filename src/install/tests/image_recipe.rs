//! The Dockerfile, checked against the workspace, since no registry is reachable to build it
//! here: every workspace member's manifest is in its dependency layer (cargo cannot load the
//! workspace without them), every crate oz-manager is built from is rebuilt from its own
//! sources, and every port oz-manager serves is exposed.

use crate::install::{HEALTH_PORT, METRICS_PORT, SESSIONS_PORT, WEBHOOK_PORT};

fn repository_file(path: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `members` of the workspace's root manifest.
fn workspace_members() -> Vec<String> {
    let manifest = repository_file("Cargo.toml");
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("Cargo.toml has a members list")
        .0;
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The Dockerfile's instruction (a `RUN` with its continuation lines joined) that contains
/// `needle`.
fn instruction_with(dockerfile: &str, needle: &str) -> String {
    let joined = dockerfile.replace("\\\n", " ");
    joined
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no Dockerfile instruction contains {needle:?}"))
        .to_string()
}

#[test]
fn every_workspace_member_is_in_the_dockerfiles_dependency_layer() {
    let dockerfile = repository_file("Dockerfile");
    let members = workspace_members();
    assert!(members.contains(&"sessions".to_string()), "{members:?}");
    let stand_ins = instruction_with(&dockerfile, "mkdir -p");
    let cleared = instruction_with(&dockerfile, "rm -rf");
    for member in &members {
        let copy = format!("COPY {member}/Cargo.toml {member}/");
        assert!(dockerfile.contains(&copy), "the Dockerfile lacks `{copy}`");
        let src = format!("{member}/src");
        assert!(
            stand_ins.contains(&src),
            "no stand-in for {src}: {stand_ins}"
        );
        assert!(
            cleared.contains(&src)
                || cleared.contains(&format!(" {}", member.split('/').next().unwrap())),
            "the stand-ins of {src} are left in the image's build: {cleared}"
        );
    }
}

#[test]
fn the_crates_oz_manager_is_built_from_are_rebuilt_from_their_sources() {
    let dockerfile = repository_file("Dockerfile");
    let touched = instruction_with(&dockerfile, "-exec touch");
    for (crate_name, dir) in [
        ("oz-api", "api"),
        ("oz-audit", "audit"),
        ("oz-webhooks", "webhooks"),
        ("oz-sessions", "sessions"),
    ] {
        assert!(
            repository_file("Cargo.toml").contains(&format!("{crate_name}.workspace = true")),
            "oz does not depend on {crate_name}: update this test"
        );
        assert!(
            touched.contains(&format!("{dir}/src")),
            "{dir}/src is not touched after COPY, so the stand-in build of {crate_name} is kept: {touched}"
        );
    }
}

#[test]
fn the_image_exposes_every_port_oz_manager_serves() {
    let dockerfile = repository_file("Dockerfile");
    let exposed = instruction_with(&dockerfile, "EXPOSE");
    for port in [
        METRICS_PORT,
        HEALTH_PORT,
        WEBHOOK_PORT,
        i32::from(SESSIONS_PORT),
    ] {
        assert!(
            exposed.split_whitespace().any(|p| p == port.to_string()),
            "port {port} is not exposed: {exposed}"
        );
    }
}
