//! Create and delete that stay correct when [`super::retry`] resends them: a 500 or a
//! dropped connection can come after the API server applied the change, so the retry may
//! meet the harness's own first attempt. A create that meets AlreadyExists for an object
//! carrying this run's id ([`super::ledger::RUN_ID_LABEL`]) adopts that object; a delete
//! that meets NotFound is done. Anything else keeps its error.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ledger::RUN_ID_LABEL;

/// Creates `obj`; if an object of that name exists and carries the same run id as `obj`,
/// returns it instead of the AlreadyExists error. Objects without a run id are never adopted.
pub async fn create<K>(api: &Api<K>, obj: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + Debug + DeserializeOwned + Serialize,
{
    let err = match api.create(&PostParams::default(), obj).await {
        Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => s,
        other => return other,
    };
    let (Some(run), Some(name)) = (obj.labels().get(RUN_ID_LABEL), obj.meta().name.as_ref()) else {
        return Err(kube::Error::Api(err));
    };
    match api.get_opt(name).await? {
        Some(existing) if existing.labels().get(RUN_ID_LABEL) == Some(run) => {
            tracing::debug!(
                %name,
                run_id = %run,
                "create met an object of this run (an earlier attempt was applied); adopting it"
            );
            Ok(existing)
        }
        _ => Err(kube::Error::Api(err)),
    }
}

/// Deletes `name`; NotFound counts as done (`Ok(false)`), an accepted delete is `Ok(true)`.
pub async fn delete<K>(api: &Api<K>, name: &str, params: &DeleteParams) -> Result<bool, kube::Error>
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    match api.delete(name, params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}
