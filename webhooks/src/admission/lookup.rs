//! What the handlers read from the cluster, behind [`AccessLookup`] so handler tests can use
//! an in-memory fake, and [`KubeLookup`], which reads through the apiserver. oz-manager serves
//! them from memory with [`CachedLookup`](super::CachedLookup).

use futures::future::BoxFuture;
use kube::{
    Api, Client,
    api::ListParams,
    core::{GroupVersionKind, ResourceExt},
};
use oz_api::{
    AccessConfig, ExecAccessRequest, ExecAccessTemplate, PodAccessRequest, PodAccessTemplate,
    RequestPhase, RequestStatus, Requester,
};

/// The two request kinds, each with its template kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestKind {
    /// ExecAccessRequest, through an ExecAccessTemplate.
    Exec,
    /// PodAccessRequest, through a PodAccessTemplate.
    Pod,
}

impl RequestKind {
    /// The request kind of an admission request's `kind`, if it is one of ours.
    pub fn of(gvk: &GroupVersionKind) -> Option<Self> {
        if gvk.group != oz_api::GROUP {
            return None;
        }
        match gvk.kind.as_str() {
            "ExecAccessRequest" => Some(Self::Exec),
            "PodAccessRequest" => Some(Self::Pod),
            _ => None,
        }
    }

    /// `ExecAccessRequest` or `PodAccessRequest`.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Exec => "ExecAccessRequest",
            Self::Pod => "PodAccessRequest",
        }
    }

    /// `ExecAccessTemplate` or `PodAccessTemplate`.
    pub fn template_kind(self) -> &'static str {
        match self {
            Self::Exec => "ExecAccessTemplate",
            Self::Pod => "PodAccessTemplate",
        }
    }
}

/// A request, reduced to what grant matching needs.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestSummary {
    /// Its kind.
    pub kind: RequestKind,
    /// Its name.
    pub name: String,
    /// `spec.templateName`.
    pub template: String,
    /// `spec.requester`.
    pub requester: Option<Requester>,
    /// `status.phase`.
    pub phase: Option<RequestPhase>,
    /// `status.podName`.
    pub pod_name: Option<String>,
}

/// A read from the cluster failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LookupError(pub String);

impl From<kube::Error> for LookupError {
    fn from(e: kube::Error) -> Self {
        Self(e.to_string())
    }
}

/// Reads templates and requests for the handlers.
pub trait AccessLookup: Send + Sync + 'static {
    /// The `spec.accessConfig` of `kind`'s template `name` in `namespace`, or `None` if there
    /// is no such template.
    fn template(
        &self,
        kind: RequestKind,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<AccessConfig>, LookupError>>;

    /// Every ExecAccessRequest and PodAccessRequest in `namespace`.
    fn requests(&self, namespace: &str) -> BoxFuture<'_, Result<Vec<RequestSummary>, LookupError>>;

    /// For a lookup that answers from a cache, which can lag the apiserver: a lookup that reads
    /// the apiserver itself. [`find_grant`](super::audit::find_grant) asks it before concluding
    /// that a user has no grant, so a request that became Ready a moment ago still counts.
    /// `None` (the default): this lookup is as current as it gets.
    fn uncached(&self) -> Option<&dyn AccessLookup> {
        None
    }
}

/// [`AccessLookup`] through the apiserver. Needs get/list on the four oz kinds.
#[derive(Clone)]
pub struct KubeLookup {
    client: Client,
}

impl KubeLookup {
    /// Reads with `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl AccessLookup for KubeLookup {
    fn template(
        &self,
        kind: RequestKind,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<AccessConfig>, LookupError>> {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        Box::pin(async move {
            Ok(match kind {
                RequestKind::Exec => {
                    Api::<ExecAccessTemplate>::namespaced(self.client.clone(), &namespace)
                        .get_opt(&name)
                        .await?
                        .map(|t| t.spec.access_config)
                }
                RequestKind::Pod => {
                    Api::<PodAccessTemplate>::namespaced(self.client.clone(), &namespace)
                        .get_opt(&name)
                        .await?
                        .map(|t| t.spec.access_config)
                }
            })
        })
    }

    fn requests(&self, namespace: &str) -> BoxFuture<'_, Result<Vec<RequestSummary>, LookupError>> {
        let namespace = namespace.to_string();
        Box::pin(async move {
            let params = ListParams::default();
            let exec = Api::<ExecAccessRequest>::namespaced(self.client.clone(), &namespace)
                .list(&params)
                .await?;
            let pod = Api::<PodAccessRequest>::namespaced(self.client.clone(), &namespace)
                .list(&params)
                .await?;
            let exec = exec.items.iter().map(RequestSummary::of_exec);
            let pod = pod.items.iter().map(RequestSummary::of_pod);
            Ok(exec.chain(pod).collect())
        })
    }
}

impl RequestSummary {
    /// An ExecAccessRequest, reduced.
    pub fn of_exec(request: &ExecAccessRequest) -> Self {
        Self::of(
            RequestKind::Exec,
            request.name_any(),
            &request.spec.template_name,
            request.spec.requester.as_ref(),
            request.status.as_ref(),
        )
    }

    /// A PodAccessRequest, reduced.
    pub fn of_pod(request: &PodAccessRequest) -> Self {
        Self::of(
            RequestKind::Pod,
            request.name_any(),
            &request.spec.template_name,
            request.spec.requester.as_ref(),
            request.status.as_ref(),
        )
    }

    fn of(
        kind: RequestKind,
        name: String,
        template: &str,
        requester: Option<&Requester>,
        status: Option<&RequestStatus>,
    ) -> Self {
        Self {
            kind,
            name,
            template: template.to_string(),
            requester: requester.cloned(),
            phase: status.and_then(|s| s.phase),
            pod_name: status.and_then(|s| s.pod_name.clone()),
        }
    }
}
