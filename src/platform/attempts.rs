//! Restore attempts in flight: a watch over a namespace's pods recording, per workspace,
//! the most pods alive (not terminating) at once after a resume, when its first new pod
//! was bound to a node, first seen Ready, and first seen with a `PodRestored` condition.
//! A count taken once, after the workspace is Running, misses an attempt that was already
//! cleaned up; this sees every one. GKE writes `PodRestored` after the pod is Ready (it
//! streams the memory in lazily), so [`AttemptWatch::wait_pod_restored`] waits for it.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;

use super::snapshots;
use super::watched::{LogGuard, Observe, Watched};
use super::workspace::WORKSPACE_LABEL;
use crate::verdict::ConditionEvidence;

/// A running pod watch; stops when dropped.
pub struct AttemptWatch {
    watch: Watched<PodLog>,
}

/// A moment the watch saw something, on both clocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen {
    pub instant: Instant,
    pub at: chrono::DateTime<chrono::Utc>,
}

impl Seen {
    pub(crate) fn now() -> Self {
        Self {
            instant: Instant::now(),
            at: chrono::Utc::now(),
        }
    }
}

/// What the watch saw of a workspace's `PodRestored` condition after the resume.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRestoredSeen {
    /// The first `PodRestored` condition seen on a live pod, and when.
    pub condition: Option<(ConditionEvidence, Seen)>,
    /// When a live pod of the workspace was first seen Ready.
    pub ready: Option<Seen>,
}

impl PodRestoredSeen {
    /// Ready -> `PodRestored`, when both were seen (zero if the condition came first).
    pub fn lag(&self) -> Option<std::time::Duration> {
        let (_, restored) = self.condition.as_ref()?;
        Some(
            restored
                .instant
                .saturating_duration_since(self.ready?.instant),
        )
    }
}

impl AttemptWatch {
    /// Starts watching `namespace`'s pods; returns once the first list is in, or with why
    /// not within `first_list` (the caller's named budget).
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        first_list: Duration,
    ) -> Result<Self, String> {
        let watch = Watched::start(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default(),
            PodLog::default(),
            first_list,
            "the pod watch",
        )
        .await?;
        Ok(Self { watch })
    }

    fn log(&self) -> LogGuard<'_, PodLog> {
        self.watch.log()
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
        self.scheduled_seen(workspace).map(|s| s.instant)
    }

    /// [`Self::scheduled`] with the wall-clock time the watch saw the binding.
    pub fn scheduled_seen(&self, workspace: &str) -> Option<Seen> {
        self.log().scheduled.get(workspace).copied()
    }

    /// What was seen of `workspace`'s `PodRestored` condition so far.
    pub fn pod_restored(&self, workspace: &str) -> PodRestoredSeen {
        self.log().pod_restored(workspace)
    }

    /// Waits until a live pod of `workspace` carries a `PodRestored` condition, or until
    /// `budget` has passed since the resume ([`Self::mark_resumed`]); returns what was seen
    /// either way (no condition at the end is evidence of a cold start, not an error).
    ///
    /// The budget counts from the resume request, or from the moment the workspace's pod
    /// was bound to a node if that came later: a resume that queued for a GPU is not
    /// penalised for the queue. The caller waits once the workspace is Running, so its pod
    /// is bound; when this watch has not delivered the binding yet (it can lag behind the
    /// Workspace watch when hundreds of pods change at once), the budget counts from the
    /// call instead, never from the resume alone. It is the caller's named budget; nothing
    /// here adds another.
    pub async fn wait_pod_restored(&self, workspace: &str, budget: Duration) -> PodRestoredSeen {
        let span = tracing::info_span!(super::wait::SPAN, on = "platform", phase = "pod_restored");
        tracing::Instrument::instrument(self.pod_restored_within(workspace, budget), span).await
    }

    async fn pod_restored_within(&self, workspace: &str, budget: Duration) -> PodRestoredSeen {
        let called = Instant::now();
        loop {
            let changed = self.watch.changed();
            let (seen, deadline) = {
                let log = self.log();
                let bound = log.scheduled.get(workspace).map_or(called, |s| s.instant);
                let from = log.resumed_at.map_or(bound, |r| r.max(bound));
                (log.pod_restored(workspace), from + budget)
            };
            if seen.condition.is_some() || Instant::now() >= deadline {
                return seen;
            }
            let _ = tokio::time::timeout_at(deadline.into(), changed).await;
        }
    }
}

/// What the pod watch saw: per workspace, when its first post-resume pod was bound, and the
/// most pods it had alive at once.
#[derive(Default)]
struct PodLog {
    resumed_at: Option<Instant>,
    alive: HashMap<String, BTreeSet<String>>,
    max_alive: HashMap<String, usize>,
    scheduled: HashMap<String, Seen>,
    /// Per workspace: when a live pod was first seen Ready=True after the resume.
    ready: HashMap<String, Seen>,
    /// Per workspace: the first `PodRestored` condition seen on a live pod after the resume.
    restored: HashMap<String, (ConditionEvidence, Seen)>,
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
                self.scheduled.entry(ws.clone()).or_insert_with(Seen::now);
            }
            if pod.metadata.deletion_timestamp.is_none() {
                if is_ready(pod) {
                    self.ready.entry(ws.clone()).or_insert_with(Seen::now);
                }
                if let Some(c) = snapshots::pod_restored(pod) {
                    self.restored
                        .entry(ws.clone())
                        .or_insert_with(|| (c, Seen::now()));
                }
            }
        }
    }

    fn pod_restored(&self, workspace: &str) -> PodRestoredSeen {
        PodRestoredSeen {
            condition: self.restored.get(workspace).cloned(),
            ready: self.ready.get(workspace).copied(),
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

/// Whether the pod's Ready condition is True.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Observe<Pod> for PodLog {
    fn event(&mut self, ev: watcher::Event<Pod>) {
        match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => self.apply(&p),
            watcher::Event::Delete(p) => self.delete(&p),
            // A relist (first list, or after a watch expired): the pods it lists are all
            // that is alive now; one deleted while the watch was down sends no Delete.
            watcher::Event::Init => self.relist(),
            watcher::Event::InitDone => {}
        }
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

    fn with_condition(mut p: Pod, type_: &str, message: Option<&str>) -> Pod {
        let c: k8s_openapi::api::core::v1::PodCondition = serde_json::from_value(
            serde_json::json!({"type": type_, "status": "True", "message": message}),
        )
        .unwrap();
        p.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(c);
        p
    }

    #[test]
    fn the_first_ready_and_the_first_pod_restored_of_a_live_pod_are_recorded() {
        let mut log = PodLog::default();
        // Before the resume nothing counts.
        log.apply(&with_condition(pod("w", "old", false), "Ready", None));
        log.resumed_at = Some(Instant::now());
        assert_eq!(
            log.pod_restored("w"),
            PodRestoredSeen {
                condition: None,
                ready: None
            }
        );
        let ready = with_condition(pod("w", "a", false), "Ready", None);
        log.apply(&ready);
        let first_ready = log.pod_restored("w").ready.expect("Ready seen");
        assert!(log.pod_restored("w").condition.is_none());
        // A terminating pod's condition is not the restore's.
        let gone = with_condition(pod("w", "b", true), "PodRestored", Some("from x"));
        log.apply(&gone);
        assert!(log.pod_restored("w").condition.is_none());
        let restored = with_condition(ready, "PodRestored", Some("Restored from snapshot s"));
        log.apply(&restored);
        log.apply(&with_condition(restored, "PodRestored", Some("later")));
        let seen = log.pod_restored("w");
        assert_eq!(seen.ready, Some(first_ready), "the first Ready stays");
        let (c, at) = seen.condition.expect("PodRestored seen");
        assert_eq!(c.message.as_deref(), Some("Restored from snapshot s"));
        assert!(at.instant >= first_ready.instant);
    }

    #[tokio::test]
    async fn the_wait_ends_at_the_budget_counted_from_the_resume() {
        let watch = AttemptWatch {
            watch: Watched::idle(resumed()),
        };
        let t = Instant::now();
        let seen = watch
            .wait_pod_restored("w", Duration::from_millis(50))
            .await;
        assert!(seen.condition.is_none());
        assert!(
            t.elapsed() >= Duration::from_millis(40),
            "{:?}",
            t.elapsed()
        );
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
