//! A restartable control plane comes back on the same port with its objects, certificates and
//! keys, so clients made before the restart work after it.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use oz_testenv::{ControlPlane, ControlPlaneOptions};

#[tokio::test]
async fn a_restarted_control_plane_keeps_its_data_port_and_clients() {
    let plane = ControlPlane::start(
        ControlPlaneOptions::empty()
            .user("alice", &["devs"])
            .restartable(),
    )
    .unwrap();
    let work_dir = plane.work_dir().to_path_buf();
    let admin = plane.admin().await.unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    maps.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("survivor".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let first_pid = plane.pid();

    plane.stop();
    assert!(!plane.is_running());
    assert!(
        work_dir.exists(),
        "a restartable control plane keeps its work dir"
    );
    assert!(maps.get("survivor").await.is_err(), "the apiserver is down");

    plane.start_again().unwrap();
    assert_ne!(plane.pid(), first_pid);
    // The client made before the restart reconnects: same port, same CA, same certificate.
    let survivor = maps.get("survivor").await.unwrap();
    assert_eq!(survivor.metadata.name.as_deref(), Some("survivor"));
    let alice = plane.client_as("alice").await.unwrap();
    let forbidden = Api::<ConfigMap>::namespaced(alice, "default")
        .get("survivor")
        .await
        .unwrap_err();
    assert!(
        matches!(forbidden, kube::Error::Api(ref s) if s.code == 403),
        "{forbidden}"
    );

    drop(plane);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while work_dir.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !work_dir.exists(),
        "dropping it removes {}",
        work_dir.display()
    );
}
