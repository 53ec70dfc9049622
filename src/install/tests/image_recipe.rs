//! The two image recipes, checked against the workspace and each other. The Dockerfile cannot be
//! built here (no registry is reachable): every workspace member's manifest is in its dependency
//! layer (cargo cannot load the workspace without them), every crate it builds is rebuilt from
//! its own sources, and every port oz-manager serves is exposed. `make image`'s script
//! (`hack/image.sh`, built and tested in CI) builds the same packages and binaries with the same
//! cargo flags, and gives its image the same user, entrypoint and ports. Both carry the fleet
//! hub's credential plugin where the hub's provider file names it, built statically from the
//! same version of its module.

use crate::install::{
    HEALTH_PORT, METRICS_PORT, RUN_AS, SESSIONS_PORT, WEBHOOK_PORT, fleet_hub::SECRETREADER_PLUGIN,
};

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
    for port in served_ports() {
        assert!(
            exposed.split_whitespace().any(|p| p == port.to_string()),
            "port {port} is not exposed: {exposed}"
        );
    }
}

/// The ports every port constant of oz-manager's says it serves.
fn served_ports() -> Vec<i32> {
    vec![
        METRICS_PORT,
        HEALTH_PORT,
        WEBHOOK_PORT,
        i32::from(SESSIONS_PORT),
    ]
}

/// The arguments of the `cargo build` in `command`, up to the end of that command.
fn cargo_build_args(command: &str) -> Vec<String> {
    let (_, rest) = command
        .split_once("cargo build ")
        .unwrap_or_else(|| panic!("no `cargo build` in {command:?}"));
    let build = rest.split("&&").next().unwrap_or_default();
    build.split_whitespace().map(String::from).collect()
}

/// `args` without the flags that say how to build, not what: the profile (the script's is chosen
/// when it runs) and the target (the Dockerfile's Alpine is musl to begin with). Sorted.
fn what_is_built(args: &[String]) -> Vec<String> {
    let mut what = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--profile" || arg == "--target" {
            args.next();
        } else {
            what.push(arg.clone());
        }
    }
    what.sort();
    what
}

/// The value after each `flag` in `args`.
fn values_of(args: &[String], flag: &str) -> Vec<String> {
    args.windows(2)
        .filter(|pair| pair[0] == flag)
        .map(|pair| pair[1].clone())
        .collect()
}

/// The `name` of the package whose manifest is `manifest`.
fn package_name(manifest: &str) -> String {
    let package = manifest
        .split_once("[package]")
        .unwrap_or_else(|| panic!("no [package] in {manifest}"))
        .1;
    package
        .lines()
        .find_map(|l| l.strip_prefix("name = "))
        .expect("a package name")
        .trim_matches('"')
        .to_string()
}

/// The `cargo build` of `make image`'s script, and those of the Dockerfile (its dependency layer
/// and its final build).
fn image_builds() -> (Vec<String>, Vec<Vec<String>>) {
    let script = repository_file("hack/image.sh");
    let script_build = script
        .lines()
        .find(|l| l.trim_start().starts_with("cargo build "))
        .expect("hack/image.sh runs `cargo build`");
    let dockerfile = repository_file("Dockerfile");
    let docker_builds = [
        instruction_with(&dockerfile, "mkdir -p"),
        instruction_with(&dockerfile, "-exec touch"),
    ]
    .iter()
    .map(|run| cargo_build_args(run))
    .collect();
    (cargo_build_args(script_build), docker_builds)
}

#[test]
fn make_image_builds_what_the_dockerfile_builds_with_the_same_flags() {
    let (script, docker) = image_builds();
    for build in &docker {
        assert_eq!(
            what_is_built(build),
            what_is_built(&script),
            "the Dockerfile builds {build:?}, hack/image.sh {script:?}"
        );
        assert_eq!(
            values_of(build, "--profile"),
            ["release"],
            "the Dockerfile builds the full release profile: {build:?}"
        );
    }
    for flag in ["--locked", "--bin"] {
        assert!(script.contains(&flag.to_string()), "{flag}: {script:?}");
    }
    assert_eq!(
        values_of(&script, "--target"),
        ["\"$rust_target\""],
        "{script:?}"
    );
    // Both strip the binaries and name the commit they build.
    let (script_text, dockerfile) = (
        repository_file("hack/image.sh"),
        repository_file("Dockerfile"),
    );
    for text in [&script_text, &dockerfile] {
        assert!(text.contains("_STRIP=symbols"), "binaries not stripped");
        assert!(text.contains("OZ_GIT_COMMIT"), "no commit for --version");
    }
}

#[test]
fn make_image_builds_workspace_members_binaries_and_nothing_else() {
    let (script, _) = image_builds();
    let members = workspace_members();
    let manifests: Vec<(String, String)> = std::iter::once(".".to_string())
        .chain(members)
        .map(|dir| {
            let manifest = repository_file(&format!("{dir}/Cargo.toml"));
            (package_name(&manifest), manifest)
        })
        .collect();
    let packages = values_of(&script, "-p");
    for package in &packages {
        assert!(
            manifests.iter().any(|(name, _)| name == package),
            "hack/image.sh builds package {package}, which is no workspace member"
        );
    }
    for binary in values_of(&script, "--bin") {
        let declared = format!("name = \"{binary}\"");
        assert!(
            manifests
                .iter()
                .any(|(name, manifest)| packages.contains(name)
                    && manifest.contains("[[bin]]")
                    && manifest.contains(&declared)),
            "no package hack/image.sh builds declares the binary {binary}"
        );
    }
}

#[test]
fn both_images_run_oz_manager_as_65532_and_expose_every_port_it_serves() {
    let script = repository_file("hack/image.sh").replace("\\\n", " ");
    let dockerfile = repository_file("Dockerfile");
    let entrypoint = "/usr/local/bin/oz-manager";
    assert!(
        script.contains(&format!("--entrypoint '[\"{entrypoint}\"]'"))
            && dockerfile.contains(&format!("ENTRYPOINT [\"{entrypoint}\"]")),
        "both images run {entrypoint}"
    );
    assert!(
        script.contains(&format!(" \"$rootfs{entrypoint}\""))
            && dockerfile.contains(&format!("/out/oz-manager {entrypoint}")),
        "both images put oz-manager at {entrypoint}"
    );
    assert!(
        script.contains(&format!("--user {RUN_AS}:{RUN_AS}"))
            && dockerfile.contains(&format!("USER {RUN_AS}:{RUN_AS}")),
        "both images run as {RUN_AS}"
    );
    let config = script
        .lines()
        .find(|l| l.contains("--port"))
        .expect("hack/image.sh exposes ports");
    let words: Vec<String> = config.split_whitespace().map(String::from).collect();
    let mut exposed: Vec<i32> = values_of(&words, "--port")
        .iter()
        .map(|p| {
            let number = p
                .strip_suffix("/tcp")
                .unwrap_or_else(|| panic!("{p} is not TCP"));
            number.parse().unwrap()
        })
        .collect();
    exposed.sort();
    let mut served = served_ports();
    served.sort();
    assert_eq!(exposed, served, "hack/image.sh's ports");
}

/// The version of the Cluster Inventory API module hack/tools/go.mod pins (what
/// `hack/testenv.sh build-tools` builds the plugin from).
fn pinned_cluster_inventory_api() -> String {
    let go_mod = repository_file("hack/tools/go.mod");
    go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("sigs.k8s.io/cluster-inventory-api "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("hack/tools/go.mod requires sigs.k8s.io/cluster-inventory-api")
        .to_string()
}

#[test]
fn both_images_carry_the_secretreader_plugin_where_the_hubs_provider_file_names_it() {
    let dockerfile = repository_file("Dockerfile");
    let script = repository_file("hack/image.sh");
    let version = pinned_cluster_inventory_api();
    assert_eq!(version, "v0.1.0", "docs/fleet.md names the version");
    // The Dockerfile builds it statically, from the module at the pinned version.
    let build = instruction_with(&dockerfile, "go build");
    assert!(
        build.contains("CGO_ENABLED=0 go build"),
        "a static plugin: {build}"
    );
    assert!(
        build.contains(&format!(
            "go get sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin@{version} "
        )) && build.ends_with(" sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin"),
        "the Dockerfile builds another plugin or version than hack/tools/go.mod's {version}: {build}"
    );
    assert!(build.contains("-o /out/secretreader-plugin"), "{build}");
    assert!(
        dockerfile.contains(&format!(
            "COPY --from=secretreader /out/secretreader-plugin {SECRETREADER_PLUGIN}\n"
        )),
        "the Dockerfile's image has no plugin at {SECRETREADER_PLUGIN}"
    );
    // The script reuses the tests' build (static too), and puts it at the same path.
    assert!(
        script.contains("tools=$(hack/testenv.sh build-tools)"),
        "hack/image.sh takes the plugin from hack/testenv.sh build-tools"
    );
    assert!(
        script.contains(&format!(
            "\"$tools/secretreader-plugin\" \"$rootfs{SECRETREADER_PLUGIN}\""
        )),
        "hack/image.sh's image has no plugin at {SECRETREADER_PLUGIN}"
    );
    let testenv = repository_file("hack/testenv.sh");
    let tools_build = testenv
        .split_once("go_build_tools() {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .expect("hack/testenv.sh defines go_build_tools")
        .0;
    assert!(
        tools_build.contains("CGO_ENABLED=0")
            && tools_build.contains("plugins/secretreader/cmd/plugin"),
        "build-tools builds the plugin statically: {tools_build}"
    );
}
