//! The run flags: their parsers, and that the Deployment's flags run the install they belong to.

use std::net::SocketAddr;

use clap::Parser;

use super::*;
use crate::{
    install::{
        DEFAULT_SESSION_RECORDINGS, HEALTH_PORT, InstallOptions, METRICS_PORT, SESSIONS_PORT,
        WEBHOOK_PORT, manager_args,
    },
    manager::Command,
};

/// `args` parsed by oz-manager's own command line, as a run.
fn parse(args: &[String]) -> Result<RunArgs, clap::Error> {
    let command =
        Command::try_parse_from(std::iter::once("oz-manager".into()).chain(args.to_vec()))?;
    Ok(command.run_args().expect("a run, not a subcommand").clone())
}

#[test]
fn retention_takes_days_or_go_durations_and_refuses_overflow() {
    assert_eq!(parse_retention("7d"), Ok(Duration::from_secs(7 * 86400)));
    assert_eq!(parse_retention("90m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_retention("0"), Ok(Duration::ZERO));
    // Found by the hostile-input review: this overflowed (a panic in debug builds, a
    // wrapped, much shorter retention in release builds).
    let error = parse_retention("999999999999999999d").unwrap_err();
    assert!(error.contains("at most 213503982334601d"), "{error}");
    assert!(parse_retention("-1h").is_err());
    assert!(parse_retention("1w").is_err());
}

#[test]
fn bind_addresses_take_a_port_an_address_or_off() {
    assert_eq!(parse_bind("metrics-bind-address", "0"), Ok(None));
    assert_eq!(parse_bind("metrics-bind-address", ""), Ok(None));
    assert_eq!(
        parse_bind("metrics-bind-address", ":8080"),
        Ok(Some(SocketAddr::from(([0, 0, 0, 0], 8080))))
    );
    assert_eq!(
        parse_bind("metrics-bind-address", "127.0.0.1:9"),
        Ok(Some(SocketAddr::from(([127, 0, 0, 1], 9))))
    );
    let error = parse_bind("metrics-bind-address", "bad").unwrap_err();
    assert!(
        error.starts_with("--metrics-bind-address \"bad\": "),
        "{error}"
    );
}

#[test]
fn controllers_are_one_list_for_running_and_installing_with_their_own_errors() {
    let run = parse(&["--controllers=exec,webhooks".into()]).unwrap();
    assert_eq!(run.controllers, [Component::Exec, Component::Webhooks]);
    assert_eq!(
        run.manager_config().unwrap_err(),
        "the webhooks need --webhook-service NAMESPACE/NAME in a cluster, or --webhook-url-base https://127.0.0.1:PORT locally (or leave webhooks out of --controllers)"
    );
    let run_error = parse(&["--controllers=exec,nope".into()])
        .unwrap_err()
        .to_string();
    assert!(
        run_error.contains("[possible values: exec, pod, webhooks, sessions]"),
        "{run_error}"
    );
    let install_error =
        Command::try_parse_from(["oz-manager", "manifests", "--controllers=exec,nope"])
            .unwrap_err()
            .to_string();
    assert!(
        install_error.contains("unknown controller \"nope\": want exec, pod, webhooks or sessions"),
        "{install_error}"
    );
}

/// The flags the install writes into the Deployment are the flags oz-manager parses, and they
/// run exactly that install: its namespaces, parts, Lease, ports, Secrets and webhook
/// registration. A flag renamed or a default changed on one side fails here, not in a cluster.
#[test]
fn the_deployments_flags_run_the_install_they_belong_to() {
    let scoped = InstallOptions {
        namespace: "oz-ops".into(),
        watch_namespaces: vec!["a".into(), "b".into()],
        ..InstallOptions::default()
    };
    for options in [
        InstallOptions::default(),
        scoped.clone(),
        InstallOptions {
            name: "team-a".into(),
            ..scoped.clone()
        },
        InstallOptions {
            controllers: vec![Component::Exec],
            ..scoped.clone()
        },
        InstallOptions {
            controllers: vec![Component::Webhooks, Component::Pod],
            ..InstallOptions::default()
        },
        InstallOptions {
            controllers: Component::ALL.to_vec(),
            ..scoped.clone()
        },
    ] {
        let flags = manager_args(&options);
        let args = parse(&flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        assert_eq!(args.log_format, LogFormat::Json);
        let config = args.manager_config().unwrap();
        let watched = options.watched();
        assert_eq!(config.namespace, options.namespace, "{flags:?}");
        assert_eq!(config.kinds, options.access_kinds(), "{flags:?}");
        let scopes: Vec<Scope> = if watched.is_empty() {
            vec![Scope::Cluster]
        } else {
            watched.iter().cloned().map(Scope::Namespace).collect()
        };
        assert_eq!(config.scopes, scopes, "{flags:?}");
        let election = config
            .leader_election
            .expect("the Deployment elects a leader");
        assert_eq!(election.lease_name, options.lease_name(), "{flags:?}");
        let port = |port: i32| Some(SocketAddr::from(([0, 0, 0, 0], port as u16)));
        assert_eq!(config.metrics_addr, port(METRICS_PORT));
        assert_eq!(config.health_addr, port(HEALTH_PORT));
        assert_eq!(
            config.webhooks.is_some(),
            options.runs(Component::Webhooks),
            "{flags:?}"
        );
        if let Some(webhooks) = config.webhooks {
            assert_eq!(webhooks.registration, options.webhook_registration());
            assert_eq!(webhooks.namespace, options.namespace);
            assert_eq!(webhooks.listen, port(WEBHOOK_PORT).unwrap());
            let [ca, tls] = options.secret_names();
            assert_eq!((webhooks.secrets.ca, webhooks.secrets.serving), (ca, tls));
            assert_eq!(webhooks.watch_namespaces, watched);
        }
        assert_eq!(
            config.sessions.is_some(),
            options.runs(Component::Sessions),
            "{flags:?}"
        );
        if let Some(sessions) = config.sessions {
            assert_eq!(sessions.listen, port(i32::from(SESSIONS_PORT)).unwrap());
            assert_eq!(sessions.recordings, DEFAULT_SESSION_RECORDINGS);
        }
    }
}

#[test]
fn sessions_are_opt_in_need_the_webhooks_and_a_service_for_their_api_service() {
    assert!(
        !parse(&[])
            .unwrap()
            .controllers
            .contains(&Component::Sessions)
    );
    assert!(!InstallOptions::default().runs(Component::Sessions));

    let alone = parse(&[
        "--controllers=exec,sessions".into(),
        "--sessions-service=oz/oz".into(),
    ])
    .unwrap()
    .manager_config()
    .unwrap_err();
    assert!(alone.contains("add webhooks to --controllers"), "{alone}");

    let local = [
        "--controllers=webhooks,sessions".to_string(),
        "--webhook-url-base=https://127.0.0.1:9443".into(),
    ];
    let error = parse(&local).unwrap().manager_config().unwrap_err();
    assert!(error.contains("--sessions-service"), "{error}");

    let mut flags = local.to_vec();
    flags.extend([
        "--sessions-service=oz-test/oz-sessions".into(),
        "--sessions-port=19444".into(),
    ]);
    let config = parse(&flags).unwrap().manager_config().unwrap();
    let service = config.webhooks.unwrap().registration.sessions.unwrap();
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.port
        ),
        ("oz-test", "oz-sessions", 19444)
    );
    assert_eq!(
        config.sessions.unwrap().listen,
        SocketAddr::from(([0, 0, 0, 0], 19444))
    );

    // In a cluster, the webhook Service (its `sessions` port) unless told otherwise.
    let config = parse(&[
        "--controllers=webhooks,sessions".into(),
        "--webhook-service=oz-system/oz-webhook".into(),
    ])
    .unwrap()
    .manager_config()
    .unwrap();
    let registration = config.webhooks.unwrap().registration;
    let service = registration.sessions.as_ref().unwrap();
    assert_eq!(
        (service.name.as_str(), service.port),
        ("oz-webhook", SESSIONS_PORT)
    );
    // The serving certificate names the sessions Service as the apiserver dials it.
    assert!(
        registration
            .serving_names()
            .contains(&"oz-webhook.oz-system.svc".to_string())
    );
}

#[test]
fn recordings_are_capped_per_session_by_default_and_in_total_when_asked() {
    let sessions = |extra: &[&str]| {
        let mut args = vec![
            "--controllers=webhooks,sessions".to_string(),
            "--webhook-url-base=https://127.0.0.1:9443".into(),
            "--sessions-service=oz-test/oz-sessions".into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        parse(&args).map(|run| run.manager_config().unwrap().sessions.unwrap())
    };
    assert_eq!(
        sessions(&[]).unwrap().recording_limits,
        RecordingLimits {
            max_session_bytes: 64 << 20,
            max_total_bytes: None
        }
    );
    assert_eq!(
        sessions(&[
            "--session-recording-max-size=1Mi",
            "--session-recordings-max-total-size=1Gi"
        ])
        .unwrap()
        .recording_limits,
        RecordingLimits {
            max_session_bytes: 1 << 20,
            max_total_bytes: Some(1 << 30)
        }
    );
    let error = sessions(&["--session-recording-max-size=1Ki"]).unwrap_err();
    assert!(error.to_string().contains("at least 64Ki"), "{error}");
}

#[test]
fn the_webhook_client_ca_is_read_at_startup_and_its_names_need_it() {
    let webhooks = |extra: &[&str]| {
        let mut args = vec![
            "--controllers=webhooks".to_string(),
            "--webhook-url-base=https://127.0.0.1:9443".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let missing = parse(&webhooks(&["--webhook-client-ca-file=/nonexistent/ca.crt"])).unwrap();
    let error = missing.manager_config().unwrap_err();
    assert!(
        error.starts_with("--webhook-client-ca-file: cannot read /nonexistent/ca.crt"),
        "{error}"
    );
    assert!(parse(&webhooks(&["--webhook-client-names=kube-apiserver"])).is_err());

    let ca = std::env::temp_dir().join(format!(
        "oz-config-test-client-ca-{}.crt",
        std::process::id()
    ));
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    std::fs::write(&ca, params.self_signed(&key).unwrap().pem()).unwrap();
    let run = parse(&webhooks(&[
        &format!("--webhook-client-ca-file={}", ca.display()),
        "--webhook-client-names=kube-apiserver,,apiserver.example",
    ]))
    .unwrap();
    let client_ca = run
        .manager_config()
        .unwrap()
        .webhooks
        .unwrap()
        .client_ca
        .unwrap();
    assert_eq!(
        client_ca.allowed_names,
        ["kube-apiserver", "apiserver.example"]
    );
    assert_eq!(client_ca.path.as_deref(), Some(ca.as_path()));
    let none = parse(&webhooks(&[])).unwrap();
    assert!(
        none.manager_config()
            .unwrap()
            .webhooks
            .unwrap()
            .client_ca
            .is_none()
    );
    let _ = std::fs::remove_file(&ca);
}

#[test]
fn a_fleet_spokes_hub_user_reaches_the_webhooks() {
    let webhooks = |extra: &[&str]| {
        let mut args = vec![
            "--controllers=webhooks".to_string(),
            "--webhook-url-base=https://127.0.0.1:9443".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        parse(&args)
            .unwrap()
            .manager_config()
            .map(|c| c.webhooks.unwrap())
    };
    assert_eq!(
        webhooks(&[]).unwrap().fleet_hub_user,
        None,
        "no hub by default"
    );
    let hub = "system:serviceaccount:oz-system:oz-fleet-hub";
    let spoke = webhooks(&["--fleet-hub-user", hub]).unwrap();
    assert_eq!(spoke.fleet_hub_user.as_deref(), Some(hub));
    let error = webhooks(&["--fleet-hub-user= "]).unwrap_err();
    assert!(error.contains("--fleet-hub-user"), "{error}");
}

#[test]
fn a_fleet_spokes_names_for_the_hubs_reach_the_webhooks_and_bad_ones_stop_the_start() {
    let hub = "--fleet-hub-user=system:serviceaccount:oz-system:oz-fleet-hub";
    let parsed = |extra: &[&str]| {
        let mut args = vec![
            "--controllers=webhooks".to_string(),
            "--webhook-url-base=https://127.0.0.1:9443".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        parse(&args).map_err(|e| e.to_string())
    };
    let names = |extra: &[&str]| {
        parsed(extra)
            .unwrap()
            .manager_config()
            .unwrap()
            .webhooks
            .unwrap()
            .fleet_names
    };
    assert_eq!(names(&[hub]), oz_api::FleetNames::default());
    let mapped = names(&[
        hub,
        "--fleet-user-prefix=oidc:=corp:",
        "--fleet-group-prefix==corp:",
    ]);
    let users = mapped.users.unwrap();
    assert_eq!(
        (users.hub.as_str(), users.spoke.as_str()),
        ("oidc:", "corp:")
    );
    let groups = mapped.groups.unwrap();
    assert_eq!((groups.hub.as_str(), groups.spoke.as_str()), ("", "corp:"));

    for (args, said) in [
        (
            &[hub, "--fleet-user-prefix=corp:"][..],
            "want HUB_PREFIX=SPOKE_PREFIX",
        ),
        (
            &[hub, "--fleet-group-prefix=a=b=c"][..],
            "more than one '='",
        ),
        (
            &[hub, "--fleet-user-prefix=="][..],
            "leave --fleet-user-prefix out",
        ),
        // Only a spoke has a hub whose names to map.
        (&["--fleet-user-prefix=oidc:=corp:"][..], "--fleet-hub-user"),
    ] {
        let error = parsed(args).unwrap_err();
        assert!(error.contains(said), "{args:?}: {error}");
        assert!(
            error.contains("--fleet-user-prefix") || error.contains("--fleet-group-prefix"),
            "{args:?}: the flag is named: {error}"
        );
    }
}

#[test]
fn the_audit_webhook_ignores_an_oz_outage_unless_told_to_fail() {
    let config = |extra: &[&str]| {
        let mut args = vec![
            "--controllers=webhooks".to_string(),
            "--webhook-url-base=https://127.0.0.1:9443".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        parse(&args).map(|run| run.manager_config().unwrap())
    };
    let policy = |c: ManagerConfig| c.webhooks.unwrap().registration.audit_failure_policy;
    assert_eq!(policy(config(&[]).unwrap()), FailurePolicy::Ignore);
    assert_eq!(
        policy(config(&["--audit-failure-policy=Fail"]).unwrap()),
        FailurePolicy::Fail
    );
    let error = config(&["--audit-failure-policy=fail"])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("--audit-failure-policy") && error.contains("want Ignore or Fail"),
        "{error}"
    );
}

/// The Pod's arguments are readable by anyone who may read the Pod: a recordings URL carrying
/// S3 credentials is refused, naming what it carries and where credentials go instead.
#[test]
fn a_recordings_url_that_carries_credentials_is_refused() {
    let run = |url: &str| {
        parse(&[
            "--controllers=webhooks,sessions".into(),
            "--webhook-service=oz-system/oz-webhook".into(),
            format!("--session-recordings={url}"),
        ])
        .unwrap()
        .manager_config()
    };
    for (url, named) in [
        (
            "s3://rec/oz?region=eu-west-1&access_key_id=AKIA&secret_access_key=s3cr3t",
            "access_key_id, secret_access_key",
        ),
        ("s3://rec/oz?aws_session_token=t", "aws_session_token"),
        ("s3://AKIA:s3cr3t@rec/oz", "user info"),
    ] {
        let error = run(url).unwrap_err();
        assert!(error.contains(named), "{url}: {error}");
        assert!(
            error.contains("AWS_ACCESS_KEY_ID") && !error.contains("s3cr3t"),
            "{error}"
        );
    }
    for url in [
        "s3://rec/oz?region=eu-west-1&endpoint=https://minio.example:9000",
        "/var/lib/oz/recordings",
    ] {
        assert!(run(url).is_ok(), "{url}");
    }
}

/// A hub's and a spoke's install run oz-manager as what they install: parsed by oz-manager's
/// own command line, the hub's flags give its settings, the spoke's the hub's user.
#[test]
fn a_fleet_installs_flags_run_a_hub_and_a_spoke() {
    let hub = InstallOptions {
        namespace: "oz-ops".into(),
        fleet_hub: Some(crate::install::FleetHubOptions {
            name: "hq".into(),
            namespace: "fleet-a".into(),
        }),
        ..InstallOptions::default()
    };
    let flags = manager_args(&hub);
    let config = parse(&flags).unwrap().manager_config().unwrap();
    let settings = config.fleet_hub.expect("a hub");
    assert_eq!(
        (settings.name.as_str(), settings.namespace.as_str()),
        ("hq", "fleet-a"),
        "{flags:?}"
    );
    assert_eq!(
        settings.provider_file,
        std::path::Path::new(crate::install::fleet_hub::FLEET_PROVIDER_FILE)
    );

    // A spoke's names for the hub's, as the install writes them, are what oz-manager reads.
    let names = oz_api::FleetNames {
        users: Some(oz_api::PrefixMap::parse("--fleet-user-prefix", "=corp:").unwrap()),
        groups: Some(oz_api::PrefixMap::parse("--fleet-group-prefix", "oidc:=corp:").unwrap()),
    };
    let spoke = InstallOptions {
        namespace: "oz-ops".into(),
        fleet_spoke: true,
        fleet_names: names.clone(),
        ..InstallOptions::default()
    };
    let flags = manager_args(&spoke);
    let config = parse(&flags).unwrap().manager_config().unwrap();
    assert!(config.fleet_hub.is_none(), "{flags:?}");
    let webhooks = config.webhooks.unwrap();
    assert_eq!(
        webhooks.fleet_hub_user,
        Some(crate::install::fleet::hub_user("oz-ops"))
    );
    assert_eq!(webhooks.fleet_names, names, "{flags:?}");
}

#[test]
fn a_fleet_hub_is_never_scoped_to_some_namespaces() {
    let hub = |extra: &[&str]| {
        let mut args: Vec<String> = [
            "--controllers=exec",
            "--fleet-hub",
            "--fleet-provider-file=/etc/oz/providers.json",
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra.iter().map(|a| a.to_string()));
        parse(&args).unwrap().manager_config()
    };
    assert!(hub(&[]).unwrap().fleet_hub.is_some());
    let error = hub(&["--watch-namespaces=shop"]).unwrap_err();
    assert!(
        error.contains("--fleet-hub") && error.contains("--watch-namespaces"),
        "{error}"
    );
}
