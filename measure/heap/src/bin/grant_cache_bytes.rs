//! How many bytes of heap a request controller holds per grant for its Role and RoleBinding: a
//! counting allocator around 10,000 grants in 100 namespaces, held as kube's reflector stores
//! would hold the watched forms (how oz kept them until the grant store) and as the
//! [`GrantRbacStore`] holds them. Run with `cargo run --release -p oz-heap --bin grant_cache_bytes`;
//! the figures are requested bytes, before the allocator's own overhead.
use k8s_openapi::api::rbac::v1::Subject;
use kube::runtime::{reflector, watcher::Event};
use oz::{
    builders::{
        GrantIdentity, grant_identity_of,
        rbac::{EXEC_PERMISSIONS, build_role, build_role_binding},
    },
    cache::{
        grant_rbac::{WatchedBinding, WatchedRole},
        grant_rbac_store::GrantRbacStore,
    },
};
use oz_api::ExecAccessRequest;

use oz_heap::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

const N: usize = 10_000;

fn grant(i: usize) -> GrantIdentity {
    grant_identity_of::<ExecAccessRequest>(
        &format!("grant-{i}"),
        format!("bench-{:03}", i % 100),
        &format!("0c7b2a6e-5d7f-4a8b-9b1e-{i:012}"),
    )
}

/// The Role and RoleBinding of grant `i` as their watches deliver them.
fn watched(i: usize) -> (WatchedRole, WatchedBinding) {
    let grant = grant(i);
    let mut role = build_role(&grant, &format!("app-7d9f8b6c5d-{i:05}"), EXEC_PERMISSIONS);
    role.metadata.resource_version = Some(format!("{}", 1_000_000 + 2 * i));
    let alice = Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: "User".into(),
        name: "alice".into(),
        namespace: None,
    };
    let mut binding = build_role_binding(&grant, vec![alice]);
    binding.metadata.resource_version = Some(format!("{}", 1_000_001 + 2 * i));
    (role.into(), binding.into())
}

/// The heap `fill` leaves behind, per grant.
fn per_grant<T>(fill: impl FnOnce() -> T) -> (isize, T) {
    let before = counting_alloc::live();
    let kept = fill();
    ((counting_alloc::live() - before) / N as isize, kept)
}

fn main() {
    let objects: Vec<_> = (0..N).map(watched).collect();
    let (reflectors, _kept) = per_grant(|| {
        let (roles, mut role_writer) = reflector::store::<WatchedRole>();
        let (bindings, mut binding_writer) = reflector::store::<WatchedBinding>();
        for (role, binding) in &objects {
            role_writer.apply_watcher_event(&Event::Apply(role.clone()));
            binding_writer.apply_watcher_event(&Event::Apply(binding.clone()));
        }
        (roles, bindings, role_writer, binding_writer)
    });
    let (store, _kept) = per_grant(|| {
        let (store, mut roles, mut bindings) = GrantRbacStore::new();
        for (role, binding) in &objects {
            roles.apply(&Event::Apply(role.clone()));
            bindings.apply(&Event::Apply(binding.clone()));
        }
        (store, roles, bindings)
    });
    println!("a grant's Role and RoleBinding, {N} grants in 100 namespaces:");
    println!("  in two reflector stores (the watched forms)  {reflectors:>5} B");
    println!("  in the grant store                           {store:>5} B");
}
