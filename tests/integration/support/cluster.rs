//! The shared control plane of this test binary, oz's CRDs in it, and kubectl run as admin.

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::ConfigMap,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, ObjectMeta, PostParams},
};
use oz_testenv::ControlPlane;
use serde_json::json;
use tokio::sync::OnceCell;

use super::{manifests::parse_manifest, polling::eventually};

/// The shared control plane of this test binary.
pub fn env() -> &'static ControlPlane {
    ControlPlane::shared()
}

static CRDS: OnceCell<()> = OnceCell::const_new();

/// Installs oz's CRDs (once per test binary) and waits until the apiserver serves them.
pub async fn install_crds() {
    CRDS.get_or_init(|| async {
        let admin = env().admin().await.unwrap();
        install_crds_into(&admin).await;
        wait_until_collected_by_gc(&admin).await;
    })
    .await;
}

/// Installs oz's CRDs into the control plane `admin` is a client of (a test's own, or the
/// shared one through [`install_crds`]) and waits until each is established.
pub async fn install_crds_into(admin: &Client) {
    apply_crds(admin, oz_api::all_crds()).await;
}

/// Applies `all` (oz's CRDs, or another project's such as the ClusterProfile CRD) by
/// server-side apply and waits until each is established.
pub async fn apply_crds(admin: &Client, all: Vec<CustomResourceDefinition>) {
    oz_testenv::apply_crds(admin, &all, "oz-tests")
        .await
        .unwrap();
}

/// Waits until the garbage collector tracks the request kinds: it learns of new CRDs only at
/// its next discovery sync (every 5 s in the test control plane), and until then it deletes an
/// orphaned template without orphaning its requests, then collects them later as dependents of
/// an owner that is gone. A canary request owned by a ConfigMap, collected once the ConfigMap is
/// deleted, shows it tracks each kind.
async fn wait_until_collected_by_gc(admin: &Client) {
    let ns = env().namespace("gc-canary").await.unwrap();
    let owners: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let owner = owners
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let owner_ref = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid().unwrap(),
    }]);
    let mut canaries = Vec::new();
    for kind in ["ExecAccessRequest", "PodAccessRequest"] {
        let yaml = json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": kind,
            "metadata": {"name": "canary", "ownerReferences": owner_ref},
            "spec": {"templateName": "none"},
        })
        .to_string();
        let (object, resource) = parse_manifest(&yaml);
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &resource);
        api.create(&PostParams::default(), &object).await.unwrap();
        canaries.push((kind, api));
    }
    owners
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    for (kind, api) in canaries {
        eventually(
            Duration::from_secs(60),
            &format!("the garbage collector to track {kind}s"),
            || {
                let api = api.clone();
                async move { api.get_opt("canary").await.unwrap().is_none().then_some(()) }
            },
        )
        .await;
    }
}

/// Runs the bundled kubectl as admin, blocking, and ignores how it ends: for `Drop` impls,
/// which must work without a runtime, even while a failed test unwinds.
pub fn kubectl_quietly(args: &[&str]) {
    let _ = env()
        .kubectl(None)
        .unwrap()
        .args(args)
        .stdin(std::process::Stdio::null())
        .output();
}
