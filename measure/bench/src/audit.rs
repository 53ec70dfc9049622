//! oz's API calls, counted from the apiserver's audit log: the policy the benchmark gives the
//! control plane, reading the log, telling oz's calls from everyone else's, and tallying them
//! per namespace and time window.
//!
//! oz-manager runs with the admin's credentials, like the benchmark itself, so its calls are
//! told apart by their `userAgent` (`oz-manager/VERSION`, which oz sets on its client). The log
//! backend writes each event before the call returns, so a call made is a line in the file.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What oz-manager's client sends as its `User-Agent`, up to its version.
pub const OZ_USER_AGENT_PREFIX: &str = "oz-manager/";

/// The audit policy: every call in `namespaces`, and every call to a cluster-scoped resource
/// (where oz's cluster-wide informers list and watch), at level Metadata, one event per stage
/// after the request was received; nothing elsewhere, so that the scale part's hundreds of
/// thousands of calls cost the apiserver no audit writes.
pub fn policy(namespaces: &[String]) -> serde_json::Value {
    let mut logged: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    // The empty name matches cluster-scoped resources and cluster-wide lists and watches.
    logged.push("");
    json!({
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "Metadata", "namespaces": logged},
            {"level": "None"},
        ],
    })
}

/// Turns auditing on for a control plane: writes the [`policy`] for `namespaces` into `dir`
/// and removes an earlier run's log there; returns the kube-apiserver flags that use them and
/// the log's path (both absolute: the control plane resolves them itself).
pub fn turn_on(dir: &Path, namespaces: &[String]) -> crate::Result<([String; 2], PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let dir = std::path::absolute(dir)?;
    let (policy, log) = (dir.join("audit-policy.json"), dir.join("audit.log"));
    std::fs::write(&policy, self::policy(namespaces).to_string())?;
    match std::fs::remove_file(&log) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let flags = [
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
    ];
    Ok((flags, log))
}

/// One API call, as the audit log records it (the fields the benchmark reads).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: String,
    pub verb: String,
    #[serde(default)]
    pub user_agent: String,
    #[serde(default)]
    pub user: AuditUser,
    #[serde(default, rename = "requestURI")]
    pub request_uri: String,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    pub request_received_timestamp: Timestamp,
    pub stage_timestamp: Timestamp,
}

/// Who made a call, as the apiserver authenticated them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct AuditUser {
    #[serde(default)]
    pub username: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub subresource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
}

impl Call {
    /// Whether oz-manager made it.
    pub fn is_oz(&self) -> bool {
        self.user_agent.starts_with(OZ_USER_AGENT_PREFIX)
    }

    /// Whether it changes something: what "writes" counts.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    /// The namespace of the object or collection, `""` for cluster-scoped or cluster-wide.
    pub fn namespace(&self) -> &str {
        self.object_ref
            .as_ref()
            .map_or("", |o| o.namespace.as_str())
    }

    /// `verb resource[/subresource]`, e.g. `patch execaccessrequests/status`: a row of the
    /// per-call breakdown.
    pub fn kind(&self) -> String {
        let resource = self.object_ref.clone().unwrap_or_default();
        if resource.subresource.is_empty() {
            format!("{} {}", self.verb, resource.resource)
        } else {
            format!(
                "{} {}/{}",
                self.verb, resource.resource, resource.subresource
            )
        }
    }

    /// The collection a list or watch reads: the request path and its label and field
    /// selectors, the same for a list and the watch it starts.
    fn collection(&self) -> String {
        let (path, query) = self
            .request_uri
            .split_once('?')
            .unwrap_or((self.request_uri.as_str(), ""));
        let mut selectors: Vec<&str> = query
            .split('&')
            .filter(|p| p.starts_with("labelSelector=") || p.starts_with("fieldSelector="))
            .collect();
        selectors.sort_unstable();
        format!("{path}?{}", selectors.join("&"))
    }
}

/// Every call in an audit log, once each (a call has one event per stage: the first is kept,
/// so a watch counts when it starts). Lines that do not parse (a line still being written)
/// are skipped.
pub fn parse(log: &str) -> Vec<Call> {
    let mut seen = std::collections::HashSet::new();
    log.lines()
        .filter_map(|line| serde_json::from_str::<Call>(line).ok())
        .filter(|call| seen.insert(call.audit_id.clone()))
        .collect()
}

/// [`parse`] of the file at `path`.
pub fn read(path: &Path) -> crate::Result<Vec<Call>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading the audit log {}: {e}", path.display()))?;
    Ok(parse(&text))
}

/// oz-manager's calls, split into those of its informers (watches, and the lists that start
/// or restart them) and all the others, which are what a grant costs.
#[derive(Clone, Debug, Default)]
pub struct OzCalls {
    pub informers: Vec<Call>,
    pub others: Vec<Call>,
}

impl OzCalls {
    /// oz's calls among `calls`. A `list` counts as an informer's when oz later watches the
    /// same collection (same path and selectors): a one-off list (the exec builder's pods in
    /// one namespace, say) is not followed by a watch of that collection.
    pub fn of(calls: &[Call]) -> Self {
        Self::split(calls.iter().filter(|c| c.is_oz()))
    }

    /// `calls`, all made by one client, split as [`OzCalls::of`] splits oz's.
    pub fn split<'a>(calls: impl IntoIterator<Item = &'a Call>) -> Self {
        let oz: Vec<&Call> = calls.into_iter().collect();
        let watches: Vec<(String, Timestamp)> = oz
            .iter()
            .filter(|c| c.verb == "watch")
            .map(|c| (c.collection(), c.request_received_timestamp))
            .collect();
        let mut split = Self::default();
        for call in &oz {
            let informer = call.verb == "watch"
                || (call.verb == "list" && {
                    let collection = call.collection();
                    watches
                        .iter()
                        .any(|(c, at)| *c == collection && *at >= call.request_received_timestamp)
                });
            if informer {
                split.informers.push((*call).clone());
            } else {
                split.others.push((*call).clone());
            }
        }
        split
    }
}

/// A count of calls: all of them, the writes, and by [`Call::kind`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    pub requests: usize,
    pub writes: usize,
    pub by_kind: BTreeMap<String, usize>,
}

impl Tally {
    /// The calls in `namespace` (`None`: any) received in `[from, to)`.
    pub fn of<'a>(
        calls: impl IntoIterator<Item = &'a Call>,
        namespace: Option<&str>,
        from: Timestamp,
        to: Timestamp,
    ) -> Self {
        let mut tally = Self::default();
        for call in calls {
            let received = call.request_received_timestamp;
            if received < from || received >= to {
                continue;
            }
            if namespace.is_some_and(|ns| ns != call.namespace()) {
                continue;
            }
            tally.requests += 1;
            tally.writes += usize::from(call.is_write());
            *tally.by_kind.entry(call.kind()).or_default() += 1;
        }
        tally
    }
}

/// Per-grant figures of one phase over several grants: mean and max of requests and writes,
/// and the mean count of each kind of call.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PerGrant {
    pub grants: usize,
    pub requests_mean: f64,
    pub requests_max: usize,
    pub writes_mean: f64,
    pub writes_max: usize,
    pub by_kind_mean: BTreeMap<String, f64>,
}

impl PerGrant {
    pub fn of(tallies: &[Tally]) -> Self {
        let n = tallies.len().max(1) as f64;
        let mut by_kind_mean = BTreeMap::new();
        for tally in tallies {
            for (kind, count) in &tally.by_kind {
                *by_kind_mean.entry(kind.clone()).or_default() += *count as f64 / n;
            }
        }
        Self {
            grants: tallies.len(),
            requests_mean: tallies.iter().map(|t| t.requests as f64).sum::<f64>() / n,
            requests_max: tallies.iter().map(|t| t.requests).max().unwrap_or(0),
            writes_mean: tallies.iter().map(|t| t.writes as f64).sum::<f64>() / n,
            writes_max: tallies.iter().map(|t| t.writes).max().unwrap_or(0),
            by_kind_mean,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as kube-apiserver 1.35 writes them at level Metadata (user and sourceIPs trimmed).
    const LOG: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/rbac.authorization.k8s.io/v1/namespaces/bench-calls-0/roles/r?fieldManager=oz","verb":"patch","user":{"username":"admin","groups":["system:masters"]},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"roles","namespace":"bench-calls-0","name":"r","apiGroup":"rbac.authorization.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.100000Z","stageTimestamp":"2026-11-23T18:00:01.104000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/apis/crds.wizardofoz.co/v1alpha1/namespaces/bench-calls-0/execaccessrequests/g/status","verb":"patch","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"execaccessrequests","namespace":"bench-calls-0","name":"g","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.200000Z","stageTimestamp":"2026-11-23T18:00:01.203000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a3","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench-calls-0/pods/web-1","verb":"get","user":{"username":"admin"},"userAgent":"kube-rs/1.0","objectRef":{"resource":"pods","namespace":"bench-calls-0","name":"web-1","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.300000Z","stageTimestamp":"2026-11-23T18:00:01.301000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a4","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench-calls-0/pods/web-1","verb":"get","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"pods","namespace":"bench-calls-0","name":"web-1","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.400000Z","stageTimestamp":"2026-11-23T18:00:01.401000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a5","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench-calls-1/events","verb":"create","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"events","namespace":"bench-calls-1","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-11-23T18:00:01.500000Z","stageTimestamp":"2026-11-23T18:00:01.502000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a6","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench-calls-0/events","verb":"create","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"events","namespace":"bench-calls-0","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-11-23T18:00:03.000000Z","stageTimestamp":"2026-11-23T18:00:03.002000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","requestURI":"/apis/rbac.authorization.k8s.io/v1/roles?labelSelector=x\u0026limit=500","verb":"list","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"roles","apiGroup":"rbac.authorization.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.600000Z","stageTimestamp":"2026-11-23T18:00:01.601000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w2","stage":"ResponseStarted","requestURI":"/apis/rbac.authorization.k8s.io/v1/roles?labelSelector=x\u0026watch=true\u0026resourceVersion=7","verb":"watch","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"roles","apiGroup":"rbac.authorization.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.700000Z","stageTimestamp":"2026-11-23T18:00:01.701000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w2","stage":"ResponseComplete","requestURI":"/apis/rbac.authorization.k8s.io/v1/roles?labelSelector=x\u0026watch=true\u0026resourceVersion=7","verb":"watch","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"roles","apiGroup":"rbac.authorization.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.700000Z","stageTimestamp":"2026-11-23T18:05:01.701000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"l1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench-calls-0/pods?labelSelector=app%3Dweb\u0026resourceVersion=0","verb":"list","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"pods","namespace":"bench-calls-0","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:01.800000Z","stageTimestamp":"2026-11-23T18:00:01.801000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w3","stage":"ResponseStarted","requestURI":"/api/v1/pods?\u0026watch=true\u0026labelSelector=app.kubernetes.io%2Fmanaged-by%3Doz\u0026resourceVersion=9","verb":"watch","user":{"username":"admin"},"userAgent":"oz-manager/0.1.0","objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-23T18:00:05.000000Z","stageTimestamp":"2026-11-23T18:00:05.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"cut"#;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_grants_calls_are_ozs_in_its_namespace_and_window_without_its_informers() {
        let calls = parse(LOG);
        assert_eq!(
            calls.len(),
            10,
            "one call per auditID; the cut line skipped"
        );
        let oz = OzCalls::of(&calls);
        assert_eq!(
            oz.informers.iter().map(Call::kind).collect::<Vec<_>>(),
            ["list roles", "watch roles", "watch pods"],
            "the list that starts a watch and the watches are the informers'; the list of one \
             namespace's pods before the watch of all oz's pods is not"
        );
        let grant = Tally::of(
            &oz.others,
            Some("bench-calls-0"),
            at("2026-11-23T18:00:01Z"),
            at("2026-11-23T18:00:02Z"),
        );
        assert_eq!(
            grant,
            Tally {
                // Not kube-rs's GET (someone else's), not the Event in bench-calls-1, not the
                // Event at 18:00:03 (after the window).
                requests: 4,
                writes: 2,
                by_kind: BTreeMap::from([
                    ("get pods".into(), 1),
                    ("list pods".into(), 1),
                    ("patch execaccessrequests/status".into(), 1),
                    ("patch roles".into(), 1),
                ]),
            }
        );
    }

    #[test]
    fn per_grant_figures_are_means_and_maxima() {
        let one = Tally {
            requests: 3,
            writes: 1,
            by_kind: BTreeMap::from([("get pods".into(), 2), ("patch roles".into(), 1)]),
        };
        let two = Tally {
            requests: 5,
            writes: 3,
            by_kind: BTreeMap::from([("patch roles".into(), 3), ("get pods".into(), 2)]),
        };
        let figures = PerGrant::of(&[one, two]);
        assert_eq!(
            (figures.requests_mean, figures.requests_max),
            (4.0, 5),
            "requests"
        );
        assert_eq!(
            (figures.writes_mean, figures.writes_max),
            (2.0, 3),
            "writes"
        );
        assert_eq!(figures.by_kind_mean["patch roles"], 2.0);
        assert_eq!(figures.by_kind_mean["get pods"], 2.0);
    }

    #[test]
    fn the_policy_logs_the_named_namespaces_and_cluster_scope_only() {
        let policy = policy(&["bench-calls-0".into()]);
        assert_eq!(
            policy["rules"][0]["namespaces"],
            json!(["bench-calls-0", ""])
        );
        assert_eq!(policy["rules"][1]["level"], "None");
        assert_eq!(policy["omitStages"], json!(["RequestReceived"]));
    }
}
