//! Finding and removing what wsgate runs created, by their labels: everything of one run
//! (after an interrupted run), or everything whose expiry has passed (after a killed run);
//! and the squeeze taints on nodes, whose value carries the run id and expiry.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Secret};
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

use super::crd::Workspace;
use super::ledger::{self, CleanupResult, EXPIRES_LABEL, Entry, MANAGED_BY, RUN_ID_LABEL};
use super::taint::{self, NodeTaint};

/// Which labelled objects to sweep.
#[derive(Debug, Clone)]
pub enum Selection {
    /// Everything one run created.
    Run(String),
    /// Everything whose `wsgate.dev/expires` is before `now`.
    ExpiredBefore(chrono::DateTime<chrono::Utc>),
}

impl Selection {
    fn selector(&self) -> String {
        match self {
            Selection::Run(id) => format!("{RUN_ID_LABEL}={id}"),
            Selection::ExpiredBefore(_) => format!("{}={}", MANAGED_BY.0, MANAGED_BY.1),
        }
    }

    fn keeps(&self, labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
        match self {
            Selection::Run(_) => true,
            Selection::ExpiredBefore(now) => labels
                .and_then(|l| l.get(EXPIRES_LABEL))
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|t| t < now.timestamp()),
        }
    }
}

async fn find<K>(
    client: &kube::Client,
    namespace: &str,
    sel: &Selection,
    out: &mut Vec<Entry>,
) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    for o in api
        .list(&ListParams::default().labels(&sel.selector()))
        .await?
        .items
    {
        let meta = o.meta();
        if !sel.keeps(meta.labels.as_ref()) {
            continue;
        }
        out.push(Entry {
            group: K::group(&()).to_string(),
            version: K::version(&()).to_string(),
            kind: K::kind(&()).to_string(),
            plural: K::plural(&()).to_string(),
            namespace: Some(namespace.to_string()),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
        });
    }
    Ok(())
}

/// The labelled objects in `namespace`, in the order they should be deleted (workspaces
/// first, so their pods and snapshots go with them; then pods, quotas, PVCs, secrets).
pub async fn find_all(
    client: &kube::Client,
    namespace: &str,
    sel: &Selection,
) -> Result<Vec<Entry>, kube::Error> {
    let mut out = Vec::new();
    find::<Workspace>(client, namespace, sel, &mut out).await?;
    find::<Pod>(client, namespace, sel, &mut out).await?;
    find::<ResourceQuota>(client, namespace, sel, &mut out).await?;
    find::<PersistentVolumeClaim>(client, namespace, sel, &mut out).await?;
    find::<Secret>(client, namespace, sel, &mut out).await?;
    Ok(out)
}

/// Deletes every entry (uid-bound) and waits for each within `budget`.
pub async fn sweep(
    client: &kube::Client,
    entries: &[Entry],
    budget: Duration,
) -> Vec<CleanupResult> {
    let mut out = Vec::new();
    for e in entries {
        out.push(CleanupResult {
            object: e.describe(),
            outcome: ledger::delete_and_wait(client, e, budget).await,
        });
    }
    out
}

/// The squeeze taints of the selection on any node: one run's, or those whose expiry (in
/// the taint's value) has passed. Taints whose value names no run are not wsgate's to remove.
pub async fn find_taints(
    client: &kube::Client,
    sel: &Selection,
) -> Result<Vec<NodeTaint>, kube::Error> {
    Ok(taint::find(client)
        .await?
        .into_iter()
        .filter(|t| match (t.run_and_expiry(), sel) {
            (Some((run, _)), Selection::Run(id)) => run == id,
            (Some((_, expires)), Selection::ExpiredBefore(now)) => expires < now.timestamp(),
            (None, _) => false,
        })
        .collect())
}

/// Takes every taint off its node, each within `budget`.
pub async fn sweep_taints(
    client: &kube::Client,
    taints: &[NodeTaint],
    budget: Duration,
) -> Vec<CleanupResult> {
    let mut out = Vec::new();
    for t in taints {
        out.push(CleanupResult {
            object: t.describe(),
            outcome: ledger::remove_taint(client, t, budget).await,
        });
    }
    out
}
