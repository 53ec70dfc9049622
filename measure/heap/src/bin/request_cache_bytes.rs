//! How many bytes of heap one cached ExecAccessRequest holds, in each form oz keeps it, and how
//! many its parsing allocates on the way: a counting allocator around 10,000 requests parsed
//! from the JSON the apiserver sends for a Ready grant (six conditions, managedFields of two
//! managers, one label as oz-bench sets). Run with `cargo run -p oz-heap --bin
//! request_cache_bytes`; the figures are requested bytes, before the allocator's own overhead
//! (about 8-16 bytes per allocation with glibc), which the allocation counts show.
use std::{collections::HashMap, sync::Arc};

use oz_api::{ExecAccessRequest, WatchedRequest, strip_unread_metadata};
use oz_webhooks::admission::GrantSummary;
use serde_json::json;

use oz_heap::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

const N: usize = 10_000;

fn request(i: usize) -> serde_json::Value {
    let ns = format!("bench-{:03}", i % 100);
    let name = format!("grant-{i:05}");
    let t = "2026-11-23T08:00:00Z";
    let cond = |ty: &str, reason: &str, msg: &str| json!({"type": ty, "status": "True", "reason": reason, "message": msg, "lastTransitionTime": t, "observedGeneration": 1});
    json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {
            "name": name, "namespace": ns, "uid": "0c7b2a6e-5d7f-4a8b-9b1e-3f2d8c1a7e44",
            "resourceVersion": "1234567", "generation": 1, "creationTimestamp": t,
            "labels": {"oz-bench/phase": "scale"},
            "ownerReferences": [{"apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
                "name": "app", "uid": "9d1c7f2e-0a3b-4c5d-8e6f-7a8b9c0d1e2f", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "oz-bench", "operation": "Update", "apiVersion": "crds.wizardofoz.co/v1alpha1", "time": t,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:templateName": {}, "f:duration": {}}}},
                {"manager": "oz", "operation": "Apply", "apiVersion": "crds.wizardofoz.co/v1alpha1", "time": t,
                 "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {"f:conditions": {
                    "k:{\"type\":\"TargetTemplateExists\"}": {".": {}, "f:type": {}, "f:status": {}, "f:reason": {}, "f:message": {}, "f:lastTransitionTime": {}},
                    "k:{\"type\":\"AccessDurationsValid\"}": {".": {}, "f:type": {}, "f:status": {}, "f:reason": {}, "f:message": {}, "f:lastTransitionTime": {}},
                    "k:{\"type\":\"AccessStillValid\"}": {".": {}, "f:type": {}, "f:status": {}, "f:reason": {}, "f:message": {}, "f:lastTransitionTime": {}},
                    "k:{\"type\":\"AccessResourcesCreated\"}": {".": {}, "f:type": {}, "f:status": {}, "f:reason": {}, "f:message": {}, "f:lastTransitionTime": {}},
                    "k:{\"type\":\"AccessResourcesReady\"}": {".": {}, "f:type": {}, "f:status": {}, "f:reason": {}, "f:message": {}, "f:lastTransitionTime": {}},
                    "k:{\"type\":\"Approved\"}": {".": {}, "f:type": {}, "f:status": {}, "f:reason": {}, "f:message": {}, "f:lastTransitionTime": {}}},
                    "f:ready": {}, "f:accessMessage": {}, "f:podName": {}, "f:phase": {}, "f:expiresAt": {}}}}
            ]
        },
        "spec": {"templateName": "app", "duration": "2h", "reason": "bench",
                 "requester": {"username": "alice", "uid": "6b1e0c2a-4f3d-4e5a-9c8b-7d6e5f4a3b2c", "groups": ["devs", "system:authenticated"]}},
        "status": {
            "conditions": [
                cond("TargetTemplateExists", "Success", "Found the ExecAccessTemplate app"),
                cond("AccessDurationsValid", "Success", "Access granted for 2h0m0s (the template's default)"),
                cond("AccessStillValid", "Success", "Access is still valid until 2026-11-23T10:00:00Z"),
                cond("AccessResourcesCreated", "Success", "Created Role and RoleBinding grant-00001-0c7b2a6e for pod app-7d9f8b6c5d-x2k4q"),
                cond("AccessResourcesReady", "Success", "The Role, RoleBinding and pod are ready"),
                cond("Approved", "Success", "No approval is required"),
            ],
            "ready": true, "podName": "app-7d9f8b6c5d-x2k4q", "phase": "Ready",
            "accessMessage": format!("kubectl exec -ti -n {ns} app-7d9f8b6c5d-x2k4q -- /bin/sh"),
            "expiresAt": "2026-11-23T10:00:00Z"
        }
    })
}

/// Makes N of `make`'s and prints the heap they hold, per request, and how much was allocated
/// on the way; returns them to keep them.
fn measure<T>(what: &str, make: impl Fn(usize) -> T) -> Vec<T> {
    let mut kept: Vec<T> = Vec::with_capacity(N);
    let (bytes, allocations, allocated) = (
        counting_alloc::live(),
        counting_alloc::allocations(),
        counting_alloc::allocated(),
    );
    for i in 0..N {
        kept.push(make(i));
    }
    let n = N as isize;
    println!(
        "{what:<56} {:>6} B in {:>3} allocations ({:>6} B allocated)",
        (counting_alloc::live() - bytes) / n,
        (counting_alloc::allocations() - allocations) / n,
        (counting_alloc::allocated() - allocated) / n,
    );
    kept
}

fn main() {
    let jsons: Vec<String> = (0..N).map(|i| request(i).to_string()).collect();
    println!("JSON as the apiserver sends it: {} B", jsons[1].len());
    let parse = |i: usize| serde_json::from_str::<ExecAccessRequest>(&jsons[i]).unwrap();
    let _full = measure("as parsed, managedFields and all", |i| Arc::new(parse(i)));
    let _stripped = measure(
        "parsed whole, then stripped (the controllers' until now)",
        |i| {
            let mut r = parse(i);
            strip_unread_metadata(&mut r.metadata);
            r.metadata.labels = None;
            r.metadata.annotations = None;
            Arc::new(r)
        },
    );
    let _controllers = measure(
        "the controllers' copy: as a WatchedRequest parses it",
        |i| {
            Arc::new(
                serde_json::from_str::<WatchedRequest<ExecAccessRequest>>(&jsons[i])
                    .unwrap()
                    .0,
            )
        },
    );
    let _summary = measure("the webhooks' copy: a GrantSummary", |i| {
        GrantSummary::of(
            &serde_json::from_str::<WatchedRequest<ExecAccessRequest>>(&jsons[i])
                .unwrap()
                .0,
        )
    });
    let _key = measure("a reflector store's key (name, namespace, rv, uid)", |i| {
        kube::runtime::reflector::ObjectRef::from_obj(&parse(i))
    });
    let mut map = HashMap::new();
    let before = counting_alloc::live();
    for i in 0..N {
        map.insert(i, Arc::new(()));
    }
    println!(
        "{:<56} {:>6} B",
        "a HashMap's own cost per pointer-sized entry",
        (counting_alloc::live() - before) / N as isize
    );
    println!(
        "size_of ExecAccessRequest: {}",
        std::mem::size_of::<ExecAccessRequest>()
    );
    println!(
        "size_of GrantSummary: {}",
        std::mem::size_of::<GrantSummary>()
    );
}
