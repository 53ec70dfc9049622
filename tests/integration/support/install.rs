//! The generated install on the test control plane: applied by server-side apply as an operator
//! would, and oz-manager run with its flags and its ServiceAccount's credentials.

use std::path::PathBuf;

use k8s_openapi::{
    api::{
        authentication::v1::TokenRequest,
        core::v1::{ConfigMap, Secret, ServiceAccount},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{
    Api, Client, Config,
    api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use oz::install::{Component, InstallOptions, install_yaml};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_testenv::ControlPlane;
use serde_json::{Value, json};

use super::{
    cluster::{env, install_crds},
    manifests::parse_manifest,
    operator::Operator,
    polling::eventually,
};

pub const FIELD_MANAGER: &str = "oz-install-test";
const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The install's objects that exist once per control plane: applied for real only on a private
/// one (`sessions/end_to_end.rs`); on the shared one, another test's would be replaced.
pub const SHARED_KINDS: [&str; 3] = [
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

pub const TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
    metadata: {name: web-exec}\nspec:\n  \
    accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
    controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

/// alice's request through [`TEMPLATE`], its requester written by the admin who creates it (these
/// tests run oz-manager without the webhook that would stamp it).
pub const ALICES_REQUEST: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\n\
    metadata: {name: alice-web}\nspec:\n  templateName: web-exec\n  \
    requester: {username: alice, groups: [devs, system:authenticated]}\n";

/// What oz-manager creates at run time in its namespace `ns` with the webhooks and an audit
/// file, for an install named `name`: each object, and its owners (`None` once it is gone,
/// `Some(vec![])` if it has none).
pub async fn created_at_run_time(
    admin: &Client,
    ns: &str,
    name: &str,
) -> Vec<(String, Option<Vec<OwnerReference>>)> {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    let owners = |meta: ObjectMeta| meta.owner_references.unwrap_or_default();
    let mut found = Vec::new();
    for secret in [
        format!("{name}-webhook-ca"),
        format!("{name}-webhook-tls"),
        "oz-audit-signing-key".to_string(),
    ] {
        let got = secrets.get_opt(&secret).await.unwrap();
        found.push((format!("Secret {secret}"), got.map(|s| owners(s.metadata))));
    }
    let got = configmaps.get_opt("oz-audit").await.unwrap();
    found.push(("ConfigMap oz-audit".into(), got.map(|c| owners(c.metadata))));
    found
}
/// The exec and pod controllers' install, applied: oz in a namespace `<prefix>-oz` of its own,
/// watching `<prefix>` alone, the CRDs already there.
pub struct ScopedInstall {
    pub admin: Client,
    pub operator_ns: String,
    pub ns: String,
    pub yaml: String,
    pub applied: Vec<DynamicObject>,
}

impl ScopedInstall {
    pub async fn apply(prefix: &str) -> ScopedInstall {
        install_crds().await;
        let admin = env().admin().await.unwrap();
        let operator_ns = env().namespace(&format!("{prefix}-oz")).await.unwrap();
        let ns = env().namespace(prefix).await.unwrap();
        let options = InstallOptions {
            namespace: operator_ns.clone(),
            watch_namespaces: vec![ns.clone()],
            controllers: vec![Component::Exec, Component::Pod],
            crds: false,
            ..InstallOptions::default()
        };
        let yaml = install_yaml(&options).unwrap();
        let applied = apply_install(&admin, &yaml, |_| true).await;
        ScopedInstall {
            admin,
            operator_ns,
            ns,
            yaml,
            applied,
        }
    }
}

/// Applies the documents of `yaml` as admin by server-side apply, without force (nothing else
/// owns these objects), after `rewrite`, which also says whether to apply each (false leaves it
/// out). Returns what was applied.
pub async fn apply_install(
    admin: &Client,
    yaml: &str,
    mut rewrite: impl FnMut(&mut DynamicObject) -> bool,
) -> Vec<DynamicObject> {
    let mut applied = Vec::new();
    for document in yaml.split("\n---\n").skip(1) {
        let (mut object, resource) = parse_manifest(document);
        if !rewrite(&mut object) {
            continue;
        }
        let name = object.metadata.name.clone().unwrap();
        let api = api_for(admin, &object, &resource);
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", resource.kind));
        applied.push(object);
    }
    applied
}

pub fn api_for(
    client: &Client,
    object: &DynamicObject,
    resource: &ApiResource,
) -> Api<DynamicObject> {
    match &object.metadata.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Deletes the cluster-scoped objects among `applied` (but the Namespace).
pub async fn delete_cluster_scoped(admin: &Client, applied: &[DynamicObject]) {
    for object in applied {
        let types = object.types.clone().unwrap();
        if object.metadata.namespace.is_some() || types.kind == "Namespace" {
            continue;
        }
        let resource = parse_manifest(&serde_json::to_string(object).unwrap()).1;
        let name = object.metadata.name.clone().unwrap();
        let _ = api_for(admin, object, &resource)
            .delete(&name, &DeleteParams::default())
            .await;
    }
}

/// The Deployment's oz-manager flags for a local run: the watch flag left to [`Operator`],
/// metrics and probes off (tests run side by side), and `changes` applied (`None` drops a flag).
pub fn operator_args(yaml: &str, changes: &[(&str, Option<String>)]) -> Vec<String> {
    let deployment = yaml
        .split("\n---\n")
        .skip(1)
        .map(parse_manifest)
        .find(|(_, resource)| resource.kind == "Deployment")
        .expect("the install has a Deployment")
        .0;
    let args: Vec<String> = serde_json::from_value(
        deployment.data["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
    )
    .unwrap();
    let mut changes: Vec<(&str, Option<String>)> = changes.to_vec();
    changes.extend([
        ("--watch-namespaces", None),
        ("--metrics-bind-address", Some("0".into())),
        ("--health-probe-bind-address", Some("0".into())),
    ]);
    let flag = |arg: &str| arg.split('=').next().unwrap_or_default().to_string();
    let mut out: Vec<String> = args
        .into_iter()
        .filter(|arg| !changes.iter().any(|(f, _)| *f == flag(arg)))
        .collect();
    for (name, value) in changes {
        if let Some(value) = value {
            out.push(format!("{name}={value}"));
        }
    }
    out
}

/// A kubeconfig for the ServiceAccount `name` in `namespace`, with a token from the
/// TokenRequest API, for `plane`'s server and CA (`admin` is a client of it).
pub async fn service_account_kubeconfig(
    plane: &ControlPlane,
    admin: &Client,
    namespace: &str,
    name: &str,
) -> PathBuf {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let admin_config: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(plane.admin_kubeconfig()).unwrap())
            .unwrap();
    let cluster = admin_config["clusters"][0].clone();
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
        "current-context": name,
    });
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{namespace}-{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string_pretty(&kubeconfig).unwrap()).unwrap();
    path
}

pub async fn client_from(kubeconfig: &std::path::Path) -> Client {
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    Client::try_from(config).unwrap()
}
/// Waits until request `name` is Ready and returns the pod it grants.
pub async fn wait_for_ready(admin: &Client, ns: &str, name: &str, operator: &Operator) -> String {
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), ns);
    eventually(
        WAIT,
        &format!("{name} to become Ready (log: {})", operator.log.display()),
        || {
            let requests = requests.clone();
            async move {
                let status = requests.get(name).await.ok()?.status?;
                (status.phase == Some(RequestPhase::Ready))
                    .then_some(status.pod_name)
                    .flatten()
            }
        },
    )
    .await
}
