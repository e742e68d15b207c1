//! Create and delete that stay correct when [`super::retry`] resends them: a 500 or a
//! dropped connection can come after the API server applied the change, so the retry may
//! meet the harness's own first attempt. A create that meets AlreadyExists for an object
//! that is wsgate's own from this run ([`super::ownership`]: managed-by wsgate and this
//! run's id) adopts that object; any other existing object is left alone and the error says
//! whose it is. A delete that meets NotFound is done. Anything else keeps its error.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ledger::RUN_ID_LABEL;
use super::ownership::{self, Claim};

/// Creates `obj`; if an object of that name exists and is wsgate's from the same run as
/// `obj`, returns it instead of the AlreadyExists error. Any other existing object is never
/// adopted: the AlreadyExists error comes back with a message naming the object, who owns
/// it, and that wsgate leaves it alone.
pub async fn create<K>(api: &Api<K>, obj: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + Debug + DeserializeOwned + Serialize,
    K::DynamicType: Default,
{
    let err = match api.create(&PostParams::default(), obj).await {
        Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => s,
        other => return other,
    };
    let mut err = err;
    let Some(name) = obj.meta().name.clone() else {
        return Err(kube::Error::Api(err));
    };
    let run = obj.labels().get(RUN_ID_LABEL).cloned().unwrap_or_default();
    let what = format!("{} {name}", K::kind(&Default::default()));
    match api.get_opt(&name).await? {
        Some(existing)
            if ownership::labels_claimed(
                existing.meta().labels.as_ref(),
                &Claim::Run(run.clone()),
            ) =>
        {
            tracing::debug!(
                %name,
                run_id = %run,
                "create met an object of this run (an earlier attempt was applied); adopting it"
            );
            Ok(existing)
        }
        Some(existing) => {
            err.message = format!(
                "{what} already exists and is not this run's ({}); wsgate leaves it alone: \
                 remove it if it is a leftover (`wsgate janitor` removes wsgate's own), or use \
                 another namespace",
                ownership::owner(existing.meta().labels.as_ref())
            );
            Err(kube::Error::Api(err))
        }
        None => Err(kube::Error::Api(err)),
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
