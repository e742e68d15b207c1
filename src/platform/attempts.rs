//! Restore attempts in flight: a watch over a namespace's pods recording, per workspace,
//! the most pods alive (not terminating) at once after a resume, and when its first new pod
//! was bound to a node. A count taken once, after the workspace is Running, misses an
//! attempt that was already cleaned up; this sees every one.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::workspace::WORKSPACE_LABEL;

/// A running pod watch; stops when dropped.
pub struct AttemptWatch {
    log: Arc<Mutex<PodLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AttemptWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AttemptWatch {
    /// Starts watching `namespace`'s pods; returns once the first list is in.
    pub async fn start(client: &kube::Client, namespace: &str) -> Result<Self, String> {
        let log = Arc::new(Mutex::new(PodLog::default()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(watch_pods(
            Api::namespaced(client.clone(), namespace),
            log.clone(),
            ready_tx,
        ));
        ready_rx
            .await
            .map_err(|_| "the pod watch ended before its first list".to_string())??;
        Ok(Self { log, task })
    }

    fn log(&self) -> std::sync::MutexGuard<'_, PodLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now on, count attempts and bindings (call just before the resume request).
    pub fn mark_resumed(&self) {
        self.log().resumed_at = Some(Instant::now());
    }

    /// The most pods `workspace` had alive at once since [`Self::mark_resumed`].
    pub fn max_alive(&self, workspace: &str) -> usize {
        self.log().max_alive.get(workspace).copied().unwrap_or(0)
    }

    /// When `workspace`'s first pod after the resume was bound to a node.
    pub fn scheduled(&self, workspace: &str) -> Option<Instant> {
        self.log().scheduled.get(workspace).copied()
    }
}

/// What the pod watch saw: per workspace, when its first post-resume pod was bound, and the
/// most pods it had alive at once.
#[derive(Default)]
struct PodLog {
    resumed_at: Option<Instant>,
    alive: HashMap<String, BTreeSet<String>>,
    max_alive: HashMap<String, usize>,
    scheduled: HashMap<String, Instant>,
}

impl PodLog {
    fn apply(&mut self, pod: &Pod) {
        let Some(ws) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(WORKSPACE_LABEL))
        else {
            return;
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let alive = self.alive.entry(ws.clone()).or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            alive.remove(&uid);
        } else {
            alive.insert(uid);
        }
        let n = alive.len();
        if self.resumed_at.is_some() {
            let max = self.max_alive.entry(ws.clone()).or_default();
            *max = (*max).max(n);
            let bound = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some();
            if bound && pod.metadata.deletion_timestamp.is_none() {
                self.scheduled
                    .entry(ws.clone())
                    .or_insert_with(Instant::now);
            }
        }
    }

    /// Forgets which pods are alive (the maxima stay): a relist re-adds the living ones.
    fn relist(&mut self) {
        self.alive.values_mut().for_each(BTreeSet::clear);
    }

    fn delete(&mut self, pod: &Pod) {
        if let (Some(ws), Some(uid)) = (
            pod.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(WORKSPACE_LABEL)),
            pod.metadata.uid.as_ref(),
        ) && let Some(alive) = self.alive.get_mut(ws)
        {
            alive.remove(uid);
        }
    }
}

async fn watch_pods(
    api: Api<Pod>,
    log: Arc<Mutex<PodLog>>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    let mut ready = Some(ready);
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(ev) = stream.next().await {
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        match ev {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => log.apply(&p),
            Ok(watcher::Event::Delete(p)) => log.delete(&p),
            // A relist (first list, or after a watch expired): the pods it lists are all
            // that is alive now; one deleted while the watch was down sends no Delete.
            Ok(watcher::Event::Init) => log.relist(),
            Ok(watcher::Event::InitDone) => {
                if let Some(r) = ready.take() {
                    let _ = r.send(Ok(()));
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "drill pod watch error; resuming");
            }
        }
    }
    if let Some(r) = ready.take() {
        let _ = r.send(Err("the pod watch ended".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ws: &str, uid: &str, deleting: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.labels = Some([(WORKSPACE_LABEL.to_string(), ws.to_string())].into());
        if deleting {
            p.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
        }
        p
    }

    /// A log that counts from now on, as after `mark_resumed`.
    fn resumed() -> PodLog {
        PodLog {
            resumed_at: Some(Instant::now()),
            ..Default::default()
        }
    }

    #[test]
    fn two_live_pods_of_one_workspace_count_as_two_attempts() {
        let mut log = resumed();
        log.apply(&pod("w", "a", false));
        log.apply(&pod("w", "b", false));
        log.apply(&pod("w", "a", true));
        log.apply(&pod("v", "c", false));
        assert_eq!(log.max_alive.get("w"), Some(&2));
        assert_eq!(log.max_alive.get("v"), Some(&1));
    }

    #[test]
    fn a_pod_deleted_while_the_watch_was_down_is_not_an_attempt() {
        let mut log = resumed();
        log.apply(&pod("w", "old", false));
        // The watch expired; `old` was deleted meanwhile, and the relist lists only `new`.
        log.relist();
        log.apply(&pod("w", "new", false));
        assert_eq!(log.max_alive.get("w"), Some(&1));
        assert_eq!(log.alive["w"].len(), 1);
    }
}
