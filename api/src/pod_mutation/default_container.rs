//! Step 1 of the mutation: which container the container-level mutations apply to.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{
    MutationError,
    vocabulary::{DEFAULT_CONTAINER_ANNOTATION, DefaultContainerOrigin},
};
use crate::PodTemplateSpecMutationConfig;

/// Oz's `getDefaultContainerID`: the index of the container the container-level mutations
/// apply to. An empty name counts as no name, as in Oz.
pub(super) fn default_container_index(
    pod: &PodTemplateSpec,
    config: &PodTemplateSpecMutationConfig,
) -> Result<usize, MutationError> {
    let containers = pod
        .spec
        .as_ref()
        .map(|spec| spec.containers.as_slice())
        .unwrap_or_default();
    if containers.is_empty() {
        return Err(MutationError::NoContainers);
    }

    let annotation = pod
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.annotations.as_ref())
        .and_then(|annotations| annotations.get(DEFAULT_CONTAINER_ANNOTATION));
    let wanted = match config.default_container_name.as_deref() {
        Some(name) if !name.is_empty() => {
            Some((name, DefaultContainerOrigin::DefaultContainerName))
        }
        _ => annotation
            .filter(|name| !name.is_empty())
            .map(|name| (name.as_str(), DefaultContainerOrigin::Annotation)),
    };
    let Some((name, origin)) = wanted else {
        return Ok(0);
    };

    containers
        .iter()
        .position(|container| container.name == name)
        .ok_or_else(|| MutationError::DefaultContainerNotFound {
            name: name.to_owned(),
            origin,
            containers: containers.iter().map(|c| c.name.clone()).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::pod_mutation::fixtures::*;
    use serde_json::json;

    #[test]
    fn default_container_is_the_first_without_name_or_annotation() {
        let pod = mutate(&busy_template(), &config(json!({"command": ["sleep"]})));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["sleep"]));
        assert_eq!(pod["spec"]["containers"][1].get("command"), None);
    }

    #[test]
    fn default_container_name_selects_the_container_for_every_container_mutation() {
        let pod = mutate(
            &busy_template(),
            &config(json!({
                "defaultContainerName": "proxy",
                "command": ["sleep"],
                "env": [{"name": "DEBUG", "value": "1"}],
                "resources": {"limits": {"memory": "1Gi"}}
            })),
        );
        let [app, proxy] = [&pod["spec"]["containers"][0], &pod["spec"]["containers"][1]];
        assert_eq!(proxy["command"], json!(["sleep"]));
        assert_eq!(proxy["args"], json!([]));
        assert_eq!(proxy["env"], json!([{"name": "DEBUG", "value": "1"}]));
        assert_eq!(proxy["resources"], json!({"limits": {"memory": "1Gi"}}));
        assert_eq!(has_probes(proxy), [false; 3]);

        assert_eq!(app["command"], json!(["shop"]));
        assert_eq!(app["args"], json!(["--serve"]));
        assert_eq!(app["env"], json!([{"name": "MODE", "value": "prod"}]));
        assert_eq!(app["resources"], json!({"limits": {"cpu": "2"}}));
        assert_eq!(has_probes(app), [true; 3]);
    }

    #[test]
    fn default_container_annotation_is_used_without_a_name() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(&source, &config(json!({"command": ["sleep"]})));
        assert_eq!(pod["spec"]["containers"][1]["command"], json!(["sleep"]));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["shop"]));
    }

    #[test]
    fn default_container_name_wins_over_the_annotation() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(
            &source,
            &config(json!({"defaultContainerName": "app", "command": ["sleep"]})),
        );
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["sleep"]));
        assert_eq!(pod["spec"]["containers"][1].get("command"), None);
    }

    #[test]
    fn empty_default_container_name_falls_back_to_the_annotation() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(
            &source,
            &config(json!({"defaultContainerName": "", "command": ["sleep"]})),
        );
        assert_eq!(pod["spec"]["containers"][1]["command"], json!(["sleep"]));
    }

    #[test]
    fn empty_annotation_means_the_first_container() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "");
        let pod = mutate(&source, &config(json!({"command": ["sleep"]})));
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["sleep"]));
    }

    #[test]
    fn annotation_is_read_before_annotations_are_purged() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "proxy");
        let pod = mutate(
            &source,
            &config(json!({"purgeAnnotations": true, "command": ["sleep"]})),
        );
        assert_eq!(pod["spec"]["containers"][1]["command"], json!(["sleep"]));
        assert!(pod["metadata"].get("annotations").is_none());
    }

    #[test]
    fn unknown_default_container_name_is_an_error_listing_the_containers() {
        let error = mutate_pod_template(
            &busy_template(),
            Some(&config(json!({"defaultContainerName": "ngnix"}))),
        )
        .unwrap_err();
        assert!(matches!(
            &error,
            MutationError::DefaultContainerNotFound {
                origin: DefaultContainerOrigin::DefaultContainerName,
                ..
            }
        ));
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.defaultContainerName names the default container \
             \"ngnix\", but the pod template has no such container (its containers are \"app\", \
             \"proxy\"); set spec.controllerTargetMutationConfig.defaultContainerName to one of \
             them"
        );
    }

    #[test]
    fn annotation_naming_a_missing_container_is_an_error() {
        let source = with_annotation(busy_template(), DEFAULT_CONTAINER_ANNOTATION, "gone");
        let message = mutate_err(&source, &PodTemplateSpecMutationConfig::default());
        assert!(
            message.starts_with(
                "the pod template's kubectl.kubernetes.io/default-container annotation names \
                 the default container \"gone\""
            ),
            "{message}"
        );
        assert!(message.contains("\"app\", \"proxy\""), "{message}");
        assert!(
            message.contains("or correct the annotation on the workload"),
            "{message}"
        );
        // With no configuration at all, the same holds.
        assert!(mutate_pod_template(&source, None).is_err());
    }

    #[test]
    fn a_template_without_containers_is_an_error() {
        for source in [
            template(json!({"metadata": {}})),
            template(json!({"spec": {"containers": []}})),
        ] {
            let error = mutate_pod_template(&source, None).unwrap_err();
            assert!(matches!(error, MutationError::NoContainers), "{error}");
            assert!(error.to_string().contains("no containers"));
        }
    }
}
