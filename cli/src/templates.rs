//! Templates of either kind, as ozctl shows them: what they grant access to, for how long, to
//! whom, and on a fleet hub, on which spoke clusters.

use kube::{Api, ResourceExt, api::ListParams};
use oz_api::{
    AccessConfig, AccessKind, AccessTemplate, ClusterSync, ExecAccessTemplate, FleetClusters,
    PodAccessTemplate, conditions::failing,
};

use super::{error::CliError, output::object_json, session::Session};

/// What ozctl shows of a template of either kind.
#[derive(Clone, Debug)]
pub struct TemplateView {
    pub kind: AccessKind,
    pub name: String,
    pub namespace: String,
    /// `Deployment/web`, or `podSpec` for a PodAccessTemplate that gives its own pod spec.
    pub target: String,
    /// `spec.accessConfig`: its durations, and who may ask ([`AccessConfig::admits`]).
    pub access: AccessConfig,
    /// `status.ready`: its target exists and its durations are valid.
    pub ready: bool,
    /// Why it is not ready, if it is not: the first condition that is not True.
    pub not_ready_because: Option<String>,
    /// `spec.clusters`: set on a fleet hub's template, which grants on the spoke clusters it
    /// covers (its requests name one in `spec.cluster`), never where it is.
    pub clusters: Option<FleetClusters>,
    /// `status.clusters`: the spoke clusters a fleet template covers, as the hub last listed
    /// them, and whether each holds the template.
    pub cluster_sync: Vec<ClusterSync>,
    /// The whole object, for `-o json|yaml`.
    pub object: serde_json::Value,
}

impl TemplateView {
    /// The view of a typed template.
    pub fn of<T: AccessTemplate>(template: &T) -> TemplateView {
        let target = template
            .target_ref()
            .map_or_else(|| "podSpec".into(), |t| format!("{:?}/{}", t.kind, t.name));
        let status = template.template_status();
        TemplateView {
            kind: T::KIND,
            name: template.name_any(),
            namespace: template.namespace().unwrap_or_default(),
            target,
            access: template.access_config().clone(),
            ready: status.is_some_and(|s| s.ready),
            not_ready_because: match status {
                None => Some("oz has not looked at it yet".into()),
                Some(s) if s.ready => None,
                Some(s) => Some(failing(&s.conditions).next().map_or_else(
                    || "not ready".into(),
                    |c| format!("{}: {}", c.type_(), c.message),
                )),
            },
            clusters: template.clusters().cloned(),
            cluster_sync: status.map(|s| s.clusters.clone()).unwrap_or_default(),
            object: object_json(template),
        }
    }

    /// Whether it is a fleet hub's template, whose requests must name a spoke cluster.
    pub fn is_fleet(&self) -> bool {
        self.clusters.is_some()
    }

    /// The names of the spoke clusters it covers, as `status.clusters` lists them.
    pub fn covered_clusters(&self) -> Vec<&str> {
        self.cluster_sync.iter().map(|c| c.name.as_str()).collect()
    }

    /// Where a fleet template is, in a line: the clusters it covers, each not synced there
    /// with the hub's message (`east, west (not synced: ...)`), or `none yet`. `None` for a
    /// template that is not a fleet template.
    pub fn clusters_summary(&self) -> Option<String> {
        if !self.is_fleet() {
            return None;
        }
        if self.cluster_sync.is_empty() {
            return Some("none yet".into());
        }
        let each = self
            .cluster_sync
            .iter()
            .map(|c| match (c.synced, &c.message) {
                (true, _) => c.name.clone(),
                (false, Some(message)) => format!("{} (not synced: {message})", c.name),
                (false, None) => format!("{} (not synced)", c.name),
            });
        Some(each.collect::<Vec<_>>().join(", "))
    }
}

/// Template `name` of `kind`, if it exists.
pub async fn get(
    session: &Session,
    kind: AccessKind,
    name: &str,
) -> Result<Option<TemplateView>, CliError> {
    match kind {
        AccessKind::Exec => get_typed::<ExecAccessTemplate>(session, name).await,
        AccessKind::Pod => get_typed::<PodAccessTemplate>(session, name).await,
    }
}

async fn get_typed<T: AccessTemplate>(
    session: &Session,
    name: &str,
) -> Result<Option<TemplateView>, CliError> {
    let api: Api<T> = session.api();
    let found = api.get_opt(name).await.map_err(|e| session.error(e))?;
    Ok(found.map(|t| TemplateView::of(&t)))
}

/// Every template of these kinds in the session's namespace, by name.
pub async fn list(session: &Session, kinds: &[AccessKind]) -> Result<Vec<TemplateView>, CliError> {
    list_in(session, kinds, false).await
}

/// Every template of these kinds in the session's namespace, or in every namespace, by
/// namespace and name.
pub async fn list_in(
    session: &Session,
    kinds: &[AccessKind],
    all_namespaces: bool,
) -> Result<Vec<TemplateView>, CliError> {
    let mut views = Vec::new();
    for &kind in kinds {
        let mut listed = match kind {
            AccessKind::Exec => list_typed::<ExecAccessTemplate>(session, all_namespaces).await?,
            AccessKind::Pod => list_typed::<PodAccessTemplate>(session, all_namespaces).await?,
        };
        views.append(&mut listed);
    }
    views.sort_by(|a, b| (&a.namespace, &a.name, a.kind).cmp(&(&b.namespace, &b.name, b.kind)));
    Ok(views)
}

async fn list_typed<T: AccessTemplate>(
    session: &Session,
    all_namespaces: bool,
) -> Result<Vec<TemplateView>, CliError> {
    let api: Api<T> = if all_namespaces {
        Api::all(session.client.clone())
    } else {
        session.api()
    };
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items.iter().map(TemplateView::of).collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(CliError::NotInstalled {
            kind: T::KIND.template_kind(),
        }),
        Err(e) => Err(session.error(e)),
    }
}
