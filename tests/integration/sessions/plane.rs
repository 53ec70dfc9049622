//! A control plane of a test's own for the sessions API: the APIService is cluster-wide and
//! singular, so a test that needs the apiserver to proxy to oz never uses the shared one.
//!
//! [`SessionsPlane::start`] starts it (users alice, bob and carol in devs, dave in leads; one kwok node; a
//! scheduler and the Deployment controllers), installs oz's CRDs, makes a namespace and, in it,
//! the `ExternalName` Service [`SERVICE`] for `localhost`, through which the apiserver reaches oz
//! on 127.0.0.1.
//! [`SessionsPlane::front_door`] serves oz's front door in this process with any routes and
//! registers the APIService for it, as oz-manager would.

use std::{sync::Arc, time::Duration};

use k8s_openapi::{
    api::core::v1::{Service, ServiceSpec},
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use oz_platform::{
    certs::PemPair, metrics::RefusedLabels, registration::SessionsService, tls::SwappableCert,
};
use oz_sessions::{
    SessionServer,
    front_proxy::{FrontProxy, Refusals},
};
use oz_testenv::{ControlPlane, ControlPlaneOptions, exec};

use crate::support::polling::eventually;

/// The `ExternalName` Service (externalName `localhost`) the APIService names.
pub const SERVICE: &str = "oz-sessions";
/// How long the apiserver may take to find the APIService available on a busy machine.
pub const AVAILABLE: Duration = Duration::from_secs(90);

/// A private control plane ready for the sessions API.
pub struct SessionsPlane {
    /// The control plane.
    pub plane: Arc<ControlPlane>,
    /// Admin.
    pub admin: Client,
    /// The test's namespace, with [`SERVICE`] in it.
    pub namespace: String,
}

/// oz's front door served in this process.
pub struct FrontDoor {
    /// The server.
    pub server: SessionServer,
    /// `oz_sessions_refused_total`.
    pub refusals: Refusals,
}

impl FrontDoor {
    /// `oz_sessions_refused_total{reason}`.
    pub fn refused(&self, reason: &'static str) -> u64 {
        self.refusals.get_or_create(&RefusedLabels { reason }).get()
    }
}

impl SessionsPlane {
    pub async fn start(prefix: &str) -> Self {
        let plane = tokio::task::spawn_blocking(|| {
            ControlPlane::start(
                ControlPlaneOptions::empty()
                    .user("alice", &["devs"])
                    .user("bob", &["devs"])
                    .user("carol", &["devs"])
                    // An approver, for templates whose grants need approval.
                    .user("dave", &["leads"])
                    // Workloads for templates to target, and their pods on the kwok node.
                    .controllers(&["scheduler", "deployment", "replicaset", "gc"])
                    .nodes(1),
            )
            .unwrap()
        })
        .await
        .unwrap();
        let plane = Arc::new(plane);
        let admin = plane.admin().await.unwrap();
        crate::support::cluster::install_crds_into(&admin).await;
        let namespace = plane.namespace(prefix).await.unwrap();
        let services: Api<Service> = Api::namespaced(admin.clone(), &namespace);
        services
            .create(
                &PostParams::default(),
                &Service {
                    metadata: ObjectMeta {
                        name: Some(SERVICE.into()),
                        ..Default::default()
                    },
                    spec: Some(ServiceSpec {
                        type_: Some("ExternalName".into()),
                        external_name: Some("localhost".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        Self {
            plane,
            admin,
            namespace,
        }
    }

    /// The Service the APIService names, at `port` (oz's sessions port: the apiserver dials
    /// localhost on it).
    pub fn service(&self, port: u16) -> SessionsService {
        SessionsService {
            namespace: self.namespace.clone(),
            name: SERVICE.into(),
            port,
        }
    }

    /// Serves oz's front door with `routes` on a free port of 127.0.0.1, with a serving
    /// certificate for the Service from a CA of its own, and registers the APIService trusting
    /// that CA.
    pub async fn front_door(&self, routes: axum::Router) -> FrontDoor {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let service = self.service(port);
        let ca = mint_ca("oz test sessions CA");
        let serving = mint_leaf(&ca, &service.serving_names(), false);
        let certificate = Arc::new(
            SwappableCert::from_pem(serving.cert.as_bytes(), serving.key.as_bytes()).unwrap(),
        );
        let refusals = Refusals::default();
        let front_proxy = FrontProxy::load(self.admin.clone(), refusals.clone())
            .await
            .unwrap();
        let server = SessionServer::start(listener, certificate, front_proxy, routes)
            .await
            .unwrap();
        let api_services: Api<APIService> = Api::all(self.admin.clone());
        api_services
            .patch(
                oz_api::SESSIONS_API_SERVICE,
                &PatchParams::apply("oz-tests").force(),
                &Patch::Apply(&service.api_service(&ca.cert)),
            )
            .await
            .unwrap();
        FrontDoor { server, refusals }
    }

    /// Waits until the apiserver finds the APIService `Available`.
    pub async fn wait_available(&self) {
        let api_services: Api<APIService> = Api::all(self.admin.clone());
        eventually(
            AVAILABLE,
            "the sessions APIService to be Available",
            || async {
                let service = api_services.get(oz_api::SESSIONS_API_SERVICE).await.ok()?;
                service
                    .status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Available" && c.status == "True")
                    .then_some(())
            },
        )
        .await;
    }

    /// Runs the bundled kubectl as `user` (admin for `None`).
    pub async fn kubectl(&self, user: Option<&str>, args: &[&str]) -> exec::Output {
        let mut kubectl = self.plane.kubectl(user).unwrap();
        kubectl.args(args);
        exec::run(kubectl, exec::RUN_TIMEOUT).await.unwrap()
    }

    /// Grants `user` `verbs` on `resources` of the sessions API group in the namespace.
    pub async fn grant_sessions(&self, user: &str, resources: &[&str], verbs: &[&str]) {
        let name = format!("sessions-{user}");
        crate::support::rbac::grant(
            &self.admin,
            &self.namespace,
            &name,
            vec![crate::support::rbac::rule(
                &[oz_api::SESSIONS_GROUP],
                resources,
                verbs,
            )],
            vec![crate::support::rbac::subject("User", user)],
        )
        .await;
    }
}

/// A new self-signed CA named `name`.
pub fn mint_ca(name: &str) -> PemPair {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    PemPair {
        cert: params.self_signed(&key).unwrap().pem(),
        key: key.serialize_pem(),
    }
}

/// A certificate for `names` (the first is also its CN) signed by `ca`: a client certificate
/// with `client`, else a serving one.
pub fn mint_leaf(ca: &PemPair, names: &[String], client: bool) -> PemPair {
    let issuer =
        rcgen::Issuer::from_ca_cert_pem(&ca.cert, rcgen::KeyPair::from_pem(&ca.key).unwrap())
            .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(names.to_vec()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0].as_str());
    params.extended_key_usages = vec![if client {
        rcgen::ExtendedKeyUsagePurpose::ClientAuth
    } else {
        rcgen::ExtendedKeyUsagePurpose::ServerAuth
    }];
    PemPair {
        cert: params.signed_by(&key, &issuer).unwrap().pem(),
        key: key.serialize_pem(),
    }
}
