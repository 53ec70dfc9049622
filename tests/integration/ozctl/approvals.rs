//! ozctl's approval commands end to end: the real ozctl binary, run as alice and carol (devs,
//! requesters) and bob (qa, the approver), against an oz-manager whose webhooks stamp who
//! decided and whose controller counts the decisions.
//!
//! Each test has its own namespace with Deployment `web` (2 ready pods), the requester RBAC of
//! `hack/demo/requesters.yaml` for everyone, the approver RBAC of `hack/demo/approvers.yaml` for
//! group qa, an ExecAccessTemplate for devs that needs one approval by qa, and an oz-manager
//! with webhooks scoped to that namespace (configurations `oz-<ns>-*`).

use std::{process::Output, time::Duration};

use kube::Api;
use oz_api::{AccessApproval, ExecAccessRequest, ExecAccessTemplate, RequestPhase};
use serde_json::Value;

use crate::support::{
    admission::wait_until_admitting,
    cluster::env,
    fixture::Fixture,
    ozctl::{assert_ok, ozctl_with, stderr, stdout},
    polling::eventually,
    rbac::{rule, subject},
};

const WAIT: Duration = Duration::from_secs(90);

/// A template for devs whose requests need one approval by a member of `approvers`; `extra`
/// adds approval fields (`reasonRequired: true, `).
fn template(approvers: &str, extra: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
         metadata: {{name: web-approved}}\nspec:\n  \
         accessConfig: {{allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h, \
         approval: {{{extra}approverGroups: [{approvers}], pendingTimeout: 1h}}}}\n  \
         controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
    )
}

const PLAIN_TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
    metadata: {name: web-plain}\nspec:\n  \
    accessConfig: {allowedGroups: [devs]}\n  \
    controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

/// What the ozctl approval tests run and wait for in their fixture.
trait OzctlApprovalsFixture {
    async fn new(prefix: &str, template_extra: &str) -> Fixture;

    async fn with_approvers(prefix: &str, approvers: &str, template_extra: &str) -> Fixture;

    async fn ozctl(&self, user: &str, args: &[&str]) -> Output;

    fn requests(&self) -> Api<ExecAccessRequest>;

    /// Waits until request `name` is in `phase`, and returns it.
    async fn until_phase(&self, name: &str, phase: RequestPhase) -> ExecAccessRequest;

    /// alice asks through web-approved without waiting, and is told it needs approval by
    /// `who`; returns the request's name.
    async fn alice_asks(&self, who: &str) -> String;

    fn cleanup(self);
}

impl OzctlApprovalsFixture for Fixture {
    async fn new(prefix: &str, template_extra: &str) -> Fixture {
        Fixture::with_approvers(prefix, "qa", template_extra).await
    }

    async fn with_approvers(prefix: &str, approvers: &str, template_extra: &str) -> Fixture {
        let fixture = Fixture::builder(prefix)
            .web(2)
            .manifest(template(approvers, template_extra))
            // A template without approval, for the probe that says oz's webhooks answer (a probe
            // through web-approved may be refused for want of a reason).
            .manifest(PLAIN_TEMPLATE)
            // hack/demo/requesters.yaml: every signed-in user may ask.
            .let_everyone_request()
            // hack/demo/approvers.yaml, for group qa: decide, and read what is decided on. Carol
            // gets it too, to show that RBAC lets her create a decision and oz still refuses it.
            .grant(
                "oz-approvers",
                vec![
                    rule(
                        &[oz_api::GROUP],
                        &["accessapprovals"],
                        &["create", "get", "list", "watch"],
                    ),
                    rule(
                        &[oz_api::GROUP],
                        &[
                            "execaccessrequests",
                            "podaccessrequests",
                            "execaccesstemplates",
                            "podaccesstemplates",
                        ],
                        &["get", "list", "watch"],
                    ),
                ],
                vec![
                    subject("Group", "qa"),
                    subject("Group", approvers),
                    subject("User", "carol"),
                ],
            )
            .webhooks()
            .start()
            .await;
        let (ns, admin, operator) = (&fixture.ns, &fixture.admin, &fixture.operator);
        let alice: Api<ExecAccessRequest> =
            Api::namespaced(env().client_as("alice").await.unwrap(), ns);
        wait_until_admitting(&alice, "alice", "web-plain", WAIT, &operator.log).await;
        let templates: Api<ExecAccessTemplate> = Api::namespaced(admin.clone(), ns);
        eventually(WAIT, "web-approved to be ready", || {
            let templates = templates.clone();
            async move {
                let template = templates.get_opt("web-approved").await.ok().flatten()?;
                template.status.filter(|s| s.ready).map(|_| ())
            }
        })
        .await;
        fixture
    }

    async fn ozctl(&self, user: &str, args: &[&str]) -> Output {
        ozctl_with(env().kubeconfig_of(user).unwrap(), &self.ns, args).await
    }

    fn requests(&self) -> Api<ExecAccessRequest> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    async fn until_phase(&self, name: &str, phase: RequestPhase) -> ExecAccessRequest {
        let log = self.operator.log.display().to_string();
        eventually(
            WAIT,
            &format!("{name} to be {phase:?} (log: {log})"),
            || {
                let requests = self.requests();
                async move {
                    let request = requests.get_opt(name).await.ok().flatten()?;
                    let now = request.status.as_ref().and_then(|s| s.phase);
                    (now == Some(phase)).then_some(request)
                }
            },
        )
        .await
    }

    async fn alice_asks(&self, who: &str) -> String {
        let output = self
            .ozctl(
                "alice",
                &[
                    "create",
                    "exec",
                    "web-approved",
                    "--reason",
                    "INC-42: web returns 502s",
                    "--ticket",
                    "INC-42",
                    "--no-wait",
                ],
            )
            .await;
        assert_ok(&output, "alice's ozctl create --reason --ticket --no-wait");
        assert!(
            stderr(&output).contains(&format!("It needs approval by {who} (within 1h)")),
            "{}",
            stderr(&output)
        );
        stdout(&output).lines().next().unwrap().to_string()
    }

    fn cleanup(self) {
        // Dropping the fixture stops oz and deletes the configurations.
        drop(self);
    }
}

async fn queue(f: &Fixture, user: &str) -> Vec<Value> {
    let output = f.ozctl(user, &["approvals", "-o", "json"]).await;
    assert_ok(&output, &format!("{user}'s ozctl approvals -o json"));
    serde_json::from_slice::<Vec<Value>>(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "approvals -o json is a JSON array ({e}): {}",
            stdout(&output)
        )
    })
}

#[tokio::test]
async fn alice_asks_with_a_reason_bob_sees_it_approves_and_alice_is_granted() {
    let f = Fixture::new("ozctl-approve", "").await;
    let name = f.alice_asks("one member of qa").await;
    let pending = f.until_phase(&name, RequestPhase::PendingApproval).await;
    assert_eq!(
        pending.spec.reason.as_deref(),
        Some("INC-42: web returns 502s")
    );
    assert_eq!(pending.spec.ticket.as_deref(), Some("INC-42"));

    // bob (qa) has it in his queue, with why; carol and alice (devs, not approvers) do not.
    let bobs = queue(&f, "bob").await;
    assert_eq!(bobs.len(), 1, "{bobs:#?}");
    assert_eq!(bobs[0]["name"], name.as_str());
    assert_eq!(bobs[0]["requester"], "alice");
    assert_eq!(bobs[0]["reason"], "INC-42: web returns 502s");
    assert_eq!(bobs[0]["ticket"], "INC-42");
    assert_eq!(bobs[0]["approvals"], "0/1");
    assert_eq!(bobs[0]["standing"], "Approver");
    for user in ["carol", "alice"] {
        assert_eq!(queue(&f, user).await, Vec::<Value>::new(), "{user}'s queue");
    }
    let table = f.ozctl("bob", &["approvals"]).await;
    assert_ok(&table, "bob's ozctl approvals");
    let row = stdout(&table)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(
        row.starts_with(&format!("{name}   exec   {}   alice", f.ns)),
        "{row}"
    );

    // bob approves; ozctl names the decision and says where the request stands.
    let approved = f
        .ozctl(
            "bob",
            &[
                "approve",
                &name,
                "--comment",
                "ok for INC-42",
                "--timeout",
                "90s",
            ],
        )
        .await;
    assert_ok(&approved, "bob's ozctl approve");
    let said = stdout(&approved);
    let approval = format!("{name}-bob");
    assert!(
        said.starts_with(&format!(
            "Approved ExecAccessRequest {name} as bob (AccessApproval {approval}).\n"
        )),
        "{said}"
    );
    assert!(said.contains(": 1/1 approvals, phase "), "{said}");
    let stored = Api::<AccessApproval>::namespaced(f.admin.clone(), &f.ns)
        .get(&approval)
        .await
        .unwrap();
    assert_eq!(stored.spec.approver.unwrap().username, "bob");
    assert_eq!(stored.spec.comment.as_deref(), Some("ok for INC-42"));

    // oz grants it, and alice's `get NAME` shows why and who approved.
    let ready = f.until_phase(&name, RequestPhase::Ready).await;
    let status = ready.status.unwrap();
    assert_eq!(status.approvals.len(), 1);
    assert_eq!(status.approvals[0].approver, "bob");
    assert!(
        f.web()
            .pod_names()
            .contains(status.pod_name.as_ref().unwrap())
    );
    let shown = f.ozctl("alice", &["get", "requests", &name]).await;
    assert_ok(&shown, "alice's ozctl get requests NAME");
    let text = stdout(&shown);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{key}: in:\n{text}"))
            .to_string()
    };
    assert_eq!(field("Reason"), "INC-42: web returns 502s");
    assert_eq!(field("Ticket"), "INC-42");
    assert_eq!(field("Phase"), "Ready (1/1 approvals)");
    assert!(text.lines().any(|l| l == "Approvals:"), "{text}");
    let row = text.lines().last().unwrap();
    assert!(row.starts_with("  bob   "), "{text}");
    assert!(row.contains("   ok for INC-42   no   "), "{text}");
    assert!(row.ends_with(&approval), "{text}");

    // Decided: no longer in bob's queue.
    assert_eq!(queue(&f, "bob").await, Vec::<Value>::new());
    f.cleanup();
}

#[tokio::test]
async fn a_non_approver_is_refused_and_a_deny_ends_the_request() {
    let f = Fixture::new("ozctl-deny", "reasonRequired: true, ").await;

    // The template wants a reason: ozctl says so and creates nothing.
    let no_reason = f
        .ozctl("alice", &["create", "exec", "web-approved", "--no-wait"])
        .await;
    assert_eq!(no_reason.status.code(), Some(2), "{}", stderr(&no_reason));
    assert!(
        stderr(&no_reason)
            .contains("ExecAccessTemplate web-approved requires a reason: add --reason TEXT"),
        "{}",
        stderr(&no_reason)
    );
    assert!(
        f.requests()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let name = f.alice_asks("one member of qa").await;
    f.until_phase(&name, RequestPhase::PendingApproval).await;

    // alice cannot use it yet: `ozctl exec` waits, then says it waits for approval and what to
    // run meanwhile.
    let early = f
        .ozctl("alice", &["exec", &name, "--timeout", "2s", "--", "true"])
        .await;
    assert_eq!(early.status.code(), Some(1), "{}", stderr(&early));
    let ns = &f.ns;
    let error = stderr(&early)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.starts_with(&format!(
            "error: ExecAccessRequest {name} is still PendingApproval after 2s ("
        )) && error.ends_with(&format!(
            "): it can be used once approved; follow it with `ozctl get requests {name} -n {ns}` \
             and run `ozctl exec {name} -n {ns}` then, or wait longer with --timeout"
        )),
        "{error}"
    );

    // carol may create AccessApprovals (RBAC) but is not in approverGroups: oz's webhook
    // refuses, and ozctl shows its message as it is, not as an RBAC problem.
    let refused = f.ozctl("carol", &["approve", &name]).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let error = stderr(&refused);
    assert!(error.contains("admission webhook"), "{error}");
    assert!(!error.contains("ask a cluster admin"), "{error}");
    let approvals: Api<AccessApproval> = Api::namespaced(f.admin.clone(), &f.ns);
    assert!(
        approvals
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // A deny needs a comment (the parser says so), then ends the request Denied.
    let bare = f.ozctl("bob", &["deny", &name]).await;
    assert_eq!(bare.status.code(), Some(2), "{}", stderr(&bare));
    let denied = f
        .ozctl(
            "bob",
            &[
                "deny",
                &name,
                "--comment",
                "not during the freeze",
                "--timeout",
                "90s",
            ],
        )
        .await;
    assert_ok(&denied, "bob's ozctl deny");
    let said = stdout(&denied);
    assert!(
        said.starts_with(&format!(
            "Denied ExecAccessRequest {name} as bob (AccessApproval {name}-bob).\n"
        )),
        "{said}"
    );
    assert!(said.contains("phase Denied; denied: "), "{said}");
    let request = f.until_phase(&name, RequestPhase::Denied).await;
    assert!(
        request.status.unwrap().pod_name.is_none(),
        "nothing was granted"
    );
    // Used anyway, it says why, and how to ask again.
    let late = f.ozctl("alice", &["exec", &name, "--", "true"]).await;
    let error = stderr(&late).lines().last().unwrap_or_default().to_string();
    assert!(
        error.starts_with(&format!("error: ExecAccessRequest {name} was denied: "))
            && error.ends_with(&format!(
                "; to ask again: ozctl create exec web-approved -n {ns}"
            )),
        "{error}"
    );
    assert_eq!(queue(&f, "bob").await, Vec::<Value>::new());
    f.cleanup();
}

#[tokio::test]
async fn break_glass_is_said_on_purpose_and_grants_alone() {
    // alice is in devs, and devs approve; the template allows break-glass, not self-approval.
    let f = Fixture::with_approvers("ozctl-glass", "devs", "required: 2, breakGlass: true, ").await;
    let name = f.alice_asks("2 members of devs").await;
    f.until_phase(&name, RequestPhase::PendingApproval).await;

    // Her own request is in her queue, marked as break-glass only.
    let mine = queue(&f, "alice").await;
    assert_eq!(mine.len(), 1, "{mine:#?}");
    assert_eq!(mine[0]["standing"], "BreakGlass");

    // Without --break-glass ozctl sends nothing, and says what to run.
    let unsaid = f
        .ozctl("alice", &["approve", &name, "--comment", "prod down"])
        .await;
    assert_eq!(unsaid.status.code(), Some(2), "{}", stderr(&unsaid));
    assert!(
        stderr(&unsaid).contains(&format!(
            "approve {name} -n {} --break-glass --comment WHY",
            f.ns
        )),
        "{}",
        stderr(&unsaid)
    );
    let approvals: Api<AccessApproval> = Api::namespaced(f.admin.clone(), &f.ns);
    assert!(
        approvals
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Said: one approval grants it, though the template requires two, marked break-glass.
    let said = f
        .ozctl(
            "alice",
            &[
                "approve",
                &name,
                "--break-glass",
                "--comment",
                "INC-7: prod down, no one answers",
                "--timeout",
                "90s",
            ],
        )
        .await;
    assert_ok(&said, "alice's ozctl approve --break-glass");
    assert!(
        stdout(&said).starts_with(&format!(
            "Approved (break-glass) ExecAccessRequest {name} as alice "
        )),
        "{}",
        stdout(&said)
    );
    let stored = approvals.get(&format!("{name}-alice")).await.unwrap();
    assert!(stored.spec.break_glass, "{stored:?}");
    let ready = f.until_phase(&name, RequestPhase::Ready).await;
    assert!(ready.status.unwrap().approvals[0].break_glass);
    let shown = stdout(&f.ozctl("alice", &["get", "requests", &name]).await);
    let row = shown.lines().last().unwrap();
    assert!(
        row.contains("   INC-7: prod down, no one answers   yes   "),
        "{shown}"
    );
    f.cleanup();
}
