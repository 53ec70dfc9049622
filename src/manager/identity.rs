//! Who oz-manager is to the apiserver, asked once at start with a SelfSubjectReview, and what
//! follows from it: the user name the webhooks know oz's own exec by (the upstream half of a
//! brokered session), and the owner of what oz-manager creates in its namespace.

use k8s_openapi::{
    api::authentication::v1::SelfSubjectReview, apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{Api, Client, api::PostParams};

/// The prefix of a ServiceAccount's user name: `system:serviceaccount:NAMESPACE:NAME`.
const SERVICE_ACCOUNT_USER: &str = "system:serviceaccount:";

/// What the apiserver says oz-manager is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The user name (in a cluster, `system:serviceaccount:NS:NAME`).
    pub username: String,
    /// The user's uid; for a ServiceAccount token, the ServiceAccount's own uid.
    pub uid: Option<String>,
}

impl Identity {
    /// Asks the apiserver (a SelfSubjectReview, which every authenticated user may create).
    pub async fn ask(client: &Client) -> Result<Self, String> {
        let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
        let review = reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .map_err(|e| {
                format!("cannot ask the apiserver who oz is (a SelfSubjectReview): {e}")
            })?;
        let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
        let username = user
            .username
            .filter(|name| !name.is_empty())
            .ok_or_else(|| "the apiserver's SelfSubjectReview named no user".to_string())?;
        Ok(Self {
            username,
            uid: user.uid.filter(|uid| !uid.is_empty()),
        })
    }

    /// The owner of what oz-manager creates in `namespace` (its webhook certificate Secrets,
    /// the audit signing key and public keys): its own ServiceAccount when it runs as one of
    /// that namespace, which the install and the Helm release delete on uninstall, so the
    /// garbage collector removes the rest. Anyone else (`make run`, a kubeconfig user, a
    /// ServiceAccount of another namespace, which an owner reference cannot name): none.
    ///
    /// The reference sets neither `controller` nor `blockOwnerDeletion`: the latter would
    /// need delete permission on the ServiceAccount itself.
    pub fn owner_in(&self, namespace: &str) -> Option<OwnerReference> {
        let (account_namespace, name) = self
            .username
            .strip_prefix(SERVICE_ACCOUNT_USER)?
            .split_once(':')?;
        if account_namespace != namespace || name.is_empty() {
            return None;
        }
        Some(OwnerReference {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            name: name.into(),
            uid: self.uid.clone()?,
            controller: None,
            block_owner_deletion: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(username: &str, uid: Option<&str>) -> Identity {
        Identity {
            username: username.into(),
            uid: uid.map(String::from),
        }
    }

    #[test]
    fn a_service_account_of_its_own_namespace_owns_what_it_creates() {
        let me = identity("system:serviceaccount:oz-system:oz-manager", Some("u-1"));
        assert_eq!(
            me.owner_in("oz-system"),
            Some(OwnerReference {
                api_version: "v1".into(),
                kind: "ServiceAccount".into(),
                name: "oz-manager".into(),
                uid: "u-1".into(),
                controller: None,
                block_owner_deletion: None,
            })
        );
    }

    #[test]
    fn anyone_else_owns_nothing() {
        let elsewhere = identity("system:serviceaccount:default:oz-manager", Some("u-1"));
        assert_eq!(elsewhere.owner_in("oz-system"), None);
        let person = identity("alice", Some("u-2"));
        assert_eq!(person.owner_in("oz-system"), None);
        let admin = identity("kubernetes-admin", None);
        assert_eq!(admin.owner_in("oz-system"), None);
        // Without its uid an owner reference would be refused (or point at nothing).
        let no_uid = identity("system:serviceaccount:oz-system:oz-manager", None);
        assert_eq!(no_uid.owner_in("oz-system"), None);
        // A user named like a namespace prefix is not that namespace's ServiceAccount.
        let prefix = identity("system:serviceaccount:oz-system", Some("u-3"));
        assert_eq!(prefix.owner_in("oz-system"), None);
    }
}
