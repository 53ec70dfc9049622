//! The control plane the benchmark runs against, and what it creates there: oz's CRDs, RBAC that
//! lets group devs create requests, and namespaces with a Deployment (with ready pods, since no
//! kubelet runs) and an ExecAccessTemplate for devs.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use k8s_openapi::api::{
    core::v1::Namespace,
    rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
};
use oz_api::{ExecAccessRequest, ExecAccessRequestSpec, ExecAccessTemplate, Requester};
use oz_testenv::workloads::{self, Workload, WorkloadSpec};
use serde_json::json;

use crate::Result;

/// The field manager of what the benchmark applies.
pub const FIELD_MANAGER: &str = "oz-bench";

/// The label every request the benchmark creates carries, naming the phase that created it.
pub const PHASE_LABEL: &str = "oz-bench/phase";

/// The users of the control plane the benchmark uses: alice (group devs) asks for access.
pub const REQUESTER: &str = "alice";

/// alice as the apiserver authenticates her (her client certificate's CN and O).
pub fn alice() -> Requester {
    Requester {
        username: REQUESTER.into(),
        uid: None,
        groups: vec!["devs".into(), "system:authenticated".into()],
    }
}

/// Applies oz's CRDs and waits until the apiserver serves them.
pub async fn install_crds(admin: &Client) -> Result<()> {
    oz_testenv::apply_crds(admin, &oz_api::all_crds(), FIELD_MANAGER).await?;
    Ok(())
}

/// Lets group devs create and read ExecAccessRequests in every namespace, as an install would
/// for its users. Exec itself is only what oz grants.
pub async fn let_devs_request(admin: &Client) -> Result<()> {
    let name = "oz-bench-requesters";
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![oz_api::GROUP.into()]),
                    resources: Some(vec!["execaccessrequests".into()]),
                    verbs: ["create", "get", "list", "watch"]
                        .map(String::from)
                        .to_vec(),
                    ..Default::default()
                }]),
                ..Default::default()
            },
        )
        .await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    bindings
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: name.into(),
                },
                subjects: Some(vec![Subject {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Group".into(),
                    name: "devs".into(),
                    ..Default::default()
                }]),
            },
        )
        .await?;
    Ok(())
}

/// Creates a namespace with a fixed name.
pub async fn create_namespace(admin: &Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    labels: Some(BTreeMap::from([(
                        "oz-bench/owner".to_string(),
                        "oz-bench".to_string(),
                    )])),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    Ok(())
}

/// Deployment `name` with `replicas` ready pods, and ExecAccessTemplate `name` for it: group
/// devs, default 1h, max 2h.
pub async fn workload_with_template(
    admin: &Client,
    namespace: &str,
    name: &str,
    replicas: usize,
) -> Result<Workload> {
    let workload =
        workloads::deployment(admin, namespace, WorkloadSpec::new(name, replicas)).await?;
    template(admin, namespace, name).await?;
    Ok(workload)
}

/// ExecAccessTemplate `name` for Deployment `name`: group devs, default 1h, max 2h.
pub async fn template(admin: &Client, namespace: &str, name: &str) -> Result<()> {
    let template: ExecAccessTemplate = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessTemplate",
        "metadata": {"name": name},
        "spec": {
            "accessConfig": {"allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h"},
            "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        },
    }))?;
    Api::<ExecAccessTemplate>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &template)
        .await?;
    Ok(())
}

/// What a benchmark request asks for.
#[derive(Clone, Debug)]
pub struct RequestSpec<'a> {
    pub name: String,
    pub template: &'a str,
    pub duration: Option<String>,
    pub target_pod: Option<String>,
    pub phase: &'static str,
}

impl RequestSpec<'_> {
    /// The request alice creates. `spec.requester` is filled in as the mutating webhook would
    /// write it, which matters only when the webhooks are off (they overwrite it otherwise).
    pub fn object(&self) -> ExecAccessRequest {
        let mut request = ExecAccessRequest::new(
            &self.name,
            ExecAccessRequestSpec {
                cluster: None,
                forwarded: None,
                reason: None,
                ticket: None,
                template_name: self.template.into(),
                target_pod: self.target_pod.clone(),
                duration: self.duration.clone(),
                requester: Some(alice()),
                start_at: None,
            },
        );
        request.metadata.labels = Some(BTreeMap::from([(
            PHASE_LABEL.to_string(),
            self.phase.to_string(),
        )]));
        request
    }
}

/// Creates the request as `client` (alice, through the webhooks when they are on).
pub async fn create_request(
    client: &Client,
    namespace: &str,
    spec: &RequestSpec<'_>,
) -> Result<()> {
    Api::<ExecAccessRequest>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &spec.object())
        .await?;
    Ok(())
}

/// How long [`clear_requests`] waits: the garbage collector deletes 2,000 Roles and
/// RoleBindings after a burst of 1,000.
const CLEAR_TIMEOUT: Duration = Duration::from_secs(180);

/// Deletes the requests in `namespace` that `labels` selects and waits, up to [`CLEAR_TIMEOUT`], until
/// they and their grants (oz's RoleBindings and Roles, which the garbage collector deletes with
/// them) are gone, so that what one measurement created is not counted by the next: a burst's
/// grants by the next burst, a part's by the scale points' memory per grant.
pub async fn clear_requests(admin: &Client, namespace: &str, labels: &str) -> Result<()> {
    let timeout = CLEAR_TIMEOUT;
    let requests = Api::<ExecAccessRequest>::namespaced(admin.clone(), namespace);
    let selected = ListParams::default().labels(labels);
    let names: BTreeSet<String> = requests
        .list_metadata(&selected)
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    requests
        .delete_collection(&DeleteParams::background(), &selected)
        .await?;
    let roles = Api::<Role>::namespaced(admin.clone(), namespace);
    let bindings = Api::<RoleBinding>::namespaced(admin.clone(), namespace);
    let owned = ListParams::default().labels(GRANT_LABEL_SELECTOR);
    let granting = |labels: &BTreeMap<String, String>| {
        labels
            .get(GRANT_REQUEST_LABEL)
            .is_some_and(|request| names.contains(request))
    };
    let gone = crate::poll(timeout, || async {
        let left = requests.list_metadata(&selected).await.ok()?.items.len()
            + (roles.list_metadata(&owned).await.ok()?.items.iter())
                .filter(|role| granting(role.labels()))
                .count()
            + (bindings.list_metadata(&owned).await.ok()?.items.iter())
                .filter(|binding| granting(binding.labels()))
                .count();
        (left == 0).then_some(())
    })
    .await;
    gone.ok_or_else(|| {
        format!(
            "the {} requests deleted in {namespace} ({labels}), or their grants, were still there after {timeout:?}",
            names.len()
        )
        .into()
    })
}

/// oz's label on every object it creates (src/builders/grant.rs, `MANAGED_BY`).
pub const GRANT_LABEL_SELECTOR: &str = "app.kubernetes.io/managed-by=oz";
/// oz's label naming the request a Role or RoleBinding grants (`REQUEST_LABEL` there).
pub const GRANT_REQUEST_LABEL: &str = "oz.wizardofoz.co/request";

/// Who the apiserver's admission makes the requester of a dry-run create by `client` in
/// `namespace` that names [`FORGED_REQUESTER`]: alice while oz's mutating webhook is called,
/// the forged name once it is not. `None` if the create failed.
pub async fn dry_run_requester(client: &Client, namespace: &str, template: &str) -> Option<String> {
    let mut probe = RequestSpec {
        name: "probe".into(),
        template,
        duration: None,
        target_pod: None,
        phase: "probe",
    }
    .object();
    probe.spec.requester.as_mut()?.username = FORGED_REQUESTER.into();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let created = Api::<ExecAccessRequest>::namespaced(client.clone(), namespace)
        .create(&dry_run, &probe)
        .await
        .ok()?;
    Some(created.spec.requester?.username)
}

/// The requester a dry-run probe claims to be, which oz's webhook overwrites.
pub const FORGED_REQUESTER: &str = "someone-else";
