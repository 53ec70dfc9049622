//! Tests of the whole mutation and of steps 2 to 6, which live in `mod.rs`.

use k8s_openapi::api::core::v1::EnvVar;
use serde_json::json;

use super::fixtures::*;
use super::*;

// ----- Oz scenario 10 -----------------------------------------------------------------------

#[test]
fn oz_scenario_10_example_template() {
    let pod = mutate(&oz_example_deployment_template(), &oz_example_config());
    let container = &pod["spec"]["containers"][0];

    assert_eq!(container["name"], "dennis");
    assert_eq!(container["command"], json!(["/bin/sleep", "999999"]));
    assert_eq!(container["args"], json!([]));
    assert_eq!(
        container["env"],
        json!([
            {"name": "FOO", "value": "foo"},
            {"name": "FOOBAR", "value": "foobar"},
            {"name": "FOO", "value": "bar"}
        ])
    );
    // `resources` replaces the whole block: the Deployment's limits are gone.
    assert_eq!(
        container["resources"],
        json!({"requests": {"memory": "42Mi", "cpu": "100m"}})
    );
    assert_eq!(has_probes(container), [false; 3]);
    assert!(pod["metadata"].get("labels").is_none(), "{pod}");
    assert!(pod["spec"].get("terminationGracePeriodSeconds").is_none());
    // Everything else is inherited.
    assert_eq!(container["image"], "nginx:latest");
    assert_eq!(container["ports"][0]["containerPort"], 80);
}

// ----- no configuration ---------------------------------------------------------------------

#[test]
fn no_config_still_strips_labels_probes_grace_period_and_spread_constraints() {
    let source = busy_template();
    let pod = serde_json::to_value(mutate_pod_template(&source, None).unwrap()).unwrap();

    assert!(pod["metadata"].get("labels").is_none(), "{pod}");
    assert!(pod["spec"].get("terminationGracePeriodSeconds").is_none());
    assert!(pod["spec"].get("topologySpreadConstraints").is_none());
    assert_eq!(has_probes(&pod["spec"]["containers"][0]), [false; 3]);

    // Only the default container loses its probes; nothing else changes.
    assert_eq!(has_probes(&pod["spec"]["containers"][1]), [true; 3]);
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({"team": "payments", "prometheus.io/scrape": "true"})
    );
    assert_eq!(pod["spec"]["nodeSelector"], json!({"disk": "ssd"}));
    assert_eq!(pod["spec"]["containers"][0]["command"], json!(["shop"]));
    assert_eq!(pod["spec"]["containers"][0]["args"], json!(["--serve"]));
    assert_eq!(pod["spec"]["initContainers"][0]["name"], "migrate");
}

#[test]
fn no_config_and_an_empty_config_are_the_same() {
    let source = busy_template();
    assert_eq!(
        mutate_pod_template(&source, None).unwrap(),
        mutate_pod_template(&source, Some(&PodTemplateSpecMutationConfig::default())).unwrap()
    );
}

#[test]
fn the_source_template_is_left_unchanged() {
    let source = busy_template();
    let before = source.clone();
    mutate_pod_template(&source, Some(&oz_example_config())).unwrap();
    assert_eq!(source, before);
}

// ----- keep flags ---------------------------------------------------------------------------

#[test]
fn keep_termination_grace_period() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"keepTerminationGracePeriod": true})),
    );
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 60);
    let pod = mutate(
        &busy_template(),
        &config(json!({"keepTerminationGracePeriod": false})),
    );
    assert!(pod["spec"].get("terminationGracePeriodSeconds").is_none());
}

#[test]
fn keep_each_probe_independently() {
    for (flag, expected) in [
        ("keepLivenessProbe", [true, false, false]),
        ("keepReadinessProbe", [false, true, false]),
        ("keepStartupProbe", [false, false, true]),
    ] {
        let pod = mutate(&busy_template(), &config(json!({ flag: true })));
        assert_eq!(
            has_probes(&pod["spec"]["containers"][0]),
            expected,
            "{flag}"
        );
    }
    let pod = mutate(
        &busy_template(),
        &config(json!({
            "keepLivenessProbe": true, "keepReadinessProbe": true, "keepStartupProbe": true
        })),
    );
    assert_eq!(has_probes(&pod["spec"]["containers"][0]), [true; 3]);
}

#[test]
fn keep_topology_spread_constraints() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"keepTopologySpreadConstraints": true})),
    );
    assert_eq!(
        pod["spec"]["topologySpreadConstraints"][0]["topologyKey"],
        "topology.kubernetes.io/zone"
    );
}

// ----- annotations, node selector, labels ---------------------------------------------------

#[test]
fn pod_annotations_merge_over_existing_ones() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"podAnnotations": {"team": "sre", "oz/reason": "debug"}})),
    );
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({"team": "sre", "oz/reason": "debug", "prometheus.io/scrape": "true"})
    );
}

#[test]
fn purge_annotations_clears_them_before_pod_annotations_are_merged() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"purgeAnnotations": true, "podAnnotations": {"oz/reason": "debug"}})),
    );
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({"oz/reason": "debug"})
    );

    let pod = mutate(&busy_template(), &config(json!({"purgeAnnotations": true})));
    assert!(pod["metadata"].get("annotations").is_none(), "{pod}");

    let pod = mutate(
        &busy_template(),
        &config(json!({"purgeAnnotations": false})),
    );
    assert_eq!(pod["metadata"]["annotations"]["team"], "payments");
}

#[test]
fn pod_annotations_on_a_template_without_annotations() {
    // Oz wrote into a nil map here and panicked.
    for source in [
        oz_example_deployment_template(),
        template(json!({"spec": {"containers": [{"name": "c"}]}})),
    ] {
        let pod = mutate(&source, &config(json!({"podAnnotations": {"a": "b"}})));
        assert_eq!(pod["metadata"]["annotations"], json!({"a": "b"}));
    }
}

#[test]
fn empty_pod_annotations_and_labels_leave_nothing_behind() {
    let pod = mutate(
        &oz_example_deployment_template(),
        &config(json!({"podAnnotations": {}, "podLabels": {}, "nodeSelector": {}})),
    );
    assert!(pod["metadata"].get("annotations").is_none(), "{pod}");
    assert!(pod["metadata"].get("labels").is_none(), "{pod}");
    assert!(pod["spec"].get("nodeSelector").is_none(), "{pod}");
}

#[test]
fn node_selector_is_merged_and_created_if_absent() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"nodeSelector": {"disk": "hdd", "pool": "debug"}})),
    );
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"disk": "hdd", "pool": "debug"})
    );

    let pod = mutate(
        &oz_example_deployment_template(),
        &config(json!({"nodeSelector": {"pool": "debug"}})),
    );
    assert_eq!(pod["spec"]["nodeSelector"], json!({"pool": "debug"}));
}

#[test]
fn labels_are_always_cleared_and_pod_labels_are_the_whole_set() {
    let pod = mutate(&busy_template(), &config(json!({"command": ["sleep"]})));
    assert!(pod["metadata"].get("labels").is_none(), "{pod}");

    let pod = mutate(
        &busy_template(),
        &config(json!({"podLabels": {"oz/access": "true"}})),
    );
    assert_eq!(pod["metadata"]["labels"], json!({"oz/access": "true"}));
}

// ----- container mutations ------------------------------------------------------------------

#[test]
fn command_empties_args() {
    let pod = mutate(&busy_template(), &config(json!({"command": ["/bin/sh"]})));
    assert_eq!(pod["spec"]["containers"][0]["command"], json!(["/bin/sh"]));
    assert_eq!(pod["spec"]["containers"][0]["args"], json!([]));
}

#[test]
fn args_are_applied_after_command() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"command": ["/bin/sh"], "args": ["-c", "sleep 1d"]})),
    );
    assert_eq!(pod["spec"]["containers"][0]["command"], json!(["/bin/sh"]));
    assert_eq!(
        pod["spec"]["containers"][0]["args"],
        json!(["-c", "sleep 1d"])
    );
}

#[test]
fn args_alone_keep_the_command() {
    let pod = mutate(&busy_template(), &config(json!({"args": ["--debug"]})));
    assert_eq!(pod["spec"]["containers"][0]["command"], json!(["shop"]));
    assert_eq!(pod["spec"]["containers"][0]["args"], json!(["--debug"]));
}

#[test]
fn resources_replace_the_whole_block() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"resources": {"requests": {"memory": "1Gi"}}})),
    );
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"requests": {"memory": "1Gi"}})
    );
}

#[test]
fn empty_resources_leave_the_container_s_own() {
    // Oz compared with the zero value, so `resources: {}` changed nothing.
    let pod = mutate(&busy_template(), &config(json!({"resources": {}})));
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "2"}})
    );
    // An explicitly empty map is not the zero value in Go either: it clears the block.
    let pod = mutate(
        &busy_template(),
        &config(json!({"resources": {"limits": {}}})),
    );
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"limits": {}})
    );
}

#[test]
fn env_is_appended_to_the_container_s_env() {
    let pod = mutate(
        &busy_template(),
        &config(json!({"env": [{"name": "MODE", "value": "debug"}, {"name": "X", "value": "1"}]})),
    );
    assert_eq!(
        pod["spec"]["containers"][0]["env"],
        json!([
            {"name": "MODE", "value": "prod"},
            {"name": "MODE", "value": "debug"},
            {"name": "X", "value": "1"}
        ])
    );

    let empty_env = PodTemplateSpecMutationConfig {
        env: Some(Vec::<EnvVar>::new()),
        ..PodTemplateSpecMutationConfig::default()
    };
    let pod = mutate(&busy_template(), &empty_env);
    assert_eq!(
        pod["spec"]["containers"][0]["env"],
        json!([{"name": "MODE", "value": "prod"}])
    );

    let pod = mutate(
        &busy_template(),
        &config(json!({"defaultContainerName": "proxy", "env": [{"name": "X", "value": "1"}]})),
    );
    assert_eq!(
        pod["spec"]["containers"][1]["env"],
        json!([{"name": "X", "value": "1"}])
    );
}
