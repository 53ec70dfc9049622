//! The PodAccessTemplate's `maxCpu`, `maxMemory` and `maxStorage` enforced on the access pod.

use std::{collections::BTreeMap, fmt};

use k8s_openapi::{
    api::core::v1::{Container, PodSpec, ResourceRequirements},
    apimachinery::pkg::api::resource::Quantity,
};

use super::{QuantityError, parse_quantity};

/// A resource a PodAccessTemplate can cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CappedResource {
    /// `cpu`, capped by `maxCpu`.
    Cpu,
    /// `memory`, capped by `maxMemory`.
    Memory,
    /// `ephemeral-storage`, capped by `maxStorage`.
    EphemeralStorage,
}

impl CappedResource {
    /// The resource's name in `requests` and `limits`.
    pub fn resource_name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Memory => "memory",
            Self::EphemeralStorage => "ephemeral-storage",
        }
    }

    /// The PodAccessTemplate field that caps it.
    pub fn cap_field(self) -> &'static str {
        match self {
            Self::Cpu => "spec.maxCpu",
            Self::Memory => "spec.maxMemory",
            Self::EphemeralStorage => "spec.maxStorage",
        }
    }
}

/// Which list of the pod spec a container is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerList {
    /// `spec.containers`.
    Containers,
    /// `spec.initContainers`, sidecars included.
    InitContainers,
}

/// A container of the access pod, as error messages name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerRef {
    /// The list it is in.
    pub list: ContainerList,
    /// Its position in that list, from 0.
    pub index: usize,
    /// Its name.
    pub name: String,
}

impl fmt::Display for ContainerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, field) = match self.list {
            ContainerList::Containers => ("container", "containers"),
            ContainerList::InitContainers => ("init container", "initContainers"),
        };
        write!(f, "{kind} {:?} (spec.{field}[{}])", self.name, self.index)
    }
}

/// How a container breaks a cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapProblem {
    /// Its request is above the cap.
    RequestAboveCap {
        /// The request as written.
        value: String,
    },
    /// Its limit is above the cap.
    LimitAboveCap {
        /// The limit as written.
        value: String,
    },
}

/// One way the access pod breaks one of the template's caps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapViolation {
    /// The container.
    pub container: ContainerRef,
    /// The resource.
    pub resource: CappedResource,
    /// What is wrong.
    pub problem: CapProblem,
    /// The cap as written in the template.
    pub cap: String,
}

impl fmt::Display for CapViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = self.resource.resource_name();
        let field = self.resource.cap_field();
        let cap = &self.cap;
        let container = &self.container;
        match &self.problem {
            CapProblem::RequestAboveCap { value } => write!(
                f,
                "{container}: requests.{resource} {value} is above {field} {cap}"
            ),
            CapProblem::LimitAboveCap { value } => write!(
                f,
                "{container}: limits.{resource} {value} is above {field} {cap}"
            ),
        }
    }
}

/// Why the access pod breaks the PodAccessTemplate's `maxCpu`, `maxMemory` or `maxStorage`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourceCapError {
    /// A cap in the template is not a quantity.
    #[error("{field}: {source}; fix it in the PodAccessTemplate")]
    InvalidCap {
        /// `spec.maxCpu`, `spec.maxMemory` or `spec.maxStorage`.
        field: &'static str,
        /// Why it was refused (it holds the value as written).
        source: QuantityError,
    },

    /// A container's request or limit is not a quantity.
    #[error(
        "{container}: {kind}.{resource}: {source}; fix it in the workload or in \
         spec.controllerTargetMutationConfig"
    )]
    InvalidQuantity {
        /// The container.
        container: ContainerRef,
        /// `requests` or `limits`.
        kind: &'static str,
        /// The resource name.
        resource: &'static str,
        /// Why it was refused (it holds the value as written).
        source: QuantityError,
    },

    /// Containers have requests or limits above a cap.
    #[error("{}", OverCapMessage(.violations))]
    OverCap {
        /// Every violation, container by container.
        violations: Vec<CapViolation>,
    },
}

struct OverCapMessage<'a>(&'a [CapViolation]);

impl fmt::Display for OverCapMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the access pod exceeds the PodAccessTemplate's resource caps: "
        )?;
        for (i, violation) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{violation}")?;
        }
        let mut fields: Vec<&str> = self.0.iter().map(|v| v.resource.cap_field()).collect();
        fields.sort_unstable();
        fields.dedup();
        write!(
            f,
            ". To fix the PodAccessTemplate, give every container requests and limits within the \
             caps (the default container's in spec.controllerTargetMutationConfig.resources, \
             other containers' with spec.controllerTargetMutationConfig.patchSpecOperations such \
             as replace /spec/containers/1/resources, or in spec.podSpec), or raise {}",
            fields.join(" / ")
        )
    }
}

/// Enforces the template's caps on every container, init container and sidecar of `spec`;
/// `None` means no cap.
///
/// A request or limit above a set cap is a violation: all of them are reported together in
/// [`ResourceCapError::OverCap`], and `spec` is left unchanged. Otherwise every container without
/// a limit for a capped resource gets the cap as its limit, so the cap always holds.
///
/// Call it on the final spec, after [`mutate_pod_template`](super::mutate_pod_template).
pub fn apply_resource_caps(
    spec: &mut PodSpec,
    max_cpu: Option<&Quantity>,
    max_memory: Option<&Quantity>,
    max_storage: Option<&Quantity>,
) -> Result<(), ResourceCapError> {
    let mut caps = Vec::new();
    for (resource, cap) in [
        (CappedResource::Cpu, max_cpu),
        (CappedResource::Memory, max_memory),
        (CappedResource::EphemeralStorage, max_storage),
    ] {
        if let Some(cap) = cap {
            let value = parse_quantity(&cap.0).map_err(|source| ResourceCapError::InvalidCap {
                field: resource.cap_field(),
                source,
            })?;
            caps.push((resource, cap, value));
        }
    }
    if caps.is_empty() {
        return Ok(());
    }

    // Check everything first, so that an error leaves the spec as it was.
    let mut violations = Vec::new();
    // (list, index, resource, cap) of every limit to fill in.
    let mut missing_limits = Vec::new();
    for (list, index, container) in all_containers(spec) {
        let container_ref = ContainerRef {
            list,
            index,
            name: container.name.clone(),
        };
        let resources = container.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        for &(resource, cap_quantity, cap) in &caps {
            let name = resource.resource_name();
            let parse = |kind: &'static str, quantity: &Quantity| {
                parse_quantity(&quantity.0).map_err(|source| ResourceCapError::InvalidQuantity {
                    container: container_ref.clone(),
                    kind,
                    resource: name,
                    source,
                })
            };
            let mut violation = |problem| {
                violations.push(CapViolation {
                    container: container_ref.clone(),
                    resource,
                    problem,
                    cap: cap_quantity.0.clone(),
                });
            };
            if let Some(request) = requests.and_then(|r| r.get(name))
                && parse("requests", request)? > cap
            {
                violation(CapProblem::RequestAboveCap {
                    value: request.0.clone(),
                });
            }
            match limits.and_then(|l| l.get(name)) {
                None => missing_limits.push((list, index, name, cap_quantity)),
                Some(limit) if parse("limits", limit)? > cap => {
                    violation(CapProblem::LimitAboveCap {
                        value: limit.0.clone(),
                    });
                }
                Some(_) => {}
            }
        }
    }
    if !violations.is_empty() {
        return Err(ResourceCapError::OverCap { violations });
    }

    for (list, index, name, cap) in missing_limits {
        let container = match list {
            ContainerList::Containers => &mut spec.containers[index],
            ContainerList::InitContainers => &mut spec
                .init_containers
                .as_mut()
                .expect("init containers were just listed")[index],
        };
        container
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .limits
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_owned(), cap.clone());
    }
    Ok(())
}

/// Every container of `spec`, then every init container (sidecars included), with its list and
/// position.
fn all_containers(spec: &PodSpec) -> impl Iterator<Item = (ContainerList, usize, &Container)> {
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(index, c)| (ContainerList::Containers, index, c));
    let init_containers = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(index, c)| (ContainerList::InitContainers, index, c));
    containers.chain(init_containers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_mutation::{fixtures::*, mutate_pod_template};
    use serde_json::{Value, json};

    fn spec(value: Value) -> PodSpec {
        serde_json::from_value(value).expect("test spec is a PodSpec")
    }

    fn q(value: &str) -> Quantity {
        Quantity(value.into())
    }

    fn within_caps_spec() -> PodSpec {
        spec(json!({
            "initContainers": [{
                "name": "sidecar",
                "restartPolicy": "Always",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}
                }
            }],
            "containers": [{
                "name": "app",
                "resources": {
                    "requests": {"cpu": "1000m", "memory": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1024Mi", "ephemeral-storage": "500M"}
                }
            }]
        }))
    }

    fn over_caps(spec: &PodSpec, cpu: &str, memory: &str, storage: &str) -> Vec<CapViolation> {
        let mut capped = spec.clone();
        let result = apply_resource_caps(
            &mut capped,
            Some(&q(cpu)),
            Some(&q(memory)),
            Some(&q(storage)),
        );
        assert_eq!(&capped, spec, "a rejected spec must be left unchanged");
        match result {
            Err(ResourceCapError::OverCap { violations }) => violations,
            other => panic!("expected OverCap, got {other:?}"),
        }
    }

    /// Applies the caps to a copy of `spec`, expecting success, and returns the result.
    fn capped(
        spec: &PodSpec,
        cpu: Option<&str>,
        memory: Option<&str>,
        storage: Option<&str>,
    ) -> PodSpec {
        let mut capped = spec.clone();
        let (cpu, memory, storage) = (cpu.map(q), memory.map(q), storage.map(q));
        apply_resource_caps(&mut capped, cpu.as_ref(), memory.as_ref(), storage.as_ref())
            .unwrap_or_else(|error| panic!("caps rejected the spec: {error}"));
        capped
    }

    /// `spec`'s `containers[index].resources` (or `initContainers`), as JSON.
    fn resources_json(spec: &PodSpec, list: ContainerList, index: usize) -> Value {
        let container = match list {
            ContainerList::Containers => &spec.containers[index],
            ContainerList::InitContainers => &spec.init_containers.as_ref().unwrap()[index],
        };
        serde_json::to_value(&container.resources).unwrap()
    }

    fn request_error(
        spec: &mut PodSpec,
        cpu: Option<&str>,
        memory: Option<&str>,
    ) -> ResourceCapError {
        let (cpu, memory) = (cpu.map(q), memory.map(q));
        apply_resource_caps(spec, cpu.as_ref(), memory.as_ref(), None).unwrap_err()
    }

    /// The error of a spec with one memory violation of a cap of 1Gi.
    fn one_memory_violation(
        list: ContainerList,
        index: usize,
        name: &str,
        problem: CapProblem,
    ) -> ResourceCapError {
        ResourceCapError::OverCap {
            violations: vec![CapViolation {
                container: ContainerRef {
                    list,
                    index,
                    name: name.into(),
                },
                resource: CappedResource::Memory,
                problem,
                cap: "1Gi".into(),
            }],
        }
    }

    #[test]
    fn caps_not_set_allow_anything_and_change_nothing() {
        let unlimited = spec(json!({"containers": [{"name": "app"}]}));
        assert_eq!(capped(&unlimited, None, None, None), unlimited);
        let big = spec(json!({"containers": [{"name": "app",
            "resources": {"limits": {"cpu": "64"}}}]}));
        assert_eq!(capped(&big, None, None, None), big);
    }

    #[test]
    fn values_equal_to_the_caps_are_within_them_and_left_alone() {
        let spec = within_caps_spec();
        assert_eq!(capped(&spec, Some("1"), Some("1Gi"), Some("1Gi")), spec);
    }

    #[test]
    fn only_the_capped_resources_get_limits() {
        let cpu_only = spec(json!({"containers": [{"name": "app",
            "resources": {"limits": {"cpu": "500m"}}}]}));
        assert_eq!(capped(&cpu_only, Some("1"), None, None), cpu_only);

        let bare = spec(json!({"containers": [{"name": "app"}]}));
        assert_eq!(
            resources_json(
                &capped(&bare, Some("1"), None, None),
                ContainerList::Containers,
                0
            ),
            json!({"limits": {"cpu": "1"}})
        );
    }

    #[test]
    fn a_limit_above_the_cap_is_named_with_its_container_value_and_cap() {
        let mut spec = spec(json!({"containers": [{"name": "app",
            "resources": {"limits": {"cpu": "2"}}}]}));
        let error = request_error(&mut spec, Some("1"), None);
        assert_eq!(
            error.to_string(),
            "the access pod exceeds the PodAccessTemplate's resource caps: container \"app\" \
             (spec.containers[0]): limits.cpu 2 is above spec.maxCpu 1. To fix the \
             PodAccessTemplate, give every container requests and limits within the caps (the \
             default container's in spec.controllerTargetMutationConfig.resources, other \
             containers' with spec.controllerTargetMutationConfig.patchSpecOperations such as \
             replace /spec/containers/1/resources, or in spec.podSpec), or raise spec.maxCpu"
        );
    }

    #[test]
    fn a_request_above_the_cap_is_a_violation() {
        let mut spec = spec(json!({"containers": [{"name": "app", "resources": {
            "requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}]}));
        let error = request_error(&mut spec, None, Some("1Gi"));
        assert_eq!(
            error,
            one_memory_violation(
                ContainerList::Containers,
                0,
                "app",
                CapProblem::RequestAboveCap {
                    value: "2Gi".into()
                }
            )
        );
        assert!(
            error
                .to_string()
                .contains("requests.memory 2Gi is above spec.maxMemory 1Gi")
        );
    }

    #[test]
    fn a_request_of_2_cpus_is_rejected_by_a_max_cpu_of_500m() {
        let mut spec = spec(json!({"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "2"}}}]}));
        let original = spec.clone();
        let error = request_error(&mut spec, Some("500m"), None);
        let message = error.to_string();
        assert!(
            message.contains(
                "container \"app\" (spec.containers[0]): requests.cpu 2 is above spec.maxCpu 500m"
            ),
            "{message}"
        );
        assert!(message.ends_with("or raise spec.maxCpu"), "{message}");
        // The missing cpu limit was not filled in either.
        assert_eq!(spec, original);
    }

    #[test]
    fn a_missing_limit_is_filled_from_the_cap() {
        let spec = spec(json!({"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "100m"}}}]}));
        assert_eq!(
            resources_json(
                &capped(&spec, Some("1"), None, None),
                ContainerList::Containers,
                0
            ),
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}})
        );
    }

    #[test]
    fn a_missing_limit_is_filled_from_the_cap_beside_the_limits_that_are_set() {
        let spec = spec(json!({"containers": [{"name": "app", "resources": {
            "requests": {"memory": "64Mi"},
            "limits": {"cpu": "250m", "nvidia.com/gpu": "1"}}}]}));
        assert_eq!(
            resources_json(
                &capped(&spec, Some("1"), Some("1Gi"), Some("2Gi")),
                ContainerList::Containers,
                0
            ),
            json!({
                "requests": {"memory": "64Mi"},
                "limits": {
                    "cpu": "250m",
                    "ephemeral-storage": "2Gi",
                    "memory": "1Gi",
                    "nvidia.com/gpu": "1"
                }
            })
        );
    }

    #[test]
    fn missing_limits_of_init_containers_and_sidecars_are_filled_from_the_cap() {
        let spec = spec(json!({
            "initContainers": [
                {"name": "migrate"},
                {"name": "mesh", "restartPolicy": "Always",
                 "resources": {"requests": {"memory": "32Mi"}}}
            ],
            "containers": [{"name": "app", "resources": {"limits": {"memory": "512Mi"}}}]
        }));
        let capped = capped(&spec, None, Some("1Gi"), None);
        assert_eq!(
            resources_json(&capped, ContainerList::InitContainers, 0),
            json!({"limits": {"memory": "1Gi"}})
        );
        assert_eq!(
            resources_json(&capped, ContainerList::InitContainers, 1),
            json!({"requests": {"memory": "32Mi"}, "limits": {"memory": "1Gi"}})
        );
        assert_eq!(
            resources_json(&capped, ContainerList::Containers, 0),
            json!({"limits": {"memory": "512Mi"}})
        );
    }

    #[test]
    fn init_containers_and_sidecars_are_checked() {
        let mut spec = spec(json!({
            "initContainers": [
                {"name": "migrate", "resources": {"limits": {"memory": "512Mi"}}},
                {"name": "mesh", "restartPolicy": "Always",
                 "resources": {"limits": {"memory": "2Gi"}}}
            ],
            "containers": [{"name": "app", "resources": {"limits": {"memory": "1Gi"}}}]
        }));
        let error = request_error(&mut spec, None, Some("1Gi"));
        assert_eq!(
            error,
            one_memory_violation(
                ContainerList::InitContainers,
                1,
                "mesh",
                CapProblem::LimitAboveCap {
                    value: "2Gi".into()
                }
            )
        );
        assert!(
            error
                .to_string()
                .contains("init container \"mesh\" (spec.initContainers[1]): limits.memory 2Gi")
        );
    }

    #[test]
    fn ephemeral_storage_is_capped_by_max_storage() {
        let spec = spec(json!({"containers": [{"name": "app", "resources": {
            "requests": {"ephemeral-storage": "2G"},
            "limits": {"ephemeral-storage": "1.5Gi"}}}]}));
        let mut rejected = spec.clone();
        let violations = match apply_resource_caps(&mut rejected, None, None, Some(&q("1Gi"))) {
            Err(ResourceCapError::OverCap { violations }) => violations,
            other => panic!("expected OverCap, got {other:?}"),
        };
        assert_eq!(rejected, spec);
        assert_eq!(
            violations
                .iter()
                .map(|v| (v.resource, v.problem.clone()))
                .collect::<Vec<_>>(),
            [
                (
                    CappedResource::EphemeralStorage,
                    CapProblem::RequestAboveCap { value: "2G".into() }
                ),
                (
                    CappedResource::EphemeralStorage,
                    CapProblem::LimitAboveCap {
                        value: "1.5Gi".into()
                    }
                ),
            ]
        );
        assert!(
            violations[1]
                .to_string()
                .contains("limits.ephemeral-storage 1.5Gi is above spec.maxStorage 1Gi")
        );
    }

    #[test]
    fn every_violation_is_reported_and_every_cap_to_raise_named() {
        let spec = spec(json!({"containers": [
            {"name": "app", "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}},
            {"name": "proxy", "resources": {"requests": {"ephemeral-storage": "2Gi"}}}
        ]}));
        let violations = over_caps(&spec, "1", "1Gi", "1Gi");
        // app: cpu and memory over; proxy: storage request over. The missing limits (app's
        // storage, all of proxy's) are not violations.
        assert_eq!(
            violations
                .iter()
                .map(|v| (v.container.name.as_str(), v.resource))
                .collect::<Vec<_>>(),
            [
                ("app", CappedResource::Cpu),
                ("app", CappedResource::Memory),
                ("proxy", CappedResource::EphemeralStorage),
            ]
        );
        let message = ResourceCapError::OverCap { violations }.to_string();
        assert!(
            message.ends_with("or raise spec.maxCpu / spec.maxMemory / spec.maxStorage"),
            "{message}"
        );
        assert!(message.contains(
            "container \"proxy\" (spec.containers[1]): requests.ephemeral-storage 2Gi is above \
             spec.maxStorage 1Gi"
        ));
    }

    #[test]
    fn on_error_the_spec_is_left_unchanged() {
        // proxy lacks every limit, which alone would be filled in, but app is over the cpu cap,
        // so nothing may be filled in.
        let original = spec(json!({
            "initContainers": [{"name": "migrate"}],
            "containers": [
                {"name": "proxy"},
                {"name": "app", "resources": {"requests": {"cpu": "100m"},
                    "limits": {"cpu": "4"}}}
            ]
        }));
        let mut spec = original.clone();
        let error = apply_resource_caps(&mut spec, Some(&q("1")), Some(&q("1Gi")), Some(&q("1Gi")))
            .unwrap_err();
        assert!(
            matches!(error, ResourceCapError::OverCap { .. }),
            "{error:?}"
        );
        assert_eq!(spec, original);
    }

    #[test]
    fn oz_example_template_passes_and_gets_limits_from_its_caps() {
        // examples/pod_access_template.yaml sets maxMemory 1Gi, maxCpu 1, maxStorage 1Gi (which
        // Oz ignored), and its `resources` leave only requests: every capped resource gets its
        // cap as the limit, and the requests stay as written.
        let mutated = mutate_pod_template(
            &oz_example_deployment_template(),
            Some(&oz_example_config()),
        )
        .unwrap();
        let mut spec = mutated.spec.unwrap();
        apply_resource_caps(&mut spec, Some(&q("1")), Some(&q("1Gi")), Some(&q("1Gi"))).unwrap();
        assert_eq!(spec.containers[0].name, "dennis");
        assert_eq!(
            resources_json(&spec, ContainerList::Containers, 0),
            json!({
                "requests": {"memory": "42Mi", "cpu": "100m"},
                "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}
            })
        );
    }

    #[test]
    fn an_invalid_cap_names_the_template_field() {
        let original = within_caps_spec();
        let mut spec = original.clone();
        let error = request_error(&mut spec, None, Some("1GB"));
        assert_eq!(
            error.to_string(),
            "spec.maxMemory: invalid quantity \"1GB\": unknown suffix \"GB\"; write a number \
             with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or an \
             integer exponent, such as 100m, 0.5, 2, 128Mi, 1Gi or 1e3; fix it in the \
             PodAccessTemplate"
        );
        assert_eq!(spec, original);
    }

    #[test]
    fn an_invalid_container_quantity_names_the_container() {
        let original = spec(json!({"containers": [
            {"name": "proxy"},
            {"name": "app", "resources": {"limits": {"cpu": "one"}}}
        ]}));
        let mut spec = original.clone();
        let error = request_error(&mut spec, Some("1"), None);
        assert!(
            matches!(
                &error,
                ResourceCapError::InvalidQuantity {
                    kind: "limits",
                    resource: "cpu",
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().starts_with(
            "container \"app\" (spec.containers[1]): limits.cpu: invalid quantity \"one\": it \
             must start with a number"
        ));
        assert_eq!(spec, original);
    }
}
