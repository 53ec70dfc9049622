//! How many bytes of heap a request controller holds per request in its cache: a counting
//! allocator around 10,000 Ready exec grants in 100 namespaces, each parsed from the JSON the
//! apiserver sends (six conditions, as oz writes them), kept in a reflector store as the
//! request itself (how oz kept them until the packed form) and as the [`CachedRequest`] it
//! keeps now. Run with `cargo run --release -p oz-heap --bin controller_request_bytes`; the figures are
//! requested bytes, before the allocator's own overhead.
use kube::runtime::{reflector, watcher::Event};
use oz::cache::requests::CachedRequest;
use oz_api::{ExecAccessRequest, WatchedRequest};
use serde_json::json;

use oz_heap::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

const N: usize = 10_000;

/// Grant `i` as the apiserver sends it, once Ready.
fn json(i: usize) -> String {
    let ns = format!("bench-{:03}", i % 100);
    let name = format!("grant-{i:05}");
    let t = "2026-11-23T08:00:00Z";
    let cond = |ty: &str, reason: &str, msg: String| json!({"type": ty, "status": "True", "reason": reason, "message": msg, "lastTransitionTime": t, "observedGeneration": 1});
    let grant = format!("{name}-0c7b2a6e");
    json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {
            "name": name, "namespace": ns, "uid": format!("0c7b2a6e-5d7f-4a8b-9b1e-{i:012}"),
            "resourceVersion": format!("{}", 1_000_000 + i), "generation": 1, "creationTimestamp": t,
            "ownerReferences": [{"apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
                "name": "app", "uid": "9d1c7f2e-0a3b-4c5d-8e6f-7a8b9c0d1e2f", "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"templateName": "app", "duration": "1h",
                 "requester": {"username": "alice", "groups": ["devs", "system:authenticated"]}},
        "status": {
            "conditions": [
                cond("TargetTemplateExists", "Success", "Found Target Template".into()),
                cond("RequesterAllowed", "Success", "user \"alice\" is in allowed group \"devs\"".into()),
                cond("AccessDurationsValid", "Success", "Access requested custom duration (1h0m0s)".into()),
                cond("AccessStillValid", "Success", "Access still valid".into()),
                cond("AccessResourcesCreated", "Success", format!("Success. Role {grant}, RoleBinding {grant} created")),
                cond("AccessResourcesReady", "Success", "Ready".into()),
            ],
            "ready": true, "podName": format!("app-7d9f8b6c5d-{:05}", i % 500), "phase": "Ready",
            "accessMessage": format!("kubectl exec -ti -n {ns} app-7d9f8b6c5d-{:05} -- /bin/sh", i % 500),
            "expiresAt": "2026-11-23T09:00:00Z"
        }
    })
    .to_string()
}

fn parse(text: &str) -> ExecAccessRequest {
    serde_json::from_str::<WatchedRequest<ExecAccessRequest>>(text)
        .unwrap()
        .0
}

/// The heap `fill` leaves behind, per request.
fn per_request<T>(fill: impl FnOnce() -> T) -> (isize, isize, T) {
    let (bytes, allocations) = (counting_alloc::live(), counting_alloc::allocations());
    let kept = fill();
    let n = N as isize;
    (
        (counting_alloc::live() - bytes) / n,
        (counting_alloc::allocations() - allocations) / n,
        kept,
    )
}

fn main() {
    let texts: Vec<String> = (0..N).map(json).collect();
    let (whole, whole_allocations, _kept) = per_request(|| {
        let (store, mut writer) = reflector::store::<ExecAccessRequest>();
        for text in &texts {
            writer.apply_watcher_event(&Event::Apply(parse(text)));
        }
        (store, writer)
    });
    let (packed, packed_allocations, _kept) = per_request(|| {
        let (store, mut writer) = reflector::store::<CachedRequest<ExecAccessRequest>>();
        for text in &texts {
            let cached = CachedRequest::of(parse(text)).unwrap();
            writer.apply_watcher_event(&Event::Apply(cached));
        }
        (store, writer)
    });
    println!("a request in a request controller's store, {N} Ready grants in 100 namespaces:");
    println!(
        "  the request, as a watch parses it  {whole:>5} B in {whole_allocations} allocations"
    );
    println!(
        "  packed (CachedRequest)             {packed:>5} B in {packed_allocations} allocations"
    );
}
