//! Test fixtures shared by the mutation steps' tests: templates, configurations and helpers
//! that run the whole mutation.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};

use super::mutate_pod_template;
use crate::PodTemplateSpecMutationConfig;

pub(super) fn template(value: Value) -> PodTemplateSpec {
    serde_json::from_value(value).expect("test template is a PodTemplateSpec")
}

pub(super) fn config(value: Value) -> PodTemplateSpecMutationConfig {
    serde_json::from_value(value).expect("test config is a PodTemplateSpecMutationConfig")
}

pub(super) fn mutate(template: &PodTemplateSpec, config: &PodTemplateSpecMutationConfig) -> Value {
    let mutated = mutate_pod_template(template, Some(config))
        .unwrap_or_else(|error| panic!("mutation failed: {error}"));
    serde_json::to_value(mutated).unwrap()
}

pub(super) fn mutate_err(
    template: &PodTemplateSpec,
    config: &PodTemplateSpecMutationConfig,
) -> String {
    mutate_pod_template(template, Some(config))
        .expect_err("mutation should fail")
        .to_string()
}

pub(super) fn probe() -> Value {
    json!({"httpGet": {"path": "/healthz", "port": 80}})
}

/// The pod template of Oz's examples/deployment.yaml (plus the grace period oz.md §8 lists).
pub(super) fn oz_example_deployment_template() -> PodTemplateSpec {
    template(json!({
        "metadata": {"labels": {"oz-examples": "example"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "nginx",
                "image": "nginx:latest",
                "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
                "env": [
                    {"name": "FOO", "value": "foo"},
                    {"name": "FOOBAR", "value": "foobar"}
                ],
                "resources": {
                    "limits": {"cpu": "1", "memory": "128Mi"},
                    "requests": {"cpu": "10m", "memory": "10Mi"}
                }
            }]
        }
    }))
}

/// The controllerTargetMutationConfig of Oz's examples/pod_access_template.yaml.
pub(super) fn oz_example_config() -> PodTemplateSpecMutationConfig {
    config(json!({
        "command": ["/bin/sleep", "999999"],
        "env": [{"name": "FOO", "value": "bar"}],
        "resources": {"requests": {"memory": "42Mi", "cpu": "100m"}},
        "patchSpecOperations": [
            {"op": "replace", "path": "/spec/containers/0/name", "value": "dennis"}
        ]
    }))
}

/// A workload template with everything the default mutations remove, two containers and an
/// init container.
pub(super) fn busy_template() -> PodTemplateSpec {
    template(json!({
        "metadata": {
            "labels": {"app": "shop", "pod-template-hash": "5d4f8"},
            "annotations": {"team": "payments", "prometheus.io/scrape": "true"}
        },
        "spec": {
            "terminationGracePeriodSeconds": 60,
            "nodeSelector": {"disk": "ssd"},
            "topologySpreadConstraints": [{
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "shop"}}
            }],
            "initContainers": [{"name": "migrate", "image": "shop:1", "command": ["migrate"]}],
            "containers": [
                {
                    "name": "app",
                    "image": "shop:1",
                    "command": ["shop"],
                    "args": ["--serve"],
                    "env": [{"name": "MODE", "value": "prod"}],
                    "resources": {"limits": {"cpu": "2"}},
                    "livenessProbe": probe(),
                    "readinessProbe": probe(),
                    "startupProbe": probe()
                },
                {
                    "name": "proxy",
                    "image": "envoy:1",
                    "args": ["--config", "/etc/envoy.yaml"],
                    "livenessProbe": probe(),
                    "readinessProbe": probe(),
                    "startupProbe": probe()
                }
            ]
        }
    }))
}

pub(super) fn with_annotation(
    mut template: PodTemplateSpec,
    key: &str,
    value: &str,
) -> PodTemplateSpec {
    template
        .metadata
        .get_or_insert_default()
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
    template
}

pub(super) fn has_probes(container: &Value) -> [bool; 3] {
    ["livenessProbe", "readinessProbe", "startupProbe"].map(|p| container.get(p).is_some())
}
