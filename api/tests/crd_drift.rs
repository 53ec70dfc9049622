//! The committed CRD YAML must be exactly what the Rust types generate.

#[test]
fn committed_crds_match_the_rust_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd/crds.yaml");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = oz_api::crds_yaml().unwrap();
    assert!(
        committed == generated,
        "config/crd/crds.yaml is out of date with the Rust types in api/: run `make crds` and commit the result"
    );
}
