//! The install as a whole: what objects it holds, where, and with which rules.

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::Deployment,
        core::v1::Service,
        rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding},
    },
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::*;
use crate::builders::{pod::POD_PERMISSIONS, rbac::EXEC_PERMISSIONS};

fn kind(manifest: &Manifest) -> &str {
    manifest
        .object
        .types
        .as_ref()
        .map(|t| t.kind.as_str())
        .unwrap_or_default()
}

fn typed<K: serde::de::DeserializeOwned>(manifest: &Manifest) -> K {
    serde_json::from_value(serde_json::to_value(&manifest.object).unwrap()).unwrap()
}

/// The arguments oz-manager's container runs with in `manifests`' Deployment.
fn manager_args_of(manifests: &[Manifest]) -> Vec<String> {
    let deployment: Deployment = typed(of_kind(manifests, "Deployment")[0]);
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    pod.containers[0].args.clone().unwrap_or_default()
}

fn of_kind<'a>(manifests: &'a [Manifest], wanted: &str) -> Vec<&'a Manifest> {
    manifests.iter().filter(|m| kind(m) == wanted).collect()
}

/// oz's own ClusterRoles: the users' aside.
fn ozs_cluster_roles(manifests: &[Manifest]) -> Vec<&Manifest> {
    of_kind(manifests, "ClusterRole")
        .into_iter()
        .filter(|m| !super::is_users_role(&m.object.metadata))
        .collect()
}

fn scoped() -> InstallOptions {
    InstallOptions {
        namespace: "oz-ops".into(),
        watch_namespaces: vec!["a".into(), "".into(), "b".into(), "a".into()],
        ..InstallOptions::default()
    }
}

/// Every rule of every Role and ClusterRole in the install.
fn all_rules(manifests: &[Manifest]) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    for manifest in manifests {
        match kind(manifest) {
            "Role" => rules.extend(typed::<Role>(manifest).rules.unwrap()),
            "ClusterRole" => rules.extend(typed::<ClusterRole>(manifest).rules.unwrap()),
            _ => {}
        }
    }
    rules
}

fn covers(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.resource_names.is_none()
            && r.api_groups.as_deref() == Some(&[group.to_string()][..])
            && r.resources.iter().flatten().any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

#[test]
fn committed_install_matches_the_generator() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/default/install.yaml");
    let generated = install_yaml(&InstallOptions::committed()).unwrap();
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "config/default/install.yaml is out of date with src/install/: run `make manifests` and commit the result"
    );
}

#[test]
fn a_scoped_install_has_a_role_in_each_watched_namespace_and_no_namespaced_cluster_role() {
    let manifests = install_objects(&scoped()).unwrap();
    let roles: Vec<(Option<String>, Option<String>)> = of_kind(&manifests, "Role")
        .iter()
        .map(|m| {
            (
                m.object.metadata.namespace.clone(),
                m.object.metadata.name.clone(),
            )
        })
        .collect();
    let expected = |ns: &str, name: &str| (Some(ns.to_string()), Some(name.to_string()));
    assert_eq!(
        roles,
        [
            expected("a", "oz-manager"),
            expected("b", "oz-manager"),
            expected("oz-ops", "oz-manager-state"),
        ]
    );
    for binding in of_kind(&manifests, "RoleBinding") {
        let binding: RoleBinding = typed(binding);
        assert_eq!(binding.role_ref.kind, "Role");
        assert_eq!(
            binding.role_ref.name,
            binding.metadata.name.clone().unwrap()
        );
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (
                subject.kind.as_str(),
                subject.name.as_str(),
                subject.namespace.as_deref()
            ),
            ("ServiceAccount", "oz-manager", Some("oz-ops"))
        );
    }
    // oz's only ClusterRole is the webhook one, and it holds only webhook configurations,
    // by name (create cannot be named), and reads AccessLocks (cluster-scoped: a lock reaches
    // every namespace).
    let cluster_roles = ozs_cluster_roles(&manifests);
    assert_eq!(cluster_roles.len(), 1);
    let cluster_role: ClusterRole = typed(cluster_roles[0]);
    assert_eq!(
        cluster_role.metadata.name.as_deref(),
        Some("oz-manager-webhooks")
    );
    for rule in cluster_role.rules.unwrap() {
        let group = rule.api_groups.as_deref().unwrap_or_default();
        if group == [oz_api::GROUP] {
            assert_eq!(
                rule.resources.as_deref(),
                Some(&["accesslocks".to_string()][..])
            );
            assert_eq!(rule.verbs, ["get", "list", "watch"]);
            continue;
        }
        assert_eq!(group, ["admissionregistration.k8s.io".to_string()]);
        assert!(
            rule.resource_names.is_some() || rule.verbs == ["create"],
            "{rule:?}"
        );
    }
    // The Deployment watches exactly the two namespaces; the webhooks see only them.
    let args = manager_args_of(&manifests);
    assert!(
        args.contains(&"--watch-namespaces=a,b".to_string()),
        "{args:?}"
    );
    for validating in of_kind(&manifests, "ValidatingWebhookConfiguration") {
        let validating: ValidatingWebhookConfiguration = typed(validating);
        for webhook in validating.webhooks.unwrap() {
            assert_eq!(
                webhook.namespace_selector,
                Some(watched_namespaces_selector(&["a".into(), "b".into()]))
            );
        }
    }
}

#[test]
fn a_cluster_wide_install_binds_one_cluster_role() {
    let manifests = install_objects(&InstallOptions::default()).unwrap();
    let names: Vec<_> = ozs_cluster_roles(&manifests)
        .iter()
        .map(|m| m.object.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["oz-manager", "oz-manager-webhooks"]);
    let roles = of_kind(&manifests, "Role");
    assert_eq!(roles.len(), 1, "only the operator namespace's own Role");
    assert_eq!(of_kind(&manifests, "ClusterRoleBinding").len(), 2);
    assert_eq!(of_kind(&manifests, "CustomResourceDefinition").len(), 6);
    assert!(
        of_kind(
            &install_objects(&InstallOptions::committed()).unwrap(),
            "CustomResourceDefinition"
        )
        .is_empty()
    );
}

#[test]
fn no_rule_escalates_binds_impersonates_or_uses_wildcards() {
    for options in [
        InstallOptions::default(),
        scoped(),
        InstallOptions {
            controllers: vec![Component::Exec],
            ..scoped()
        },
    ] {
        let manifests = install_objects(&options).unwrap();
        let rules = all_rules(&manifests);
        assert!(!rules.is_empty());
        for rule in rules {
            for verb in &rule.verbs {
                assert!(
                    !["escalate", "bind", "impersonate", "*"].contains(&verb.as_str()),
                    "{rule:?}"
                );
            }
            let fields = [
                rule.api_groups.clone().unwrap_or_default(),
                rule.resources.clone().unwrap_or_default(),
                rule.resource_names.clone().unwrap_or_default(),
            ];
            assert!(
                fields.iter().flatten().all(|f| !f.contains('*')),
                "{rule:?}"
            );
            assert!(rule.non_resource_urls.is_none(), "{rule:?}");
            assert!(
                !rule.resources.iter().flatten().any(|r| r == "secrets")
                    || rule.resource_names.is_some()
                    || rule.verbs == ["create"],
                "secrets are readable only by name: {rule:?}"
            );
        }
    }
}

#[test]
fn oz_holds_exactly_what_its_roles_grant_so_creating_them_needs_no_escalate() {
    let options = InstallOptions::default();
    let rules: Vec<PolicyRule> = watched_namespace_rules(&options)
        .into_iter()
        .map(|r| r.rule)
        .collect();
    for permission in EXEC_PERMISSIONS.iter().chain(POD_PERMISSIONS) {
        for verb in permission.verbs {
            assert!(
                covers(&rules, "", permission.resource, verb),
                "oz must hold {verb} {} to grant it",
                permission.resource
            );
        }
    }
    // And nothing on pod subresources beyond that.
    for rule in &rules {
        for resource in rule.resources.iter().flatten() {
            if let Some(sub) = resource.strip_prefix("pods/") {
                assert!(
                    ["exec", "attach"].contains(&sub),
                    "unexpected pod subresource {resource}"
                );
                assert_eq!(rule.verbs, ["get", "create"]);
            }
        }
    }
    // Exec alone never grants attach.
    let exec_only = watched_namespace_rules(&InstallOptions {
        controllers: vec![Component::Exec],
        ..options
    });
    let exec_only: Vec<PolicyRule> = exec_only.into_iter().map(|r| r.rule).collect();
    assert!(covers(&exec_only, "", "pods/exec", "create"));
    assert!(!covers(&exec_only, "", "pods/attach", "create"));
    assert!(!covers(&exec_only, "", "pods", "create"));
}

#[test]
fn events_are_granted_in_the_events_k8s_io_group_not_core() {
    let rules: Vec<PolicyRule> = watched_namespace_rules(&InstallOptions::default())
        .into_iter()
        .map(|r| r.rule)
        .collect();
    assert!(covers(&rules, "events.k8s.io", "events", "create"));
    // Each Event is created anew (a Recorder per Event), never patched into a series.
    assert!(!covers(&rules, "events.k8s.io", "events", "patch"));
    assert!(!covers(&rules, "", "events", "create"));
}

#[test]
fn every_rule_has_a_reason_in_the_yaml() {
    let yaml = install_yaml(&InstallOptions::default()).unwrap();
    // The comments, unwrapped.
    let comments = yaml
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ");
    for line in yaml.lines() {
        assert!(line.len() <= 100 || !line.starts_with('#'), "{line}");
    }
    for rule in watched_namespace_rules(&InstallOptions::default())
        .iter()
        .chain(&operator_namespace_rules(&InstallOptions::default()))
        .chain(&cluster_rules(&InstallOptions::default()))
    {
        assert!(!rule.why.is_empty());
        for why in &rule.why {
            assert!(comments.contains(why.as_str()), "{why}");
        }
    }
}

#[test]
fn the_deployment_runs_non_root_read_only_without_privileges() {
    let manifests = install_objects(&InstallOptions::default()).unwrap();
    let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(1));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("oz-manager"));
    let pod_security = pod.security_context.unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.run_as_user, Some(65532));
    assert_eq!(
        pod_security.seccomp_profile.unwrap().type_,
        "RuntimeDefault"
    );
    let container = &pod.containers[0];
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.run_as_user, Some(65532));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.privileged, Some(false));
    assert_eq!(
        security.capabilities.unwrap().drop,
        Some(vec!["ALL".to_string()])
    );
    assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
    assert_eq!(container.image.as_deref(), Some(DEFAULT_IMAGE));

    let args = container.args.clone().unwrap();
    assert_eq!(
        args,
        [
            "--namespace=oz-system",
            "--controllers=exec,pod,webhooks",
            "--leader-elect",
            "--metrics-bind-address=:8080",
            "--health-probe-bind-address=:8081",
            "--webhook-port=9443",
            "--webhook-service=oz-system/oz-webhook",
            "--log-format=json",
        ]
    );
    let env: Vec<_> = container
        .env
        .iter()
        .flatten()
        .map(|e| {
            (
                e.name.as_str(),
                e.value_from
                    .as_ref()
                    .unwrap()
                    .field_ref
                    .as_ref()
                    .unwrap()
                    .field_path
                    .as_str(),
            )
        })
        .collect();
    assert_eq!(
        env,
        [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace")
        ]
    );
    for (probe, path) in [
        (container.liveness_probe.clone(), "/healthz"),
        (container.readiness_probe.clone(), "/readyz"),
    ] {
        let get = probe.unwrap().http_get.unwrap();
        assert_eq!(
            (get.path.as_deref(), get.port),
            (Some(path), IntOrString::Int(8081))
        );
    }
    let resources = container.resources.clone().unwrap();
    assert!(resources.requests.is_some() && resources.limits.is_some());
}

#[test]
fn every_object_is_in_the_right_namespace() {
    let options = scoped();
    let cluster_scoped = [
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "APIService",
    ];
    for manifest in install_objects(&options).unwrap() {
        let namespace = manifest.object.metadata.namespace.as_deref();
        let name = manifest.object.metadata.name.clone().unwrap();
        match kind(&manifest) {
            k if cluster_scoped.contains(&k) => assert_eq!(namespace, None, "{k} {name}"),
            "Role" | "RoleBinding" if name == "oz-manager" => {
                assert!(matches!(namespace, Some("a" | "b")), "{name}")
            }
            k => assert_eq!(namespace, Some("oz-ops"), "{k} {name}"),
        }
    }
}

#[test]
fn webhook_configurations_come_only_with_the_webhooks_and_carry_no_ca_bundle() {
    let without = install_objects(&InstallOptions {
        controllers: vec![Component::Exec, Component::Pod],
        ..scoped()
    })
    .unwrap();
    for gone in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(of_kind(&without, gone).is_empty(), "{gone}");
    }
    // The controllers' one cluster-wide right: reading AccessLocks.
    let cluster_roles = ozs_cluster_roles(&without);
    assert_eq!(cluster_roles.len(), 1);
    let rules = cluster_roles[0].object.data["rules"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0]["resources"], serde_json::json!(["accesslocks"]));
    let services: Vec<_> = of_kind(&without, "Service")
        .iter()
        .map(|m| m.object.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(services, ["oz-metrics"]);
    let state = operator_namespace_rules(&InstallOptions {
        controllers: vec![Component::Exec],
        ..scoped()
    });
    assert!(
        state
            .iter()
            .all(|r| r.rule.resources.as_deref() == Some(&["leases".to_string()][..])),
        "no Secrets without the webhooks"
    );

    let with = install_objects(&InstallOptions::default()).unwrap();
    let mutating: MutatingWebhookConfiguration =
        typed(of_kind(&with, "MutatingWebhookConfiguration")[0]);
    assert_eq!(mutating.metadata.name.as_deref(), Some("oz-requests"));
    let validating: Vec<ValidatingWebhookConfiguration> =
        of_kind(&with, "ValidatingWebhookConfiguration")
            .into_iter()
            .map(typed)
            .collect();
    let names: Vec<_> = validating
        .iter()
        .map(|v| v.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["oz-requests", "oz-audit"]);
    let registration = InstallOptions::default().webhook_registration();
    let mut expected = registration.mutating_configuration("");
    let webhook = &mutating.webhooks.unwrap()[0];
    assert_eq!(webhook.client_config.ca_bundle, None);
    let service = webhook.client_config.service.clone().unwrap();
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.port
        ),
        ("oz-system", "oz-webhook", Some(443))
    );
    let expected = &mut expected.webhooks.as_mut().unwrap()[0];
    expected.client_config.ca_bundle = None;
    assert_eq!(webhook, expected);
    for v in &validating {
        for webhook in v.webhooks.iter().flatten() {
            assert_eq!(webhook.client_config.ca_bundle, None);
        }
    }
    let service: Service = typed(
        of_kind(&with, "Service")
            .into_iter()
            .find(|m| m.object.metadata.name.as_deref() == Some("oz-webhook"))
            .unwrap(),
    );
    let port = &service.spec.unwrap().ports.unwrap()[0];
    assert_eq!(
        (port.port, port.target_port.clone()),
        (443, Some(IntOrString::String("webhook".into())))
    );
}

#[test]
fn another_name_renames_every_shared_object_and_tells_oz_manager() {
    let options = InstallOptions {
        name: "team-a".into(),
        ..scoped()
    };
    for manifest in install_objects(&options).unwrap() {
        let name = manifest.object.metadata.name.clone().unwrap();
        if !["Namespace", "CustomResourceDefinition"].contains(&kind(&manifest)) {
            assert!(name.starts_with("team-a-"), "{} {name}", kind(&manifest));
        }
    }
    let args = manager_args(&options);
    for flag in [
        "--leader-elect-lease-name=team-a-manager",
        "--webhook-service=oz-ops/team-a-webhook",
        "--webhook-ca-secret=team-a-webhook-ca",
        "--webhook-cert-secret=team-a-webhook-tls",
        "--webhook-configuration-name=team-a",
    ] {
        assert!(args.contains(&flag.to_string()), "{flag} in {args:?}");
    }
    assert_eq!(
        options.command_line(),
        "oz-manager manifests --namespace oz-ops --watch-namespaces a,b --name team-a"
    );
}

#[test]
fn bad_options_are_refused() {
    for bad in [
        InstallOptions {
            namespace: "".into(),
            ..Default::default()
        },
        InstallOptions {
            watch_namespaces: vec!["Not_A_Namespace".into()],
            ..Default::default()
        },
        InstallOptions {
            controllers: vec![],
            ..Default::default()
        },
        InstallOptions {
            image: "".into(),
            ..Default::default()
        },
        InstallOptions {
            replicas: 0,
            ..Default::default()
        },
        InstallOptions {
            name: "x".repeat(60),
            ..Default::default()
        },
    ] {
        assert!(
            matches!(install_objects(&bad), Err(ManifestError::Invalid(_))),
            "{bad:?}"
        );
    }
    assert_eq!("pod".parse::<Component>().unwrap(), Component::Pod);
    assert!("pods".parse::<Component>().is_err());
}

#[test]
fn controllers_parse_as_a_comma_separated_flag() {
    let command = clap::Command::new("oz-manager").arg(
        clap::Arg::new("controllers")
            .long("controllers")
            .value_delimiter(',')
            .value_parser(clap::value_parser!(Component)),
    );
    let matches = command
        .clone()
        .try_get_matches_from(["oz-manager", "--controllers", "exec,webhooks"])
        .unwrap();
    let parsed: Vec<Component> = matches
        .get_many::<Component>("controllers")
        .unwrap()
        .copied()
        .collect();
    assert_eq!(parsed, [Component::Exec, Component::Webhooks]);
    assert!(
        command
            .try_get_matches_from(["oz-manager", "--controllers", "exec,nope"])
            .is_err()
    );
    assert_eq!(
        InstallOptions::default().command_line(),
        "oz-manager manifests"
    );
}

#[test]
fn the_yaml_is_one_document_per_object_and_reads_back() {
    let options = scoped();
    let yaml = install_yaml(&options).unwrap();
    assert!(yaml.starts_with("# oz: "));
    let documents: Vec<&str> = yaml.split("\n---\n").skip(1).collect();
    let objects = install_objects(&options).unwrap();
    assert_eq!(documents.len(), objects.len());
    for (document, manifest) in documents.iter().zip(&objects) {
        let value: serde_json::Value = serde_saphyr::from_str(document).unwrap();
        assert_eq!(value, serde_json::to_value(&manifest.object).unwrap());
    }
}

#[test]
fn the_audit_signing_key_and_its_public_keys_are_granted_by_name() {
    let rules: Vec<PolicyRule> = operator_namespace_rules(&InstallOptions::default())
        .into_iter()
        .map(|r| r.rule)
        .collect();
    let named = |resource: &str, name: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| {
                r.resources.iter().flatten().any(|x| x == resource)
                    && r.resource_names.iter().flatten().any(|n| n == name)
            })
            .flat_map(|r| r.verbs.clone())
            .collect()
    };
    assert_eq!(named("secrets", AUDIT_SIGNING_KEY_SECRET), ["get"]);
    assert_eq!(
        named("configmaps", AUDIT_PUBLIC_KEYS_CONFIGMAP),
        ["get", "patch"]
    );
    assert!(covers(&rules, "", "secrets", "create"));
    assert!(covers(&rules, "", "configmaps", "create"));
    // No ConfigMap but its own is readable or writable.
    for rule in &rules {
        if rule.resources.iter().flatten().any(|r| r == "configmaps") {
            assert!(
                rule.resource_names.is_some() || rule.verbs == ["create"],
                "{rule:?}"
            );
        }
    }
    // Its Events about the audit file go on that ConfigMap, in oz's own namespace.
    assert!(covers(&rules, "events.k8s.io", "events", "create"));
    // Each Event is created anew (a Recorder per Event), never patched into a series.
    assert!(!covers(&rules, "events.k8s.io", "events", "patch"));

    let without = operator_namespace_rules(&InstallOptions {
        controllers: vec![Component::Exec, Component::Pod],
        ..InstallOptions::default()
    });
    assert!(
        without
            .iter()
            .all(|r| r.rule.resources.as_deref() == Some(&["leases".to_string()][..]))
    );
}

mod callers;
mod egress;
mod fleet;
mod image_recipe;
mod recordings;
mod release_version;

/// With sessions: oz holds what a Brokered grant's Role grants (so creating it needs no
/// escalate), reads the front-proxy ConfigMap through the built-in Role, may apply its own
/// APIService only, and the install carries that APIService without a caBundle, the Service
/// port and the Deployment's port and flags.
#[test]
fn sessions_bring_their_api_service_port_and_rbac() {
    let options = InstallOptions {
        controllers: Component::ALL.to_vec(),
        ..scoped()
    };
    let manifests = install_objects(&options).unwrap();
    let rules = all_rules(&manifests);
    for resource in ["pods/exec", "pods/attach"] {
        for verb in ["create", "get"] {
            assert!(
                covers(&rules, oz_api::SESSIONS_GROUP, resource, verb),
                "{resource} {verb}"
            );
            assert!(covers(&rules, "", resource, verb), "core {resource} {verb}");
        }
    }
    let api_service_rule = rules
        .iter()
        .find(|r| {
            r.resources.iter().flatten().any(|x| x == "apiservices") && r.resource_names.is_some()
        })
        .expect("a rule on its APIService, by name");
    assert_eq!(
        api_service_rule.resource_names.as_deref(),
        Some(&[oz_api::SESSIONS_API_SERVICE.to_string()][..])
    );
    assert!(api_service_rule.verbs.contains(&"patch".to_string()));

    let reader: RoleBinding = of_kind(&manifests, "RoleBinding")
        .into_iter()
        .map(typed::<RoleBinding>)
        .find(|b| b.metadata.namespace.as_deref() == Some("kube-system"))
        .expect("a RoleBinding in kube-system");
    assert_eq!(reader.role_ref.kind, "Role");
    assert_eq!(
        reader.role_ref.name,
        "extension-apiserver-authentication-reader"
    );

    let api_service = of_kind(&manifests, "APIService");
    assert_eq!(api_service.len(), 1);
    let api_service = serde_json::to_value(&api_service[0].object).unwrap();
    assert_eq!(
        api_service["metadata"]["name"],
        oz_api::SESSIONS_API_SERVICE
    );
    assert_eq!(api_service["spec"]["insecureSkipTLSVerify"], false);
    assert!(api_service["spec"].get("caBundle").is_none());
    assert_eq!(
        api_service["spec"]["service"],
        serde_json::json!({"namespace": "oz-ops", "name": "oz-webhook", "port": SESSIONS_PORT})
    );

    let service: Service = of_kind(&manifests, "Service")
        .into_iter()
        .map(typed::<Service>)
        .find(|s| s.metadata.name.as_deref() == Some("oz-webhook"))
        .unwrap();
    let ports = service.spec.unwrap().ports.unwrap();
    assert!(ports.iter().any(|p| p.name.as_deref() == Some("sessions")
        && p.port == i32::from(SESSIONS_PORT)
        && p.target_port == Some(IntOrString::String("sessions".into()))));
    let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    assert!(
        container
            .ports
            .iter()
            .flatten()
            .any(|p| p.name.as_deref() == Some("sessions"))
    );
    let args = container.args.clone().unwrap();
    assert!(
        args.contains(&"--controllers=exec,pod,webhooks,sessions".to_string()),
        "{args:?}"
    );

    // Without sessions, none of it.
    let manifests = install_objects(&scoped()).unwrap();
    assert!(of_kind(&manifests, "APIService").is_empty());
    assert!(!covers(
        &all_rules(&manifests),
        oz_api::SESSIONS_GROUP,
        "pods/exec",
        "create"
    ));
}
