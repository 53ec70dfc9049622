//! ExecAccessTemplate and ExecAccessRequest: `kubectl exec` into a live pod of a workload.

use crate::{
    AccessConfig, CrossVersionObjectReference, FleetClusters, Forwarded, RequestStatus, Requester,
    TemplateStatus,
    approval::{MAX_REASON_LENGTH, MAX_TICKET_LENGTH},
    rules::{
        DURATION_MAX_LENGTH, GO_DURATION_HINT, OBJECT_NAME_HINT, object_name_rule,
        request_duration_rule,
    },
};

access_template_spec! {
    kind = "ExecAccessTemplate",
    shortname = "exectpl",
    /// Which workload's pods may be exec'd into, by whom and for how long.
    pub struct ExecAccessTemplateSpec {
        /// Who may request access, for how long, and the access command they are shown.
        pub access_config: AccessConfig,

        /// oz only, on a fleet hub: the spoke clusters this template covers. A template that
        /// names clusters grants nothing on the hub: the hub keeps an equivalent of it on each
        /// covered spoke, and its requests name the spoke to grant on (`docs/fleet.md`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub clusters: Option<FleetClusters>,
        /// The Deployment, DaemonSet, StatefulSet or Rollout whose pods may be exec'd into.
        pub controller_target_ref: CrossVersionObjectReference,
    }
}

access_request_spec! {
    kind = "ExecAccessRequest",
    shortname = "execreq",
    /// A request for time-boxed `kubectl exec` into one pod of a template's workload.
    #[x_kube(validation = Rule::new("has(self.targetPod) == has(oldSelf.targetPod) && (!has(self.targetPod) || self.targetPod == oldSelf.targetPod)")
        .message("error - Spec.TargetPod is an immutable field, create a new ExecAccessRequest instead").field_path(".targetPod"))]
    pub struct ExecAccessRequestSpec {
        /// The ExecAccessTemplate, in this namespace, to request access through.
        #[schemars(length(min = 1, max = 253))]
        #[x_kube(validation = Rule::new(object_name_rule()).message(format!("spec.templateName must be {OBJECT_NAME_HINT}").as_str()))]
        pub template_name: String,

        /// A specific pod of the template's workload; a random running pod if unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 253))]
        #[x_kube(validation = Rule::new(object_name_rule()).message(format!("spec.targetPod must be {OBJECT_NAME_HINT}").as_str()))]
        pub target_pod: Option<String>,

        /// How long access should last, counted from creation: a Go duration such as `30m`. Unset,
        /// empty or `0` means the template's default; longer than its maximum is clamped to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = DURATION_MAX_LENGTH))]
        #[x_kube(validation = Rule::new(request_duration_rule()).message(format!("spec.duration must be {GO_DURATION_HINT}; empty or 0 means the template's default").as_str()))]
        pub duration: Option<String>,

        /// oz only: why access is needed, for approvers and the audit trail (at most 1024
        /// characters). Required when the template's approval says `reasonRequired`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = MAX_REASON_LENGTH))]
        pub reason: Option<String>,

        /// oz only: the ticket or incident this access is for (at most 256 characters).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = MAX_TICKET_LENGTH))]
        pub ticket: Option<String>,

        /// oz only: when access should start (RFC 3339), for planned work; at most the
        /// template's `maxLeadTime` ahead. Nothing is granted before it (an approval may come
        /// ahead), and the window counts from it. Unset: at once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub start_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,

        /// Who created the request, recorded by oz's admission webhook; not set by users.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub requester: Option<Requester>,

        /// oz only, on a fleet hub: the spoke cluster (a ClusterProfile of the hub's fleet
        /// namespace) to grant on. Required when the template names clusters, refused otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(min = 1, max = 253))]
        pub cluster: Option<Box<str>>,

        /// oz only, on a fleet spoke: what the hub attests about a request it decided; written
        /// by the hub's credential only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub forwarded: Option<Box<Forwarded>>,
    }
}
