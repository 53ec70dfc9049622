//! What the generic reconcilers need to know about each kind: templates share an AccessConfig
//! and a target; requests share a template name, a duration, a requester and a status.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use oz_api::{
    AccessConfig, CrossVersionObjectReference, ExecAccessRequest, ExecAccessTemplate,
    PodAccessRequest, PodAccessTemplate, RequestStatus, Requester, TemplateStatus,
};
use serde::{Serialize, de::DeserializeOwned};

/// The bounds every oz kind meets, so the reconcilers can watch, read and apply it.
pub trait OzResource:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
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
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

/// ExecAccessTemplate or PodAccessTemplate.
pub trait AccessTemplate: OzResource {
    /// Who may ask, for how long, and the access command.
    fn access_config(&self) -> &AccessConfig;
    /// The workload controller, if any (a PodAccessTemplate may give a podSpec instead).
    fn target_ref(&self) -> Option<&CrossVersionObjectReference>;
    /// The status, if written yet.
    fn template_status(&self) -> Option<&TemplateStatus>;
}

/// ExecAccessRequest or PodAccessRequest.
pub trait AccessRequest: OzResource {
    /// The template kind this request names.
    type Template: AccessTemplate;
    /// `spec.templateName`.
    fn template_name(&self) -> &str;
    /// `spec.duration`.
    fn duration(&self) -> Option<&str>;
    /// `spec.requester`, as recorded by the admission webhook.
    fn requester(&self) -> Option<&Requester>;
    /// The status, if written yet.
    fn request_status(&self) -> Option<&RequestStatus>;
}

impl AccessTemplate for ExecAccessTemplate {
    fn access_config(&self) -> &AccessConfig {
        &self.spec.access_config
    }
    fn target_ref(&self) -> Option<&CrossVersionObjectReference> {
        Some(&self.spec.controller_target_ref)
    }
    fn template_status(&self) -> Option<&TemplateStatus> {
        self.status.as_ref()
    }
}

impl AccessTemplate for PodAccessTemplate {
    fn access_config(&self) -> &AccessConfig {
        &self.spec.access_config
    }
    fn target_ref(&self) -> Option<&CrossVersionObjectReference> {
        self.spec.controller_target_ref.as_ref()
    }
    fn template_status(&self) -> Option<&TemplateStatus> {
        self.status.as_ref()
    }
}

impl AccessRequest for ExecAccessRequest {
    type Template = ExecAccessTemplate;
    fn template_name(&self) -> &str {
        &self.spec.template_name
    }
    fn duration(&self) -> Option<&str> {
        self.spec.duration.as_deref()
    }
    fn requester(&self) -> Option<&Requester> {
        self.spec.requester.as_ref()
    }
    fn request_status(&self) -> Option<&RequestStatus> {
        self.status.as_ref()
    }
}

impl AccessRequest for PodAccessRequest {
    type Template = PodAccessTemplate;
    fn template_name(&self) -> &str {
        &self.spec.template_name
    }
    fn duration(&self) -> Option<&str> {
        self.spec.duration.as_deref()
    }
    fn requester(&self) -> Option<&Requester> {
        self.spec.requester.as_ref()
    }
    fn request_status(&self) -> Option<&RequestStatus> {
        self.status.as_ref()
    }
}
