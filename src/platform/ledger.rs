//! The cleanup ledger: everything a scenario creates is recorded *before* it is created,
//! and removed in reverse order with UID-aware delete-and-wait once the evidence is in.
//! Created objects carry labels with the run id and an expiry, so `wsgate janitor` can
//! remove what a killed run left behind. Every removal goes through [`super::ownership`]:
//! the live object must be wsgate's, of the claimed run, in an opted-in namespace. A
//! cleanup ends when the pods of the Workspaces it deleted are gone too
//! ([`wait_for_workspace_pods`], reading only).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Preconditions, PropagationPolicy};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher::{self, watcher};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::crd::Workspace;
use super::names::WORKSPACE_LABEL;
use super::ownership::{self, Claim, NotOurs};
use super::taint::NodeTaint;

pub use super::names::{EXPIRES_LABEL, MANAGED_BY, RUN_ID_LABEL};

/// The labels every object a run creates carries.
pub fn labels(run_id: &str, expires_at: chrono::DateTime<chrono::Utc>) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RUN_ID_LABEL.to_string(), run_id.to_string()),
        (
            EXPIRES_LABEL.to_string(),
            expires_at.timestamp().to_string(),
        ),
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
    ])
}

/// One object the scenario creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: String,
    /// Known once the create succeeded; deletion is then bound to this uid.
    pub uid: Option<String>,
}

impl Entry {
    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(&self.group, &self.version, &self.kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, &self.plural);
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        }
    }

    /// `Workspace wsgate-test/ws-a`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// What happened to one entry at cleanup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanupResult {
    pub object: String,
    pub outcome: CleanupOutcome,
}

impl CleanupResult {
    /// Whether the object was left behind.
    pub fn is_leak(&self) -> bool {
        self.outcome.is_leak()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "detail")]
pub enum CleanupOutcome {
    Deleted,
    AlreadyGone,
    Kept,
    /// Still there when the budget ran out, or the delete failed: a leak.
    Leaked(String),
    /// Not wsgate's to touch (labels, uid, namespace or kind say so): left alone, and why.
    Refused(String),
}

impl CleanupOutcome {
    /// Whether the object was left behind: the one leak predicate that reports, exit codes
    /// and messages all ask.
    pub fn is_leak(&self) -> bool {
        matches!(self, CleanupOutcome::Leaked(_))
    }
}

/// The ledger of one scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub entries: Vec<Entry>,
    /// Node taints the scenario adds (the `taint` squeeze): removed, not deleted.
    #[serde(default)]
    pub taints: Vec<NodeTaint>,
}

impl Ledger {
    /// Records an object about to be created; returns its index for [`Ledger::created`].
    pub fn record<K: kube::Resource<DynamicType = ()>>(
        &mut self,
        namespace: Option<&str>,
        name: &str,
    ) -> usize {
        self.entries.push(Entry {
            group: K::group(&()).to_string(),
            version: K::version(&()).to_string(),
            kind: K::kind(&()).to_string(),
            plural: K::plural(&()).to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            uid: None,
        });
        self.entries.len() - 1
    }

    /// Notes the uid of a created object.
    pub fn created(&mut self, index: usize, uid: Option<String>) {
        if let Some(e) = self.entries.get_mut(index) {
            e.uid = uid;
        }
    }

    /// The uid recorded for the object of kind `K` named `name` in `namespace`.
    pub fn uid_of<K: kube::Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| {
                e.kind == K::kind(&())
                    && e.group == K::group(&())
                    && e.namespace.as_deref() == Some(namespace)
                    && e.name == name
            })
            .and_then(|e| e.uid.as_deref())
    }

    /// Checks a ledger read from a file (another machine wrote it, anyone may have edited
    /// it) before anything is removed: an entry without a uid (a real run records every
    /// uid it created), outside `namespace`, or cluster-scoped, and a taint that is not a
    /// squeeze taint of `claim`, is reported as refused and dropped. What remains still
    /// meets the live check of [`delete_and_wait`].
    pub fn vet(&self, namespace: &str, claim: &Claim) -> (Ledger, Vec<CleanupResult>) {
        let mut kept = Ledger::default();
        let mut refused = Vec::new();
        let mut refuse = |object: String, why: String| {
            refused.push(CleanupResult {
                object: object.clone(),
                outcome: CleanupOutcome::Refused(NotOurs { object, why }.to_string()),
            })
        };
        for t in &self.taints {
            match ownership::check_taint(t, claim) {
                Ok(()) => kept.taints.push(t.clone()),
                Err(e) => refuse(e.object, e.why),
            }
        }
        for e in &self.entries {
            match (&e.namespace, &e.uid) {
                (None, _) => refuse(
                    e.describe(),
                    "a cluster-scoped object; wsgate creates none".into(),
                ),
                (Some(ns), _) if ns != namespace => refuse(
                    e.describe(),
                    format!("outside the state's namespace {namespace}"),
                ),
                (_, None) => refuse(
                    e.describe(),
                    "the entry has no uid, so nothing proves wsgate created it".into(),
                ),
                _ => kept.entries.push(e.clone()),
            }
        }
        (kept, refused)
    }

    /// Records a node taint about to be added.
    pub fn record_taint(&mut self, taint: NodeTaint) {
        if !self.taints.contains(&taint) {
            self.taints.push(taint);
        }
    }

    /// Removes the taints (first: they hold back every pod), then everything in reverse
    /// order; each delete waits (within `budget`) until the object with that uid is gone.
    /// Only what `claim` owns is touched ([`super::ownership`]). `keep` leaves everything in
    /// place and says so.
    pub async fn cleanup(
        &self,
        client: &kube::Client,
        claim: &Claim,
        budget: Duration,
        keep: bool,
    ) -> Vec<CleanupResult> {
        let mut out = Vec::new();
        for t in &self.taints {
            let outcome = match keep {
                true => CleanupOutcome::Kept,
                false => remove_taint(client, claim, t, budget).await,
            };
            out.push((t.describe(), outcome));
        }
        let mut deleted = Vec::new();
        for e in self.entries.iter().rev() {
            let outcome = match keep {
                true => CleanupOutcome::Kept,
                false => delete_and_wait(client, claim, e, budget).await,
            };
            deleted.push((e.clone(), outcome));
        }
        wait_for_workspace_pods(client, &mut deleted, budget).await;
        out.extend(
            deleted
                .into_iter()
                .map(|(e, outcome)| (e.describe(), outcome)),
        );
        out.into_iter()
            .map(|(object, outcome)| CleanupResult { object, outcome })
            .collect()
    }
}

/// After the deletes of a cleanup: waits, within `budget` of its own (the deletes had
/// theirs), until the pods of the Workspaces
/// among `deleted` that were deleted or found gone are gone too, and makes each Workspace
/// whose pods are still there then a leak that names them. Deleted in the background, a
/// Workspace goes at once, and its pods after it: the garbage collector deletes its
/// StatefulSet, then the pods, which terminate (Kubernetes' garbage collection). One watch
/// of the pods with the controller's label serves every Workspace, so the wait is one
/// termination, not one per Workspace. Reads only; a Workspace of the name that is there
/// again (made after ours went) is not waited for: its pods are its own.
pub async fn wait_for_workspace_pods(
    client: &kube::Client,
    deleted: &mut [(Entry, CleanupOutcome)],
    budget: Duration,
) {
    let deadline = tokio::time::Instant::now() + budget;
    let mut by_namespace: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (e, outcome) in deleted.iter() {
        if let (true, Some(ns)) = (e.kind == Workspace::kind(&()), &e.namespace)
            && matches!(
                outcome,
                CleanupOutcome::Deleted | CleanupOutcome::AlreadyGone
            )
        {
            by_namespace
                .entry(ns.clone())
                .or_default()
                .insert(e.name.clone());
        }
    }
    for (ns, mut names) in by_namespace {
        let workspaces: Api<Workspace> = Api::namespaced(client.clone(), &ns);
        if let Ok(Ok(there)) =
            tokio::time::timeout_at(deadline, workspaces.list_metadata(&ListParams::default()))
                .await
        {
            for w in there.items {
                names.remove(w.metadata.name.as_deref().unwrap_or(""));
            }
        }
        let left = pods_gone(client, &ns, &names, deadline).await;
        for (e, outcome) in deleted.iter_mut() {
            if e.namespace.as_deref() != Some(ns.as_str()) || e.kind != Workspace::kind(&()) {
                continue;
            }
            if let Some(pods) = left.get(&e.name) {
                *outcome = CleanupOutcome::Leaked(format!(
                    "the Workspace is gone, but its pods are still there after the delete budget \
                     ({budget:?}, budgets.delete): {}",
                    pods.join(", ")
                ));
            }
        }
    }
}

/// Watches, until `deadline`, the pods in `namespace` with the workspace controller's label
/// until none of the Workspaces `names` has one left. Returns what is left at the deadline,
/// by Workspace name: its pods, or a line saying they could not be listed.
async fn pods_gone(
    client: &kube::Client,
    namespace: &str,
    names: &BTreeSet<String>,
    deadline: tokio::time::Instant,
) -> BTreeMap<String, Vec<String>> {
    if names.is_empty() {
        return BTreeMap::new();
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().labels(WORKSPACE_LABEL);
    let mut stream = watcher(api, config).default_backoff().boxed();
    // Pod name -> its Workspace, for the Workspaces waited for.
    let mut live: BTreeMap<String, String> = BTreeMap::new();
    let mut initial: BTreeMap<String, String> = BTreeMap::new();
    let mut listed = false;
    let mut last_error = String::new();
    let of_ours = |p: &Pod| -> Option<(String, String)> {
        let ws = p.metadata.labels.as_ref()?.get(WORKSPACE_LABEL)?;
        names
            .contains(ws)
            .then(|| (p.metadata.name.clone().unwrap_or_default(), ws.clone()))
    };
    loop {
        if listed && live.is_empty() {
            return BTreeMap::new();
        }
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(Ok(event))) => match event {
                watcher::Event::Init => initial.clear(),
                watcher::Event::InitApply(p) => initial.extend(of_ours(&p)),
                watcher::Event::InitDone => {
                    live = std::mem::take(&mut initial);
                    listed = true;
                }
                watcher::Event::Apply(p) => live.extend(of_ours(&p)),
                watcher::Event::Delete(p) => {
                    live.remove(p.metadata.name.as_deref().unwrap_or(""));
                }
            },
            Ok(Some(Err(e))) => {
                last_error = e.to_string();
                // Refused (permissions, say): retrying cannot fix it, so say it now.
                if super::wait::permanent(&e) {
                    break;
                }
            }
        }
    }
    let mut left: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if !listed {
        for ws in names {
            left.entry(ws.clone()).or_default().push(format!(
                "its pods in {namespace} (not listed: {last_error})"
            ));
        }
    }
    for (pod, ws) in live {
        left.entry(ws)
            .or_default()
            .push(format!("Pod {namespace}/{pod}"));
    }
    left
}

/// Takes a taint off its node within `budget`, if it is a squeeze taint of `claim`.
pub async fn remove_taint(
    client: &kube::Client,
    claim: &Claim,
    t: &NodeTaint,
    budget: Duration,
) -> CleanupOutcome {
    if let Err(e) = ownership::check_taint(t, claim) {
        return CleanupOutcome::Refused(e.to_string());
    }
    match tokio::time::timeout(budget, super::taint::remove(client, t)).await {
        Ok(Ok(true)) => CleanupOutcome::Deleted,
        Ok(Ok(false)) => CleanupOutcome::AlreadyGone,
        Ok(Err(e)) => CleanupOutcome::Leaked(match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        }),
        Err(_) => {
            CleanupOutcome::Leaked(format!("not removed within the delete budget ({budget:?})"))
        }
    }
}

/// Deletes one entry (bound to its uid) and waits, within `budget`, until it is gone.
/// First the live object must be `claim`'s ([`super::ownership`]): namespaced, in an
/// opted-in namespace, with wsgate's labels of that run, and the entry's uid when it has
/// one. An entry recorded before a create that never answered has no uid: the object of
/// that name is deleted only if its labels say this run made it. A Workspace's pods go
/// after it: [`wait_for_workspace_pods`] waits for them once every delete is done.
pub async fn delete_and_wait(
    client: &kube::Client,
    claim: &Claim,
    e: &Entry,
    budget: Duration,
) -> CleanupOutcome {
    let refused = |why: String| {
        CleanupOutcome::Refused(
            NotOurs {
                object: e.describe(),
                why,
            }
            .to_string(),
        )
    };
    let Some(namespace) = &e.namespace else {
        return refused("a cluster-scoped object; wsgate deletes none".into());
    };
    match super::target::check_opt_in(client, namespace).await {
        Ok(()) => {}
        Err(err @ super::target::TargetError::Namespace { .. }) => {
            return CleanupOutcome::Leaked(format!("cannot read its namespace: {err}"));
        }
        Err(super::target::TargetError::NamespaceMissing { .. }) => {
            return CleanupOutcome::AlreadyGone;
        }
        Err(err) => return refused(err.to_string()),
    }
    let api = e.api(client);
    let live = match api.get_opt(&e.name).await {
        Ok(Some(o)) => o,
        Ok(None) => return CleanupOutcome::AlreadyGone,
        Err(err) => return CleanupOutcome::Leaked(format!("cannot read it: {err}")),
    };
    if let Err(not_ours) =
        ownership::check_meta(&e.describe(), &live.metadata, claim, e.uid.as_deref())
    {
        // A uid that no longer matches: the object wsgate made is gone, another took the name.
        if e.uid.is_some() && ownership::labels_claimed(live.metadata.labels.as_ref(), claim) {
            return CleanupOutcome::AlreadyGone;
        }
        return CleanupOutcome::Refused(not_ours.to_string());
    }
    let uid = live.metadata.uid.unwrap_or_default();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&e.name, &dp).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return CleanupOutcome::AlreadyGone,
        // 409 on the uid precondition: a different object has the name now; ours is gone.
        Err(kube::Error::Api(s)) if s.code == 409 => return CleanupOutcome::AlreadyGone,
        Err(err) => return CleanupOutcome::Leaked(format!("delete failed: {err}")),
    }
    // await_condition ends at the first watch error (an expired resourceVersion, say): watch
    // again, briefly paced, until the budget runs out, and name the last error then.
    let deadline = tokio::time::Instant::now() + budget;
    let mut last_error = String::new();
    loop {
        let gone = await_condition(api.clone(), &e.name, conditions::is_deleted(&uid));
        let span = tracing::info_span!(super::wait::SPAN, on = "platform", phase = "delete");
        match tokio::time::timeout_at(deadline, gone)
            .instrument(span)
            .await
        {
            Ok(Ok(_)) => return CleanupOutcome::Deleted,
            Ok(Err(err)) => {
                tracing::debug!(object = %e.describe(), error = %err, "watch of a deletion failed; watching again");
                last_error = format!("; last watch error: {err}");
                let pause = tokio::time::Instant::now() + Duration::from_millis(200);
                tokio::time::sleep_until(pause.min(deadline)).await;
            }
            Err(_) => {
                return CleanupOutcome::Leaked(format!(
                    "still present after the delete budget ({budget:?}): a finalizer may be \
                     stuck{last_error}"
                ));
            }
        }
    }
}
