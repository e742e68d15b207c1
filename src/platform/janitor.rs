//! Finding and removing what wsgate runs created, by their labels: everything of one run
//! (after an interrupted run), or everything whose expiry has passed (after a killed run);
//! and the squeeze taints on nodes, whose value carries the run id and expiry.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Secret};
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

use super::crd::Workspace;
use super::ledger::{self, CleanupResult, Entry, MANAGED_BY, RUN_ID_LABEL};
use super::ownership;
use super::taint::{self, NodeTaint};

/// Which labelled objects to sweep: one run's, or every expired one
/// ([`ownership::Claim`]; a run id is checked with [`ownership::check_run_id`] first).
pub use super::ownership::Claim as Selection;

/// The server-side selector for a selection; what comes back is checked again here.
fn selector(sel: &Selection) -> String {
    match sel {
        Selection::Run(id) => format!("{}={},{RUN_ID_LABEL}={id}", MANAGED_BY.0, MANAGED_BY.1),
        Selection::ExpiredBefore(_) => format!("{}={}", MANAGED_BY.0, MANAGED_BY.1),
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
        .list(&ListParams::default().labels(&selector(sel)))
        .await?
        .items
    {
        let meta = o.meta();
        if !ownership::labels_claimed(meta.labels.as_ref(), sel) {
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

/// Deletes every entry that is `sel`'s (uid-bound) and waits for each within `budget`,
/// then for the pods of the Workspaces among them ([`ledger::wait_for_workspace_pods`]).
pub async fn sweep(
    client: &kube::Client,
    sel: &Selection,
    entries: &[Entry],
    budget: Duration,
) -> Vec<CleanupResult> {
    let mut deleted = Vec::new();
    for e in entries {
        let outcome = ledger::delete_and_wait(client, sel, e, budget).await;
        deleted.push((e.clone(), outcome));
    }
    ledger::wait_for_workspace_pods(client, &mut deleted, budget).await;
    deleted
        .into_iter()
        .map(|(e, outcome)| CleanupResult {
            object: e.describe(),
            outcome,
        })
        .collect()
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
        .filter(|t| ownership::check_taint(t, sel).is_ok())
        .collect())
}

/// Everything one run left, swept as after an interrupt (its ledger may miss what was
/// being created): its squeeze taints first, since they hold back every pod on their
/// nodes, then its labelled objects in `namespace`, each within `budget`. A listing that
/// fails is a result of its own: what it could not look at may be left behind.
pub async fn sweep_run(
    client: &kube::Client,
    namespace: &str,
    run_id: &str,
    budget: Duration,
) -> Vec<CleanupResult> {
    let sel = Selection::Run(run_id.to_string());
    let unlisted = |what: String, e: kube::Error| CleanupResult {
        object: what,
        outcome: ledger::CleanupOutcome::Leaked(format!("cannot list them: {e}")),
    };
    let mut out = match find_taints(client, &sel).await {
        Ok(taints) => sweep_taints(client, &sel, &taints, budget).await,
        Err(e) => vec![unlisted(format!("node taints of run {run_id}"), e)],
    };
    match find_all(client, namespace, &sel).await {
        Ok(entries) => out.extend(sweep(client, &sel, &entries, budget).await),
        Err(e) => out.push(unlisted(
            format!("objects of run {run_id} in {namespace}"),
            e,
        )),
    }
    out
}

/// Takes every taint that is `sel`'s off its node, each within `budget`.
pub async fn sweep_taints(
    client: &kube::Client,
    sel: &Selection,
    taints: &[NodeTaint],
    budget: Duration,
) -> Vec<CleanupResult> {
    let mut out = Vec::new();
    for t in taints {
        out.push(CleanupResult {
            object: t.describe(),
            outcome: ledger::remove_taint(client, sel, t, budget).await,
        });
    }
    out
}
