//! NoSchedule taints wsgate puts on GPU nodes (the `taint` squeeze): add and remove one
//! taint on one node without clobbering anyone else's edit (a JSON patch that tests the
//! node's resourceVersion, re-read and retried on conflict), and find every squeeze taint
//! left on the cluster. The taint's value carries the run id and the expiry
//! (`<run-id>.<epoch-seconds>`), so `wsgate janitor` can tell whose it is and when it may go.

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde::{Deserialize, Serialize};

/// The key of every squeeze taint.
pub const SQUEEZE_TAINT: &str = "wsgate.dev/squeeze";
/// The effect of every squeeze taint: new pods stay off the node; running ones stay.
pub const EFFECT: &str = "NoSchedule";
/// Conflicting edits (someone else changed the node in between) retried before giving up.
const CONFLICT_RETRIES: usize = 8;

/// One taint on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTaint {
    pub node: String,
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl NodeTaint {
    /// The squeeze taint of run `run_id` on `node`, removable by the janitor after `expires`.
    pub fn squeeze(node: &str, run_id: &str, expires: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            node: node.to_string(),
            key: SQUEEZE_TAINT.to_string(),
            value: format!("{run_id}.{}", expires.timestamp()),
            effect: EFFECT.to_string(),
        }
    }

    /// `taint wsgate.dev/squeeze=r...:NoSchedule on Node gpu-a`.
    pub fn describe(&self) -> String {
        format!(
            "taint {}={}:{} on Node {}",
            self.key, self.value, self.effect, self.node
        )
    }

    /// The run id and expiry (epoch seconds) in a squeeze taint's value.
    pub fn run_and_expiry(&self) -> Option<(&str, i64)> {
        let (run, expires) = self.value.rsplit_once('.')?;
        Some((run, expires.parse().ok()?))
    }

    fn matches(&self, t: &Taint) -> bool {
        t.key == self.key && t.value.as_deref() == Some(&self.value) && t.effect == self.effect
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TaintError {
    #[error("cannot {action} Node {node}")]
    Api {
        action: &'static str,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "cannot edit the taints of Node {node}: it changed under every one of {CONFLICT_RETRIES} attempts"
    )]
    Conflict { node: String },
}

/// Edits the node's taints with `change` (which says whether it changed anything). Returns
/// whether the node was changed; a node that does not exist is `Ok(false)`.
async fn edit(
    client: &kube::Client,
    node: &str,
    change: impl Fn(&mut Vec<Taint>) -> bool,
) -> Result<bool, TaintError> {
    let api: Api<Node> = Api::all(client.clone());
    let err = |action, source| TaintError::Api {
        action,
        node: node.to_string(),
        source,
    };
    for _ in 0..CONFLICT_RETRIES {
        let Some(current) = api.get_opt(node).await.map_err(|e| err("read", e))? else {
            return Ok(false);
        };
        let mut taints = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if !change(&mut taints) {
            return Ok(false);
        }
        let rv = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/spec/taints", "value": taints},
        ]))
        .expect("a valid JSON patch");
        match api
            .patch(node, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => return Ok(true),
            // The test failed (422) or the write raced (409): read again.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => continue,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) => return Err(err("patch", e)),
        }
    }
    Err(TaintError::Conflict {
        node: node.to_string(),
    })
}

/// Puts the taint on its node (nothing if it is there already).
pub async fn add(client: &kube::Client, t: &NodeTaint) -> Result<(), TaintError> {
    edit(client, &t.node, |taints| {
        if taints.iter().any(|x| t.matches(x)) {
            return false;
        }
        taints.push(Taint {
            key: t.key.clone(),
            value: Some(t.value.clone()),
            effect: t.effect.clone(),
            time_added: None,
        });
        true
    })
    .await
    .map(|_| ())
}

/// Takes the taint off its node; `Ok(false)` when it (or the node) was already gone.
pub async fn remove(client: &kube::Client, t: &NodeTaint) -> Result<bool, TaintError> {
    edit(client, &t.node, |taints| {
        let before = taints.len();
        taints.retain(|x| !t.matches(x));
        taints.len() != before
    })
    .await
}

/// Every squeeze taint on any node.
pub async fn find(client: &kube::Client) -> Result<Vec<NodeTaint>, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    Ok(nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .flat_map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            n.spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.key == SQUEEZE_TAINT)
                .map(move |t| NodeTaint {
                    node: name.clone(),
                    key: t.key,
                    value: t.value.unwrap_or_default(),
                    effect: t.effect,
                })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_carries_run_id_and_expiry_back() {
        let at = chrono::DateTime::from_timestamp(1_767_225_600, 0).expect("a time");
        let t = NodeTaint::squeeze("gpu-a", "r20260101-000000-ab12", at);
        assert_eq!(t.value, "r20260101-000000-ab12.1767225600");
        assert!(
            t.value.len() <= 63,
            "a taint value is at most 63 characters"
        );
        assert_eq!(
            t.run_and_expiry(),
            Some(("r20260101-000000-ab12", 1_767_225_600))
        );
        let foreign = NodeTaint {
            value: "someone-else".into(),
            ..t.clone()
        };
        assert_eq!(foreign.run_and_expiry(), None);
        assert_eq!(
            t.describe(),
            "taint wsgate.dev/squeeze=r20260101-000000-ab12.1767225600:NoSchedule on Node gpu-a"
        );
    }
}
