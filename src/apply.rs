//! The one way oz writes objects: server-side apply with oz's field manager, forced, since oz
//! is the only writer of what it applies.

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
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
