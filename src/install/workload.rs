//! What runs oz-manager: its Services, its Deployment (with the flags it runs with) and the
//! webhook configurations it registers, and the one derivation of that registration shared with
//! oz-manager itself.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{
            Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
            EnvFromSource, EnvVar, EnvVarSource, HTTPGetAction, KeyToPath, ObjectFieldSelector,
            PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
            SeccompProfile, SecretEnvSource, SecretVolumeSource, SecurityContext, Service,
            ServicePort, ServiceSpec, Volume, VolumeMount,
        },
    },
    apimachinery::pkg::{
        api::resource::Quantity, apis::meta::v1::LabelSelector, util::intstr::IntOrString,
    },
};
use kube::api::ObjectMeta;

use super::{
    Component, DEFAULT_NAME, HEALTH_PORT, InstallOptions, METRICS_PORT, Manifest, ManifestError,
    RUN_AS, SESSIONS_PORT, WEBHOOK_PORT, WEBHOOK_SERVICE_PORT,
    fleet::hub_user,
    fleet_hub::{
        FLEET_PROVIDER_DIR, FLEET_PROVIDER_FILE, FLEET_PROVIDER_KEY, provider_config_map_name,
    },
    fleet_names::name_flags,
    labels, meta,
    options::join,
    selector_labels,
};

const CONTAINER: &str = "manager";

/// Where the Deployment mounts the webhook client CA Secret (the whole Secret, not a subPath,
/// so the kubelet updates the file when the Secret changes).
pub const WEBHOOK_CLIENT_CA_DIR: &str = "/etc/oz/webhook-client-ca";
/// The key of the webhook client CA Secret that holds the CA bundle, as in cert-manager's and
/// kubeadm's CA Secrets.
pub const WEBHOOK_CLIENT_CA_KEY: &str = "ca.crt";
const WEBHOOK_CLIENT_CA_VOLUME: &str = "webhook-client-ca";
const SESSION_RECORDINGS_VOLUME: &str = "session-recordings";
const FLEET_PROVIDERS_VOLUME: &str = "fleet-providers";
/// Where the Deployment keeps session recordings: [`super::DEFAULT_SESSION_RECORDINGS`], an
/// `emptyDir` volume.
pub const SESSION_RECORDINGS_DIR: &str = super::DEFAULT_SESSION_RECORDINGS;
/// The recordings volume's `sizeLimit`: past it the kubelet evicts the pod, and the webhooks,
/// the sessions and the recordings go with it.
pub const SESSION_RECORDINGS_SIZE_LIMIT: &str = "1Gi";
/// oz-manager's total cap on that volume (`--session-recordings-max-total-size`): below the
/// size limit by two 64 MiB recordings, one being assembled next to its parts and one of slack.
pub const SESSION_RECORDINGS_MAX_TOTAL_SIZE: &str = "896Mi";

/// The workload objects of the install, in order: the Services, the Deployment, the
/// NetworkPolicy (with ingress CIDRs) and (with the webhooks) the webhook configurations, without
/// a caBundle.
pub(super) fn manifests(o: &InstallOptions) -> Result<Vec<Manifest>, ManifestError> {
    let mut out = Vec::new();
    let mut push = |comment: Vec<String>, object: &dyn super::yaml::ErasedObject| {
        out.push(Manifest::new(comment, object)?);
        Ok::<_, ManifestError>(())
    };
    push(
        vec![format!(
            "Prometheus metrics of oz-manager (plain HTTP, /metrics on port {METRICS_PORT})."
        )],
        &service(o, &format!("{}-metrics", o.name), METRICS_PORT, "metrics"),
    )?;
    if o.runs(Component::Webhooks) {
        push(
            vec![format!(
                "The apiserver reaches the admission webhooks through this Service (443 -> {WEBHOOK_PORT})."
            )],
            &webhook_service(o),
        )?;
    }
    push(
        vec![format!(
            "oz-manager: the controllers{} in one process; with --leader-elect only the leader reconciles.",
            if o.runs(Component::Webhooks) {
                " and the webhook server"
            } else {
                ""
            }
        )],
        &deployment(o),
    )?;
    if o.runs(Component::Webhooks) && !o.webhook_ingress_cidrs.is_empty() {
        push(
            vec![
                format!(
                    "Only the control plane ({}) may reach the webhook port; metrics and health probes stay open.",
                    o.webhook_ingress_cidrs.join(", ")
                ),
                "Enforced only where the network plugin implements NetworkPolicy.".into(),
            ],
            &super::network_policies::ingress_policy(o),
        )?;
    }
    if !o.egress_cidrs.is_empty() {
        push(
            vec![
                format!(
                    "oz-manager may connect only to name servers and {}: the apiserver and the notification sinks.",
                    o.egress_cidrs.join(", ")
                ),
                "Enforced only where the network plugin implements NetworkPolicy.".into(),
            ],
            &super::network_policies::egress_policy(o),
        )?;
    }

    if o.runs(Component::Webhooks) {
        let registration = o.webhook_registration();
        let note =
            "No caBundle: oz-manager makes its own CA, keeps it in a Secret and injects it here.";
        let mut mutating = registration.mutating_configuration("");
        add_labels(o, &mut mutating.metadata);
        for webhook in mutating.webhooks.iter_mut().flatten() {
            webhook.client_config.ca_bundle = None;
        }
        push(
            vec![
                "Stamps spec.requester on new requests with the user who creates them; until oz-manager runs, requests are refused (failurePolicy Fail).".into(),
                note.into(),
            ],
            &mutating,
        )?;
        for mut validating in registration.validating_configurations("") {
            add_labels(o, &mut validating.metadata);
            for webhook in validating.webhooks.iter_mut().flatten() {
                webhook.client_config.ca_bundle = None;
            }
            let what = if validating.metadata.name == Some(registration.audit_name()) {
                "Audits exec, attach, port-forward and debug into pods (failurePolicy Ignore: an oz outage never blocks kubectl exec)."
            } else {
                "Validates requests: the template exists and the requester may use it; until oz-manager runs, requests are refused (failurePolicy Fail)."
            };
            push(vec![what.into(), note.into()], &validating)?;
        }
        if let Some(sessions) = &registration.sessions {
            let mut api_service = sessions.api_service("");
            add_labels(o, &mut api_service.metadata);
            if let Some(spec) = api_service.spec.as_mut() {
                spec.ca_bundle = None;
            }
            push(
                vec![
                    format!(
                        "Brokered sessions: the apiserver serves {} and proxies it to oz (sessions port {SESSIONS_PORT}).",
                        oz_api::SESSIONS_GROUP
                    ),
                    "While oz-manager is down the group answers 503 (fail closed) and discovery of it fails.".into(),
                    note.into(),
                ],
                &api_service,
            )?;
        }
    }
    Ok(out)
}

/// The webhook Service: `webhook` (443), and with sessions `sessions`, which the APIService
/// names.
fn webhook_service(o: &InstallOptions) -> Service {
    let mut service = service(
        o,
        &o.webhook_service_name(),
        i32::from(WEBHOOK_SERVICE_PORT),
        "webhook",
    );
    if o.runs(Component::Sessions) {
        let ports = service
            .spec
            .as_mut()
            .and_then(|s| s.ports.as_mut())
            .expect("service() sets the ports");
        ports.push(ServicePort {
            name: Some("sessions".into()),
            port: i32::from(SESSIONS_PORT),
            target_port: Some(IntOrString::String("sessions".into())),
            protocol: Some("TCP".into()),
            ..Default::default()
        });
    }
    service
}

/// Adds the install's labels to an object built elsewhere (the webhook configurations).
fn add_labels(options: &InstallOptions, metadata: &mut ObjectMeta) {
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(labels(options));
}

/// A ClusterIP Service `name` in front of oz-manager's container port named `target`.
fn service(options: &InstallOptions, name: &str, port: i32, target: &str) -> Service {
    Service {
        metadata: meta(options, name, Some(&options.namespace)),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector_labels(options)),
            ports: Some(vec![ServicePort {
                name: Some(target.into()),
                port,
                target_port: Some(IntOrString::String(target.into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// oz-manager's command-line flags in the Deployment. `manager::config`'s tests parse them with
/// oz-manager's own parser and check that the run they describe is this install's, so a flag
/// renamed or a default changed there fails a unit test rather than an install.
pub fn manager_args(options: &InstallOptions) -> Vec<String> {
    let mut args = vec![format!("--namespace={}", options.namespace)];
    let watched = options.watched();
    if !watched.is_empty() {
        args.push(format!("--watch-namespaces={}", watched.join(",")));
    }
    args.push(format!("--controllers={}", join(&options.parts())));
    args.push("--leader-elect".into());
    if options.lease_name() != "oz-manager" {
        args.push(format!(
            "--leader-elect-lease-name={}",
            options.lease_name()
        ));
    }
    args.push(format!("--metrics-bind-address=:{METRICS_PORT}"));
    args.push(format!("--health-probe-bind-address=:{HEALTH_PORT}"));
    if options.runs(Component::Webhooks) {
        args.push(format!("--webhook-port={WEBHOOK_PORT}"));
        args.push(format!(
            "--webhook-service={}/{}",
            options.namespace,
            options.webhook_service_name()
        ));
        if options.name != DEFAULT_NAME {
            let [ca, tls] = options.secret_names();
            args.push(format!("--webhook-ca-secret={ca}"));
            args.push(format!("--webhook-cert-secret={tls}"));
            args.push(format!("--webhook-configuration-name={}", options.name));
        }
        if options.webhook_client_ca_secret.is_some() {
            args.push(format!(
                "--webhook-client-ca-file={WEBHOOK_CLIENT_CA_DIR}/{WEBHOOK_CLIENT_CA_KEY}"
            ));
        }
        if options.unverified_webhook_callers {
            args.push("--unverified-webhook-callers".into());
        }
        if options.fleet_spoke {
            args.push(format!("--fleet-hub-user={}", hub_user(&options.namespace)));
            for (flag, value) in name_flags(&options.fleet_names) {
                args.push(format!("{flag}={value}"));
            }
        }
    }
    if options.runs(Component::Sessions) {
        args.push(format!("--sessions-port={SESSIONS_PORT}"));
        match &options.session_recordings {
            Some(url) => args.push(format!("--session-recordings={url}")),
            // The emptyDir: capped below its size limit.
            None => {
                args.push(format!("--session-recordings={SESSION_RECORDINGS_DIR}"));
                args.push(format!(
                    "--session-recordings-max-total-size={SESSION_RECORDINGS_MAX_TOTAL_SIZE}"
                ));
            }
        }
    }
    if let Some(hub) = &options.fleet_hub {
        args.push("--fleet-hub".into());
        args.push(format!("--fleet-name={}", hub.name));
        args.push(format!("--fleet-namespace={}", hub.namespace));
        args.push(format!("--fleet-provider-file={FLEET_PROVIDER_FILE}"));
    }
    args.push("--log-format=json".into());
    args
}

/// oz-manager's Deployment: one hardened container running [`manager_args`].
fn deployment(options: &InstallOptions) -> Deployment {
    let field_env = |name: &str, path: &str| EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                api_version: None,
            }),
            ..Default::default()
        }),
    };
    let probe = |path: &str, initial_delay: i32, period: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(HEALTH_PORT),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        ..Default::default()
    };
    let port = |name: &str, port: i32| ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])
    };
    let mut ports = vec![port("metrics", METRICS_PORT), port("health", HEALTH_PORT)];
    if options.runs(Component::Webhooks) {
        ports.push(port("webhook", WEBHOOK_PORT));
    }
    if options.runs(Component::Sessions) {
        ports.push(port("sessions", i32::from(SESSIONS_PORT)));
    }
    // The webhook client CA, when the install has one: read-only, only ca.crt.
    let client_ca = options
        .webhook_client_ca_secret
        .as_ref()
        .filter(|_| options.runs(Component::Webhooks));
    let mut volumes: Vec<Volume> = client_ca
        .map(|secret| Volume {
            name: WEBHOOK_CLIENT_CA_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                items: Some(vec![KeyToPath {
                    key: WEBHOOK_CLIENT_CA_KEY.into(),
                    path: WEBHOOK_CLIENT_CA_KEY.into(),
                    mode: None,
                }]),
                default_mode: Some(0o444),
                optional: Some(false),
            }),
            ..Default::default()
        })
        .into_iter()
        .collect();
    let mut volume_mounts: Vec<VolumeMount> = client_ca
        .map(|_| VolumeMount {
            name: WEBHOOK_CLIENT_CA_VOLUME.into(),
            mount_path: WEBHOOK_CLIENT_CA_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        })
        .into_iter()
        .collect();
    // The root filesystem is read-only: recordings go to a volume of their own, which lasts
    // as long as the pod (point --session-recordings at object storage to keep them longer).
    // Its size limit keeps a full volume from getting the pod evicted; the total cap keeps
    // oz-manager below it.
    if options.runs(Component::Sessions) {
        volumes.push(Volume {
            name: SESSION_RECORDINGS_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(Quantity(SESSION_RECORDINGS_SIZE_LIMIT.into())),
                ..Default::default()
            }),
            ..Default::default()
        });
        volume_mounts.push(VolumeMount {
            name: SESSION_RECORDINGS_VOLUME.into(),
            mount_path: SESSION_RECORDINGS_DIR.into(),
            ..Default::default()
        });
    }
    // A hub's provider file: the whole ConfigMap, read-only, so the kubelet keeps it current.
    if options.fleet_hub.is_some() {
        volumes.push(Volume {
            name: FLEET_PROVIDERS_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: provider_config_map_name(options),
                items: Some(vec![KeyToPath {
                    key: FLEET_PROVIDER_KEY.into(),
                    path: FLEET_PROVIDER_KEY.into(),
                    mode: None,
                }]),
                default_mode: Some(0o444),
                optional: Some(false),
            }),
            ..Default::default()
        });
        volume_mounts.push(VolumeMount {
            name: FLEET_PROVIDERS_VOLUME.into(),
            mount_path: FLEET_PROVIDER_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    let volumes = (!volumes.is_empty()).then_some(volumes);
    let volume_mounts = (!volume_mounts.is_empty()).then_some(volume_mounts);
    let container = Container {
        name: CONTAINER.into(),
        image: Some(options.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(manager_args(options)),
        env: Some(vec![
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
        ]),
        // The recordings store's credentials (AWS_ACCESS_KEY_ID, ...), never in the arguments.
        env_from: options
            .session_recordings_secret
            .as_ref()
            .filter(|_| options.runs(Component::Sessions))
            .map(|secret| {
                vec![EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: secret.clone(),
                        optional: None,
                    }),
                    ..Default::default()
                }]
            }),
        ports: Some(ports),
        volume_mounts,
        liveness_probe: Some(probe("/healthz", 15, 20)),
        readiness_probe: Some(probe("/readyz", 5, 10)),
        resources: Some(ResourceRequirements {
            requests: Some(quantities("10m", "64Mi")),
            limits: Some(quantities("500m", "256Mi")),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    Deployment {
        metadata: meta(options, &options.manager_name(), Some(&options.namespace)),
        spec: Some(DeploymentSpec {
            replicas: Some(options.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(options)),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector_labels(options)),
                    annotations: Some(BTreeMap::from([(
                        "kubectl.kubernetes.io/default-container".to_string(),
                        CONTAINER.to_string(),
                    )])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(options.manager_name()),
                    containers: vec![container],
                    volumes,
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(RUN_AS),
                        run_as_group: Some(RUN_AS),
                        seccomp_profile: Some(runtime_default()),
                        ..Default::default()
                    }),
                    node_selector: Some(BTreeMap::from([(
                        "kubernetes.io/os".to_string(),
                        "linux".to_string(),
                    )])),
                    // Room to finish in-flight reconciles and release the Lease on SIGTERM.
                    termination_grace_period_seconds: Some(30),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The container runtime's default seccomp profile.
fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        localhost_profile: None,
    }
}
