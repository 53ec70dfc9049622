//! Where oz's controllers, caches and notifiers look: every namespace, or one.

use kube::{Api, Client, Resource};

/// Where the controllers look.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    Cluster,
    /// One namespace.
    Namespace(String),
}

impl Scope {
    /// The one namespace watched, if the scope is one.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Scope::Cluster => None,
            Scope::Namespace(ns) => Some(ns),
        }
    }

    pub(crate) fn api<
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    >(
        &self,
        client: &Client,
    ) -> Api<K> {
        match self {
            Scope::Cluster => Api::all(client.clone()),
            Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
        }
    }
}
