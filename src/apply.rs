//! How oz writes objects: server-side apply with oz's field manager, forced, since oz is the
//! only writer of what it applies; and, for an object oz knows to be new, a create.

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;

use crate::{FIELD_MANAGER, Result};

/// Applies `object` (which must carry its name) and returns what the apiserver stored.
pub async fn apply<K>(api: &Api<K>, object: &K) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    Ok(api
        .patch(
            &object.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await?)
}

/// Creates `object` if it is `new`, else applies it. A create costs the apiserver less than an
/// apply that creates: no apply body to parse as YAML and merge (about a third less of its CPU
/// per object, docs/benchmarks.md), and a burst of grants, two objects each, is bound by the
/// apiserver's CPU. What was created is owned by oz's field manager as an update;
/// a later forced apply by oz takes it over. An object that exists after all (created meanwhile,
/// or unseen by the cache that called it new) is applied instead.
pub async fn create_or_apply<K>(api: &Api<K>, object: &K, new: bool) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    if new {
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api.create(&params, object).await {
            Err(kube::Error::Api(status)) if status.reason == "AlreadyExists" => {}
            created => return Ok(created?),
        }
    }
    apply(api, object).await
}

/// Applies `status` to the status subresource of the object `name`.
pub async fn apply_status<K>(api: &Api<K>, name: &str, status: &impl Serialize) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    Ok(api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?)
}

/// Deletes `name`, treating "already gone" as success. Returns whether it existed.
pub async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(e.into()),
    }
}
