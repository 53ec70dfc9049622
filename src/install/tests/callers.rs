//! The caller options of the install: the apiserver's webhook client CA mounted and passed to
//! oz-manager, and the NetworkPolicy that admits only the control plane to the webhook port.

use k8s_openapi::{
    api::{apps::v1::Deployment, networking::v1::NetworkPolicy},
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::{manager_args_of, of_kind, scoped, typed};
use crate::install::*;

fn with_caller_options() -> InstallOptions {
    InstallOptions {
        webhook_client_ca_secret: Some("apiserver-webhook-client-ca".into()),
        webhook_ingress_cidrs: vec!["10.0.0.0/24".into(), "fd00::/64".into()],
        ..scoped()
    }
}

#[test]
fn the_client_ca_secret_is_mounted_and_passed_to_oz_manager() {
    let manifests = install_objects(&with_caller_options()).unwrap();
    let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let volumes = pod.volumes.unwrap();
    assert_eq!(volumes.len(), 1);
    let secret = volumes[0].secret.clone().unwrap();
    assert_eq!(
        secret.secret_name.as_deref(),
        Some("apiserver-webhook-client-ca")
    );
    let items: Vec<(String, String)> = secret
        .items
        .unwrap()
        .into_iter()
        .map(|i| (i.key, i.path))
        .collect();
    assert_eq!(items, [("ca.crt".to_string(), "ca.crt".to_string())]);
    let container = &pod.containers[0];
    let mounts = container.volume_mounts.clone().unwrap();
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[0].name, volumes[0].name);
    assert_eq!(mounts[0].read_only, Some(true));
    // The whole directory, not a subPath: the kubelet only updates a mounted Secret's files
    // without one, and oz re-reads the CA when it changes.
    assert_eq!(mounts[0].sub_path, None);
    let flag = format!(
        "--webhook-client-ca-file={}/ca.crt",
        mounts[0].mount_path.trim_end_matches('/')
    );
    assert!(
        container.args.clone().unwrap().contains(&flag),
        "{flag} in {:?}",
        container.args
    );
    assert!(
        with_caller_options()
            .command_line()
            .contains(" --webhook-client-ca-secret apiserver-webhook-client-ca"),
        "{}",
        with_caller_options().command_line()
    );

    // Without the option: no volume, no flag.
    let plain = install_objects(&scoped()).unwrap();
    let deployment: Deployment = typed(of_kind(&plain, "Deployment")[0]);
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.volumes, None);
    assert_eq!(pod.containers[0].volume_mounts, None);
    assert!(
        !manager_args(&scoped())
            .iter()
            .any(|a| a.starts_with("--webhook-client-ca-file"))
    );
}

#[test]
fn the_network_policy_admits_only_the_control_plane_to_the_webhook_port() {
    let options = with_caller_options();
    let manifests = install_objects(&options).unwrap();
    let policies = of_kind(&manifests, "NetworkPolicy");
    assert_eq!(policies.len(), 1);
    let policy: NetworkPolicy = typed(policies[0]);
    assert_eq!(policy.metadata.namespace.as_deref(), Some("oz-ops"));
    let spec = policy.spec.unwrap();
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));

    // It selects oz-manager's pods: the Deployment's template labels.
    let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
    let template = deployment.spec.unwrap().template;
    let pod_labels = template.metadata.unwrap().labels.unwrap();
    let selector = spec.pod_selector.unwrap().match_labels.unwrap();
    assert!(
        selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "{selector:?} selects {pod_labels:?}"
    );

    // Each rule names container ports that exist; the webhook port only from the CIDRs,
    // metrics and health from anywhere.
    let container_ports: Vec<String> = template.spec.unwrap().containers[0]
        .ports
        .iter()
        .flatten()
        .filter_map(|p| p.name.clone())
        .collect();
    let mut opened = Vec::new();
    for rule in spec.ingress.unwrap() {
        let sources: Option<Vec<String>> = rule.from.map(|peers| {
            peers
                .into_iter()
                .map(|p| {
                    assert!(p.pod_selector.is_none() && p.namespace_selector.is_none());
                    p.ip_block.unwrap().cidr
                })
                .collect()
        });
        for port in rule.ports.unwrap() {
            let IntOrString::String(name) = port.port.unwrap() else {
                panic!("ports are named")
            };
            assert!(container_ports.contains(&name), "{name}");
            opened.push((name, sources.clone()));
        }
    }
    let cidrs = Some(vec!["10.0.0.0/24".to_string(), "fd00::/64".to_string()]);
    assert_eq!(
        opened,
        [
            ("webhook".to_string(), cidrs),
            ("metrics".to_string(), None),
            ("health".to_string(), None),
        ]
    );
    assert!(
        options
            .command_line()
            .ends_with(" --webhook-ingress-cidrs 10.0.0.0/24,fd00::/64"),
        "{}",
        options.command_line()
    );

    // No CIDRs, no policy.
    assert!(of_kind(&install_objects(&scoped()).unwrap(), "NetworkPolicy").is_empty());
}

#[test]
fn caller_options_are_checked() {
    for cidr in [
        "10.0.0.0",
        "10.0.0.0/33",
        "fd00::/129",
        "10.0.0/8",
        "x/8",
        "10.0.0.0/+8",
        "10.0.0.0/",
        "10.0.0.0/08x",
        " 10.0.0.0/8",
    ] {
        let options = InstallOptions {
            webhook_ingress_cidrs: vec![cidr.into()],
            ..InstallOptions::default()
        };
        assert!(
            matches!(install_objects(&options), Err(ManifestError::Invalid(m)) if m.contains(cidr)),
            "{cidr}"
        );
    }
    for cidr in ["0.0.0.0/0", "192.168.1.7/32", "::/0", "2001:db8::/32"] {
        let options = InstallOptions {
            webhook_ingress_cidrs: vec![cidr.into()],
            ..InstallOptions::default()
        };
        install_objects(&options).unwrap_or_else(|e| panic!("{cidr}: {e}"));
    }
    let bad_secret = InstallOptions {
        webhook_client_ca_secret: Some("Client_CA".into()),
        ..InstallOptions::default()
    };
    assert!(matches!(
        install_objects(&bad_secret),
        Err(ManifestError::Invalid(_))
    ));
    // They protect the webhooks: without them they make no sense.
    let without_webhooks = InstallOptions {
        controllers: vec![Component::Exec],
        ..with_caller_options()
    };
    let error = install_objects(&without_webhooks).unwrap_err().to_string();
    assert!(error.contains("add webhooks to --controllers"), "{error}");
}

/// The client CA flag the Deployment passes is oz-manager's own, and names the file the
/// Secret is mounted as.
#[test]
fn oz_manager_reads_the_client_ca_where_the_deployment_mounts_it() {
    use clap::Parser;

    let args = manager_args(&with_caller_options());
    let command = crate::manager::Command::try_parse_from(
        std::iter::once("oz-manager".to_string()).chain(args.clone()),
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let run = command.run_args().expect("a run");
    let mounted = std::path::Path::new(WEBHOOK_CLIENT_CA_DIR).join(WEBHOOK_CLIENT_CA_KEY);
    assert_eq!(
        run.webhook_client_ca_file.as_deref(),
        Some(mounted.as_path())
    );
    // Here nothing is mounted: oz-manager refuses to start, naming the flag and the file.
    let error = run.manager_config().unwrap_err();
    assert!(
        error.contains("--webhook-client-ca-file") && error.contains(&*mounted.to_string_lossy()),
        "{error}"
    );
}

/// An install with webhooks says how their callers are checked: neither way is safe for every
/// cluster (a client CA needs an apiserver that presents a certificate; unverified callers
/// need the port kept closed), so `oz-manager manifests` and the chart make the installer
/// choose, and the Pod's arguments show the choice.
#[test]
fn an_install_with_webhooks_chooses_how_their_callers_are_checked() {
    let unchosen = InstallOptions::default();
    let refused = unchosen.caller_choice().unwrap_err().to_string();
    for named in [
        "--webhook-client-ca-secret",
        "--unverified-webhook-callers",
        "docs/security.md",
    ] {
        assert!(refused.contains(named), "{named} in {refused}");
    }
    assert!(with_caller_options().caller_choice().is_ok());

    let unverified = InstallOptions {
        unverified_webhook_callers: true,
        ..scoped()
    };
    assert!(unverified.caller_choice().is_ok());
    let args = manager_args_of(&install_objects(&unverified).unwrap());
    assert!(
        args.contains(&"--unverified-webhook-callers".to_string()),
        "{args:?}"
    );
    assert!(
        unverified
            .command_line()
            .ends_with(" --unverified-webhook-callers"),
        "{}",
        unverified.command_line()
    );
    // The committed install made the choice that works everywhere.
    assert!(InstallOptions::committed().caller_choice().is_ok());

    // Both at once, or the choice without webhooks, is refused.
    let both = InstallOptions {
        unverified_webhook_callers: true,
        ..with_caller_options()
    };
    let refused = both.validate().unwrap_err().to_string();
    assert!(refused.contains("choose one"), "{refused}");
    let without_webhooks = InstallOptions {
        controllers: vec![Component::Exec],
        unverified_webhook_callers: true,
        ..scoped()
    };
    assert!(without_webhooks.validate().is_err());
    // Without webhooks there is nothing to choose.
    let exec_only = InstallOptions {
        controllers: vec![Component::Exec],
        ..scoped()
    };
    assert!(exec_only.caller_choice().is_ok());
}
