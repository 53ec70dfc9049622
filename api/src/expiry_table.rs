//! Every request's expiry as the apiserver's Table of requests shows it: their printer columns
//! (name, namespace, UID, phase, expires), without the requests themselves.
//!
//! oz-manager arms an expiry timer for every grant that may be in force when it starts, and
//! until the timers are armed a grant expiring is revoked late. With many requests the LIST of
//! whole requests is what they waited for; the same rows as a server-side Table without the
//! objects (`includeObject=None`) are a fraction of its size and of the apiserver's time
//! (docs/benchmarks.md), so the timers are armed from the Table first, and the full LIST,
//! which fills the caches the reconciles read, comes after it.
//!
//! A row is trusted as much as the request it shows, no more: the same `status.phase` and
//! `status.expiresAt` the full LIST arms the timers from. A timer only ever takes access away,
//! so one armed for a request that is being deleted, or that turned Expired since, costs two
//! deletes of nothing.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::ListMeta, jiff::Timestamp};
use serde::{Deserialize, de::IgnoredAny};

use crate::RequestPhase;

/// The `Accept` header that asks for a Table instead of a list.
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
/// The query parameter that leaves the objects out of the Table's rows (by default each row
/// carries its object's metadata, managedFields and all).
pub const WITHOUT_OBJECTS: (&str, &str) = ("includeObject", "None");

/// The columns a row is read by: the apiserver's own first column, and the request kinds'
/// printer columns of these names (`crd_shape.rs`).
pub mod column {
    /// The apiserver's first column of every Table of a custom resource.
    pub const NAME: &str = "Name";
    pub const NAMESPACE: &str = "Namespace";
    pub const UID: &str = "UID";
    pub const PHASE: &str = "Phase";
    pub const EXPIRES: &str = "Expires";
}

/// One page of the Table of requests of one kind.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestTablePage {
    #[serde(default)]
    column_definitions: Vec<ColumnDefinition>,
    #[serde(default)]
    rows: Vec<Row>,
    #[serde(default)]
    metadata: ListMeta,
}

#[derive(Debug, Deserialize)]
struct ColumnDefinition {
    name: String,
}

#[derive(Debug, Deserialize)]
struct Row {
    cells: Vec<Cell>,
}

/// A cell: oz reads only text; a number, a boolean or null is kept as nothing.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Cell {
    Text(String),
    Other(IgnoredAny),
}

/// A grant that may be in force, and when it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedExpiry {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub expires_at: Timestamp,
}

/// A Table without a column oz reads: its CRD is older than this oz (during an upgrade), and
/// the timers wait for the full LIST, as before.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the Table of requests has no {0:?} column: its CRD predates this oz (apply oz's CRDs); expiry timers are armed from the full list instead"
)]
pub struct MissingColumn(pub &'static str);

impl RequestTablePage {
    /// The token for the next page, if there is one.
    pub fn continue_token(&self) -> Option<&str> {
        self.metadata.continue_.as_deref().filter(|c| !c.is_empty())
    }

    /// The number of rows on this page.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The grants on this page that may be in force, as the full LIST would arm them: every
    /// request with an `expiresAt` but an Expired or Denied one, or one without a phase.
    pub fn expiries(&self) -> Result<Vec<ListedExpiry>, MissingColumn> {
        let column = |name: &'static str| {
            self.column_definitions
                .iter()
                .position(|c| c.name == name)
                .ok_or(MissingColumn(name))
        };
        let name = column(column::NAME)?;
        let namespace = column(column::NAMESPACE)?;
        let uid = column(column::UID)?;
        let phase = column(column::PHASE)?;
        let expires = column(column::EXPIRES)?;
        Ok(self
            .rows
            .iter()
            .filter_map(|row| {
                let text = |i: usize| match row.cells.get(i) {
                    Some(Cell::Text(text)) if !text.is_empty() => Some(text.as_str()),
                    _ => None,
                };
                if !may_be_in_force(text(phase)?) {
                    return None;
                }
                Some(ListedExpiry {
                    namespace: text(namespace)?.to_owned(),
                    name: text(name)?.to_owned(),
                    uid: text(uid)?.to_owned(),
                    expires_at: text(expires)?.parse().ok()?,
                })
            })
            .collect())
    }
}

/// Whether a request in `phase` may hold a grant. A phase this oz does not know is taken as
/// one that may: an early timer costs nothing, a missing one leaves access in place.
fn may_be_in_force(phase: &str) -> bool {
    let known = RequestPhase::deserialize(serde::de::value::StrDeserializer::<
        serde::de::value::Error,
    >::new(phase));
    !known.is_ok_and(RequestPhase::is_settled)
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::json;

    use super::*;
    use crate::{ExecAccessRequest, PodAccessRequest};

    const UID: &str = "35bb408c-9beb-4185-9cad-e9eb3bceacea";
    const AT: &str = "2026-11-25T10:00:00Z";

    /// A page as kube-apiserver 1.35 sends it, with its columns in the CRD's order but for
    /// Namespace and UID, swapped to show that cells are found by their column's name.
    fn page(rows: serde_json::Value) -> RequestTablePage {
        let columns: Vec<_> = [
            "Name",
            "Template",
            "Pod",
            "Phase",
            "Ready",
            "Approvals",
            "Expires",
            "Age",
            "UID",
            "Namespace",
        ]
        .iter()
        .map(|name| json!({"name": name, "type": "string", "format": "", "description": "", "priority": 0}))
        .collect();
        serde_json::from_value(json!({
            "kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "101138", "continue": "next-page"},
            "columnDefinitions": columns,
            "rows": rows,
        }))
        .unwrap()
    }

    fn row(name: &str, phase: serde_json::Value, expires: serde_json::Value) -> serde_json::Value {
        json!({
            "cells": [name, "app", "app-7d9f8b6c5d-x2k4q", phase, true, null, expires, "10m", UID, "shop"],
            "object": null,
        })
    }

    #[test]
    fn a_row_in_force_becomes_its_grants_expiry_read_by_column_name() {
        let page = page(json!([row("grant-1", json!("Ready"), json!(AT))]));
        assert_eq!(page.continue_token(), Some("next-page"));
        assert_eq!(
            page.expiries().unwrap(),
            [ListedExpiry {
                namespace: "shop".into(),
                name: "grant-1".into(),
                uid: UID.into(),
                expires_at: AT.parse().unwrap(),
            }]
        );
    }

    #[test]
    fn only_requests_whose_grant_may_be_in_force_are_armed_as_from_the_full_list() {
        let page = page(json!([
            row("ready", json!("Ready"), json!(AT)),
            row("pending", json!("Pending"), json!(AT)),
            row("failed", json!("Failed"), json!(AT)),
            row("unknown-phase", json!("Suspended"), json!(AT)),
            row("expired", json!("Expired"), json!(AT)),
            row("denied", json!("Denied"), json!(AT)),
            row("no-phase", json!(null), json!(AT)),
            row("no-expiry", json!("Pending"), json!(null)),
            row("bad-expiry", json!("Ready"), json!("tomorrow")),
        ]));
        let names: Vec<String> = page
            .expiries()
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["ready", "pending", "failed", "unknown-phase"]);
    }

    #[test]
    fn a_table_without_a_column_oz_reads_names_it() {
        let mut page = page(json!([row("grant-1", json!("Ready"), json!(AT))]));
        page.column_definitions.retain(|c| c.name != column::UID);
        let error = page.expiries().unwrap_err();
        assert_eq!(error, MissingColumn("UID"));
        assert!(error.to_string().contains("apply oz's CRDs"), "{error}");
    }

    #[test]
    fn the_last_page_has_no_continue_token() {
        let mut page = page(json!([]));
        page.metadata.continue_ = Some(String::new());
        assert_eq!(page.continue_token(), None);
        assert!(page.is_empty());
    }

    /// The columns read above are the request kinds' printer columns.
    #[test]
    fn both_request_crds_have_the_columns_the_table_is_read_by() {
        for crd in [ExecAccessRequest::crd(), PodAccessRequest::crd()] {
            let columns = crd.spec.versions[0]
                .additional_printer_columns
                .clone()
                .unwrap_or_default();
            let path = |name: &str| {
                columns
                    .iter()
                    .find(|c| c.name == name)
                    .map(|c| c.json_path.clone())
            };
            assert_eq!(
                path(column::NAMESPACE).as_deref(),
                Some(".metadata.namespace")
            );
            assert_eq!(path(column::UID).as_deref(), Some(".metadata.uid"));
            assert_eq!(path(column::PHASE).as_deref(), Some(".status.phase"));
            assert_eq!(path(column::EXPIRES).as_deref(), Some(".status.expiresAt"));
        }
    }
}
