//! Moving from Oz: grants exactly as Oz leaves them (`fixtures/oz/`: no requester, Oz's status,
//! Role and RoleBinding under Oz's names, controlled by the request) are created by admin with
//! no oz webhook in the path, before oz-manager starts. oz adopts them without a gap in access
//! or a duplicate, ends them at Oz's end, and adopts nothing less.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::{
    api::{
        core::v1::Pod,
        rbac::v1::{Role, RoleBinding},
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ListParams, Patch, PatchParams},
    runtime::watcher,
};
use oz_api::{AccessRequest, ExecAccessRequest, PodAccessRequest, RequestPhase};
use oz_testenv::{
    pods::wait_ready,
    workloads::{self, WorkloadSpec},
};
use serde::de::DeserializeOwned;

use crate::support::{
    cluster::{env, install_crds},
    manifests::create_manifest,
    operator::Operator,
    polling::eventually,
    users::can,
};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/integration/fixtures/oz");

/// How long oz may take to settle on a loaded machine; never a bound on oz's timing.
const SETTLE: Duration = Duration::from_secs(60);

/// The fixture `file` with its placeholders filled in.
fn fixture(file: &str, vars: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
    for (key, value) in vars {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    text
}

/// What Oz left: a request, its grant's name `<request>-<uid8>`, and its creation time.
struct OzGrant {
    request: String,
    grant: String,
    created: Timestamp,
}

/// Creates request `name` as Oz leaves it, with `duration`, and `objects` (fixture suffixes:
/// `request-status.yaml` is Oz's status, written to the status subresource; `role.yaml`,
/// `rolebinding.yaml`, `pod.yaml` the grant's objects, controlled by the request).
async fn oz_left(
    admin: &Client,
    ns: &str,
    kind: &str,
    name: &str,
    duration: &str,
    pod: &str,
    objects: &[&str],
) -> OzGrant {
    let template_kind = if kind == "exec" {
        "ExecAccessTemplate"
    } else {
        "PodAccessTemplate"
    };
    let template = format!("web-{kind}");
    let template_uid = dynamic_uid(admin, ns, template_kind, &template).await;
    let base = [
        ("REQUEST", name),
        ("TEMPLATE_UID", template_uid.as_str()),
        ("DURATION", duration),
        ("NAMESPACE", ns),
        ("POD", pod),
    ];
    let created = create_manifest(admin, ns, &fixture(&format!("{kind}-request.yaml"), &base))
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    let grant = format!("{name}-{}", &uid[..8]);
    let now = Timestamp::now().to_string();
    let mut vars = base.to_vec();
    vars.extend([
        ("REQUEST_UID", uid.as_str()),
        ("GRANT", grant.as_str()),
        ("NOW", now.as_str()),
    ]);
    if objects.contains(&"request-status.yaml") {
        let status: serde_json::Value =
            serde_saphyr::from_str(&fixture(&format!("{kind}-request-status.yaml"), &vars))
                .unwrap();
        let patch = Patch::Merge(&status);
        if kind == "exec" {
            let api: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), ns);
            api.patch_status(name, &PatchParams::default(), &patch)
                .await
                .unwrap();
        } else {
            let api: Api<PodAccessRequest> = Api::namespaced(admin.clone(), ns);
            api.patch_status(name, &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
    }
    for object in objects.iter().filter(|o| **o != "request-status.yaml") {
        let yaml = fixture(&format!("{kind}-{object}"), &vars);
        create_manifest(admin, ns, &yaml).await.unwrap();
    }
    let created = created.metadata.creation_timestamp.unwrap().0;
    OzGrant {
        request: name.into(),
        grant,
        created,
    }
}

async fn dynamic_uid(admin: &Client, ns: &str, kind: &str, name: &str) -> String {
    let resource = kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "crds.wizardofoz.co",
        "v1alpha1",
        kind,
    ));
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(admin.clone(), ns, &resource);
    api.get(name).await.unwrap().uid().unwrap()
}

/// A namespace with Deployment `web` (one ready pod) and Oz's templates for it.
async fn namespace(prefix: &str) -> (String, Client, String) {
    install_crds().await;
    let ns = env().namespace(prefix).await.unwrap();
    let admin = env().admin().await.unwrap();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    for file in ["exec-template.yaml", "pod-template.yaml"] {
        create_manifest(&admin, &ns, &fixture(file, &[]))
            .await
            .unwrap();
    }
    (ns, admin, web.pod_names()[0].clone())
}

/// Waits until request `name` reaches `phase`.
async fn wait_for<R>(api: &Api<R>, name: &str, phase: RequestPhase, log: &std::path::Path) -> R
where
    R: AccessRequest + Clone + DeserializeOwned + std::fmt::Debug,
{
    eventually(
        SETTLE,
        &format!("{name} to become {phase:?} (log: {})", log.display()),
        || async {
            let request = api.get(name).await.ok()?;
            (request.request_status()?.phase == Some(phase)).then_some(request)
        },
    )
    .await
}

/// Every RoleBinding event a watch saw: (name, uid, deleted?, when seen).
type Seen = Arc<Mutex<Vec<(String, String, bool, Timestamp)>>>;

fn watch_bindings(admin: &Client, ns: &str) -> Seen {
    let seen: Seen = Arc::default();
    let api: Api<RoleBinding> = Api::namespaced(admin.clone(), ns);
    let record = seen.clone();
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            let (binding, deleted) = match event {
                watcher::Event::Apply(b) | watcher::Event::InitApply(b) => (b, false),
                watcher::Event::Delete(b) => (b, true),
                _ => continue,
            };
            let entry = (
                binding.name_any(),
                binding.uid().unwrap(),
                deleted,
                Timestamp::now(),
            );
            record.lock().unwrap().push(entry);
        }
    });
    seen
}

/// How many objects `api` lists.
async fn count<K>(api: &Api<K>) -> usize
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default()).await.unwrap().items.len()
}

fn expiry_of<R: AccessRequest>(request: &R) -> Timestamp {
    request
        .request_status()
        .unwrap()
        .expires_at
        .clone()
        .unwrap()
        .0
}

fn condition_holds<R: AccessRequest>(request: &R, type_: &str) -> bool {
    oz_api::conditions::is_true(&request.request_status().unwrap().conditions, type_)
}

#[tokio::test]
async fn an_oz_exec_grant_in_its_window_is_kept_without_a_gap_and_ends_at_ozs_end() {
    let (ns, admin, pod) = namespace("oz-adopt-exec").await;
    let seen = watch_bindings(&admin, &ns);
    let oz = oz_left(
        &admin,
        &ns,
        "exec",
        "alice-oz",
        "30s",
        &pod,
        &["request-status.yaml", "role.yaml", "rolebinding.yaml"],
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);
    let original = bindings.get(&oz.grant).await.unwrap().uid().unwrap();
    assert!(
        can("alice", "create", "pods", Some("exec"), &ns, &pod).await,
        "Oz's grant lets devs in before oz starts"
    );

    let operator = Operator::start(&ns, &[]);
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    let ready = wait_for(&requests, &oz.request, RequestPhase::Ready, &operator.log).await;
    let expires_at = expiry_of(&ready);
    assert_eq!(
        expires_at,
        oz.created + Duration::from_secs(30),
        "Oz's end: creation plus the duration"
    );
    assert!(condition_holds(&ready, "AdoptedFromOz"), "{ready:?}");
    assert_eq!(ready.spec.requester, None);
    assert_eq!(
        ready.status.as_ref().unwrap().pod_name.as_deref(),
        Some(pod.as_str())
    );

    // No duplicate: one Role and one RoleBinding, Oz's, now labelled as oz's.
    let roles: Api<Role> = Api::namespaced(admin.clone(), &ns);
    let managed = ListParams::default().labels("app.kubernetes.io/managed-by=oz");
    assert_eq!(count(&roles).await, 1);
    let listed = bindings.list(&managed).await.unwrap().items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].uid().as_deref(), Some(original.as_str()));

    // Access holds until Oz's end, then ends, and the request is kept as Expired.
    loop {
        let asked = Timestamp::now();
        let allowed = can("alice", "create", "pods", Some("exec"), &ns, &pod).await;
        let answered = Timestamp::now();
        if answered < expires_at {
            assert!(
                allowed,
                "access lost at {asked}, before Oz's end {expires_at}"
            );
        }
        if !allowed {
            assert!(asked >= expires_at || answered >= expires_at);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let expired = wait_for(&requests, &oz.request, RequestPhase::Expired, &operator.log).await;
    assert_eq!(expiry_of(&expired), expires_at);

    // The binding was the same object throughout, deleted once, at the end.
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|(_, uid, _, _)| *uid == original),
        "{seen:?}"
    );
    let deletions: Vec<_> = seen.iter().filter(|(_, _, deleted, _)| *deleted).collect();
    assert_eq!(deletions.len(), 1, "{seen:?}");
    assert!(deletions[0].3 >= expires_at, "{seen:?}");
}

#[tokio::test]
async fn an_oz_pod_grant_keeps_its_pod_and_ends_at_ozs_end() {
    let (ns, admin, _) = namespace("oz-adopt-pod").await;
    let name = "alice-pod";
    let oz = oz_left(
        &admin,
        &ns,
        "pod",
        name,
        "30s",
        "",
        &[
            "request-status.yaml",
            "pod.yaml",
            "role.yaml",
            "rolebinding.yaml",
        ],
    )
    .await;
    let original_pod = wait_ready(&admin, &ns, &oz.grant).await.unwrap().uid();

    let operator = Operator::start(&ns, &[]);
    let requests: Api<PodAccessRequest> = Api::namespaced(admin.clone(), &ns);
    let ready = wait_for(&requests, name, RequestPhase::Ready, &operator.log).await;
    assert_eq!(expiry_of(&ready), oz.created + Duration::from_secs(30));
    assert_eq!(
        ready.status.as_ref().unwrap().pod_name.as_deref(),
        Some(oz.grant.as_str())
    );
    assert!(can("alice", "create", "pods", Some("exec"), &ns, &oz.grant).await);

    // No second pod: the deployment's one, and Oz's, the same object.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let owned: Vec<Pod> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.owner_references()
                .iter()
                .any(|o| o.uid == ready.meta().uid.clone().unwrap())
        })
        .collect();
    assert_eq!(owned.len(), 1, "{owned:?}");
    assert_eq!(owned[0].uid(), original_pod);
    let roles: Api<Role> = Api::namespaced(admin.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);
    assert_eq!(count(&roles).await, 1);
    assert_eq!(count(&bindings).await, 1);

    wait_for(&requests, name, RequestPhase::Expired, &operator.log).await;
    assert!(!can("alice", "create", "pods", Some("exec"), &ns, &oz.grant).await);
    assert!(bindings.get_opt(&oz.grant).await.unwrap().is_none());
}

#[tokio::test]
async fn only_live_grants_oz_provably_made_are_adopted() {
    let (ns, admin, pod) = namespace("oz-adopt-not").await;
    let grant = ["request-status.yaml", "role.yaml", "rolebinding.yaml"];
    // Oz's grant, already past its end when oz starts.
    let late = oz_left(&admin, &ns, "exec", "late", "1s", &pod, &grant).await;
    // No requester, and nothing from Oz: no status, no grant.
    oz_left(&admin, &ns, "exec", "nobody", "1h", &pod, &[]).await;
    // Oz's status, and a Role and RoleBinding under its grant's name, but controlled by another
    // request: objects that could be made for it without Oz, e.g. left over from another grant.
    let forged = oz_left(
        &admin,
        &ns,
        "exec",
        "forged",
        "1h",
        &pod,
        &["request-status.yaml"],
    )
    .await;
    // (Another request that exists: the garbage collector would delete objects whose owner
    // does not, and the case would pass for the wrong reason.)
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    let other = requests.get("nobody").await.unwrap().uid().unwrap();
    let vars = [
        ("REQUEST", "nobody"),
        ("REQUEST_UID", other.as_str()),
        ("GRANT", forged.grant.as_str()),
        ("POD", pod.as_str()),
    ];
    for object in ["exec-role.yaml", "exec-rolebinding.yaml"] {
        create_manifest(&admin, &ns, &fixture(object, &vars))
            .await
            .unwrap();
    }
    eventually(SETTLE, "the late grant's end to pass", || async {
        (Timestamp::now() > late.created + Duration::from_secs(1)).then_some(())
    })
    .await;

    let operator = Operator::start(&ns, &[]);
    let expired = wait_for(&requests, "late", RequestPhase::Expired, &operator.log).await;
    assert_eq!(expiry_of(&expired), late.created + Duration::from_secs(1));
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);
    assert!(bindings.get_opt(&late.grant).await.unwrap().is_none());

    for name in ["nobody", "forged"] {
        let denied = wait_for(&requests, name, RequestPhase::Denied, &operator.log).await;
        assert!(!condition_holds(&denied, "AdoptedFromOz"), "{denied:?}");
    }
    assert!(!can("alice", "create", "pods", Some("exec"), &ns, &pod).await);
    assert_eq!(count(&bindings).await, 0);
}
