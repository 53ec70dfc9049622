//! The vocabulary of oz's two access kinds, declared once and used by the controllers, the
//! webhooks and the CLI alike: [`AccessKind`] names a kind, [`AccessTemplate`] and
//! [`AccessRequest`] are what every template and request offers, whatever its kind.

use std::{fmt, str::FromStr};

use k8s_openapi::{NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{Resource, core::GroupVersionKind};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    AccessConfig, CrossVersionObjectReference, ExecAccessRequest, ExecAccessRequestSpec,
    ExecAccessTemplate, FleetClusters, Forwarded, PodAccessRequest, PodAccessRequestSpec,
    PodAccessTemplate, RequestStatus, Requester, TemplateStatus,
};

/// Exec access (into a live pod of a workload) or pod access (a private copy of its pod): each
/// is a template kind and a request kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessKind {
    /// ExecAccessTemplate and ExecAccessRequest.
    Exec,
    /// PodAccessTemplate and PodAccessRequest.
    Pod,
}

impl AccessKind {
    /// Both kinds, exec first.
    pub const ALL: [AccessKind; 2] = [AccessKind::Exec, AccessKind::Pod];

    /// `exec` or `pod`: how flags and commands spell it (`--controllers exec`, `ozctl get pod`).
    pub fn word(self) -> &'static str {
        match self {
            AccessKind::Exec => "exec",
            AccessKind::Pod => "pod",
        }
    }

    /// `ExecAccessRequest` or `PodAccessRequest`.
    pub fn request_kind(self) -> &'static str {
        match self {
            AccessKind::Exec => "ExecAccessRequest",
            AccessKind::Pod => "PodAccessRequest",
        }
    }

    /// `ExecAccessTemplate` or `PodAccessTemplate`.
    pub fn template_kind(self) -> &'static str {
        match self {
            AccessKind::Exec => "ExecAccessTemplate",
            AccessKind::Pod => "PodAccessTemplate",
        }
    }

    /// `execaccessrequests` or `podaccessrequests`: the resource, as RBAC rules name it.
    pub fn request_plural(self) -> &'static str {
        match self {
            AccessKind::Exec => "execaccessrequests",
            AccessKind::Pod => "podaccessrequests",
        }
    }

    /// `execaccesstemplates` or `podaccesstemplates`.
    pub fn template_plural(self) -> &'static str {
        match self {
            AccessKind::Exec => "execaccesstemplates",
            AccessKind::Pod => "podaccesstemplates",
        }
    }

    /// The kind of an object whose group/version/kind names one of oz's request kinds.
    pub fn of_request(gvk: &GroupVersionKind) -> Option<Self> {
        if gvk.group != crate::GROUP {
            return None;
        }
        Self::ALL
            .into_iter()
            .find(|kind| kind.request_kind() == gvk.kind)
    }
}

impl fmt::Display for AccessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// A word that is neither `exec` nor `pod`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown access kind {0:?}: want exec or pod")]
pub struct UnknownAccessKind(pub String);

impl FromStr for AccessKind {
    type Err = UnknownAccessKind;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.word() == word)
            .ok_or_else(|| UnknownAccessKind(word.to_string()))
    }
}

/// The bounds every oz kind meets, so the reconcilers can watch, read and apply it.
pub trait OzResource:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<K> OzResource for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

/// ExecAccessTemplate or PodAccessTemplate.
pub trait AccessTemplate: OzResource {
    /// Which of the two kinds this is.
    const KIND: AccessKind;
    /// Who may ask, for how long, and the access command.
    fn access_config(&self) -> &AccessConfig;
    /// The workload controller, if any (a PodAccessTemplate may give a podSpec instead).
    fn target_ref(&self) -> Option<&CrossVersionObjectReference>;
    /// The status, if written yet.
    fn template_status(&self) -> Option<&TemplateStatus>;
    /// `spec.clusters`: on a fleet hub, the spokes this template covers.
    fn clusters(&self) -> Option<&FleetClusters>;
}

/// ExecAccessRequest or PodAccessRequest.
pub trait AccessRequest: OzResource {
    /// Which of the two kinds this is.
    const KIND: AccessKind;
    /// The template kind this request names.
    type Template: AccessTemplate;
    /// What `spec` holds.
    type Spec: DeserializeOwned;
    /// The request made of its parts, as a watch parses them ([`crate::WatchedRequest`]).
    fn from_parts(metadata: ObjectMeta, spec: Self::Spec, status: Option<RequestStatus>) -> Self;
    /// `spec.templateName`.
    fn template_name(&self) -> &str;
    /// `spec.duration`.
    fn duration(&self) -> Option<&str>;
    /// `spec.requester`, as recorded by the admission webhook.
    fn requester(&self) -> Option<&Requester>;
    /// `spec.reason`.
    fn reason(&self) -> Option<&str>;
    /// `spec.ticket`.
    fn ticket(&self) -> Option<&str>;
    /// `spec.startAt`: when access should start, if it is scheduled.
    fn start_at(&self) -> Option<k8s_openapi::jiff::Timestamp>;
    /// `spec.cluster`: on a fleet hub, the spoke to grant on.
    fn cluster(&self) -> Option<&str>;
    /// `spec.forwarded`: on a fleet spoke, what the hub attests.
    fn forwarded(&self) -> Option<&Forwarded>;
    /// The status, if written yet.
    fn request_status(&self) -> Option<&RequestStatus>;
    /// The status, to change in place (as a cache trims what it does not read).
    fn request_status_mut(&mut self) -> Option<&mut RequestStatus>;
}

impl AccessTemplate for ExecAccessTemplate {
    const KIND: AccessKind = AccessKind::Exec;
    fn access_config(&self) -> &AccessConfig {
        &self.spec.access_config
    }
    fn target_ref(&self) -> Option<&CrossVersionObjectReference> {
        Some(&self.spec.controller_target_ref)
    }
    fn template_status(&self) -> Option<&TemplateStatus> {
        self.status.as_ref()
    }
    fn clusters(&self) -> Option<&FleetClusters> {
        self.spec.clusters.as_ref()
    }
}

impl AccessTemplate for PodAccessTemplate {
    const KIND: AccessKind = AccessKind::Pod;
    fn access_config(&self) -> &AccessConfig {
        &self.spec.access_config
    }
    fn target_ref(&self) -> Option<&CrossVersionObjectReference> {
        self.spec.controller_target_ref.as_ref()
    }
    fn template_status(&self) -> Option<&TemplateStatus> {
        self.status.as_ref()
    }
    fn clusters(&self) -> Option<&FleetClusters> {
        self.spec.clusters.as_ref()
    }
}

/// Both request kinds keep these fields under the same names, so one implementation serves both.
macro_rules! impl_access_request {
    ($request:ident, $spec:ty, $kind:expr, $template:ty) => {
        impl AccessRequest for $request {
            const KIND: AccessKind = $kind;
            type Template = $template;
            type Spec = $spec;
            fn from_parts(
                metadata: ObjectMeta,
                spec: $spec,
                status: Option<RequestStatus>,
            ) -> Self {
                $request {
                    metadata,
                    spec,
                    status,
                }
            }
            fn template_name(&self) -> &str {
                &self.spec.template_name
            }
            fn duration(&self) -> Option<&str> {
                self.spec.duration.as_deref()
            }
            fn requester(&self) -> Option<&Requester> {
                self.spec.requester.as_ref()
            }
            fn reason(&self) -> Option<&str> {
                self.spec.reason.as_deref()
            }
            fn ticket(&self) -> Option<&str> {
                self.spec.ticket.as_deref()
            }
            fn start_at(&self) -> Option<k8s_openapi::jiff::Timestamp> {
                self.spec.start_at.as_ref().map(|t| t.0)
            }
            fn cluster(&self) -> Option<&str> {
                self.spec.cluster.as_deref()
            }
            fn forwarded(&self) -> Option<&Forwarded> {
                self.spec.forwarded.as_deref()
            }
            fn request_status(&self) -> Option<&RequestStatus> {
                self.status.as_ref()
            }
            fn request_status_mut(&mut self) -> Option<&mut RequestStatus> {
                self.status.as_mut()
            }
        }
    };
}

impl_access_request!(
    ExecAccessRequest,
    ExecAccessRequestSpec,
    AccessKind::Exec,
    ExecAccessTemplate
);
impl_access_request!(
    PodAccessRequest,
    PodAccessRequestSpec,
    AccessKind::Pod,
    PodAccessTemplate
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_names_and_reads_back_from_its_word() {
        for kind in AccessKind::ALL {
            assert_eq!(kind.word().parse::<AccessKind>(), Ok(kind));
            assert!(kind.request_kind().ends_with("AccessRequest"));
            assert!(kind.template_kind().ends_with("AccessTemplate"));
            assert_eq!(
                kind.request_plural(),
                kind.request_kind().to_lowercase() + "s"
            );
            assert_eq!(
                kind.template_plural(),
                kind.template_kind().to_lowercase() + "s"
            );
        }
        assert_eq!(AccessKind::Pod.request_kind(), "PodAccessRequest");
        assert_eq!(
            "debug".parse::<AccessKind>().unwrap_err().to_string(),
            "unknown access kind \"debug\": want exec or pod"
        );
    }

    #[test]
    fn only_our_group_and_request_kinds_are_recognised() {
        let gvk = |group: &str, kind: &str| GroupVersionKind::gvk(group, crate::VERSION, kind);
        assert_eq!(
            AccessKind::of_request(&gvk(crate::GROUP, "ExecAccessRequest")),
            Some(AccessKind::Exec)
        );
        assert_eq!(
            AccessKind::of_request(&gvk(crate::GROUP, "PodAccessRequest")),
            Some(AccessKind::Pod)
        );
        assert_eq!(
            AccessKind::of_request(&gvk(crate::GROUP, "PodAccessTemplate")),
            None
        );
        assert_eq!(
            AccessKind::of_request(&gvk("example.com", "ExecAccessRequest")),
            None
        );
    }

    #[test]
    fn the_traits_know_their_kind() {
        assert_eq!(<ExecAccessRequest as AccessRequest>::KIND, AccessKind::Exec);
        assert_eq!(<PodAccessTemplate as AccessTemplate>::KIND, AccessKind::Pod);
    }

    fn read_through_the_trait<R: AccessRequest>(mut request: R) {
        assert_eq!(request.template_name(), "web");
        assert_eq!(request.duration(), Some("5m"));
        assert_eq!(
            request.requester().map(|r| r.username.as_str()),
            Some("alice")
        );
        assert_eq!(
            request.request_status().and_then(|s| s.pod_name.as_deref()),
            Some("web-0")
        );
        request.request_status_mut().unwrap().pod_name = None;
        assert_eq!(request.request_status().unwrap().pod_name, None);
    }

    #[test]
    fn both_request_kinds_answer_from_their_own_fields() {
        let spec = serde_json::json!({
            "templateName": "web",
            "duration": "5m",
            "requester": {"username": "alice", "groups": ["devs"]},
        });
        let status = RequestStatus {
            pod_name: Some("web-0".into()),
            ..RequestStatus::default()
        };
        let mut exec = ExecAccessRequest::new("r", serde_json::from_value(spec.clone()).unwrap());
        exec.status = Some(status.clone());
        read_through_the_trait(exec);
        let mut pod = PodAccessRequest::new("r", serde_json::from_value(spec).unwrap());
        pod.status = Some(status);
        read_through_the_trait(pod);
    }
}
