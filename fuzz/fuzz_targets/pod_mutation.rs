//! The pod mutation pipeline (`mutate_pod_template`, then `apply_resource_caps`) on arbitrary
//! templates, configurations, patches and caps.
//!
//! The input is structured with `arbitrary`: a source pod template (one of a few realistic
//! ones, or arbitrary JSON parsed as one), a mutation configuration whose patch paths mix the
//! pod's real field names with arbitrary segments, and three caps.
//!
//! Properties: nothing panics; the source is left unchanged; the result is deterministic; the
//! workload's labels never survive; unless the template opts in, the result has no more
//! privilege than the source (checked here independently, on the JSON); after the caps, every
//! container has a limit within each cap, and a refused spec is left as it was.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use k8s_openapi::{
    api::core::v1::{PodSpec, PodTemplateSpec},
    apimachinery::pkg::api::resource::Quantity,
};
use libfuzzer_sys::fuzz_target;
use oz_api::{
    PodTemplateSpecMutationConfig,
    pod_mutation::{apply_resource_caps, mutate_pod_template, parse_quantity},
};
use serde_json::{Value, json};

/// Path segments worth trying: the pod's real fields, list positions, and pointer escapes.
const SEGMENTS: &[&str] = &[
    "metadata",
    "labels",
    "annotations",
    "namespace",
    "name",
    "spec",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "volumes",
    "hostPath",
    "path",
    "securityContext",
    "privileged",
    "allowPrivilegeEscalation",
    "capabilities",
    "add",
    "drop",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "hostUsers",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "ephemeral-storage",
    "command",
    "args",
    "env",
    "image",
    "nodeSelector",
    "0",
    "1",
    "2",
    "-",
    "~0",
    "~1",
    "",
    "~",
    "~2",
    "9999999999999999999999",
];

const QUANTITIES: &[&str] = &[
    "1",
    "100m",
    "0.5",
    "2",
    "1Gi",
    "1G",
    "512Mi",
    "1e3",
    "1E-2",
    "9223372036854775807",
    "9223372036854775808",
    "1e1000000",
    "-1",
    "0",
    "1Ei",
    ".5",
    "1.",
    "+1",
    "1 Gi",
    "",
];

#[derive(Debug)]
struct Input {
    source: PodTemplateSpec,
    config: PodTemplateSpecMutationConfig,
    caps: [Option<Quantity>; 3],
}

fn word(u: &mut Unstructured) -> arbitrary::Result<String> {
    Ok(if u.ratio(3, 4)? {
        (*u.choose(SEGMENTS)?).to_string()
    } else {
        String::arbitrary(u)?
    })
}

fn pointer(u: &mut Unstructured) -> arbitrary::Result<String> {
    if u.ratio(1, 20)? {
        return String::arbitrary(u);
    }
    let mut path = String::new();
    for _ in 0..u.int_in_range(0..=6)? {
        path.push('/');
        path.push_str(&word(u)?);
    }
    Ok(path)
}

fn value(u: &mut Unstructured, depth: u32) -> arbitrary::Result<Value> {
    let choice = if depth > 3 {
        u.int_in_range(0..=4)?
    } else {
        u.int_in_range(0..=6)?
    };
    Ok(match choice {
        0 => Value::Null,
        1 => json!(bool::arbitrary(u)?),
        2 => json!(i64::arbitrary(u)?),
        3 => json!(word(u)?),
        4 => json!(*u.choose(QUANTITIES)?),
        5 => Value::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| value(u, depth + 1))
                .collect::<arbitrary::Result<_>>()?,
        ),
        _ => {
            let mut object = serde_json::Map::new();
            for _ in 0..u.int_in_range(0..=4)? {
                object.insert(word(u)?, value(u, depth + 1)?);
            }
            Value::Object(object)
        }
    })
}

fn strings(u: &mut Unstructured) -> arbitrary::Result<Option<Value>> {
    Ok(if bool::arbitrary(u)? {
        Some(Value::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| word(u).map(Value::String))
                .collect::<arbitrary::Result<_>>()?,
        ))
    } else {
        None
    })
}

fn map(u: &mut Unstructured) -> arbitrary::Result<Option<Value>> {
    Ok(if bool::arbitrary(u)? {
        let mut object = serde_json::Map::new();
        for _ in 0..u.int_in_range(0..=3)? {
            object.insert(word(u)?, json!(word(u)?));
        }
        Some(Value::Object(object))
    } else {
        None
    })
}

/// Realistic sources: a plain pod, a busy one, a guarded one, and one with no containers.
fn sources() -> Vec<Value> {
    vec![
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "web:1"}]}}),
        json!({
            "metadata": {
                "labels": {"app": "shop", "pod-template-hash": "5d4f8"},
                "annotations": {"kubectl.kubernetes.io/default-container": "proxy"}
            },
            "spec": {
                "terminationGracePeriodSeconds": 60,
                "nodeSelector": {"disk": "ssd"},
                "initContainers": [{"name": "migrate", "image": "shop:1", "resources": {"requests": {"cpu": "3"}}}],
                "containers": [
                    {"name": "app", "image": "shop:1", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                     "livenessProbe": {"exec": {"command": ["true"]}}},
                    {"name": "proxy", "image": "envoy:1", "args": ["--config", "/etc/envoy.yaml"]}
                ]
            }
        }),
        json!({
            "spec": {
                "serviceAccountName": "shop",
                "automountServiceAccountToken": false,
                "hostUsers": false,
                "volumes": [{"name": "logs", "hostPath": {"path": "/var/log"}}, {"name": "tmp", "emptyDir": {}}],
                "containers": [
                    {"name": "app", "image": "shop:1", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}},
                    {"name": "agent", "image": "agent:1", "securityContext": {"privileged": true}}
                ]
            }
        }),
        json!({"spec": {"containers": []}}),
    ]
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let source: PodTemplateSpec = if u.ratio(1, 8)? {
            serde_json::from_value(value(u, 0)?).map_err(|_| arbitrary::Error::IncorrectFormat)?
        } else {
            serde_json::from_value(u.choose(&sources())?.clone()).unwrap()
        };
        let mut operations = Vec::new();
        for _ in 0..u.int_in_range(0..=6)? {
            let op = *u.choose(&[
                "add", "remove", "replace", "move", "copy", "test", "explode",
            ])?;
            let mut operation = json!({"op": op, "path": pointer(u)?});
            if bool::arbitrary(u)? {
                operation["from"] = json!(pointer(u)?);
            }
            if u.ratio(3, 4)? {
                operation["value"] = value(u, 0)?;
            }
            operations.push(operation);
        }
        let mut config = json!({"patchSpecOperations": operations});
        let optional = |u: &mut Unstructured, config: &mut Value, key: &str, v: Option<Value>| {
            let _ = u;
            if let Some(v) = v {
                config[key] = v;
            }
        };
        let name = if bool::arbitrary(u)? {
            Some(json!(word(u)?))
        } else {
            None
        };
        optional(u, &mut config, "defaultContainerName", name);
        let command = strings(u)?;
        optional(u, &mut config, "command", command);
        let args = strings(u)?;
        optional(u, &mut config, "args", args);
        let annotations = map(u)?;
        optional(u, &mut config, "podAnnotations", annotations);
        let labels = map(u)?;
        optional(u, &mut config, "podLabels", labels);
        let selector = map(u)?;
        optional(u, &mut config, "nodeSelector", selector);
        for flag in [
            "purgeAnnotations",
            "keepTerminationGracePeriod",
            "keepLivenessProbe",
            "keepReadinessProbe",
            "keepStartupProbe",
            "keepTopologySpreadConstraints",
            "allowPrivilegedPatches",
        ] {
            if bool::arbitrary(u)? {
                config[flag] = json!(bool::arbitrary(u)?);
            }
        }
        if bool::arbitrary(u)? {
            config["resources"] = json!({
                "limits": {"cpu": *u.choose(QUANTITIES)?},
                "requests": {"memory": *u.choose(QUANTITIES)?},
            });
        }
        if bool::arbitrary(u)? {
            config["env"] = json!([{"name": word(u)?, "value": word(u)?}]);
        }
        let config =
            serde_json::from_value(config).map_err(|_| arbitrary::Error::IncorrectFormat)?;
        let cap = |u: &mut Unstructured| -> arbitrary::Result<Option<Quantity>> {
            Ok(if bool::arbitrary(u)? {
                Some(Quantity((*u.choose(QUANTITIES)?).to_string()))
            } else {
                None
            })
        };
        let caps = [cap(u)?, cap(u)?, cap(u)?];
        Ok(Input {
            source,
            config,
            caps,
        })
    }
}

/// The privilege the pod has, as plain JSON facts, independent of `oz_api`'s own check.
fn privilege(spec: &Value) -> (usize, Vec<String>, Vec<&'static str>) {
    let lists = ["containers", "initContainers", "ephemeralContainers"];
    let count = lists
        .iter()
        .map(|l| spec[l].as_array().map_or(0, Vec::len))
        .sum();
    let host_paths = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| !v["hostPath"].is_null())
        .map(|v| format!("{}={}", v["name"], v["hostPath"]))
        .collect();
    let mut flags = Vec::new();
    for flag in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec[flag] == json!(true) {
            flags.push(flag);
        }
    }
    for list in lists {
        for container in spec[list].as_array().into_iter().flatten() {
            if container["securityContext"]["privileged"] == json!(true) {
                flags.push("privileged");
            }
        }
    }
    (count, host_paths, flags)
}

fuzz_target!(|input: Input| {
    let Input {
        source,
        config,
        caps,
    } = input;
    let before = source.clone();
    let result = mutate_pod_template(&source, Some(&config));
    assert_eq!(source, before, "the source template was changed");
    let again = mutate_pod_template(&source, Some(&config));
    assert_eq!(
        result.as_ref().map_err(|e| e.to_string()),
        again.as_ref().map_err(|e| e.to_string()),
        "not deterministic"
    );
    let mutated = match result {
        Ok(mutated) => mutated,
        Err(error) => {
            assert!(!error.to_string().is_empty());
            return;
        }
    };

    // The workload's labels are cleared; only podLabels and patches may add labels.
    let labels = mutated
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let source_labels = source
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let patched = config
        .patch_spec_operations
        .as_ref()
        .is_some_and(|o| !o.is_empty());
    if !patched {
        for (key, value) in &source_labels {
            let kept = labels.get(key) == Some(value);
            let asked = config.pod_labels.as_ref().and_then(|l| l.get(key)) == Some(value);
            assert!(!kept || asked, "workload label {key}={value} survived");
        }
    }

    // No more privilege than the source, unless the template opts in.
    if config.allow_privileged_patches != Some(true) {
        let spec =
            |t: &PodTemplateSpec| serde_json::to_value(t.spec.clone().unwrap_or_default()).unwrap();
        let (count_before, host_paths_before, flags_before) = privilege(&spec(&source));
        let (count_after, host_paths_after, flags_after) = privilege(&spec(&mutated));
        assert!(
            count_after <= count_before,
            "containers added: {count_before} -> {count_after}"
        );
        for host_path in &host_paths_after {
            assert!(
                host_paths_before.contains(host_path),
                "hostPath added: {host_path}"
            );
        }
        for flag in &flags_after {
            let before = flags_before.iter().filter(|f| *f == flag).count();
            let after = flags_after.iter().filter(|f| *f == flag).count();
            assert!(after <= before, "{flag} raised");
        }
        let namespace = |t: &PodTemplateSpec| t.metadata.as_ref().and_then(|m| m.namespace.clone());
        assert_eq!(namespace(&source), namespace(&mutated), "namespace changed");
        let account =
            |t: &PodTemplateSpec| t.spec.as_ref().and_then(|s| s.service_account_name.clone());
        assert_eq!(
            account(&source),
            account(&mutated),
            "service account changed"
        );
    }

    // The caps: on success every container is within each cap and has a limit; on refusal
    // the spec is untouched.
    let mut spec: PodSpec = mutated.spec.unwrap_or_default();
    let untouched = spec.clone();
    match apply_resource_caps(
        &mut spec,
        caps[0].as_ref(),
        caps[1].as_ref(),
        caps[2].as_ref(),
    ) {
        Err(error) => {
            assert_eq!(spec, untouched, "a refused spec was changed");
            assert!(!error.to_string().is_empty());
        }
        Ok(()) => {
            for (cap, name) in caps.iter().zip(["cpu", "memory", "ephemeral-storage"]) {
                let Some(cap) = cap else { continue };
                let cap = parse_quantity(&cap.0).unwrap();
                for container in spec
                    .containers
                    .iter()
                    .chain(spec.init_containers.iter().flatten())
                {
                    let resources = container.resources.clone().unwrap_or_default();
                    let limit = resources.limits.unwrap_or_default().get(name).cloned();
                    let limit =
                        limit.unwrap_or_else(|| panic!("{} has no {name} limit", container.name));
                    assert!(
                        parse_quantity(&limit.0).unwrap() <= cap,
                        "{name} limit above the cap"
                    );
                    if let Some(request) = resources.requests.unwrap_or_default().get(name) {
                        assert!(
                            parse_quantity(&request.0).unwrap() <= cap,
                            "{name} request above the cap"
                        );
                    }
                }
            }
        }
    }
});
