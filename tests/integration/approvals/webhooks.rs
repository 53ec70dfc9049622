//! oz's AccessApproval webhooks against the real control plane: real users create decisions,
//! the apiserver calls oz's webhook server over TLS, and what is stored (or refused) is what
//! the users see. No controller runs: request phases are set by an admin, on the status
//! subresource, where a test needs one.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use oz_api::{
    AccessApproval, AccessApprovalSpec, ApprovalRequestRef, ApprovedKind, Decision,
    ExecAccessRequest, ExecAccessRequestSpec,
};
use oz_webhooks::{WebhookConfig, WebhookServer};
use serde_json::json;

use crate::support::{
    cluster::env,
    fixture::{Fixture, PreparedFixture},
    manifests::create_manifest,
    polling::{eventually, wait_until_gone},
    rbac::{grant, rule, subject},
    webhook_server::scoped_config,
};

/// How long anything may take to show: both cores are shared by every test of the run.
const WAIT: Duration = Duration::from_secs(60);

/// A namespace with templates `gated` (devs request, qa decide), `glass` (the same, with
/// breakGlass) and `reasoned` (a reason required), RBAC for alice and carol (devs) and bob
/// (qa), and oz's webhook server registered for it alone.
struct ServerFixture {
    ns: String,
    admin: Client,
    config: WebhookConfig,
    server: Option<WebhookServer>,
}

impl ServerFixture {
    async fn new() -> ServerFixture {
        let PreparedFixture { ns, admin, .. } =
            Fixture::builder("approval-webhooks").prepare().await;
        let rules = vec![
            rule(
                &[oz_api::GROUP],
                &["execaccessrequests", "accessapprovals"],
                &["create", "get", "list", "delete"],
            ),
            rule(&[oz_api::GROUP], &["execaccesstemplates"], &["get", "list"]),
        ];
        let subjects = vec![subject("Group", "devs"), subject("Group", "qa")];
        grant(&admin, &ns, "decide", rules, subjects).await;
        for (name, approval) in [
            ("gated", "{approverGroups: [qa]}"),
            ("glass", "{approverGroups: [qa], breakGlass: true}"),
            ("reasoned", "{approverGroups: [qa], reasonRequired: true}"),
        ] {
            create_manifest(
                &admin,
                &ns,
                &format!(
                    "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
                     metadata: {{name: {name}}}\nspec:\n  accessConfig: {{allowedGroups: [devs], \
                     defaultDuration: 1h, maxDuration: 2h, approval: {approval}}}\n  \
                     controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
                ),
            )
            .await
            .unwrap();
        }
        let (listener, mut config) = scoped_config(&ns);
        config.registration.audit = false;
        let server = WebhookServer::start_on(listener, admin.clone(), config.clone())
            .await
            .unwrap();
        ServerFixture {
            ns,
            admin,
            config,
            server: Some(server),
        }
    }

    async fn requests(&self, user: &str) -> Api<ExecAccessRequest> {
        Api::namespaced(env().client_as(user).await.unwrap(), &self.ns)
    }

    async fn approvals(&self, user: &str) -> Api<AccessApproval> {
        Api::namespaced(env().client_as(user).await.unwrap(), &self.ns)
    }

    /// `user`'s request `name` through `template`, once oz's request webhooks stamp it.
    async fn request(&self, user: &str, name: &str, template: &str) -> ExecAccessRequest {
        let api = self.requests(user).await;
        let request = exec_request(name, template, None);
        eventually(WAIT, "oz's request webhooks to stamp a request", || {
            let (api, request) = (api.clone(), request.clone());
            async move {
                let dry_run = PostParams {
                    dry_run: true,
                    ..Default::default()
                };
                let stamped = api.create(&dry_run, &request).await.ok()?;
                stamped.spec.requester.is_some().then_some(())
            }
        })
        .await;
        api.create(&PostParams::default(), &request).await.unwrap()
    }

    /// Waits until the apiserver calls both approval webhooks: a decision on a missing request
    /// is refused by the mutating one, and carol's on `request` by the validating one.
    async fn wait_until_admitting_approvals(&self, request: &str) {
        let carol = self.approvals("carol").await;
        eventually(WAIT, "oz's approval webhooks to be called", || {
            let carol = carol.clone();
            async move {
                let dry_run = PostParams {
                    dry_run: true,
                    ..Default::default()
                };
                let missing = carol
                    .create(
                        &dry_run,
                        &approval("probe", "no-such-request", Decision::Approve, None),
                    )
                    .await;
                let refused_missing = matches!(missing, Err(kube::Error::Api(ref s))
                    if s.message.contains("does not exist"));
                let decided = carol
                    .create(
                        &dry_run,
                        &approval("probe", request, Decision::Approve, None),
                    )
                    .await;
                let refused_carol = matches!(decided, Err(kube::Error::Api(ref s))
                    if s.message.contains("approverGroups"));
                (refused_missing && refused_carol).then_some(())
            }
        })
        .await;
    }

    /// Stops the server and removes its configurations.
    async fn cleanup(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown(Duration::from_secs(1)).await.unwrap();
        }
        let name = self.config.registration.requests_name();
        Api::<MutatingWebhookConfiguration>::all(self.admin.clone())
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        Api::<ValidatingWebhookConfiguration>::all(self.admin.clone())
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

fn exec_request(name: &str, template: &str, reason: Option<&str>) -> ExecAccessRequest {
    ExecAccessRequest::new(
        name,
        ExecAccessRequestSpec {
            start_at: None,
            cluster: None,
            forwarded: None,
            reason: reason.map(String::from),
            ticket: None,
            template_name: template.into(),
            target_pod: None,
            duration: None,
            requester: None,
        },
    )
}

fn approval(
    name: &str,
    request: &str,
    decision: Decision,
    comment: Option<&str>,
) -> AccessApproval {
    AccessApproval::new(
        name,
        AccessApprovalSpec {
            request_ref: ApprovalRequestRef {
                kind: ApprovedKind::ExecAccessRequest,
                name: request.into(),
            },
            decision,
            comment: comment.map(String::from),
            approver: None,
            request_uid: None,
            break_glass: false,
            extension: None,
        },
    )
}

/// The message of a 403 Forbidden from oz's webhook; panics on anything else.
fn forbidden<T: std::fmt::Debug>(result: kube::Result<T>) -> String {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => status.message,
        other => panic!("expected 403 Forbidden from oz's webhook, got {other:?}"),
    }
}

#[tokio::test]
async fn decisions_are_stamped_with_their_approver_and_refused_as_the_template_says() {
    let fixture = ServerFixture::new().await;
    let request = fixture.request("alice", "r", "gated").await;
    fixture.wait_until_admitting_approvals("r").await;
    let (alice, bob, carol) = (
        fixture.approvals("alice").await,
        fixture.approvals("bob").await,
        fixture.approvals("carol").await,
    );
    let create = PostParams::default();

    // bob forges an admin approver, a request uid and break-glass: oz records what is true.
    let mut forged = approval("r-bob", "r", Decision::Approve, Some("lgtm"));
    forged.spec.approver = Some(oz_api::Requester {
        username: "admin".into(),
        uid: None,
        groups: vec!["system:masters".into()],
    });
    forged.spec.request_uid = Some("forged".into());
    forged.spec.break_glass = true;
    let stored = bob.create(&create, &forged).await.unwrap();
    let approver = stored.spec.approver.as_ref().expect("an approver stamped");
    assert_eq!(approver.username, "bob");
    assert!(approver.groups.contains(&"qa".to_string()), "{approver:?}");
    assert_eq!(stored.spec.request_uid, request.uid());
    assert!(!stored.spec.break_glass);
    let owners = stored.owner_references();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            Some(&owners[0].uid)
        ),
        ("ExecAccessRequest", "r", request.uid().as_ref())
    );
    assert_eq!(owners[0].controller, Some(false));

    // alice may not approve her own request; carol is no approver; bob has decided already.
    let message = forbidden(
        alice
            .create(&create, &approval("r-alice", "r", Decision::Approve, None))
            .await,
    );
    assert!(
        message.contains(
            "you cannot approve your own request: ExecAccessTemplate \"gated\" does not \
             allowSelfApproval (and has no breakGlass)"
        ),
        "{message}"
    );
    let message = forbidden(
        carol
            .create(&create, &approval("r-carol", "r", Decision::Approve, None))
            .await,
    );
    assert!(
        message.contains("carol is not in the template's approverGroups (qa)"),
        "{message}"
    );
    let message = forbidden(
        bob.create(
            &create,
            &approval("r-bob-2", "r", Decision::Deny, Some("changed my mind")),
        )
        .await,
    );
    assert!(
        message.contains("bob has already decided on request \"r\" (AccessApproval \"r-bob\")"),
        "{message}"
    );

    // A request an admin marked Ready takes no more decisions.
    fixture.request("alice", "ready", "gated").await;
    Api::<ExecAccessRequest>::namespaced(fixture.admin.clone(), &fixture.ns)
        .patch_status(
            "ready",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    let message = forbidden(
        bob.create(
            &create,
            &approval("ready-bob", "ready", Decision::Approve, None),
        )
        .await,
    );
    assert!(
        message.contains("request \"ready\" is already Ready: decisions are taken only while it waits for approval"),
        "{message}"
    );

    // Break-glass: alice alone, with a reason.
    fixture.request("alice", "g", "glass").await;
    let message = forbidden(
        alice
            .create(&create, &approval("g-alice", "g", Decision::Approve, None))
            .await,
    );
    assert!(
        message.contains(
            "a break-glass approval needs spec.comment: say why no approver could decide"
        ),
        "{message}"
    );
    let glass = alice
        .create(
            &create,
            &approval(
                "g-alice",
                "g",
                Decision::Approve,
                Some("checkout down, nobody on call"),
            ),
        )
        .await
        .unwrap();
    assert!(glass.spec.break_glass, "{glass:?}");
    assert_eq!(glass.spec.approver.as_ref().unwrap().username, "alice");

    // A template that requires a reason refuses a request without one.
    let requests = fixture.requests("alice").await;
    let message = forbidden(
        requests
            .create(&create, &exec_request("unreasoned", "reasoned", None))
            .await,
    );
    assert!(
        message.contains("spec.reason: ExecAccessTemplate \"reasoned\" requires a reason"),
        "{message}"
    );
    requests
        .create(
            &create,
            &exec_request("reasoned", "reasoned", Some("INC-42")),
        )
        .await
        .unwrap();

    // The request owns its decisions: the garbage collector deletes them with it.
    requests
        .delete("r", &DeleteParams::default())
        .await
        .unwrap();
    let admin_approvals: Api<AccessApproval> = Api::namespaced(fixture.admin.clone(), &fixture.ns);
    wait_until_gone(
        &admin_approvals,
        "r-bob",
        WAIT,
        "bob's decision to go with request r",
    )
    .await;
    assert!(
        admin_approvals.get_opt("g-alice").await.unwrap().is_some(),
        "another request's decision stays"
    );

    fixture.cleanup().await;
}
