//! Who may delete (revoke) requests besides their requesters.

/// Who may delete requests besides their requester. Deleting a request only ever removes access,
/// so this guards against two other harms: someone revoking a colleague's access, and anyone
/// erasing the access-review record an expired request is.
#[derive(Clone, Debug)]
pub struct DeletePolicy {
    /// Groups whose members may delete any request, expired or not: administrators
    /// (`system:masters` by default), the cluster's own controllers (the garbage collector and
    /// the namespace controller run as service accounts of kube-system) and oz itself (the
    /// service accounts of its namespace, which delete expired requests after the retention).
    pub trusted_groups: std::collections::BTreeSet<String>,
    /// On a fleet spoke, the hub's credential (`--fleet-hub-user`). It withdraws the live
    /// requests it made there, and nothing else, even if it is a service account of oz's
    /// namespace (which the default install makes it).
    pub fleet_hub_user: Option<String>,
}

impl DeletePolicy {
    /// `admin_groups`, kube-system's service accounts, and those of oz's `namespace`.
    pub fn new(admin_groups: impl IntoIterator<Item = String>, namespace: &str) -> Self {
        let mut trusted_groups: std::collections::BTreeSet<String> =
            admin_groups.into_iter().collect();
        trusted_groups.insert("system:serviceaccounts:kube-system".into());
        trusted_groups.insert(format!("system:serviceaccounts:{namespace}"));
        Self {
            trusted_groups,
            fleet_hub_user: None,
        }
    }
}
