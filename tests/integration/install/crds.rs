//! The four CRDs on a real apiserver: they install, document every field, accept Oz's own
//! manifests unchanged with Oz's defaults, and reject bad objects at apply time with a message
//! that names the field.

use std::{collections::BTreeMap, time::Duration};

use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams},
};
use oz_api::{
    ExecAccessRequest, ExecAccessTemplate, PodAccessTemplate,
    access_command::DEFAULT_ACCESS_COMMAND,
};

use crate::support::{
    cluster::{env, install_crds},
    manifests::{create_manifest, parse_manifest},
    polling::eventually,
};

const OZ_EXAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/integration/fixtures/oz-examples"
);
const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/samples");

fn read(dir: &str, file: &str) -> String {
    std::fs::read_to_string(format!("{dir}/{file}")).unwrap()
}

fn kubectl(args: &[&str]) -> String {
    let output = env().kubectl(None).unwrap().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn kubectl_explain_documents_every_request_field() {
    install_crds().await;
    // Discovery can lag a moment behind Established.
    let explained = eventually(
        Duration::from_secs(20),
        "kubectl explain to know the CRD",
        || async {
            let output = env()
                .kubectl(None)
                .unwrap()
                .args(["explain", "execaccessrequest.spec"])
                .output()
                .unwrap();
            output
                .status
                .success()
                .then(|| String::from_utf8(output.stdout).unwrap())
        },
    )
    .await;
    for field in ["templateName", "targetPod", "duration", "requester"] {
        assert!(
            explained.contains(field),
            "explain misses {field}:\n{explained}"
        );
    }
    assert!(
        explained.contains("a random running pod"),
        "fields carry their docs:\n{explained}"
    );

    let mutation = kubectl(&[
        "explain",
        "podaccesstemplate.spec.controllerTargetMutationConfig",
        "--recursive",
    ]);
    for field in [
        "defaultContainerName",
        "command",
        "args",
        "env",
        "resources",
        "podAnnotations",
        "podLabels",
        "purgeAnnotations",
        "patchSpecOperations",
        "keepTerminationGracePeriod",
        "keepLivenessProbe",
        "keepReadinessProbe",
        "keepStartupProbe",
        "keepTopologySpreadConstraints",
        "nodeSelector",
    ] {
        assert!(
            mutation.contains(field),
            "explain misses mutation field {field}:\n{mutation}"
        );
    }
}

#[tokio::test]
async fn oz_examples_apply_unchanged_and_get_ozs_defaults() {
    install_crds().await;
    let ns = env().namespace("ozexamples").await.unwrap();
    let admin = env().admin().await.unwrap();
    for file in [
        "deployment.yaml",
        "exec_access_template.yaml",
        "exec_access_request.yaml",
        "pod_access_template.yaml",
        "pod_access_request.yaml",
        "custom_pod_access_template.yaml",
    ] {
        create_manifest(&admin, &ns, &read(OZ_EXAMPLES, file))
            .await
            .unwrap_or_else(|e| panic!("Oz's {file} must apply unchanged: {e}"));
    }

    // Oz scenario 2: a template with only allowedGroups and a target gets Oz's defaults.
    let minimal = r#"
apiVersion: crds.wizardofoz.co/v1alpha1
kind: ExecAccessTemplate
metadata: {name: minimal}
spec:
  accessConfig: {allowedGroups: [devs]}
  controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: example}
"#;
    create_manifest(&admin, &ns, minimal).await.unwrap();
    let templates: Api<ExecAccessTemplate> = Api::namespaced(admin.clone(), &ns);
    let stored = templates.get("minimal").await.unwrap().spec.access_config;
    assert_eq!(stored.default_duration, "1h");
    assert_eq!(stored.max_duration, "24h");
    assert_eq!(stored.access_command, DEFAULT_ACCESS_COMMAND);
    assert_eq!(
        stored.grant_to, None,
        "grantTo stays unset; unset means Requester"
    );

    // The typed view reads back what Oz's examples wrote.
    let pod_templates: Api<PodAccessTemplate> = Api::namespaced(admin.clone(), &ns);
    let pod_template = pod_templates.get("deployment-example").await.unwrap();
    let mutation = pod_template.spec.controller_target_mutation_config.unwrap();
    assert_eq!(mutation.command.unwrap(), ["/bin/sleep", "999999"]);
    assert_eq!(
        mutation.patch_spec_operations.unwrap()[0].value,
        Some(serde_json::json!("dennis"))
    );
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin, &ns);
    assert_eq!(
        requests
            .get("deployment-example")
            .await
            .unwrap()
            .spec
            .duration
            .as_deref(),
        Some("5m")
    );
}

#[tokio::test]
async fn every_sample_applies() {
    install_crds().await;
    let ns = env().namespace("samples").await.unwrap();
    let admin = env().admin().await.unwrap();
    let mut files: Vec<_> = std::fs::read_dir(SAMPLES)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".yaml") && f != "kustomization.yaml")
        .collect();
    files.sort();
    assert!(files.len() >= 4, "one sample per kind: {files:?}");
    for file in files {
        create_manifest(&admin, &ns, &read(SAMPLES, &file))
            .await
            .unwrap_or_else(|e| panic!("config/samples/{file} must apply: {e}"));
    }
}

/// Manifests the apiserver must refuse, each with text its message must contain (the field and
/// the hint).
const INVALID: &[(&str, &str, &[&str])] = &[
    (
        "unknown duration unit",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs], defaultDuration: 1x}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}}"#,
        &["spec.accessConfig.defaultDuration", "positive Go duration"],
    ),
    (
        "negative default duration",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs], defaultDuration: -1h}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}}"#,
        &["spec.accessConfig.defaultDuration", "positive Go duration"],
    ),
    (
        "zero max duration",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs], maxDuration: 0s}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}}"#,
        &["spec.accessConfig.maxDuration", "positive Go duration"],
    ),
    (
        "unparseable max duration",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs], maxDuration: soon}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}}"#,
        &["spec.accessConfig.maxDuration", "positive Go duration"],
    ),
    (
        "default above max",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs], defaultDuration: 3h, maxDuration: 2h}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}}"#,
        &[
            "spec.accessConfig.defaultDuration",
            "must not be greater than spec.accessConfig.maxDuration",
        ],
    ),
    (
        "default above the 24h default max",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs], defaultDuration: 48h}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}}"#,
        &[
            "spec.accessConfig.defaultDuration",
            "must not be greater than",
        ],
    ),
    (
        "apps/v1 with Rollout",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: Rollout, name: web}}}"#,
        &[
            "spec.controllerTargetRef.kind",
            "apiVersion and kind do not go together",
        ],
    ),
    (
        "argo apiVersion with Deployment",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: argoproj.io/v1alpha1, kind: Deployment, name: web}}}"#,
        &[
            "spec.controllerTargetRef.kind",
            "apiVersion and kind do not go together",
        ],
    ),
    (
        "unsupported controller kind",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: CronJob, name: web}}}"#,
        &[
            "spec.controllerTargetRef.kind",
            "Unsupported value: \"CronJob\"",
        ],
    ),
    (
        "unsupported apiVersion",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v2, kind: Deployment, name: web}}}"#,
        &[
            "spec.controllerTargetRef.apiVersion",
            "Unsupported value: \"apps/v2\"",
        ],
    ),
    (
        "exec template without a target",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}}}"#,
        &["spec.controllerTargetRef", "Required value"],
    ),
    (
        "template without allowedGroups",
        r#"{kind: ExecAccessTemplate, spec: {accessConfig: {}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}}"#,
        &["spec.accessConfig.allowedGroups", "Required value"],
    ),
    (
        "both podSpec and controllerTargetRef",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, podSpec: {containers: [{name: c, image: busybox}]}}}"#,
        &["spec", "exactly one of controllerTargetRef"],
    ),
    (
        "neither podSpec nor controllerTargetRef",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}}}"#,
        &["spec", "exactly one of controllerTargetRef"],
    ),
    (
        "unknown patch op",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, controllerTargetMutationConfig: {patchSpecOperations: [{op: delete, path: /spec/nodeName}]}}}"#,
        &[
            "spec.controllerTargetMutationConfig.patchSpecOperations[0].op",
            "Unsupported value: \"delete\"",
        ],
    ),
    (
        "patch path that is not a JSON pointer",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, controllerTargetMutationConfig: {patchSpecOperations: [{op: remove, path: spec/nodeName}]}}}"#,
        &[
            "spec.controllerTargetMutationConfig.patchSpecOperations[0].path",
            "must be a JSON pointer",
        ],
    ),
    (
        "patch path with a bad escape",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, controllerTargetMutationConfig: {patchSpecOperations: [{op: remove, path: /metadata/labels/a~2b}]}}}"#,
        &["patchSpecOperations[0].path", "must be a JSON pointer"],
    ),
    (
        "too many patch operations",
        TOO_MANY_PATCHES,
        &[
            "spec.controllerTargetMutationConfig.patchSpecOperations",
            "must have at most 64 items",
        ],
    ),
    (
        "patch move without from",
        r#"{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, controllerTargetMutationConfig: {patchSpecOperations: [{op: move, path: /spec/hostname}]}}}"#,
        &["patchSpecOperations[0].from", "need a from path"],
    ),
    (
        "exec request with words for a duration",
        r#"{kind: ExecAccessRequest, spec: {templateName: web, duration: 1 hour}}"#,
        &["spec.duration", "positive Go duration"],
    ),
    (
        "exec request with a negative duration",
        r#"{kind: ExecAccessRequest, spec: {templateName: web, duration: -5m}}"#,
        &["spec.duration", "positive Go duration"],
    ),
    (
        "exec request without a template",
        r#"{kind: ExecAccessRequest, spec: {duration: 5m}}"#,
        &["spec.templateName", "Required value"],
    ),
    (
        "pod request with a compound duration (Oz's pattern)",
        r#"{kind: PodAccessRequest, spec: {templateName: web, duration: 1h30m}}"#,
        &["spec.duration", "^[0-9]+(s|m|h)$"],
    ),
    (
        "pod request without a template",
        r#"{kind: PodAccessRequest, spec: {}}"#,
        &["spec.templateName", "Required value"],
    ),
    (
        "duration that overflows",
        r#"{kind: ExecAccessRequest, spec: {templateName: web, duration: 99999999999h}}"#,
        &["spec.duration"],
    ),
];

const TOO_MANY_PATCHES: &str = concat!(
    "{kind: PodAccessTemplate, spec: {accessConfig: {allowedGroups: [devs]}, controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, ",
    "controllerTargetMutationConfig: {patchSpecOperations: [",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, {op: remove, path: /a}, ",
    "{op: remove, path: /a}]}}}",
);

#[tokio::test]
async fn invalid_manifests_are_rejected_with_a_message_naming_the_field() {
    assert!(INVALID.len() >= 15);
    install_crds().await;
    let ns = env().namespace("invalid").await.unwrap();
    let admin = env().admin().await.unwrap();
    let mut failures = Vec::new();
    for (i, (case, body, expected)) in INVALID.iter().enumerate() {
        // Each body is a YAML flow mapping; complete it into a manifest.
        let manifest = format!(
            "{{apiVersion: crds.wizardofoz.co/v1alpha1, metadata: {{name: invalid-{i}}}, {}",
            &body[1..]
        );
        match create_manifest(&admin, &ns, &manifest).await {
            Ok(_) => failures.push(format!("{case}: was accepted")),
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{case}: {status:?}");
                for text in *expected {
                    if !status.message.contains(text) {
                        failures.push(format!(
                            "{case}: message lacks {text:?}: {}",
                            status.message
                        ));
                    }
                }
            }
            Err(other) => failures.push(format!("{case}: unexpected error {other}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        INVALID.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn oz_accepted_durations_are_still_accepted() {
    install_crds().await;
    let ns = env().namespace("durations").await.unwrap();
    let admin = env().admin().await.unwrap();
    // Oz scenario 8: 90m is fine for a PodAccessRequest; every Go duration for the rest.
    let cases = [
        ("PodAccessRequest", "90m"),
        ("PodAccessRequest", "30s"),
        ("ExecAccessRequest", "1h30m"),
        ("ExecAccessRequest", "1.5h"),
        ("ExecAccessRequest", "\"0\""),
        ("ExecAccessRequest", "0s"),
        ("ExecAccessRequest", "\"\""),
        ("ExecAccessRequest", "300ms"),
    ];
    for (i, (kind, duration)) in cases.iter().enumerate() {
        let manifest = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: {kind}\nmetadata: {{name: ok-{i}}}\nspec: {{templateName: web, duration: {duration}}}"
        );
        create_manifest(&admin, &ns, &manifest)
            .await
            .unwrap_or_else(|e| panic!("{kind} with duration {duration} must be accepted: {e}"));
    }
}

#[tokio::test]
async fn a_request_cannot_be_changed_after_creation() {
    install_crds().await;
    let ns = env().namespace("immutable").await.unwrap();
    let admin = env().admin().await.unwrap();
    create_manifest(&admin, &ns, &read(OZ_EXAMPLES, "exec_access_request.yaml"))
        .await
        .unwrap();
    let (_, resource) = parse_manifest(&read(OZ_EXAMPLES, "exec_access_request.yaml"));
    let requests: Api<DynamicObject> = Api::namespaced_with(admin, &ns, &resource);

    // Oz scenario 7: targetPod is immutable, with Oz's message.
    let err = requests
        .patch(
            "deployment-example",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"targetPod": "other"}})),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Spec.TargetPod is an immutable field"),
        "{err}"
    );

    // And so is the rest of the spec.
    let err = requests
        .patch(
            "deployment-example",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"duration": "2h"}})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("spec is immutable"), "{err}");

    // Metadata stays editable: labels, and the owner references the controller sets.
    requests
        .patch(
            "deployment-example",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn kubectl_get_oz_lists_every_kind_with_its_columns() {
    install_crds().await;
    let ns = env().namespace("category").await.unwrap();
    let admin = env().admin().await.unwrap();
    for file in [
        "exec_access_template.yaml",
        "exec_access_request.yaml",
        "pod_access_template.yaml",
        "pod_access_request.yaml",
    ] {
        create_manifest(&admin, &ns, &read(OZ_EXAMPLES, file))
            .await
            .unwrap();
    }
    let all = eventually(
        Duration::from_secs(20),
        "the oz category in discovery",
        || {
            let ns = ns.clone();
            async move {
                let out = env()
                    .kubectl(None)
                    .unwrap()
                    .args(["get", "oz", "-n", &ns])
                    .output()
                    .unwrap();
                let text = String::from_utf8(out.stdout).unwrap();
                (out.status.success() && text.contains("podaccessrequest")).then_some(text)
            }
        },
    )
    .await;
    for kind in [
        "execaccesstemplate",
        "execaccessrequest",
        "podaccesstemplate",
        "podaccessrequest",
    ] {
        assert!(
            all.contains(&format!("{kind}.crds.wizardofoz.co/deployment-example")),
            "{kind} missing:\n{all}"
        );
    }

    let columns: BTreeMap<&str, &[&str]> = BTreeMap::from([
        (
            "execreq",
            &["TEMPLATE", "POD", "PHASE", "READY", "EXPIRES"][..],
        ),
        (
            "podreq",
            &["TEMPLATE", "POD", "PHASE", "READY", "EXPIRES"][..],
        ),
        ("exectpl", &["READY", "KIND", "TARGET"][..]),
        ("podtpl", &["READY", "KIND", "TARGET"][..]),
    ]);
    for (short_name, headers) in columns {
        let table = kubectl(&["get", short_name, "-n", &ns]);
        let header = table.lines().next().unwrap_or_default();
        for h in headers {
            assert!(
                header.contains(h),
                "{short_name} lacks column {h}: {header}"
            );
        }
    }
}

/// oz-manager arms its expiry timers at start-up from the Table of requests (their printer
/// columns, without the objects) before it lists them whole: the real apiserver's Table, read
/// page by page, names every grant that may be in force with its namespace, UID and
/// `expiresAt`, and leaves out the ones that cannot be.
#[tokio::test]
async fn the_table_of_requests_names_every_grant_in_force_and_its_expiry() {
    use oz::{controllers::request::table_timers::read_expiries, scope::Scope};
    use oz_api::expiry_table::ListedExpiry;

    install_crds().await;
    let ns = env().namespace("expiry-table").await.unwrap();
    let admin = env().admin().await.unwrap();
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    let (soon, later) = ("2026-11-25T10:00:00Z", "2026-11-25T12:30:00Z");
    let statuses = [
        ("ready", Some(("Ready", soon))),
        ("pending", Some(("Pending", later))),
        ("expired", Some(("Expired", soon))),
        ("denied", Some(("Denied", soon))),
        ("new", None),
    ];
    let mut expected = Vec::new();
    for (name, status) in statuses {
        let manifest = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\nspec: {{templateName: web}}"
        );
        let created = create_manifest(&admin, &ns, &manifest).await.unwrap();
        let Some((phase, expires_at)) = status else {
            continue;
        };
        let status = serde_json::json!({"status": {"phase": phase, "expiresAt": expires_at}});
        requests
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        if !matches!(phase, "Expired" | "Denied") {
            expected.push(ListedExpiry {
                namespace: ns.clone(),
                name: name.into(),
                uid: created.metadata.uid.unwrap(),
                expires_at: expires_at.parse().unwrap(),
            });
        }
    }
    expected.sort_by(|a, b| a.name.cmp(&b.name));

    // Pages of two: five requests take three pages.
    let mut listed = Vec::new();
    let scope = Scope::Namespace(ns.clone());
    let rows = read_expiries::<ExecAccessRequest>(&admin, &scope, 2, |e| listed.push(e))
        .await
        .unwrap();
    assert_eq!(rows, 5);
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(listed, expected);

    // Across the cluster, as oz-manager reads it when it watches every namespace.
    let mut listed = Vec::new();
    read_expiries::<ExecAccessRequest>(&admin, &Scope::Cluster, 500, |e| {
        if e.namespace == ns {
            listed.push(e);
        }
    })
    .await
    .unwrap();
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(listed, expected);
}
