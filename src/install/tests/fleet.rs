//! A fleet's install: a hub reads ClusterProfiles and the spokes' token Secrets in its fleet
//! namespace and nowhere else, runs with the hub's flags and mounts a provider file that oz's
//! own parser accepts; a spoke holds the hub's credential and names it to oz-manager.

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::ConfigMap,
    rbac::v1::{PolicyRule, Role, RoleBinding},
};

use oz_api::{
    FleetNames, PrefixMap,
    fleet::names::{GROUP_PREFIX_FLAG, USER_PREFIX_FLAG},
};

use super::{kind, manager_args_of, of_kind, scoped, typed};
use crate::fleet::access::Providers;
use crate::install::{
    fleet::{HUB_CREDENTIAL_NAME, hub_user},
    fleet_hub::{
        FLEET_PROVIDER_DIR, FLEET_PROVIDER_FILE, FLEET_PROVIDER_KEY, SECRETREADER_PLUGIN,
        SECRETREADER_PROVIDER,
    },
    *,
};

/// A hub in oz's namespace oz-ops (it watches every namespace).
fn hub() -> InstallOptions {
    InstallOptions {
        namespace: "oz-ops".into(),
        fleet_hub: Some(FleetHubOptions {
            name: "hq".into(),
            namespace: "fleet-a".into(),
        }),
        ..InstallOptions::default()
    }
}

/// The install's RBAC objects (Roles, ClusterRoles and their bindings) as JSON, keyed by kind,
/// namespace and name.
fn rbac_objects(options: &InstallOptions) -> Vec<((String, String, String), serde_json::Value)> {
    install_objects(options)
        .unwrap()
        .iter()
        .filter(|m| kind(m).contains("Role"))
        .map(|m| {
            let object = serde_json::to_value(&m.object).unwrap();
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            let key = (
                text(&object["kind"]),
                text(&object["metadata"]["namespace"]),
                text(&object["metadata"]["name"]),
            );
            (key, object)
        })
        .collect()
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn a_hub_reads_profiles_and_token_secrets_in_its_fleet_namespace_only() {
    let ops = InstallOptions {
        namespace: "oz-ops".into(),
        ..InstallOptions::default()
    };
    for base in [ops, InstallOptions::default()] {
        let plain = rbac_objects(&base);
        let options = InstallOptions {
            fleet_hub: hub().fleet_hub,
            ..base
        };
        let with_hub = rbac_objects(&options);
        // Every other Role and ClusterRole is the plain install's, unchanged: nothing
        // cluster-wide, nothing in oz's namespace.
        let added: Vec<_> = with_hub.iter().filter(|o| !plain.contains(o)).collect();
        let keys: Vec<_> = added.iter().map(|(key, _)| key.clone()).collect();
        let key = |kind: &str| {
            (
                kind.to_string(),
                "fleet-a".to_string(),
                "oz-manager-fleet".to_string(),
            )
        };
        assert_eq!(keys, [key("Role"), key("RoleBinding")]);
        assert_eq!(with_hub.len(), plain.len() + 2);

        let role: Role = serde_json::from_value(added[0].1.clone()).unwrap();
        assert_eq!(
            role.rules.unwrap(),
            [
                rule(
                    "multicluster.x-k8s.io",
                    "clusterprofiles",
                    &["get", "list", "watch"]
                ),
                rule("", "secrets", &["get"]),
            ],
            "the inventory, read; the tokens, by GET alone"
        );
        let binding: RoleBinding = serde_json::from_value(added[1].1.clone()).unwrap();
        assert_eq!(
            (
                binding.role_ref.kind.as_str(),
                binding.role_ref.name.as_str()
            ),
            ("Role", "oz-manager-fleet")
        );
        let subjects = binding.subjects.unwrap();
        assert_eq!(subjects.len(), 1);
        assert_eq!(
            (subjects[0].name.as_str(), subjects[0].namespace.as_deref()),
            ("oz-manager", Some(options.namespace.as_str()))
        );
    }
}

#[test]
fn a_hub_watches_every_namespace() {
    let scoped_hub = InstallOptions {
        fleet_hub: hub().fleet_hub,
        ..scoped()
    };
    let error = install_objects(&scoped_hub).unwrap_err().to_string();
    assert!(error.contains("leave out --watch-namespaces"), "{error}");
}

#[test]
fn a_hub_runs_with_the_hub_flags_and_mounts_its_provider_file() {
    let manifests = install_objects(&hub()).unwrap();
    let args = manager_args_of(&manifests);
    for flag in [
        "--fleet-hub".to_string(),
        "--fleet-name=hq".into(),
        "--fleet-namespace=fleet-a".into(),
        format!("--fleet-provider-file={FLEET_PROVIDER_FILE}"),
    ] {
        assert!(args.contains(&flag), "{flag} in {args:?}");
    }
    let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let volume = pod
        .volumes
        .unwrap()
        .into_iter()
        .find_map(|v| v.config_map.map(|c| (v.name, c)))
        .expect("a ConfigMap volume");
    let mount = pod.containers[0]
        .volume_mounts
        .clone()
        .unwrap()
        .into_iter()
        .find(|m| m.name == volume.0)
        .expect("its mount");
    assert_eq!(volume.1.name, "oz-fleet-providers");
    let item = &volume.1.items.unwrap()[0];
    assert_eq!(
        format!("{}/{}", mount.mount_path, item.path),
        FLEET_PROVIDER_FILE
    );
    assert_eq!(
        (mount.mount_path.as_str(), item.key.as_str()),
        (FLEET_PROVIDER_DIR, FLEET_PROVIDER_KEY)
    );
    assert_eq!(mount.read_only, Some(true));
    let config_maps = of_kind(&manifests, "ConfigMap");
    let config_map: ConfigMap = typed(config_maps[0]);
    assert_eq!(
        config_map.metadata.name.as_deref(),
        Some("oz-fleet-providers")
    );
    assert_eq!(config_map.metadata.namespace.as_deref(), Some("oz-ops"));
}

/// The provider file, as mounted, is read by the hub's own reader: the secretreader provider
/// runs the image's plugin with the cluster's info, reading Secrets in the fleet namespace.
#[test]
fn the_provider_file_is_accepted_by_the_hubs_own_reader() {
    let manifests = install_objects(&hub()).unwrap();
    let config_map: ConfigMap = typed(of_kind(&manifests, "ConfigMap")[0]);
    let text = &config_map.data.unwrap()[FLEET_PROVIDER_KEY];
    let path = std::env::temp_dir().join(format!("oz-providers-{}.json", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let providers = Providers::read(&path);
    let _ = std::fs::remove_file(&path);
    let providers = providers.unwrap();
    let exec = providers
        .exec_config(SECRETREADER_PROVIDER)
        .expect("the secretreader provider");
    assert_eq!(exec.command.as_deref(), Some(SECRETREADER_PLUGIN));
    assert_eq!(
        exec.api_version.as_deref(),
        Some("client.authentication.k8s.io/v1")
    );
    assert!(
        exec.provide_cluster_info,
        "the plugin needs the clusterName"
    );
    let env = exec.env.clone().unwrap_or_default();
    assert!(
        env.iter().any(
            |e| e.get("name").map(String::as_str) == Some("POD_NAMESPACE")
                && e.get("value").map(String::as_str) == Some("fleet-a")
        ),
        "the plugin reads the fleet namespace's Secrets: {env:?}"
    );
}

#[test]
fn a_spoke_holds_the_hubs_credential_and_names_it_to_oz_manager() {
    let options = InstallOptions {
        fleet_spoke: true,
        ..scoped()
    };
    let manifests = install_objects(&options).unwrap();
    let credential: Vec<String> = manifests
        .iter()
        .filter(|m| m.object.metadata.name.as_deref() == Some(HUB_CREDENTIAL_NAME))
        .map(|m| kind(m).to_string())
        .collect();
    assert_eq!(
        credential,
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    );
    let args = manager_args_of(&manifests);
    assert!(
        args.contains(&format!("--fleet-hub-user={}", hub_user("oz-ops"))),
        "{args:?}"
    );
    let plain = install_objects(&scoped()).unwrap();
    assert!(
        !manager_args_of(&plain)
            .iter()
            .any(|a| a.starts_with("--fleet")),
        "no fleet unless asked"
    );
    assert!(
        !plain
            .iter()
            .any(|m| m.object.metadata.name.as_deref() == Some(HUB_CREDENTIAL_NAME))
    );
    let without_webhooks = InstallOptions {
        controllers: vec![Component::Exec],
        ..options
    };
    let error = install_objects(&without_webhooks).unwrap_err().to_string();
    assert!(error.contains("add webhooks"), "{error}");
}

/// A spoke whose authenticator names people differently: `--fleet-user-prefix` and
/// `--fleet-group-prefix` reach oz-manager's args as it parses them, right after the hub's user,
/// and the command line that prints the install names them too.
#[test]
fn a_spokes_names_for_the_hubs_reach_oz_manager_and_need_a_spoke() {
    let names = FleetNames {
        users: Some(PrefixMap::parse(USER_PREFIX_FLAG, "=corp:").unwrap()),
        groups: Some(PrefixMap::parse(GROUP_PREFIX_FLAG, "oidc:=corp:").unwrap()),
    };
    let options = InstallOptions {
        fleet_spoke: true,
        fleet_names: names.clone(),
        ..scoped()
    };
    let args = manager_args_of(&install_objects(&options).unwrap());
    let hub_user_at = args
        .iter()
        .position(|a| a.starts_with("--fleet-hub-user="))
        .expect("--fleet-hub-user");
    assert_eq!(
        args[hub_user_at + 1..hub_user_at + 3],
        [
            "--fleet-user-prefix==corp:",
            "--fleet-group-prefix=oidc:=corp:"
        ],
        "{args:?}"
    );
    assert!(
        options.command_line().ends_with(
            " --fleet-spoke-install --fleet-user-prefix =corp: --fleet-group-prefix oidc:=corp:"
        ),
        "{}",
        options.command_line()
    );

    // Each alone, and each refused without a spoke, named.
    for (flag, only) in [
        (
            USER_PREFIX_FLAG,
            FleetNames {
                groups: None,
                ..names.clone()
            },
        ),
        (
            GROUP_PREFIX_FLAG,
            FleetNames {
                users: None,
                ..names.clone()
            },
        ),
    ] {
        let spoke = InstallOptions {
            fleet_names: only.clone(),
            ..options.clone()
        };
        let args = manager_args_of(&install_objects(&spoke).unwrap());
        let rendered: Vec<_> = args.iter().filter(|a| a.contains("-prefix=")).collect();
        assert_eq!(rendered.len(), 1, "{flag}: {args:?}");
        assert!(rendered[0].starts_with(&format!("{flag}=")), "{args:?}");

        let not_a_spoke = InstallOptions {
            fleet_spoke: false,
            ..spoke
        };
        let error = install_objects(&not_a_spoke).unwrap_err().to_string();
        assert!(
            error.contains(&format!("{flag} maps the hub's names"))
                && error.contains("--fleet-spoke-install"),
            "{error}"
        );
    }
}
