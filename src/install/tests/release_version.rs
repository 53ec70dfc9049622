//! One version for everything a release ships: the crates, the image, the chart and the installs.
//! A version bump that misses one of them fails here, not as an ImagePullBackOff in a cluster.

use serde_json::Value;

use crate::install::{DEFAULT_IMAGE, InstallOptions, install_objects};

fn repository_file(path: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&repository_file(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `version` of the workspace's `[workspace.package]`, which every crate inherits.
fn workspace_version() -> String {
    let manifest = repository_file("Cargo.toml");
    let package = manifest
        .split_once("[workspace.package]")
        .expect("Cargo.toml has [workspace.package]")
        .1;
    package
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| l.strip_prefix("version = "))
        .expect("[workspace.package] has a version")
        .trim_matches('"')
        .to_string()
}

#[test]
fn every_crate_has_the_workspace_version() {
    let version = workspace_version();
    assert_eq!(env!("CARGO_PKG_VERSION"), version);
    let root = repository_file("Cargo.toml");
    let members = root
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("Cargo.toml has a members list")
        .0
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty());
    for manifest in
        std::iter::once("Cargo.toml".to_string()).chain(members.map(|m| format!("{m}/Cargo.toml")))
    {
        assert!(
            repository_file(&manifest).contains("\nversion.workspace = true\n"),
            "{manifest} does not take the workspace's version"
        );
    }
}

#[test]
fn the_installs_default_image_is_this_versions() {
    let image = format!("oz:{}", workspace_version());
    assert_eq!(DEFAULT_IMAGE, image);
    let deployment = install_objects(&InstallOptions::default())
        .unwrap()
        .into_iter()
        .find(|m| {
            m.object
                .types
                .as_ref()
                .is_some_and(|t| t.kind == "Deployment")
        })
        .expect("the install has a Deployment");
    assert_eq!(
        deployment.object.data["spec"]["template"]["spec"]["containers"][0]["image"],
        image.as_str()
    );
    assert!(
        repository_file("config/default/install.yaml").contains(&format!("image: {image}\n")),
        "config/default/install.yaml's image is not {image}: run `make manifests`"
    );
}

#[test]
fn the_kustomization_sets_the_image_to_this_versions() {
    let kustomization = yaml("config/default/kustomization.yaml");
    let images = kustomization["images"]
        .as_array()
        .expect("config/default/kustomization.yaml has an images list");
    let (repository, _) = DEFAULT_IMAGE.split_once(':').unwrap();
    let entry = images
        .iter()
        .find(|i| i["name"] == repository)
        .unwrap_or_else(|| panic!("no images entry named {repository}: {images:?}"));
    assert_eq!(entry["newTag"], workspace_version().as_str());
}

#[test]
fn the_chart_and_its_default_image_are_this_version() {
    let version = workspace_version();
    let chart = yaml("charts/oz/Chart.yaml");
    assert_eq!(chart["version"], version.as_str(), "Chart.yaml's version");
    assert_eq!(
        chart["appVersion"],
        version.as_str(),
        "Chart.yaml's appVersion"
    );
    let values = yaml("charts/oz/values.yaml");
    let image = &values["controllerManager"]["manager"]["image"];
    assert_eq!(image["tag"], version.as_str(), "values.yaml's image tag");
    assert_eq!(
        format!("{}:{}", image["repository"].as_str().unwrap(), version),
        DEFAULT_IMAGE,
        "the chart installs the image the install does"
    );
}
