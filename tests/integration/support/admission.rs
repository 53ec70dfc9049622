//! Whether oz's webhooks answer yet, and requests created as a user once they do.

use std::time::Duration;

use kube::{Api, api::PostParams};
use oz_api::{AccessRequest, ExecAccessRequest};
use serde_json::json;

use super::polling::eventually;

/// Whether oz's webhooks answer for `user` right now: a dry-run request naming a missing
/// template is refused by oz, and one for `template` with a forged requester comes back with
/// `user` stamped in.
pub async fn admits(api: &Api<ExecAccessRequest>, user: &str, template: &str) -> bool {
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let probe = |template: &str| -> ExecAccessRequest {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessRequest",
            "metadata": {"name": "probe"},
            "spec": {"templateName": template, "requester": {"username": "mallory", "groups": ["system:masters"]}},
        }))
        .unwrap()
    };
    let refused = matches!(
        api.create(&dry_run, &probe("no-such-template")).await,
        Err(kube::Error::Api(ref s)) if s.message.contains("does not exist")
    );
    let stamped = api
        .create(&dry_run, &probe(template))
        .await
        .ok()
        .and_then(|r| r.spec.requester)
        .is_some_and(|r| r.username == user);
    refused && stamped
}

/// ExecAccessRequest `name` through `template` as a user writes it: no requester (oz's
/// mutating webhook records who created it) and the template's default duration.
pub fn written_request(name: &str, template: &str) -> ExecAccessRequest {
    serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": name},
        "spec": {"templateName": template},
    }))
    .unwrap()
}

/// Waits up to `timeout` until oz's webhooks answer for `user` ([`admits`]), through `api`
/// (that user's client). `log` names oz-manager's log for the timeout message.
pub async fn wait_until_admitting(
    api: &Api<ExecAccessRequest>,
    user: &str,
    template: &str,
    timeout: Duration,
    log: &std::path::Path,
) {
    eventually(
        timeout,
        &format!("oz's webhooks to admit {user} (log: {})", log.display()),
        || async { admits(api, user, template).await.then_some(()) },
    )
    .await;
}

/// Creates `request` through `api` (a user's client) once oz's webhooks answer
/// ([`wait_until_admitting`]), and returns it, with `user` stamped as its requester. A request
/// created before oz registered its webhooks would carry no requester, and a real create retried
/// after that would only conflict with it.
pub async fn create_once_admitted(
    api: &Api<ExecAccessRequest>,
    request: &ExecAccessRequest,
    user: &str,
    log: &std::path::Path,
) -> ExecAccessRequest {
    let template = &request.spec.template_name;
    wait_until_admitting(api, user, template, Duration::from_secs(60), log).await;
    let created = api.create(&PostParams::default(), request).await.unwrap();
    assert!(
        created.requester().is_some_and(|r| r.username == user),
        "the webhook recorded {user}: {created:?}"
    );
    created
}
