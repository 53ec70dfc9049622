//! What oz needs, rule by rule, each with its reason: in the namespaces it works in, in its own
//! namespace and cluster-wide. `super` writes them into Roles and ClusterRoles.

use k8s_openapi::api::rbac::v1::PolicyRule;
use oz_api::AccessKind;
use oz_api::notifications::NAMESPACE_SINK_SECRET;

use crate::builders::{pod::POD_PERMISSIONS, rbac::EXEC_PERMISSIONS};
use crate::install::{
    AUDIT_PUBLIC_KEYS_CONFIGMAP, AUDIT_SIGNING_KEY_SECRET, Component, InstallOptions,
};

/// The API group of oz's kinds, as rules name it.
pub(super) const CRD_GROUP: &str = oz_api::GROUP;
/// The API group of Roles and RoleBindings.
pub(super) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A PolicyRule and why oz needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The rule as it goes into the Role or ClusterRole.
    pub rule: PolicyRule,
    /// Why, one reason per part of oz that needs it: who, and for what.
    pub why: Vec<String>,
}

/// What oz needs in each namespace it works in (a Role there, or a ClusterRole bound
/// cluster-wide when it watches them all).
pub fn watched_namespace_rules(options: &InstallOptions) -> Vec<Rule> {
    let mut rules = RuleSet::default();
    let exec = options.runs(Component::Exec);
    let pod = options.runs(Component::Pod);
    let kinds = options.access_kinds();
    let templates: Vec<&str> = kinds.iter().map(|k| k.template_plural()).collect();
    let requests: Vec<&str> = kinds.iter().map(|k| k.request_plural()).collect();
    let sub = |resources: &[&str], subresource: &str| -> Vec<String> {
        resources
            .iter()
            .map(|r| format!("{r}/{subresource}"))
            .collect()
    };

    if exec || pod {
        rules.add(
            CRD_GROUP,
            &templates,
            &["get", "list", "watch"],
            "controllers: the template controller watches templates to keep their status current; \
             the request controller reads the template a request names, and watches templates to wake their requests",
        );
        rules.add(
            CRD_GROUP,
            &sub(&templates, "status"),
            &["patch"],
            "controllers: a template's status (conditions, ready) is written by server-side apply",
        );
        rules.add(
            CRD_GROUP,
            &sub(&templates, "finalizers"),
            &["update"],
            "controllers: lets a request's owner reference to its template carry blockOwnerDeletion where the \
             OwnerReferencesPermissionEnforcement admission plugin is on; CRDs serve no finalizers subresource, so it allows nothing else",
        );
        rules.add(
            CRD_GROUP,
            &requests,
            &["get", "list", "watch", "patch", "delete"],
            "controllers: the request controller watches requests; patch makes the template the request's controller owner \
             (server-side apply of ownerReferences), so deleting a template deletes its requests; \
             delete removes an expired request once --history-retention has passed",
        );
        rules.add(
            CRD_GROUP,
            &sub(&requests, "status"),
            &["patch"],
            "controllers: a request's status (phase, conditions, expiresAt, podName) is written by server-side apply",
        );
        rules.add(
            CRD_GROUP,
            &sub(&requests, "finalizers"),
            &["update"],
            "controllers: the same for the owner references of the Roles, RoleBindings and Pods a request owns",
        );
        rules.add(
            CRD_GROUP,
            &["accessapprovals"],
            &["get", "list", "watch"],
            "controllers: the request controller tallies a request's decisions from a watch cache of AccessApprovals, \
             and a change to one (its deletion too: that withdraws it) wakes the request it names; oz never writes them",
        );
        rules.add_named(
            "",
            &["secrets"],
            &[NAMESPACE_SINK_SECRET],
            &["get", "list", "watch"],
            "notifications: the namespace's sink (docs/approvals.md), watched and read by name only (the watch's field \
             selector metadata.name=oz-notifications is what the apiserver authorizes against this name); a template's \
             own secretRefs are readable only where the Secret's owner grants oz get on that one name, so oz can never \
             read, nor grant, any other Secret here",
        );
        rules.add(
            "apps",
            &["deployments", "statefulsets", "daemonsets"],
            &["get", "list", "watch"],
            "controllers: a template's controllerTargetRef: read for its pod selector and pod template, \
             watched so a template becomes ready as soon as its target appears",
        );
        rules.add(
            "argoproj.io",
            &["rollouts"],
            &["get", "list", "watch"],
            "controllers: Argo Rollouts as controllerTargetRef; allows nothing where Argo Rollouts is not installed",
        );
        rules.add(
            RBAC_GROUP,
            &["roles", "rolebindings"],
            &["get", "list", "watch", "create", "patch", "delete"],
            "controllers: each grant is a Role and a RoleBinding, created when new (create) and put back by server-side apply \
             when changed (patch), watched by label (app.kubernetes.io/managed-by=oz) to undo edits, read back to find the granted pod, \
             and deleted when access ends or is denied; no escalate, no bind (see the pods/... rules)",
        );
        rules.add(
            "events.k8s.io",
            &["events"],
            &["create"],
            "controllers: Events about templates and requests (TemplateReady, Created, Ready, Denied, Expired, Failed); \
             each is a new events.k8s.io/v1 Event (oz never folds them into a series, which would patch), \
             never core v1 events, which is all Oz's RBAC grants",
        );
    }
    if exec {
        rules.add(
            "",
            &["pods"],
            &["get", "list"],
            "exec controller: reads the requested pod, and lists the target's pods to pick a running one",
        );
    }
    if pod {
        rules.add(
            "",
            &["pods"],
            &["get", "list", "watch", "create", "delete"],
            "pod controller: creates the access pod, watches the pods it owns (by label), deletes the access pod when access ends",
        );
    }
    // What templates can grant, from the builders themselves: holding it is what lets oz create
    // and bind the grant's Role without `escalate` or `bind`.
    let mut grantable: Vec<(&str, &[&str])> = Vec::new();
    if exec {
        grantable.extend(EXEC_PERMISSIONS.iter().map(|p| (p.resource, p.verbs)));
    }
    if pod {
        grantable.extend(POD_PERMISSIONS.iter().map(|p| (p.resource, p.verbs)));
    }
    for (resource, verbs) in grantable {
        rules.add(
            "",
            &[resource],
            verbs,
            &format!(
                "grantable: the Roles oz creates grant {resource} {} on one pod; RBAC lets oz create and bind \
                 such a Role only while it holds that itself, since oz has neither escalate nor bind{}",
                verbs.join(", "),
                if resource == "pods" { "" } else { "; oz never uses it itself" }
            ),
        );
    }

    if options.runs(Component::Sessions) {
        rules.add(
            oz_api::SESSIONS_GROUP,
            &["pods/exec", "pods/attach"],
            &["create", "get"],
            "grantable: a Brokered grant's Role grants create and get on one pod's pods/exec (and pods/attach) in the \
             sessions API group; RBAC lets oz create such a Role only while it holds that itself",
        );
        rules.add(
            "",
            &["pods/exec", "pods/attach"],
            &["create", "get"],
            "sessions: the broker opens the stream to the pod as itself, once it has found the user's grant",
        );
        rules.add(
            CRD_GROUP,
            &AccessKind::ALL.map(AccessKind::template_plural),
            &["get", "list", "watch"],
            "sessions: a session's grant is closed when its template is deleted (a watch), and its sessionMode is the template's",
        );
        rules.add(
            CRD_GROUP,
            &AccessKind::ALL.map(AccessKind::request_plural),
            &["get", "list", "watch"],
            "sessions: each session needs a Ready grant for its pod and user, from a watch cache of requests, which also \
             tells when the grant ends",
        );
        rules.add(
            CRD_GROUP,
            &AccessKind::ALL
                .map(AccessKind::request_plural)
                .map(|r| format!("{r}/status")),
            &["patch"],
            "sessions: records each session's start and end in its request's status.sessions (a merge patch)",
        );
    }
    if options.runs(Component::Webhooks) {
        rules.add(
            CRD_GROUP,
            &AccessKind::ALL.map(AccessKind::template_plural),
            &["get", "list", "watch"],
            "webhooks: the request webhooks check that the template a new request names exists and admits the requester (from a watch cache; a GET when it is not there yet)",
        );
        rules.add(
            CRD_GROUP,
            &AccessKind::ALL.map(AccessKind::request_plural),
            &["list", "watch"],
            "webhooks: the audit webhook tells whether an exec or attach is covered by an active grant, from a watch cache of requests (a LIST when it finds none)",
        );
        rules.add(
            CRD_GROUP,
            &["accessapprovals"],
            &["get", "list", "watch"],
            "webhooks: the approval webhooks refuse a second decision by the same approver on a request, from a watch cache of AccessApprovals",
        );
        rules.add(
            "",
            &["pods"],
            &["get", "list", "watch"],
            "webhooks: the audit webhook reads the pod an exec or attach goes into, for its record; where access is \
             enforced, it watches the pods' metadata, so that a denial names the templates that can grant the pod",
        );
        rules.add(
            "events.k8s.io",
            &["events"],
            &["create"],
            "webhooks: the audit webhook records each exec, attach, port-forward and debug as an Event on the pod",
        );
    }
    rules.into_rules()
}

/// What oz needs in its own namespace: the leader-election Lease and, with the webhooks, the
/// two certificate Secrets, the audit signing key and the ConfigMap of its public keys.
pub fn operator_namespace_rules(options: &InstallOptions) -> Vec<Rule> {
    let mut rules = RuleSet::default();
    let lease = options.lease_name();
    rules.add_named(
        "coordination.k8s.io",
        &["leases"],
        &[lease.as_str()],
        &["get", "list", "watch", "patch"],
        "leader election (--leader-elect): reads and watches the Lease (a release or a new holder is seen at once), \
         takes, renews and releases it by a patch carrying the resourceVersion it read",
    );
    rules.add(
        "coordination.k8s.io",
        &["leases"],
        &["create"],
        "leader election: creates the Lease the first time; RBAC cannot limit create by name, so this is any Lease, \
         in this namespace only",
    );
    if options.runs(Component::Webhooks) {
        let [ca, tls] = options.secret_names();
        rules.add_named(
            "",
            &["secrets"],
            &[ca.as_str(), tls.as_str()],
            &["get", "list", "watch", "update", "delete"],
            "webhooks: the webhook CA and serving certificate: read, and watched by name (a metadata.name field \
             selector, which RBAC checks against resourceNames), renewed by update, replaced (delete, create) if unusable",
        );
        rules.add_named(
            "",
            &["secrets"],
            &[AUDIT_SIGNING_KEY_SECRET],
            &["get"],
            "webhooks: the audit file's Ed25519 checkpoint signing key (docs/audit.md): read at start, created the \
             first time (create, below), never changed: an old key stays valid for the checkpoints it signed",
        );
        rules.add(
            "",
            &["secrets"],
            &["create"],
            "webhooks: creates its Secrets (the two certificates, the audit signing key) the first time; RBAC cannot \
             limit create by name, so this is any Secret, in this namespace only (oz can read none but its own)",
        );
        rules.add_named(
            "",
            &["configmaps"],
            &[AUDIT_PUBLIC_KEYS_CONFIGMAP],
            &["get", "patch"],
            "webhooks: publishes the audit signing key's public key in this ConfigMap, beside every earlier one, \
             for anyone verifying the audit file (ozctl audit verify reads it)",
        );
        rules.add(
            "",
            &["configmaps"],
            &["create"],
            "webhooks: creates that ConfigMap the first time; RBAC cannot limit create by name, so this is any \
             ConfigMap, in this namespace only",
        );
        rules.add(
            "events.k8s.io",
            &["events"],
            &["create"],
            "webhooks: Warning Events about the audit file itself (AuditFileUnwritable: records then go to the log \
             only) on that ConfigMap",
        );
    }
    rules.into_rules()
}

/// The cluster-scoped rules: with the webhooks, oz's own webhook configurations, by name.
pub fn cluster_rules(options: &InstallOptions) -> Vec<Rule> {
    let mut rules = RuleSet::default();
    let controllers = options.runs(Component::Exec) || options.runs(Component::Pod);
    if controllers || options.runs(Component::Webhooks) || options.runs(Component::Sessions) {
        rules.add(
            CRD_GROUP,
            &["accesslocks"],
            &["get", "list", "watch"],
            "locks: the request controller revokes what an AccessLock holds over, the webhooks refuse what it locks and \
             find no grant for a locked user, and the sessions broker closes a locked user's sessions, each from a \
             cluster-wide watch cache (a lock reaches every namespace); oz never writes them",
        );
    }
    if options.runs(Component::Webhooks) {
        let registration = options.webhook_registration();
        rules.add_named(
            "admissionregistration.k8s.io",
            &["mutatingwebhookconfigurations"],
            &[registration.requests_name().as_str()],
            &["get", "list", "watch", "patch"],
            "webhooks: keeps the caBundle of its own configuration current by server-side apply, watching it by name",
        );
        let validating = registration.validating_names();
        let validating: Vec<&str> = validating.iter().map(String::as_str).collect();
        rules.add_named(
            "admissionregistration.k8s.io",
            &["validatingwebhookconfigurations"],
            &validating,
            &["get", "list", "watch", "patch"],
            "webhooks: the same for its validating configurations",
        );
        rules.add(
            "admissionregistration.k8s.io",
            &[
                "mutatingwebhookconfigurations",
                "validatingwebhookconfigurations",
            ],
            &["create"],
            "webhooks: re-creates its configurations if they are deleted (server-side apply of a missing object needs create); \
             RBAC cannot limit create by name, and it allows no more than patch on oz's own configurations already does",
        );
    }
    if options.runs(Component::Sessions) {
        rules.add_named(
            "apiregistration.k8s.io",
            &["apiservices"],
            &[oz_api::SESSIONS_API_SERVICE],
            &["get", "list", "watch", "patch"],
            "sessions: registers the sessions API and keeps its caBundle current by server-side apply, watching it by name",
        );
        rules.add(
            "apiregistration.k8s.io",
            &["apiservices"],
            &["create"],
            "sessions: re-creates the APIService if it is deleted; RBAC cannot limit create by name",
        );
    }
    rules.into_rules()
}

/// What a fleet hub's credential may do on a spoke: keep the hub's templates there and create
/// (and withdraw) the requests the hub decided, both kinds, whatever the spoke runs. Nothing
/// else: no RBAC, no Secrets, no pods, no impersonation. The spoke's own oz grants, and its
/// webhook takes a request's requester from this credential only on hub-managed templates.
pub fn fleet_hub_credential_rules() -> Vec<Rule> {
    let mut rules = RuleSet::default();
    let templates: Vec<&str> = AccessKind::ALL
        .iter()
        .map(|k| k.template_plural())
        .collect();
    let requests: Vec<&str> = AccessKind::ALL.iter().map(|k| k.request_plural()).collect();
    rules.add(
        CRD_GROUP,
        &templates,
        &["get", "list", "watch", "create", "update", "patch", "delete"],
        "fleet hub: keeps an equivalent of each fleet template on the spokes it covers, and removes it from \
         spokes it no longer covers",
    );
    rules.add(
        CRD_GROUP,
        &requests,
        &["get", "list", "watch", "create", "delete"],
        "fleet hub: creates the request the hub approved, follows its status back to the hub, and deletes it \
         when the hub's request is deleted (which revokes the grant)",
    );
    rules.into_rules()
}

/// The API group of the Cluster Inventory API's ClusterProfiles.
pub const CLUSTER_INVENTORY_GROUP: &str = "multicluster.x-k8s.io";

/// What a fleet hub needs in its fleet namespace, and only there (a Role): the inventory, and
/// the spokes' tokens the secretreader plugin reads as oz's ServiceAccount.
pub fn fleet_hub_rules() -> Vec<Rule> {
    let mut rules = RuleSet::default();
    rules.add(
        CLUSTER_INVENTORY_GROUP,
        &["clusterprofiles"],
        &["get", "list", "watch"],
        "fleet hub: the inventory: reads, lists and watches the ClusterProfiles of the fleet namespace for the spokes, \
         their labels (which templates cover them) and their access providers; never writes them",
    );
    rules.add(
        "",
        &["secrets"],
        &["get"],
        "fleet hub: the secretreader plugin reads the hub's token for a spoke from the Secret named after its \
         cluster, one GET each time it connects; RBAC cannot name Secrets not yet made, so this is any Secret in \
         the fleet namespace (keep nothing else there); no list or watch, so it never learns other names",
    );
    rules.into_rules()
}

/// Rules keyed by (group, resources, resourceNames), their verbs merged and their reasons kept.
#[derive(Default)]
struct RuleSet {
    rules: Vec<(PolicyRule, Vec<String>)>,
}

/// The order verbs are written in.
const VERB_ORDER: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

impl RuleSet {
    fn add(&mut self, group: &str, resources: &[impl AsRef<str>], verbs: &[&str], why: &str) {
        self.add_named(group, resources, &[] as &[&str], verbs, why);
    }

    fn add_named(
        &mut self,
        group: &str,
        resources: &[impl AsRef<str>],
        names: &[impl AsRef<str>],
        verbs: &[&str],
        why: &str,
    ) {
        if resources.is_empty() {
            return;
        }
        fn strings(items: &[impl AsRef<str>]) -> Vec<String> {
            items.iter().map(|s| s.as_ref().to_string()).collect()
        }
        let rule = PolicyRule {
            api_groups: Some(vec![group.into()]),
            resources: Some(strings(resources)),
            resource_names: (!names.is_empty()).then(|| strings(names)),
            verbs: Vec::new(),
            non_resource_urls: None,
        };
        let index = match self.rules.iter().position(|(r, _)| {
            (&r.api_groups, &r.resources, &r.resource_names)
                == (&rule.api_groups, &rule.resources, &rule.resource_names)
        }) {
            Some(index) => index,
            None => {
                self.rules.push((rule, Vec::new()));
                self.rules.len() - 1
            }
        };
        let (rule, reasons) = &mut self.rules[index];
        for verb in verbs {
            assert!(VERB_ORDER.contains(verb), "unexpected verb {verb}");
            if !rule.verbs.iter().any(|v| v == verb) {
                rule.verbs.push(verb.to_string());
            }
        }
        rule.verbs
            .sort_by_key(|v| VERB_ORDER.iter().position(|o| o == v));
        if !reasons.iter().any(|r| r == why) {
            reasons.push(why.to_string());
        }
    }

    fn into_rules(self) -> Vec<Rule> {
        self.rules
            .into_iter()
            .map(|(rule, reasons)| Rule { rule, why: reasons })
            .collect()
    }
}
