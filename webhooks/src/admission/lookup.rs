//! What the handlers read from the cluster, behind [`AccessLookup`] so handler tests can use
//! an in-memory fake, and [`KubeLookup`], which reads through the apiserver. oz-manager serves
//! them from memory with [`CachedLookup`](super::CachedLookup).

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Api, Client, ResourceExt, api::ListParams};
use oz_api::{
    AccessApproval, AccessConfig, AccessKind, AccessRequest, AccessTemplate, ExecAccessRequest,
    ExecAccessTemplate, ExtensionRecord, PodAccessRequest, PodAccessTemplate, RequestPhase,
    Requester,
    extension::extension_asks,
    grant_hint::{PodOwner, TemplateTarget},
};

/// A request of either kind in the compact form [`AccessLookup::requests`] answers with: what
/// the grant rule reads ([`oz_api::grant_rule`]), and no more, so the cache's answer for a
/// namespace is one small copy per request rather than whole objects.
pub use oz_api::GrantSummary;

/// A template as the handlers read it: who it admits and for how long, and, on a fleet spoke,
/// the hub whose copy it is. Read from the template whole (the cache keeps templates whole),
/// so knowing the hub costs nothing more to keep.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateSummary {
    /// `spec.accessConfig`.
    pub config: AccessConfig,
    /// The fleet hub that manages it ([`oz_api::fleet::managing_hub`]); `None` for the
    /// cluster's own templates.
    pub hub: Option<String>,
}

impl TemplateSummary {
    /// `template`, as the handlers read it.
    pub fn of<T: AccessTemplate>(template: &T) -> Self {
        Self {
            config: template.access_config().clone(),
            hub: oz_api::fleet::managing_hub(template.meta()).map(str::to_string),
        }
    }
}

/// A template of the cluster's own (managed by no hub) that admits as `config` says.
impl From<AccessConfig> for TemplateSummary {
    fn from(config: AccessConfig) -> Self {
        Self { config, hub: None }
    }
}

/// One request as the approval handlers read it: what a decision on it is checked against.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestState {
    /// Its kind.
    pub kind: AccessKind,
    /// Its name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `spec.templateName`.
    pub template: String,
    /// `spec.requester`.
    pub requester: Option<Requester>,
    /// `status.phase`.
    pub phase: Option<RequestPhase>,
    /// `status.approvedAt`.
    pub approved_at: Option<Time>,
    /// How many extension asks its annotation holds ([`oz_api::EXTEND_ANNOTATION`]).
    pub extension_asks: usize,
    /// `status.extensions`: where each ask stands, as oz last recorded it.
    pub extensions: Vec<ExtensionRecord>,
}

/// What the enforced webhook's denial reads to say what to do instead
/// ([`AccessLookup::denial_facts`], [`oz_api::grant_hint`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DenialFacts {
    /// The workload the pod belongs to, if known.
    pub owner: PodOwner,
    /// ExecAccessTemplates of the pod's namespace that target that workload (the others are
    /// never named: see [`oz_api::grant_hint`]).
    pub templates: Vec<TemplateTarget>,
    /// The requests Ready for the pod, whoever's and whatever their route: a Brokered one of
    /// the user's is used with `ozctl exec`, and the denial says so.
    pub ready: Vec<GrantSummary>,
}

impl Default for DenialFacts {
    /// Nothing known: the denial says where to look.
    fn default() -> Self {
        Self {
            owner: PodOwner::Unknown,
            templates: Vec::new(),
            ready: Vec::new(),
        }
    }
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

/// What a lookup answers, later: `T`, or why the cluster could not be read.
pub type Answer<'a, T> = BoxFuture<'a, Result<T, LookupError>>;

/// Reads templates and requests for the handlers.
pub trait AccessLookup: Send + Sync + 'static {
    /// `kind`'s template `name` in `namespace`, or `None` if there is no such template.
    fn template(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<TemplateSummary>>;

    /// The uid of `kind`'s template `name` in `namespace`, for the owner reference the mutating
    /// webhook gives a new request. The default, `None`: not known here, and the controller
    /// sets the owner reference itself.
    fn template_uid(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<String>> {
        let _ = (kind, namespace, name);
        Box::pin(async { Ok(None) })
    }

    /// Every ExecAccessRequest and PodAccessRequest in `namespace`.
    fn requests(&self, namespace: &str) -> Answer<'_, Vec<GrantSummary>>;

    /// The requests in `namespace` [Ready for](GrantSummary::ready_for) `pod`,
    /// which is all the audit reads on every exec. The default filters
    /// [`AccessLookup::requests`]; a cache answers without copying the rest of the namespace.
    fn may_grant(&self, namespace: &str, pod: &str) -> Answer<'_, Vec<GrantSummary>> {
        let (requests, pod) = (self.requests(namespace), pod.to_string());
        Box::pin(async move {
            let mut requests = requests.await?;
            requests.retain(|r| r.ready_for(&pod));
            Ok(requests)
        })
    }

    /// Every request `user` made, in every namespace served, with its namespace: what a per-user
    /// cap across templates counts. The default answers that this lookup cannot.
    fn requests_of(&self, user: &str) -> Answer<'_, Vec<(String, GrantSummary)>> {
        let _ = user;
        Box::pin(async { Err(LookupError("this lookup counts no one's requests".into())) })
    }

    /// `kind`'s request `name` in `namespace`, or `None` if there is no such request. The
    /// default answers that this lookup reads no single requests (a lookup that only serves
    /// the audit), so the approval handlers refuse rather than guess.
    fn request(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<RequestState>> {
        let _ = (kind, namespace, name);
        Box::pin(async { Err(LookupError(NO_APPROVAL_READS.into())) })
    }

    /// Every AccessApproval in `namespace`, as the apiserver has them now: "one decision per
    /// person" must see a decision made a moment ago, so no implementation answers this from
    /// a cache. The default: as for [`AccessLookup::request`].
    fn decisions(&self, namespace: &str) -> Answer<'_, Vec<AccessApproval>> {
        let _ = namespace;
        Box::pin(async { Err(LookupError(NO_APPROVAL_READS.into())) })
    }

    /// What a denial in `namespace` for `pod` reads to say what to do instead, from memory
    /// alone: a denial waits for no apiserver call of its own. The default, nothing known
    /// ([`DenialFacts::default`]): a lookup without a cache would have to ask.
    fn denial_facts(&self, namespace: &str, pod: &str) -> DenialFacts {
        let _ = (namespace, pod);
        DenialFacts::default()
    }

    /// For a lookup that answers from a cache, which can lag the apiserver: a lookup that reads
    /// the apiserver itself. [`find_grant`](super::audit::find_grant) asks it before concluding
    /// that a user has no grant, so a request that became Ready a moment ago still counts.
    /// `None` (the default): this lookup is as current as it gets.
    fn uncached(&self) -> Option<&dyn AccessLookup> {
        None
    }
}

const NO_APPROVAL_READS: &str = "this lookup reads no requests or approvals by name";

/// [`AccessLookup`] through the apiserver. Needs get/list on the four oz kinds and list on
/// AccessApprovals.
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
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<TemplateSummary>> {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        Box::pin(async move {
            match kind {
                AccessKind::Exec => {
                    self.template_summary::<ExecAccessTemplate>(&namespace, &name)
                        .await
                }
                AccessKind::Pod => {
                    self.template_summary::<PodAccessTemplate>(&namespace, &name)
                        .await
                }
            }
        })
    }

    fn requests(&self, namespace: &str) -> Answer<'_, Vec<GrantSummary>> {
        let namespace = namespace.to_string();
        Box::pin(async move {
            let mut requests = self.summaries::<ExecAccessRequest>(&namespace).await?;
            requests.extend(self.summaries::<PodAccessRequest>(&namespace).await?);
            Ok(requests)
        })
    }

    fn request(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<RequestState>> {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        Box::pin(async move {
            match kind {
                AccessKind::Exec => {
                    self.request_state::<ExecAccessRequest>(&namespace, &name)
                        .await
                }
                AccessKind::Pod => {
                    self.request_state::<PodAccessRequest>(&namespace, &name)
                        .await
                }
            }
        })
    }

    fn decisions(&self, namespace: &str) -> Answer<'_, Vec<AccessApproval>> {
        let api = Api::<AccessApproval>::namespaced(self.client.clone(), namespace);
        Box::pin(async move { Ok(api.list(&ListParams::default()).await?.items) })
    }
}

impl KubeLookup {
    /// Template `name`, if it exists.
    async fn template_summary<T: AccessTemplate>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<TemplateSummary>, LookupError> {
        let template = Api::<T>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await?;
        Ok(template.as_ref().map(TemplateSummary::of))
    }

    /// Request `name` of kind `R`, if it exists.
    async fn request_state<R: AccessRequest>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<RequestState>, LookupError> {
        let request = Api::<R>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await?;
        Ok(request.as_ref().map(RequestState::of))
    }

    /// Every request of kind `R` in `namespace`, reduced.
    async fn summaries<R: AccessRequest>(
        &self,
        namespace: &str,
    ) -> Result<Vec<GrantSummary>, LookupError> {
        let list = Api::<R>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default())
            .await?;
        Ok(list.items.iter().map(GrantSummary::of).collect())
    }
}

impl RequestState {
    /// `request`, as the approval handlers read it.
    pub fn of<R: AccessRequest>(request: &R) -> Self {
        let status = request.request_status();
        Self {
            kind: R::KIND,
            name: request.name_any(),
            uid: request.uid(),
            template: request.template_name().to_string(),
            requester: request.requester().cloned(),
            phase: status.and_then(|s| s.phase),
            approved_at: status.and_then(|s| s.approved_at.clone()),
            extension_asks: extension_asks(request.meta()).map_or(0, |asks| asks.len()),
            extensions: status.map(|s| s.extensions.clone()).unwrap_or_default(),
        }
    }
}
