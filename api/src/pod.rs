//! PodAccessTemplate and PodAccessRequest: a private, mutated copy of a workload's pod (or a pod
//! from a given spec) to debug in.

use k8s_openapi::{api::core::v1::PodSpec, apimachinery::pkg::api::resource::Quantity};

use crate::{
    AccessConfig, CrossVersionObjectReference, FleetClusters, Forwarded,
    PodTemplateSpecMutationConfig, RequestStatus, Requester, TemplateStatus,
    approval::{MAX_REASON_LENGTH, MAX_TICKET_LENGTH},
    rules::{OBJECT_NAME_HINT, OZ_POD_REQUEST_DURATION_PATTERN, object_name_rule},
};

access_template_spec! {
    kind = "PodAccessTemplate",
    shortname = "podtpl",
    /// How access pods are built, who may request them and for how long.
    #[x_kube(validation = Rule::new("has(self.controllerTargetRef) != has(self.podSpec)")
        .message("spec needs exactly one of controllerTargetRef (copy a workload's pod) and podSpec (build the pod from this spec)"))]
    pub struct PodAccessTemplateSpec {
        /// Who may request access, for how long, and the access command they are shown.
        pub access_config: AccessConfig,

        /// oz only, on a fleet hub: the spoke clusters this template covers. A template that
        /// names clusters grants nothing on the hub: the hub keeps an equivalent of it on each
        /// covered spoke, and its requests name the spoke to grant on (`docs/fleet.md`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub clusters: Option<FleetClusters>,

        /// The Deployment, DaemonSet, StatefulSet or Rollout whose pod template is copied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub controller_target_ref: Option<CrossVersionObjectReference>,

        /// Changes made to the copied pod template before the access pod is created.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub controller_target_mutation_config: Option<PodTemplateSpecMutationConfig>,

        /// The access pod's spec, instead of copying a workload's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub pod_spec: Option<PodSpec>,

        /// The most CPU the access pod's containers may request or be limited to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_cpu: Option<Quantity>,

        /// The most memory the access pod's containers may request or be limited to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_memory: Option<Quantity>,

        /// The most ephemeral storage the access pod's containers may request or be limited to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_storage: Option<Quantity>,
    }
}

access_request_spec! {
    kind = "PodAccessRequest",
    shortname = "podreq",
    /// A request for a time-boxed private access pod built from a PodAccessTemplate.
    pub struct PodAccessRequestSpec {
        /// The PodAccessTemplate, in this namespace, to request access through.
        #[schemars(length(min = 1, max = 253))]
        #[x_kube(validation = Rule::new(object_name_rule()).message(format!("spec.templateName must be {OBJECT_NAME_HINT}").as_str()))]
        pub template_name: String,

        /// How long access should last, counted from creation: whole seconds, minutes or hours
        /// (`90m`, `2h`), as Oz accepts. Unset means the template's default; longer than its
        /// maximum is clamped to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(regex(pattern = OZ_POD_REQUEST_DURATION_PATTERN))]
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
