//! Where brokered sessions' recordings go: the pod's capped emptyDir by default, or a store the
//! install names, whose credentials come from a Secret in oz-manager's environment and never
//! from the URL the Pod's arguments show.

use k8s_openapi::api::apps::v1::Deployment;

use super::{manager_args_of, of_kind, typed};
use crate::install::*;

fn with_sessions() -> InstallOptions {
    InstallOptions {
        controllers: Component::ALL.to_vec(),
        unverified_webhook_callers: true,
        ..InstallOptions::default()
    }
}

#[test]
fn s3_credentials_come_from_a_secret_never_the_url() {
    let s3 = InstallOptions {
        session_recordings: Some("s3://recordings/oz?region=eu-west-1".into()),
        session_recordings_secret: Some("oz-recordings-s3".into()),
        ..with_sessions()
    };
    let manifests = install_objects(&s3).unwrap();
    let args = manager_args_of(&manifests);
    assert!(
        args.contains(&"--session-recordings=s3://recordings/oz?region=eu-west-1".to_string()),
        "{args:?}"
    );
    // The emptyDir's total cap is for the emptyDir only.
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--session-recordings-max-total-size")),
        "{args:?}"
    );
    let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
    let container = deployment.spec.unwrap().template.spec.unwrap().containers[0].clone();
    let from = container.env_from.expect("the Secret as environment");
    assert_eq!(from.len(), 1);
    assert_eq!(
        from[0].secret_ref.as_ref().map(|s| s.name.as_str()),
        Some("oz-recordings-s3")
    );
    assert!(
        s3.command_line().ends_with(
            " --session-recordings s3://recordings/oz?region=eu-west-1 --session-recordings-secret oz-recordings-s3"
        ),
        "{}",
        s3.command_line()
    );

    // By default: the emptyDir, capped, and no Secret.
    let manifests = install_objects(&with_sessions()).unwrap();
    let args = manager_args_of(&manifests);
    assert!(args.contains(&format!(
        "--session-recordings={}",
        workload::SESSION_RECORDINGS_DIR
    )));
    assert!(args.contains(&format!(
        "--session-recordings-max-total-size={}",
        workload::SESSION_RECORDINGS_MAX_TOTAL_SIZE
    )));
    let deployment: Deployment = typed(of_kind(&manifests, "Deployment")[0]);
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(container.env_from, None);

    // Credentials in the URL are refused, and the refusal does not repeat them.
    for url in [
        "s3://recordings/oz?access_key_id=AKIA&secret_access_key=s3cr3t",
        "s3://AKIA:s3cr3t@recordings/oz",
    ] {
        let refused = install_objects(&InstallOptions {
            session_recordings: Some(url.into()),
            ..with_sessions()
        })
        .unwrap_err()
        .to_string();
        assert!(
            refused.contains("--session-recordings-secret") && !refused.contains("s3cr3t"),
            "{refused}"
        );
    }
    // Without sessions, neither means anything.
    let without = InstallOptions {
        session_recordings_secret: Some("oz-recordings-s3".into()),
        ..InstallOptions::default()
    };
    assert!(install_objects(&without).is_err());
}
