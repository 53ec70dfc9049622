//! The Helm chart (`charts/oz`): it lints, it renders exactly what `oz-manager manifests`
//! prints for the same settings (but for the differences named in [`CHART_ONLY`]), its values
//! table documents every value, and against the real control plane it installs, runs oz-manager
//! under its own RBAC, moves that RBAC on upgrade and leaves nothing behind on uninstall.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use k8s_openapi::api::{
    apps::v1::Deployment,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Secret, Service, ServiceAccount},
    rbac::v1::{ClusterRole, Role, RoleBinding},
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};
use oz::install::{Component, FleetHubOptions, InstallOptions, fleet, install_objects};
use oz_api::{ExecAccessRequest, FleetNames, PrefixMap};
use oz_testenv::workloads::{self, WorkloadSpec};
use serde_json::{Value, json};

use crate::support::{
    cluster::{env, install_crds},
    install::{
        ALICES_REQUEST, TEMPLATE, created_at_run_time, operator_args, service_account_kubeconfig,
        wait_for_ready,
    },
    manifests::{create_manifest, parse_manifest},
    operator::Operator,
    polling::eventually,
    users::can_exec,
};

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/oz");
const WAIT: Duration = Duration::from_secs(60);

/// What the chart renders that `oz-manager manifests` does not, and nothing else:
/// - Helm's standard labels `helm.sh/chart` on every object, and `app.kubernetes.io/managed-by:
///   Helm` on those oz-manager does not manage at run time (the webhook configurations and
///   APIService keep `oz-webhooks`: oz-manager applies them too);
/// - no Namespace: Helm installs into the release namespace (`--create-namespace`);
/// - the leader-election Lease, which the chart holds so that uninstalling removes it;
/// - the CRDs, which are in the chart's `crds/` (compared with `config/crd/crds.yaml` on their own).
const CHART_ONLY: &str = "helm.sh/chart and managed-by: Helm labels; no Namespace; a Lease";

fn helm(args: &[&str]) -> String {
    let output = Command::new(oz_testenv::helm().unwrap())
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "helm {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The chart's `values` as a file helm reads with `-f`, with the webhooks' callers chosen
/// unverified unless `values` chose (or left unchosen on purpose, with
/// `webhook.unverifiedCallers: false`): the chart refuses to render without a choice.
fn chart_values_file(values: &Value) -> PathBuf {
    let mut values = values.clone();
    let webhook = &values["webhook"];
    if webhook.get("clientCASecret").is_none() && webhook.get("unverifiedCallers").is_none() {
        values["webhook"]["unverifiedCallers"] = json!(true);
    }
    json_file(&values)
}

/// `values` as a file (JSON is YAML).
fn json_file(values: &Value) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("helm-values-{}.json", digest(&values.to_string())));
    std::fs::write(&path, values.to_string()).unwrap();
    path
}

/// A short stable name for some text, to name files after.
fn digest(text: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// The chart rendered for `release` in `namespace` with `values`, one JSON value per object.
fn helm_template(release: &str, namespace: &str, values: &Value) -> Vec<Value> {
    let file = chart_values_file(values);
    let yaml = helm(&[
        "template",
        release,
        CHART,
        "--namespace",
        namespace,
        "-f",
        file.to_str().unwrap(),
    ]);
    documents(&yaml)
}

fn documents(yaml: &str) -> Vec<Value> {
    yaml.split("\n---")
        .filter_map(|document| serde_saphyr::from_str::<Value>(document).ok())
        .filter(|value| value.is_object())
        .collect()
}

fn key(object: &Value) -> (String, String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

/// The chart's objects, keyed, without Helm's own labels (see [`CHART_ONLY`]); the Lease aside.
fn chart_objects(objects: Vec<Value>) -> BTreeMap<(String, String, String), Value> {
    let mut out = BTreeMap::new();
    for mut object in objects {
        if object["kind"] == "Lease" {
            continue;
        }
        let labels = object["metadata"]["labels"].as_object_mut().unwrap();
        assert!(
            labels.remove("helm.sh/chart").is_some(),
            "{:?} has Helm's chart label",
            key(&object)
        );
        let labels = object["metadata"]["labels"].as_object_mut().unwrap();
        if labels.get("app.kubernetes.io/managed-by") == Some(&json!("Helm")) {
            labels.remove("app.kubernetes.io/managed-by");
        }
        out.insert(key(&object), object);
    }
    out
}

/// `oz-manager manifests` for `options`, keyed, without the Namespace (see [`CHART_ONLY`]).
fn install_manifests(options: &InstallOptions) -> BTreeMap<(String, String, String), Value> {
    install_objects(options)
        .unwrap()
        .into_iter()
        .map(|m| serde_json::to_value(&m.object).unwrap())
        .filter(|object| object["kind"] != "Namespace")
        .map(|object| (key(&object), object))
        .collect()
}

/// Renders the chart with `values` as release `options.name` in `options.namespace` and asserts
/// it holds exactly the install's objects (but [`CHART_ONLY`]), each equal.
fn assert_chart_matches(case: &str, options: InstallOptions, values: Value) {
    let options = InstallOptions {
        crds: false,
        unverified_webhook_callers: options.webhook_client_ca_secret.is_none()
            && options.controllers.contains(&Component::Webhooks)
            && values["webhook"]["unverifiedCallers"] != json!(false),
        ..options
    };
    let chart = chart_objects(helm_template(&options.name, &options.namespace, &values));
    let install = install_manifests(&options);
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        install.keys().collect::<Vec<_>>(),
        "{case}: the chart renders other objects than `{}` (allowed: {CHART_ONLY})",
        options.command_line()
    );
    for (key, expected) in &install {
        assert_eq!(
            &chart[key],
            expected,
            "{case}: the chart's {key:?} differs from `{}`",
            options.command_line()
        );
    }
}

#[test]
fn the_chart_lints_strictly_and_ships_the_crds() {
    let output = helm(&["lint", "--strict", CHART]);
    assert!(output.contains("0 chart(s) failed"), "{output}");
    let shipped = std::fs::read_to_string(format!("{CHART}/crds/crds.yaml")).unwrap();
    let generated =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/crd/crds.yaml"))
            .unwrap();
    assert!(
        shipped == generated,
        "charts/oz/crds/crds.yaml differs from config/crd/crds.yaml: copy it (`make crds` writes both)"
    );
}

#[test]
fn the_chart_renders_what_oz_manager_manifests_prints_for_the_same_settings() {
    assert_chart_matches("defaults", InstallOptions::default(), json!({}));
    assert_chart_matches(
        "scoped",
        InstallOptions {
            namespace: "oz-ops".into(),
            watch_namespaces: vec!["team-a".into(), "team-b".into()],
            controllers: vec![Component::Exec, Component::Webhooks],
            ..InstallOptions::default()
        },
        json!({"watchNamespaces": ["team-a", "team-b"], "controllers": ["exec", "webhooks"]}),
    );
    assert_chart_matches(
        "sessions, another release name",
        InstallOptions {
            name: "jit".into(),
            controllers: Component::ALL.to_vec(),
            ..InstallOptions::default()
        },
        json!({"controllers": ["exec", "pod", "webhooks", "sessions"]}),
    );
    assert_chart_matches(
        "recordings in S3, credentials from a Secret",
        InstallOptions {
            controllers: Component::ALL.to_vec(),
            session_recordings: Some("s3://recordings/oz?region=eu-west-1".into()),
            session_recordings_secret: Some("oz-recordings-s3".into()),
            ..InstallOptions::default()
        },
        json!({
            "controllers": ["exec", "pod", "webhooks", "sessions"],
            "sessions": {
                "recordings": "s3://recordings/oz?region=eu-west-1",
                "recordingsCredentialsSecret": "oz-recordings-s3",
            },
        }),
    );
    assert_chart_matches(
        "egress",
        InstallOptions {
            egress_cidrs: vec!["10.96.0.1/32".into(), "203.0.113.0/24".into()],
            ..InstallOptions::default()
        },
        json!({"egressCIDRs": ["10.96.0.1/32", "203.0.113.0/24"]}),
    );
    assert_chart_matches(
        "replicas",
        InstallOptions {
            replicas: 2,
            ..InstallOptions::default()
        },
        json!({"controllerManager": {"replicas": 2}}),
    );
    assert_chart_matches(
        "caller verification, with sessions",
        InstallOptions {
            watch_namespaces: vec!["team-a".into()],
            controllers: Component::ALL.to_vec(),
            webhook_client_ca_secret: Some("apiserver-webhook-client-ca".into()),
            webhook_ingress_cidrs: vec!["10.0.0.0/16".into(), "fd00::/64".into()],
            ..InstallOptions::default()
        },
        json!({
            "watchNamespaces": ["team-a"],
            "controllers": ["exec", "pod", "webhooks", "sessions"],
            "webhook": {
                "clientCASecret": "apiserver-webhook-client-ca",
                "ingressCIDRs": ["10.0.0.0/16", "fd00::/64"],
            },
        }),
    );
    assert_chart_matches(
        "pod only",
        InstallOptions {
            controllers: vec![Component::Pod],
            ..InstallOptions::default()
        },
        json!({"controllers": ["pod"]}),
    );
    assert_chart_matches(
        "fleet hub",
        InstallOptions {
            fleet_hub: Some(FleetHubOptions::default()),
            ..InstallOptions::default()
        },
        json!({"fleet": {"hub": {"enabled": true}}}),
    );
    assert_chart_matches(
        "fleet hub, named, its own fleet namespace, another release name",
        InstallOptions {
            name: "jit".into(),
            namespace: "oz-ops".into(),
            fleet_hub: Some(FleetHubOptions {
                name: "hq".into(),
                namespace: "fleet-a".into(),
            }),
            ..InstallOptions::default()
        },
        json!({"fleet": {"hub": {"enabled": true, "name": "hq", "namespace": "fleet-a"}}}),
    );
    assert_chart_matches(
        "fleet spoke",
        InstallOptions {
            namespace: "oz-ops".into(),
            fleet_spoke: true,
            ..InstallOptions::default()
        },
        json!({"fleet": {"spoke": {"enabled": true}}}),
    );
    // A prefix ending in ':' (which would end a plain YAML scalar), one side empty.
    let map = |text| PrefixMap::parse("--fleet-user-prefix", text).unwrap();
    assert_chart_matches(
        "fleet spoke mapping the hub's names",
        InstallOptions {
            namespace: "oz-ops".into(),
            fleet_spoke: true,
            fleet_names: FleetNames {
                users: Some(map("=corp:")),
                groups: Some(map("oidc:=corp:")),
            },
            ..InstallOptions::default()
        },
        json!({"fleet": {"spoke": {"enabled": true, "userPrefix": "=corp:", "groupPrefix": "oidc:=corp:"}}}),
    );
    assert_chart_matches(
        "fleet spoke mapping the hub's groups only",
        InstallOptions {
            fleet_spoke: true,
            fleet_names: FleetNames {
                users: None,
                groups: Some(map("hub-=")),
            },
            ..InstallOptions::default()
        },
        json!({"fleet": {"spoke": {"enabled": true, "groupPrefix": "hub-="}}}),
    );
}

/// The fleet's chart-only values: a provider file of one's own goes into the ConfigMap as
/// given, and a spoke reached as another user gets no credential of the chart's.
#[test]
fn the_fleets_own_values_replace_the_provider_file_and_the_hubs_user() {
    let providers = r#"{"providers": [{"name": "eks", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/usr/local/bin/secretreader-plugin"}}]}"#;
    let objects = helm_template(
        "oz",
        "oz-system",
        &json!({"fleet": {"hub": {"enabled": true, "providerFile": providers}}}),
    );
    let config_map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "oz-fleet-providers")
        .expect("the provider file's ConfigMap");
    assert_eq!(config_map["data"]["providers.json"], providers);

    let user = "system:serviceaccount:open-cluster-management-agent-addon:hub";
    let objects = helm_template(
        "oz",
        "oz-system",
        &json!({"fleet": {"spoke": {"enabled": true, "hubUser": user}}}),
    );
    assert!(
        !objects
            .iter()
            .any(|o| o["metadata"]["name"] == fleet::HUB_CREDENTIAL_NAME),
        "no credential of the chart's when the hub comes as another user"
    );
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!(format!("--fleet-hub-user={user}"))),
        "{args}"
    );
}

/// The chart-only values (no `oz-manager manifests` flag) land in the Deployment as given.
#[test]
fn the_charts_own_values_land_in_the_deployment() {
    let values = json!({
        "controllerManager": {
            "nodeSelector": {"pool": "system"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
            "manager": {
                "image": {"repository": "registry.example/oz", "tag": "1.2.3"},
                "resources": {"requests": {"cpu": "50m", "memory": "100Mi"}},
                "logLevel": "debug",
            },
        },
        "historyRetention": "30d",
        "requestAdminGroups": ["platform", "security"],
        "maxGrantsPerUser": 3,
        "audit": {"log": {"enabled": true, "maxFiles": 3}, "enforceNamespaces": ["prod"]},
        "sessions": {"recordings": "s3://recordings/oz", "recordingMaxSize": "16Mi"},
        "controllers": ["exec", "pod", "webhooks", "sessions"],
        "webhook": {"podExecWatcher": {"failurePolicy": "Fail"}},
    });
    let objects = helm_template("oz", "oz-system", &values);
    // Oz's name for the audit webhook's failurePolicy: the configuration says it, and so does
    // oz-manager's flag (it re-applies the configuration at start).
    let audit = objects
        .iter()
        .find(|o| {
            o["kind"] == "ValidatingWebhookConfiguration" && o["metadata"]["name"] == "oz-audit"
        })
        .unwrap();
    assert_eq!(audit["webhooks"][0]["failurePolicy"], "Fail");
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    // Helm merges a map with the default: `kubernetes.io/os: null` would drop that key.
    assert_eq!(
        pod["nodeSelector"],
        json!({"kubernetes.io/os": "linux", "pool": "system"})
    );
    assert_eq!(
        pod["tolerations"],
        values["controllerManager"]["tolerations"]
    );
    assert_eq!(pod["affinity"], values["controllerManager"]["affinity"]);
    assert_eq!(container["image"], "registry.example/oz:1.2.3");
    assert_eq!(
        container["resources"],
        json!({"requests": {"cpu": "50m", "memory": "100Mi"},
               "limits": {"cpu": "500m", "memory": "256Mi"}})
    );
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for flag in [
        "--log-level=debug",
        "--history-retention=30d",
        "--request-admin-groups=platform,security",
        "--max-grants-per-user=3",
        "--audit-log-path=/var/log/oz/audit.jsonl",
        "--audit-log-max-files=3",
        "--audit-enforce-namespaces=prod",
        "--session-recordings=s3://recordings/oz",
        "--session-recording-max-size=16Mi",
        "--audit-failure-policy=Fail",
    ] {
        assert!(args.contains(&flag), "{flag} in {args:?}");
    }
    // In S3 the total is not this pod's disk: no total cap unless asked for.
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--session-recordings-max-total-size")),
        "{args:?}"
    );
    // Both emptyDirs have a size limit, which oz-manager's caps and the audit rotation stay below.
    let volumes = pod["volumes"].as_array().unwrap();
    for (name, limit) in [("audit-log", "1200Mi"), ("session-recordings", "1Gi")] {
        let volume = volumes.iter().find(|v| v["name"] == name).unwrap();
        assert_eq!(volume["emptyDir"]["sizeLimit"], limit, "{volume}");
    }
    // The audit file is on a volume of its own: the root filesystem is read-only.
    assert!(
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "audit-log", "mountPath": "/var/log/oz"})),
        "{}",
        container["volumeMounts"]
    );
}

/// Bad values fail the render with a message naming the value and the fix.
#[test]
fn bad_values_are_refused_naming_the_value() {
    for (values, says) in [
        (
            json!({"controllers": ["exec", "ssh"]}),
            "controllers: unknown part \"ssh\"",
        ),
        (json!({"controllers": []}), "controllers: empty"),
        (
            json!({"controllers": ["exec", "sessions"]}),
            "controllers: sessions serve the webhooks' certificate: add webhooks",
        ),
        (
            json!({"controllerManager": {"replicas": 0}}),
            "controllerManager.replicas must be at least 1",
        ),
        (
            json!({"webhook": {"podExecWatcher": {"failurePolicy": "fail"}}}),
            "webhook.podExecWatcher.failurePolicy: \"fail\": want Ignore or Fail",
        ),
        (
            json!({"controllers": ["exec"], "webhook": {"ingressCIDRs": ["10.0.0.0/8"]}}),
            "webhook.clientCASecret and webhook.ingressCIDRs protect the webhooks",
        ),
        (
            json!({"webhook": {"unverifiedCallers": false}}),
            "choose how the webhooks' callers are checked: webhook.clientCASecret",
        ),
        (
            json!({"webhook": {"clientCASecret": "apiserver-ca", "unverifiedCallers": true}}),
            "webhook.clientCASecret verifies the webhooks' callers and webhook.unverifiedCallers does not: choose one",
        ),
        (
            json!({"controllers": ["exec"], "fleet": {"spoke": {"enabled": true}}}),
            "fleet.spoke.enabled: a fleet spoke's webhooks are what limit the hub's credential there",
        ),
        (
            json!({"watchNamespaces": ["team-a"], "fleet": {"hub": {"enabled": true}}}),
            "fleet.hub.enabled: a fleet hub reads fleet templates in every namespace: leave watchNamespaces empty",
        ),
        (
            json!({"fleet": {"spoke": {"userPrefix": "oidc:=corp:"}}}),
            "fleet.spoke.userPrefix maps the hub's names on a fleet spoke: set fleet.spoke.enabled",
        ),
        (
            json!({"fleet": {"spoke": {"groupPrefix": "oidc:=corp:"}}}),
            "fleet.spoke.groupPrefix maps the hub's names on a fleet spoke: set fleet.spoke.enabled",
        ),
        (
            json!({"fleet": {"hub": {"enabled": true, "namespace": "Fleet_A"}}}),
            "fleet.hub.namespace: \"Fleet_A\" is not a namespace name",
        ),
    ] {
        let file = chart_values_file(&values);
        let output = Command::new(oz_testenv::helm().unwrap())
            .args(["template", "oz", CHART, "-f", file.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        // `fail` writes "execution error at (TEMPLATE): MESSAGE".
        let refused =
            stderr.contains("execution error at") && stderr.contains(&format!("): {says}"));
        assert!(!output.status.success() && refused, "{values}: {stderr}");
    }
}

/// One row of the values table: key, type, default (as JSON), description.
type Row = (String, String, String, String);

/// The values table helm-docs would write: a row for every documented key (`# --` above it) and
/// every leaf under no documented key, in file order.
fn values_table() -> Vec<Row> {
    let text = std::fs::read_to_string(format!("{CHART}/values.yaml")).unwrap();
    let values: Value = serde_saphyr::from_str(&text).unwrap();
    let mut rows = Vec::new();
    // The keys above the current line: (indent, key, whether it has a `# --` description).
    let mut path: Vec<(usize, String, bool)> = Vec::new();
    let mut comment: Vec<String> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(doc) = trimmed.strip_prefix("# --") {
            comment = vec![doc.trim().to_string()];
            continue;
        }
        if trimmed.starts_with('#') || trimmed.is_empty() {
            if trimmed.is_empty() {
                comment.clear();
            }
            continue;
        }
        let Some((name, _)) = trimmed.split_once(':') else {
            continue;
        };
        if name.starts_with('-') {
            continue;
        }
        while path.last().is_some_and(|(i, _, _)| *i >= indent) {
            path.pop();
        }
        let documented_parent = path.iter().any(|(_, _, documented)| *documented);
        path.push((indent, name.to_string(), !comment.is_empty()));
        let dotted: Vec<String> = path.iter().map(|(_, key, _)| key.clone()).collect();
        let value = dotted.iter().fold(&values, |v, k| &v[k.as_str()]);
        let leaf = value.as_object().is_none_or(|m| m.is_empty());
        if !comment.is_empty() || (leaf && !documented_parent) {
            let kind = match value {
                Value::Object(_) => "object",
                Value::Array(_) => "list",
                Value::String(_) => "string",
                Value::Number(_) => "int",
                Value::Bool(_) => "bool",
                Value::Null => "string",
            };
            rows.push((
                dotted.join("."),
                kind.to_string(),
                value.to_string(),
                comment.join(" "),
            ));
        }
        comment.clear();
    }
    rows
}

/// The table as charts/oz/README.md writes it.
fn values_table_markdown() -> String {
    let mut out = String::from(
        "| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n",
    );
    for (key, kind, default, description) in values_table() {
        out.push_str(&format!(
            "| {key} | {kind} | `{}` | {} |\n",
            default.replace('|', "\\|"),
            description.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn the_readme_values_table_documents_every_value() {
    let readme_path = format!("{CHART}/README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let (before, rest) = readme
        .split_once("<!-- values:begin -->\n")
        .expect("charts/oz/README.md has a <!-- values:begin --> marker");
    let (table, after) = rest
        .split_once("<!-- values:end -->")
        .expect("charts/oz/README.md has a <!-- values:end --> marker");
    let generated = values_table_markdown();
    // OZ_WRITE_VALUES_TABLE=1 rewrites the table rather than compare it.
    if std::env::var_os("OZ_WRITE_VALUES_TABLE").is_some() {
        std::fs::write(
            &readme_path,
            format!("{before}<!-- values:begin -->\n{generated}<!-- values:end -->{after}"),
        )
        .unwrap();
        return;
    }
    for (key, _, _, description) in values_table() {
        assert!(
            !description.is_empty(),
            "values.yaml: {key} has no `# --` description"
        );
    }
    assert!(
        table == generated,
        "charts/oz/README.md's values table is out of date with values.yaml: run \
         `OZ_WRITE_VALUES_TABLE=1 cargo test -p oz --test integration install::helm::the_readme_values_table`\n\
         want:\n{generated}"
    );
}

/// Applies `objects` by server-side apply as a dry run: the apiserver validates each in full.
async fn dry_run_apply(admin: &Client, objects: &[Value]) {
    for object in objects {
        let (object, resource) = parse_manifest(&object.to_string());
        let name = object.metadata.name.clone().unwrap();
        let api: Api<kube::api::DynamicObject> = match &object.metadata.namespace {
            Some(ns) => Api::namespaced_with(admin.clone(), ns, &resource),
            None => Api::all_with(admin.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply("oz-helm-test").dry_run(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("dry-run applying {} {name}: {e}", resource.kind));
    }
}

#[tokio::test]
async fn the_rendered_chart_passes_the_apiservers_validation() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let operator_ns = env().namespace("helm-dry").await.unwrap();
    let a = env().namespace("helm-dry-a").await.unwrap();
    let b = env().namespace("helm-dry-b").await.unwrap();
    // Nothing is written: a dry run, so the cluster-wide objects of a default install are safe.
    dry_run_apply(&admin, &helm_template("oz", &operator_ns, &json!({}))).await;
    dry_run_apply(
        &admin,
        &helm_template(
            "oz",
            &operator_ns,
            &json!({"watchNamespaces": [a, b], "controllers": ["exec", "webhooks", "sessions"],
                    "webhook": {"clientCASecret": "ca", "ingressCIDRs": ["10.0.0.0/8"]}}),
        ),
    )
    .await;
    // A fleet hub that is also a spoke: the provider file's ConfigMap, the Role in the fleet
    // namespace (a), and the hub's credential.
    dry_run_apply(
        &admin,
        &helm_template(
            "oz",
            &operator_ns,
            &json!({"fleet": {"hub": {"enabled": true, "namespace": a}, "spoke": {"enabled": true}}}),
        ),
    )
    .await;
}

/// The labels every object of the release carries.
fn release_selector(release: &str) -> ListParams {
    ListParams::default().labels(&format!("app.kubernetes.io/instance={release}"))
}

/// The names of what `api` lists with `params`.
async fn names<K>(api: Api<K>, params: &ListParams) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .collect()
}

async fn role_names(admin: &Client, ns: &str) -> Vec<String> {
    names(
        Api::<Role>::namespaced(admin.clone(), ns),
        &ListParams::default(),
    )
    .await
}

/// `helm install` or `upgrade` (`verb`) of release `release` into the namespace of the same
/// name on the shared control plane, with `values` (the CRDs are already there).
/// `--force-conflicts`: oz-manager owns the webhook configurations' fields too (it applies them
/// at start); Helm takes them back, and oz-manager, restarted with the new flags, agrees.
fn helm_release(verb: &str, release: &str, values: &Value) -> String {
    let file = chart_values_file(values);
    let kubeconfig = env().admin_kubeconfig();
    helm(&[
        verb,
        release,
        CHART,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--namespace",
        release,
        "--skip-crds",
        "--force-conflicts",
        "-f",
        file.to_str().unwrap(),
    ])
}

/// `helm uninstall` of `release`, waiting until its objects are deleted.
fn helm_uninstall(release: &str) {
    let kubeconfig = env().admin_kubeconfig();
    helm(&[
        "uninstall",
        release,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--namespace",
        release,
        "--wait",
    ]);
}

#[tokio::test]
async fn helm_install_runs_oz_under_its_rbac_upgrade_moves_it_and_uninstall_cleans_up() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    // The release is named after its namespace: its ClusterRoles are its own.
    let release = env().namespace("helm-oz").await.unwrap();
    let ns = env().namespace("helm").await.unwrap();
    let moved = env().namespace("helm-moved").await.unwrap();
    // No webhooks: they register cluster-wide objects the shared control plane's other tests use.
    let values = json!({"watchNamespaces": [ns], "controllers": ["exec", "pod"]});
    helm_release("install", &release, &values);

    // oz-manager runs with the chart's ServiceAccount token and its Deployment's flags.
    let token =
        service_account_kubeconfig(env(), &admin, &release, &format!("{release}-manager")).await;
    let deployment = Api::<Deployment>::namespaced(admin.clone(), &release)
        .get(&format!("{release}-manager"))
        .await
        .unwrap();
    let yaml = format!(
        "# the chart's Deployment\n---\n{}",
        serde_json::to_string(&deployment).unwrap()
    );
    let args = operator_args(&yaml, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    create_manifest(&admin, &ns, TEMPLATE).await.unwrap();
    let operator = Operator::start_with_kubeconfig(&ns, &token, &args);
    create_manifest(&admin, &ns, ALICES_REQUEST).await.unwrap();
    let pod = wait_for_ready(&admin, &ns, "alice-web", &operator).await;
    assert_eq!(pod, web.pod_names()[0]);
    assert!(can_exec("alice", &ns, &pod).await);
    // It leads through the chart's Lease.
    let lease = Api::<Lease>::namespaced(admin.clone(), &release)
        .get(&format!("{release}-manager"))
        .await
        .unwrap();
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());
    drop(operator);

    // Upgrading to another watched namespace moves oz's Role with it.
    let manager = format!("{release}-manager");
    helm_release(
        "upgrade",
        &release,
        &json!({"watchNamespaces": [moved], "controllers": ["exec", "pod"]}),
    );
    eventually(
        WAIT,
        "oz's Role to move to the new watched namespace",
        || {
            let admin = admin.clone();
            let (ns, moved, manager) = (ns.clone(), moved.clone(), manager.clone());
            async move {
                let old = role_names(&admin, &ns).await;
                let new = role_names(&admin, &moved).await;
                (!old.contains(&manager) && new.contains(&manager)).then_some(())
            }
        },
    )
    .await;

    // Uninstalling leaves no object of the release; the request stays, for history.
    helm_uninstall(&release);
    let selector = release_selector(&release);
    for namespace in [&release, &ns, &moved] {
        assert!(
            Api::<Role>::namespaced(admin.clone(), namespace)
                .list(&selector)
                .await
                .unwrap()
                .items
                .is_empty()
        );
        assert!(
            Api::<RoleBinding>::namespaced(admin.clone(), namespace)
                .list(&selector)
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }
    let in_release = |kind: &str, names: Vec<String>| {
        assert!(names.is_empty(), "{kind} left behind: {names:?}");
    };
    in_release(
        "Lease",
        names(
            Api::<Lease>::namespaced(admin.clone(), &release),
            &ListParams::default(),
        )
        .await,
    );
    in_release(
        "ServiceAccount",
        names(
            Api::<ServiceAccount>::namespaced(admin.clone(), &release),
            &selector,
        )
        .await,
    );
    in_release(
        "Service",
        names(
            Api::<Service>::namespaced(admin.clone(), &release),
            &selector,
        )
        .await,
    );
    in_release(
        "Deployment",
        names(
            Api::<Deployment>::namespaced(admin.clone(), &release),
            &selector,
        )
        .await,
    );
    in_release(
        "ClusterRole",
        names(Api::<ClusterRole>::all(admin.clone()), &selector).await,
    );
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    assert!(requests.get_opt("alice-web").await.unwrap().is_some());
}

/// With the webhooks, oz-manager applies the chart's webhook configurations itself (forcing,
/// as field manager `oz-webhooks`); `helm upgrade` changing `watchNamespaces` still moves their
/// namespaceSelector. What oz-manager makes at run time in the release namespace (certificate
/// Secrets, audit signing key and public keys) belongs to the release's ServiceAccount, so
/// `helm uninstall` leaves no Secret, ConfigMap or Lease of oz there. The release's names are
/// its own and its webhooks select only its namespaces, so the shared control plane's other
/// tests never meet them.
#[tokio::test]
async fn helm_upgrade_moves_the_webhooks_oz_manager_also_applies_and_uninstall_leaves_nothing() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let release = env().namespace("helm-hooks").await.unwrap();
    let ns = env().namespace("helm-hooks-a").await.unwrap();
    let moved = env().namespace("helm-hooks-b").await.unwrap();
    let values = |watched: &str| {
        json!({
            "watchNamespaces": [watched],
            "controllers": ["exec", "webhooks"],
            "audit": {"log": {"enabled": true}},
        })
    };
    helm_release("install", &release, &values(&ns));

    // oz-manager, with the chart's ServiceAccount token and flags, applies its registration
    // (forcing, as its own field manager) and makes its Secrets and ConfigMap.
    let manager = format!("{release}-manager");
    let token = service_account_kubeconfig(env(), &admin, &release, &manager).await;
    let deployment = Api::<Deployment>::namespaced(admin.clone(), &release)
        .get(&manager)
        .await
        .unwrap();
    let yaml = format!(
        "# the chart's Deployment\n---\n{}",
        serde_json::to_string(&deployment).unwrap()
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let audit_log = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{release}-audit.jsonl"));
    let args = operator_args(
        &yaml,
        &[
            ("--webhook-port", Some(port.to_string())),
            ("--audit-log-path", Some(audit_log.display().to_string())),
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let operator = Operator::start_with_kubeconfig(&ns, &token, &args);
    let validating: Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = Api::all(admin.clone());
    let audit_name = format!("{release}-audit");
    eventually(WAIT, "oz-manager to apply its caBundle", || {
        let (validating, audit_name) = (validating.clone(), audit_name.clone());
        async move {
            let audit = validating.get(&audit_name).await.ok()?;
            let bundle = audit.webhooks?.first()?.client_config.ca_bundle.clone()?;
            (!bundle.0.is_empty()).then_some(())
        }
    })
    .await;
    let created = eventually(WAIT, "oz-manager's Secrets and ConfigMap", || {
        let (admin, release) = (admin.clone(), release.clone());
        async move {
            let created = created_at_run_time(&admin, &release, &release).await;
            created
                .iter()
                .all(|(_, owners)| owners.is_some())
                .then_some(created)
        }
    })
    .await;
    for (object, owners) in created {
        let owners = owners.unwrap_or_default();
        assert!(
            owners
                .iter()
                .any(|o| o.kind == "ServiceAccount" && o.name == manager),
            "{object} is not owned by {manager}: {owners:?} (log: {})",
            operator.log.display()
        );
    }
    // A running oz-manager would apply its own (old) namespaces again: stop it, as the upgrade
    // restarts its pods.
    drop(operator);
    let _ = std::fs::remove_file(&audit_log);

    helm_release("upgrade", &release, &values(&moved));
    let audit = validating.get(&audit_name).await.unwrap();
    let selector = audit.webhooks.unwrap()[0]
        .namespace_selector
        .clone()
        .unwrap();
    assert_eq!(
        selector.match_expressions.unwrap()[0].values,
        Some(vec![moved.clone()])
    );
    helm_uninstall(&release);
    assert!(validating.get_opt(&audit_name).await.unwrap().is_none());
    // Helm deletes the ServiceAccount; the garbage collector then deletes what it owned.
    wait_until_empty(&admin, &release).await;
}

/// Waits up to [`WAIT`] for `namespace` to hold no Secret, ConfigMap or Lease (but the
/// cluster's CA), then fails naming what is left.
async fn wait_until_empty(admin: &Client, namespace: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = objects_in(admin, namespace).await;
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "left behind in {namespace} after {WAIT:?}: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Secrets, ConfigMaps and Leases in `namespace`, but the ConfigMap every namespace has
/// (`kube-root-ca.crt`, the cluster's CA).
async fn objects_in(admin: &Client, namespace: &str) -> Vec<String> {
    let everything = ListParams::default();
    let mut found = Vec::new();
    for secret in Api::<Secret>::namespaced(admin.clone(), namespace)
        .list(&everything)
        .await
        .unwrap()
    {
        found.push(format!(
            "Secret {}",
            secret.metadata.name.unwrap_or_default()
        ));
    }
    for configmap in Api::<ConfigMap>::namespaced(admin.clone(), namespace)
        .list(&everything)
        .await
        .unwrap()
    {
        let name = configmap.metadata.name.unwrap_or_default();
        if name != "kube-root-ca.crt" {
            found.push(format!("ConfigMap {name}"));
        }
    }
    for lease in Api::<Lease>::namespaced(admin.clone(), namespace)
        .list(&everything)
        .await
        .unwrap()
    {
        found.push(format!("Lease {}", lease.metadata.name.unwrap_or_default()));
    }
    found
}

/// The objects of `kind` among `objects`.
fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// With `monitoring.*.enabled`, the chart adds a ServiceMonitor that selects the metrics
/// Service alone by a port it has, a PrometheusRule whose groups promtool accepts with the
/// configured threshold, and the dashboard; by default none of them.
#[test]
fn the_monitoring_values_add_a_service_monitor_the_alerts_and_the_dashboard() {
    let defaults = helm_template("oz", "oz-system", &json!({}));
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert!(of_kind(&defaults, kind).is_empty(), "{kind} by default");
    }
    let on = json!({"monitoring": {
        "serviceMonitor": {"enabled": true},
        "prometheusRule": {"enabled": true, "grantsInForceThreshold": 250},
        "dashboard": {"enabled": true},
    }});
    let objects = helm_template("oz", "oz-system", &on);

    let monitor = of_kind(&objects, "ServiceMonitor");
    let [monitor] = monitor.as_slice() else {
        panic!("one ServiceMonitor: {monitor:?}")
    };
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    let port = monitor["spec"]["endpoints"][0]["port"].as_str().unwrap();
    let selected: Vec<&str> = of_kind(&objects, "Service")
        .into_iter()
        .filter(|service| {
            selector
                .iter()
                .all(|(k, v)| &service["metadata"]["labels"][k] == v)
        })
        .filter(|service| {
            service["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == port)
        })
        .map(|service| service["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        selected,
        ["oz-metrics"],
        "the Services the ServiceMonitor scrapes"
    );

    let rule = of_kind(&objects, "PrometheusRule");
    let [rule] = rule.as_slice() else {
        panic!("one PrometheusRule: {rule:?}")
    };
    let groups = json!({"groups": rule["spec"]["groups"]});
    assert!(
        groups.to_string().contains("> 250"),
        "the threshold is not in the rules: {groups}"
    );
    let file = json_file(&groups);
    let output = Command::new(oz_testenv::promtool().unwrap())
        .args(["check", "rules", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "promtool refused the rendered rules: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let dashboards: Vec<&Value> = of_kind(&objects, "ConfigMap")
        .into_iter()
        .filter(|c| c["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    let [dashboard] = dashboards.as_slice() else {
        panic!("one dashboard ConfigMap: {dashboards:?}")
    };
    let json = dashboard["data"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    let parsed: Value = serde_json::from_str(json.as_str().unwrap()).unwrap();
    assert!(parsed["panels"].as_array().is_some_and(|p| !p.is_empty()));
}
