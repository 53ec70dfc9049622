//! What a user may do, asked through their own credentials, and `kubectl exec` as that user.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::{Api, Client, api::PostParams};
use oz_testenv::exec;

use super::cluster::env;

/// Whether `user` may `verb` the `resource` (with `subresource`) named `name` in `namespace`,
/// asked by that user through their own credentials.
pub async fn can(
    user: &str,
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: &str,
    name: &str,
) -> bool {
    let client = env().client_as(user).await.unwrap();
    client_can(&client, verb, resource, subresource, namespace, name).await
}

/// [`can`], asked with `client`'s credentials.
pub async fn client_can(
    client: &Client,
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: &str,
    name: &str,
) -> bool {
    let attributes = ResourceAttributes {
        namespace: Some(namespace.into()),
        verb: Some(verb.into()),
        resource: Some(resource.into()),
        subresource: subresource.map(Into::into),
        name: Some(name.into()),
        ..Default::default()
    };
    self_review(client, attributes).await
}

/// Whether `client`'s identity may do what `attributes` describe, asked with its own
/// credentials (a SelfSubjectAccessReview): what the apiserver's authorizer decides.
pub async fn self_review(client: &Client, attributes: ResourceAttributes) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(attributes),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

/// Whether `user` may exec into `pod`: both verbs a 1.35 websocket exec needs.
pub async fn can_exec(user: &str, namespace: &str, pod: &str) -> bool {
    may_exec(&env().client_as(user).await.unwrap(), namespace, pod).await
}

/// [`can_exec`], asked with `client`'s credentials.
pub async fn may_exec(client: &Client, namespace: &str, pod: &str) -> bool {
    client_can(client, "create", "pods", Some("exec"), namespace, pod).await
        && client_can(client, "get", "pods", Some("exec"), namespace, pod).await
}

/// Runs `kubectl exec` into `pod` as `user`, as that user would, through the apiserver to the
/// pod's kwok node, which runs `command` as a local process.
pub async fn exec(user: &str, ns: &str, pod: &str, command: &[&str]) -> exec::Output {
    let mut kubectl = env().kubectl(Some(user)).unwrap();
    kubectl.args(["exec", "-n", ns, pod, "--"]).args(command);
    exec::run(kubectl, exec::RUN_TIMEOUT).await.unwrap()
}
