//! The webhook configurations oz registers for itself, and the one way they are written:
//! server-side apply of the whole desired object, `caBundle` included, with the
//! [`FIELD_MANAGER`] field manager.
//!
//! Three configurations, named after [`Registration::name`] (default `oz`):
//!
//! | Configuration | Webhook | Rules | failurePolicy |
//! |---|---|---|---|
//! | Mutating `oz-requests` | `requester.oz.wizardofoz.co` | CREATE of execaccessrequests, podaccessrequests | Fail |
//! | Validating `oz-requests` | `requests.oz.wizardofoz.co` | CREATE, UPDATE of the same | Fail |
//! | Validating `oz-audit` | `audit.oz.wizardofoz.co` | CONNECT of pods/exec, pods/attach, pods/portforward; UPDATE of pods/ephemeralcontainers | Ignore (`--audit-failure-policy`) |
//! | Validating `oz-audit` | `audit-enforced.oz.wizardofoz.co` (only with enforced namespaces) | the same, in the enforced namespaces alone | Fail |
//! | Validating `oz-requests` | `templates-enforced.oz.wizardofoz.co` (only with enforced namespaces) | CREATE, UPDATE, DELETE of execaccesstemplates, podaccesstemplates in the enforced namespaces | Fail |
//! | Validating `oz-requests` | `templates.oz.wizardofoz.co` (only on a fleet spoke) | the same, in every namespace served but the enforced ones | Fail |
//!
//! The audit webhook never has an objectSelector: CONNECT options have no labels, so an
//! objectSelector would match nothing. Scope it with a namespaceSelector instead.
//!
//! Enforcement (`--audit-enforce-namespaces`) is decided by the handler, but it binds only if
//! the apiserver cannot skip the handler: so the enforced namespaces get a webhook of their own
//! that fails closed (with oz down, exec there is refused), and the audit webhook, which never
//! blocks, leaves them out. Both select namespaces by the name label the apiserver sets on
//! every Namespace ([`NAMESPACE_NAME_LABEL`]).
//!
//! On a fleet spoke (oz-manager's `--fleet-hub-user`), a hub's copies of its templates must be
//! written by the hub alone wherever they are, so templates are judged in every namespace the
//! request webhooks serve. That is a webhook of its own, [`TEMPLATES_WEBHOOK`], rather than
//! [`TEMPLATES_ENFORCED_WEBHOOK`] widened: the same handler answers both (and judges both
//! rules), the enforced one keeps its name and scope, and the new one leaves the enforced
//! namespaces out, so a write there is still judged once. Both fail closed: with oz down,
//! nobody rewrites a hub's template unseen, nor takes one over by labelling it.

use std::collections::BTreeSet;

use k8s_openapi::{
    api::admissionregistration::v1::{
        MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
        ValidatingWebhookConfiguration,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement},
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};

use crate::{FIELD_MANAGER, Result};

mod endpoint;
mod object_meta;
mod sessions;

use object_meta::metadata;

pub use endpoint::WebhookEndpoint;
pub use sessions::{SESSIONS_GROUP_PRIORITY_MINIMUM, SESSIONS_VERSION_PRIORITY, SessionsService};

/// Path of the mutating webhook that records the requester.
pub const MUTATE_REQUESTS_PATH: &str = "/mutate-requests";
/// Path of the validating webhook for requests.
pub const VALIDATE_REQUESTS_PATH: &str = "/validate-requests";
/// Path of the mutating webhook that records who made a decision (an AccessApproval).
pub const MUTATE_APPROVALS_PATH: &str = "/mutate-approvals";
/// Path of the validating webhook for AccessApprovals.
pub const VALIDATE_APPROVALS_PATH: &str = "/validate-approvals";
/// Path of the exec/attach/port-forward/debug audit webhook.
pub const AUDIT_PATH: &str = "/audit";
/// Path of the webhook that keeps templates in the enforced namespaces to their admin groups.
pub const VALIDATE_TEMPLATES_PATH: &str = "/validate-templates";

/// Name of the mutating webhook inside its configuration.
pub const REQUESTER_WEBHOOK: &str = "requester.oz.wizardofoz.co";
/// Name of the request validating webhook inside its configuration.
pub const REQUESTS_WEBHOOK: &str = "requests.oz.wizardofoz.co";
/// Name of the mutating webhook that stamps an AccessApproval's approver.
pub const APPROVER_WEBHOOK: &str = "approver.oz.wizardofoz.co";
/// Name of the AccessApproval validating webhook.
pub const APPROVALS_WEBHOOK: &str = "approvals.oz.wizardofoz.co";
/// The webhook guarding request deletion (who may revoke, and the expired records).
pub const REQUEST_DELETES_WEBHOOK: &str = "request-deletes.oz.wizardofoz.co";
/// Name of the audit webhook inside its configuration; the apiserver prefixes the audit
/// annotations it returns with this name.
pub const AUDIT_WEBHOOK: &str = "audit.oz.wizardofoz.co";
/// Name of the audit webhook for the enforced namespaces (same handler, failurePolicy Fail).
pub const AUDIT_ENFORCED_WEBHOOK: &str = "audit-enforced.oz.wizardofoz.co";
/// Name of the webhook that lets only the template admin groups write templates in the
/// enforced namespaces (failurePolicy Fail).
pub const TEMPLATES_ENFORCED_WEBHOOK: &str = "templates-enforced.oz.wizardofoz.co";
/// Name of the webhook that, on a fleet spoke, lets only the hub's credential write the hub's
/// templates, in every namespace served but the enforced ones (failurePolicy Fail).
pub const TEMPLATES_WEBHOOK: &str = "templates.oz.wizardofoz.co";

/// The label the apiserver sets on every Namespace, with its own name: what a namespaceSelector
/// matches to name namespaces.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The request webhooks' timeout; the apiserver's default and well under its 30 s maximum.
const REQUEST_TIMEOUT_SECONDS: i32 = 10;
/// The audit webhook answers fast or is skipped: an exec should not wait long for an audit.
const AUDIT_TIMEOUT_SECONDS: i32 = 5;

/// The failure policy of the audit webhook.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// An unreachable webhook is skipped: an oz outage never blocks `kubectl exec`.
    #[default]
    Ignore,
    /// An unreachable webhook blocks the operation: no exec, attach, port-forward or debug
    /// anywhere goes unaudited while oz is down (Oz's pod exec watcher's default).
    Fail,
}

impl FailurePolicy {
    /// The word the webhook configuration (and `--audit-failure-policy`) uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ignore => "Ignore",
            Self::Fail => "Fail",
        }
    }
}

impl std::str::FromStr for FailurePolicy {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        [Self::Ignore, Self::Fail]
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| format!("{text:?}: want Ignore or Fail"))
    }
}

/// What oz registers, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Registration {
    /// Base name of the configurations: `<name>-requests` (mutating and validating) and
    /// `<name>-audit` (validating). Default `oz`.
    pub name: String,
    /// How the apiserver reaches the server.
    pub endpoint: WebhookEndpoint,
    /// Limits the request webhooks to matching namespaces; all namespaces if `None`.
    pub request_namespace_selector: Option<LabelSelector>,
    /// Whether the audit webhook is registered. Default true.
    pub audit: bool,
    /// Limits the audit webhook to matching namespaces; all namespaces if `None`.
    pub audit_namespace_selector: Option<LabelSelector>,
    /// The audit webhook's failure policy. Default [`FailurePolicy::Ignore`].
    pub audit_failure_policy: FailurePolicy,
    /// Namespaces where access without a grant is denied (`--audit-enforce-namespaces`). They
    /// get [`AUDIT_ENFORCED_WEBHOOK`], which fails closed, and [`AUDIT_WEBHOOK`] leaves them
    /// out. Default none. oz-webhooks' `WebhookServer` fills it in from its
    /// `WebhookConfig::enforce`, so enforcement is never registered to be skipped.
    pub audit_enforced_namespaces: BTreeSet<String>,
    /// Whether this is a fleet spoke whose hub-managed templates are guarded: then
    /// [`TEMPLATES_WEBHOOK`] judges template writes in every namespace served. Default false.
    /// oz-webhooks' `WebhookServer` sets it from its `WebhookConfig::fleet_hub_user`.
    pub hub_managed_templates: bool,
    /// The APIService of oz's sessions API (`--controllers` with `sessions`), applied with the
    /// same CA bundle as the webhooks and kept current with it. Default none.
    pub sessions: Option<SessionsService>,
}

impl Registration {
    /// Everything registered, in all namespaces, under the default names.
    pub fn new(endpoint: WebhookEndpoint) -> Self {
        Self {
            name: "oz".into(),
            endpoint,
            request_namespace_selector: None,
            audit: true,
            audit_namespace_selector: None,
            audit_failure_policy: FailurePolicy::Ignore,
            audit_enforced_namespaces: BTreeSet::new(),
            hub_managed_templates: false,
            sessions: None,
        }
    }

    /// This registration, with `namespaces` enforced (see
    /// [`Registration::audit_enforced_namespaces`]).
    pub fn enforcing(mut self, namespaces: &BTreeSet<String>) -> Self {
        self.audit_enforced_namespaces
            .extend(namespaces.iter().cloned());
        self
    }

    /// This registration, with template writes judged in every namespace served if `guarded`
    /// (see [`Registration::hub_managed_templates`]); never un-set.
    pub fn guarding_hub_templates(mut self, guarded: bool) -> Self {
        self.hub_managed_templates |= guarded;
        self
    }

    /// Every name the serving certificate must carry: the webhook endpoint's, and the sessions
    /// Service's.
    pub fn serving_names(&self) -> Vec<String> {
        let mut names = self.endpoint.serving_names();
        for name in self
            .sessions
            .iter()
            .flat_map(SessionsService::serving_names)
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// Name of the mutating and of the request validating configuration.
    pub fn requests_name(&self) -> String {
        format!("{}-requests", self.name)
    }

    /// Name of the audit validating configuration.
    pub fn audit_name(&self) -> String {
        format!("{}-audit", self.name)
    }

    /// Names of every validating configuration registered.
    pub fn validating_names(&self) -> Vec<String> {
        let mut names = vec![self.requests_name()];
        if self.audit {
            names.push(self.audit_name());
        }
        names
    }

    /// The mutating configuration, trusting `ca_bundle` (PEM).
    pub fn mutating_configuration(&self, ca_bundle: &str) -> MutatingWebhookConfiguration {
        // Both stamp who acts (the requester, the approver) and fail closed: an unstamped
        // object would be refused by validation anyway.
        let stamping_webhook = |name: &str, path: &str, rule: RuleWithOperations| MutatingWebhook {
            name: name.into(),
            client_config: self.endpoint.client_config(path, ca_bundle),
            rules: Some(vec![rule]),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            namespace_selector: self.request_namespace_selector.clone(),
            reinvocation_policy: Some("Never".into()),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            timeout_seconds: Some(REQUEST_TIMEOUT_SECONDS),
            ..Default::default()
        };
        MutatingWebhookConfiguration {
            metadata: metadata(self.requests_name()),
            webhooks: Some(vec![
                stamping_webhook(
                    REQUESTER_WEBHOOK,
                    MUTATE_REQUESTS_PATH,
                    request_rule(&["CREATE"]),
                ),
                stamping_webhook(
                    APPROVER_WEBHOOK,
                    MUTATE_APPROVALS_PATH,
                    approval_rule(&["CREATE"]),
                ),
            ]),
        }
    }

    /// The validating configurations (requests, then audit if enabled), trusting `ca_bundle`.
    pub fn validating_configurations(
        &self,
        ca_bundle: &str,
    ) -> Vec<ValidatingWebhookConfiguration> {
        let validating_webhook =
            |name: &str, path: &str, rule: RuleWithOperations, failure_policy: &str| {
                ValidatingWebhook {
                    name: name.into(),
                    client_config: self.endpoint.client_config(path, ca_bundle),
                    rules: Some(vec![rule]),
                    failure_policy: Some(failure_policy.into()),
                    match_policy: Some("Equivalent".into()),
                    namespace_selector: self.request_namespace_selector.clone(),
                    side_effects: "None".into(),
                    admission_review_versions: vec!["v1".into()],
                    timeout_seconds: Some(REQUEST_TIMEOUT_SECONDS),
                    ..Default::default()
                }
            };
        let mut request_webhooks = vec![
            validating_webhook(
                REQUESTS_WEBHOOK,
                VALIDATE_REQUESTS_PATH,
                request_rule(&["CREATE", "UPDATE"]),
                "Fail",
            ),
            // Ignore: deleting a request only removes access, so with oz down a delete (a
            // revocation, or the garbage collector's cascade) must still go through.
            validating_webhook(
                REQUEST_DELETES_WEBHOOK,
                VALIDATE_REQUESTS_PATH,
                request_rule(&["DELETE"]),
                "Ignore",
            ),
            // Deletes are not seen: deleting a decision withdraws it, which anyone allowed
            // to delete it may do, and the garbage collector must.
            validating_webhook(
                APPROVALS_WEBHOOK,
                VALIDATE_APPROVALS_PATH,
                approval_rule(&["CREATE", "UPDATE"]),
                "Fail",
            ),
        ];
        let enforced = &self.audit_enforced_namespaces;
        let template_webhook = |name: &str| {
            validating_webhook(
                name,
                VALIDATE_TEMPLATES_PATH,
                template_rule(&["CREATE", "UPDATE", "DELETE"]),
                "Fail",
            )
        };
        if !enforced.is_empty() {
            // Where exec needs a grant, a template is a grant in waiting: fail closed, so that
            // with oz down nobody but RBAC's own cluster admins rewrites one unseen.
            request_webhooks.push(ValidatingWebhook {
                namespace_selector: Some(and_names(
                    self.request_namespace_selector.clone(),
                    "In",
                    enforced,
                )),
                ..template_webhook(TEMPLATES_ENFORCED_WEBHOOK)
            });
        }
        if self.hub_managed_templates {
            // The rest of the namespaces served: the enforced ones have theirs, same handler.
            let namespace_selector = match enforced.is_empty() {
                true => self.request_namespace_selector.clone(),
                false => Some(and_names(
                    self.request_namespace_selector.clone(),
                    "NotIn",
                    enforced,
                )),
            };
            request_webhooks.push(ValidatingWebhook {
                namespace_selector,
                ..template_webhook(TEMPLATES_WEBHOOK)
            });
        }
        let mut configurations = vec![ValidatingWebhookConfiguration {
            metadata: metadata(self.requests_name()),
            webhooks: Some(request_webhooks),
        }];
        if self.audit {
            let audit_webhook =
                |name: &str,
                 failure_policy: FailurePolicy,
                 names: Option<(&str, &BTreeSet<String>)>| ValidatingWebhook {
                    name: name.into(),
                    client_config: self.endpoint.client_config(AUDIT_PATH, ca_bundle),
                    rules: Some(vec![
                        pod_rule("CONNECT", &["pods/exec", "pods/attach", "pods/portforward"]),
                        pod_rule("UPDATE", &["pods/ephemeralcontainers"]),
                    ]),
                    failure_policy: Some(failure_policy.as_str().into()),
                    match_policy: Some("Equivalent".into()),
                    namespace_selector: match names {
                        None => self.audit_namespace_selector.clone(),
                        Some((operator, names)) => Some(and_names(
                            self.audit_namespace_selector.clone(),
                            operator,
                            names,
                        )),
                    },
                    // It records Events, but never on a dry run.
                    side_effects: "NoneOnDryRun".into(),
                    admission_review_versions: vec!["v1".into()],
                    timeout_seconds: Some(AUDIT_TIMEOUT_SECONDS),
                    ..Default::default()
                };
            let webhooks = if enforced.is_empty() {
                vec![audit_webhook(
                    AUDIT_WEBHOOK,
                    self.audit_failure_policy,
                    None,
                )]
            } else {
                vec![
                    audit_webhook(
                        AUDIT_WEBHOOK,
                        self.audit_failure_policy,
                        Some(("NotIn", enforced)),
                    ),
                    audit_webhook(
                        AUDIT_ENFORCED_WEBHOOK,
                        FailurePolicy::Fail,
                        Some(("In", enforced)),
                    ),
                ]
            };
            configurations.push(ValidatingWebhookConfiguration {
                metadata: metadata(self.audit_name()),
                webhooks: Some(webhooks),
            });
        }
        configurations
    }

    /// Applies every configuration, trusting `ca_bundle`. Configurations no longer wanted
    /// (the audit one when disabled) are left alone.
    pub async fn apply(&self, client: &Client, ca_bundle: &str) -> Result<()> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let config = self.mutating_configuration(ca_bundle);
        mutating
            .patch(&self.requests_name(), &params, &Patch::Apply(&config))
            .await?;
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        for config in self.validating_configurations(ca_bundle) {
            let name = config.metadata.name.clone().unwrap_or_default();
            validating
                .patch(&name, &params, &Patch::Apply(&config))
                .await?;
        }
        if let Some(sessions) = &self.sessions {
            let api_services: Api<APIService> = Api::all(client.clone());
            api_services
                .patch(
                    oz_api::SESSIONS_API_SERVICE,
                    &params,
                    &Patch::Apply(&sessions.api_service(ca_bundle)),
                )
                .await?;
        }
        Ok(())
    }
}

/// `selector` (everything if `None`), further limited to the namespaces whose name is (`In`)
/// or is not (`NotIn`) one of `names`.
fn and_names(
    selector: Option<LabelSelector>,
    operator: &str,
    names: &BTreeSet<String>,
) -> LabelSelector {
    let mut selector = selector.unwrap_or_default();
    selector
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.into(),
            operator: operator.into(),
            values: Some(names.iter().cloned().collect()),
        });
    selector
}

fn request_rule(operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        operations: Some(operations.iter().map(|o| o.to_string()).collect()),
        api_groups: Some(vec![oz_api::GROUP.into()]),
        api_versions: Some(vec![oz_api::VERSION.into()]),
        resources: Some(vec![
            "execaccessrequests".into(),
            "podaccessrequests".into(),
        ]),
        scope: Some("Namespaced".into()),
    }
}

fn template_rule(operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        resources: Some(vec![
            "execaccesstemplates".into(),
            "podaccesstemplates".into(),
        ]),
        ..request_rule(operations)
    }
}

fn approval_rule(operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        resources: Some(vec!["accessapprovals".into()]),
        ..request_rule(operations)
    }
}

fn pod_rule(operation: &str, resources: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        operations: Some(vec![operation.into()]),
        api_groups: Some(vec!["".into()]),
        api_versions: Some(vec!["v1".into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        scope: Some("Namespaced".into()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn request_webhooks_fail_closed_and_cover_only_the_request_kinds() {
        let registration =
            Registration::new(WebhookEndpoint::service("oz-system/oz-webhook", 443).unwrap());
        let mutating = registration.mutating_configuration("PEM");
        assert_eq!(mutating.metadata.name.as_deref(), Some("oz-requests"));
        let webhook = &mutating.webhooks.unwrap()[0];
        assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(webhook.side_effects, "None");
        assert_eq!(webhook.admission_review_versions, ["v1"]);
        assert!(webhook.timeout_seconds.unwrap() <= 10);
        let rule = &webhook.rules.as_ref().unwrap()[0];
        assert_eq!(
            rule.operations.as_deref(),
            Some(&["CREATE".to_string()][..])
        );
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&["crds.wizardofoz.co".to_string()][..])
        );
        assert_eq!(
            rule.resources.as_deref(),
            Some(
                &[
                    "execaccessrequests".to_string(),
                    "podaccessrequests".to_string()
                ][..]
            )
        );
        let service = webhook.client_config.service.as_ref().unwrap();
        assert_eq!(
            (
                service.namespace.as_str(),
                service.name.as_str(),
                service.port
            ),
            ("oz-system", "oz-webhook", Some(443))
        );
        assert_eq!(service.path.as_deref(), Some(MUTATE_REQUESTS_PATH));
        assert_eq!(
            webhook.client_config.ca_bundle,
            Some(ByteString(b"PEM".to_vec()))
        );

        let validating = registration.validating_configurations("PEM");
        assert_eq!(validating.len(), 2);
        let requests = &validating[0].webhooks.as_ref().unwrap()[0];
        assert_eq!(requests.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(
            requests.rules.as_ref().unwrap()[0].operations.as_deref(),
            Some(&["CREATE".to_string(), "UPDATE".to_string()][..])
        );
    }

    #[test]
    fn approval_webhooks_fail_closed_and_cover_only_access_approvals() {
        let registration =
            Registration::new(WebhookEndpoint::service("oz-system/oz-webhook", 443).unwrap());
        let mutating = registration.mutating_configuration("PEM").webhooks.unwrap();
        let approver = mutating
            .iter()
            .find(|w| w.name == APPROVER_WEBHOOK)
            .expect("the approver webhook is registered");
        let validating = registration.validating_configurations("PEM");
        let approvals = validating[0]
            .webhooks
            .as_ref()
            .unwrap()
            .iter()
            .find(|w| w.name == APPROVALS_WEBHOOK)
            .expect("the approvals webhook is registered with the request ones");
        for (path, failure_policy, rules, expected_path, operations) in [
            (
                approver
                    .client_config
                    .service
                    .as_ref()
                    .unwrap()
                    .path
                    .as_deref(),
                approver.failure_policy.as_deref(),
                approver.rules.as_ref().unwrap(),
                MUTATE_APPROVALS_PATH,
                &["CREATE"][..],
            ),
            (
                approvals
                    .client_config
                    .service
                    .as_ref()
                    .unwrap()
                    .path
                    .as_deref(),
                approvals.failure_policy.as_deref(),
                approvals.rules.as_ref().unwrap(),
                VALIDATE_APPROVALS_PATH,
                &["CREATE", "UPDATE"][..],
            ),
        ] {
            assert_eq!(path, Some(expected_path));
            assert_eq!(failure_policy, Some("Fail"));
            assert_eq!(rules.len(), 1);
            assert_eq!(
                rules[0].resources.as_deref(),
                Some(&["accessapprovals".to_string()][..])
            );
            assert_eq!(
                rules[0].api_groups.as_deref(),
                Some(&["crds.wizardofoz.co".to_string()][..])
            );
            let wanted: Vec<String> = operations.iter().map(|o| o.to_string()).collect();
            assert_eq!(rules[0].operations.as_ref(), Some(&wanted));
        }
        assert_eq!(
            approver.namespace_selector,
            registration.request_namespace_selector
        );
    }

    #[test]
    fn the_audit_webhook_never_blocks_and_has_no_object_selector() {
        let mut registration =
            Registration::new(WebhookEndpoint::url("https://127.0.0.1:9443").unwrap());
        let selector = LabelSelector {
            match_labels: Some([("team".to_string(), "a".to_string())].into()),
            ..Default::default()
        };
        registration.audit_namespace_selector = Some(selector.clone());
        let validating = registration.validating_configurations("PEM");
        assert_eq!(validating[1].metadata.name.as_deref(), Some("oz-audit"));
        let audit = &validating[1].webhooks.as_ref().unwrap()[0];
        assert_eq!(audit.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(audit.object_selector, None);
        assert_eq!(audit.namespace_selector, Some(selector));
        assert_eq!(
            audit.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/audit")
        );
        let rules = audit.rules.as_ref().unwrap();
        assert_eq!(
            rules[0].operations.as_deref(),
            Some(&["CONNECT".to_string()][..])
        );
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(
                &[
                    "pods/exec".to_string(),
                    "pods/attach".to_string(),
                    "pods/portforward".to_string()
                ][..]
            )
        );
        assert_eq!(
            rules[1].operations.as_deref(),
            Some(&["UPDATE".to_string()][..])
        );
        assert_eq!(
            rules[1].resources.as_deref(),
            Some(&["pods/ephemeralcontainers".to_string()][..])
        );

        registration.audit = false;
        assert_eq!(registration.validating_configurations("PEM").len(), 1);
        assert_eq!(registration.validating_names(), ["oz-requests"]);
    }

    #[test]
    fn enforced_namespaces_get_a_webhook_that_fails_closed_and_the_audit_webhook_leaves_them_out() {
        let mut registration =
            Registration::new(WebhookEndpoint::url("https://127.0.0.1:9443").unwrap());
        let scoped = LabelSelector {
            match_labels: Some([("team".to_string(), "a".to_string())].into()),
            ..Default::default()
        };
        registration.audit_namespace_selector = Some(scoped.clone());
        let registration = registration.enforcing(&["prod".to_string(), "pci".to_string()].into());
        let validating = registration.validating_configurations("PEM");
        assert_eq!(validating.len(), 2, "no configuration of its own");
        let webhooks = validating[1].webhooks.as_ref().unwrap();
        assert_eq!(webhooks.len(), 2);
        let names = |operator: &str| LabelSelector {
            match_labels: scoped.match_labels.clone(),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.into(),
                operator: operator.into(),
                values: Some(vec!["pci".into(), "prod".into()]),
            }]),
        };
        let (audit, enforced) = (&webhooks[0], &webhooks[1]);
        assert_eq!(audit.name, AUDIT_WEBHOOK);
        assert_eq!(audit.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(audit.namespace_selector, Some(names("NotIn")));
        assert_eq!(enforced.name, AUDIT_ENFORCED_WEBHOOK);
        assert_eq!(enforced.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(enforced.namespace_selector, Some(names("In")));
        // The same handler and operations: only the scope and the failure policy differ.
        assert_eq!(enforced.client_config, audit.client_config);
        assert_eq!(enforced.rules, audit.rules);
        assert_eq!(enforced.object_selector, None);

        // Templates there are written only by their admin groups, failing closed, in the
        // enforced namespaces alone (within the requests' own scope).
        let templates = validating[0].webhooks.as_ref().unwrap().last().unwrap();
        assert_eq!(templates.name, TEMPLATES_ENFORCED_WEBHOOK);
        assert_eq!(templates.failure_policy.as_deref(), Some("Fail"));
        let in_enforced = LabelSelector {
            match_labels: None,
            ..names("In")
        };
        assert_eq!(templates.namespace_selector, Some(in_enforced));
        let rule = &templates.rules.as_ref().unwrap()[0];
        assert_eq!(
            rule.operations.as_deref(),
            Some(&["CREATE".to_string(), "UPDATE".into(), "DELETE".into()][..])
        );
        assert_eq!(
            rule.resources.as_deref(),
            Some(
                &[
                    "execaccesstemplates".to_string(),
                    "podaccesstemplates".into()
                ][..]
            )
        );

        // Nothing enforced: one audit webhook, as before, and no templates webhook.
        let plain = Registration::new(WebhookEndpoint::url("https://127.0.0.1:9443").unwrap())
            .enforcing(&BTreeSet::new());
        let validating = plain.validating_configurations("PEM");
        assert_eq!(validating[1].webhooks.as_ref().unwrap().len(), 1);
        assert!(
            validating[0]
                .webhooks
                .as_ref()
                .unwrap()
                .iter()
                .all(|w| w.name != TEMPLATES_ENFORCED_WEBHOOK)
        );
    }
    #[test]
    fn a_fleet_spoke_judges_template_writes_in_every_namespace_served_once() {
        let scoped = LabelSelector {
            match_labels: Some([("team".to_string(), "a".to_string())].into()),
            ..Default::default()
        };
        let mut registration =
            Registration::new(WebhookEndpoint::url("https://127.0.0.1:9443").unwrap());
        registration.request_namespace_selector = Some(scoped.clone());
        let templates_webhooks = |registration: &Registration| {
            let validating = registration.validating_configurations("PEM");
            validating[0]
                .webhooks
                .clone()
                .unwrap()
                .into_iter()
                .filter(|w| {
                    w.client_config
                        .url
                        .as_deref()
                        .unwrap()
                        .ends_with(VALIDATE_TEMPLATES_PATH)
                })
                .collect::<Vec<_>>()
        };
        assert!(
            templates_webhooks(&registration).is_empty(),
            "off by default"
        );
        assert!(templates_webhooks(&registration.clone().guarding_hub_templates(false)).is_empty());

        // Every namespace the request webhooks serve, failing closed, for every write.
        let spoke = registration.clone().guarding_hub_templates(true);
        let webhooks = templates_webhooks(&spoke);
        assert_eq!(webhooks.len(), 1);
        let fleet = &webhooks[0];
        assert_eq!(fleet.name, TEMPLATES_WEBHOOK);
        assert_eq!(fleet.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(fleet.namespace_selector, Some(scoped.clone()));
        let rule = &fleet.rules.as_ref().unwrap()[0];
        assert_eq!(
            rule.operations.as_deref(),
            Some(&["CREATE".to_string(), "UPDATE".into(), "DELETE".into()][..])
        );
        assert_eq!(
            rule.resources.as_deref(),
            Some(
                &[
                    "execaccesstemplates".to_string(),
                    "podaccesstemplates".into()
                ][..]
            )
        );

        // With enforced namespaces, each namespace is judged by one of the two: the enforced
        // webhook as before, and the fleet one everywhere else.
        let both = spoke
            .enforcing(&["prod".to_string()].into())
            .guarding_hub_templates(false);
        let webhooks = templates_webhooks(&both);
        let names: Vec<_> = webhooks.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, [TEMPLATES_ENFORCED_WEBHOOK, TEMPLATES_WEBHOOK]);
        let names_of = |operator: &str| LabelSelector {
            match_labels: scoped.match_labels.clone(),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.into(),
                operator: operator.into(),
                values: Some(vec!["prod".into()]),
            }]),
        };
        assert_eq!(webhooks[0].namespace_selector, Some(names_of("In")));
        assert_eq!(webhooks[1].namespace_selector, Some(names_of("NotIn")));
        assert_eq!(webhooks[0].rules, webhooks[1].rules);
    }
}
