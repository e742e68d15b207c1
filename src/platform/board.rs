//! One Workspace watch for many waiters: the drill resumes hundreds of Workspaces at once and
//! waits for each to be Running. A watch per Workspace would hold a stream (and a connection)
//! per Workspace for as long as it queues for a GPU; the board holds one stream for all of
//! them (label-selected: only the run's own), records when each state was first seen, and
//! wakes the waiters on every change. Each wait keeps its own named budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;

use super::attempts::Seen;
use super::crd::{Workspace, WorkspaceState};
use super::wait::{WaitError, WaitFor, permanent};
use super::workspace as ws;

/// What the board knows of one Workspace.
#[derive(Debug, Clone, Default)]
struct Entry {
    uid: Option<String>,
    /// The state in words, for budget messages (`ws::describe`).
    described: String,
    /// When each state was first seen.
    first: Vec<(WorkspaceState, Seen)>,
}

#[derive(Debug, Default)]
struct Log {
    entries: HashMap<String, Entry>,
    /// The last watch error, named when a budget runs out while the watch was failing.
    last_error: Option<String>,
    /// An error that retrying cannot fix (403, 404 ...): every wait ends with it.
    fatal: Option<String>,
}

impl Log {
    fn apply(&mut self, w: &Workspace) {
        let Some(name) = w.metadata.name.clone() else {
            return;
        };
        let e = self.entries.entry(name).or_default();
        e.uid = w.metadata.uid.clone();
        e.described = ws::describe(Some(w));
        if let Some(state) = w.status.as_ref().map(|s| s.state)
            && !e.first.iter().any(|(s, _)| *s == state)
        {
            e.first.push((state, Seen::now()));
        }
    }

    fn delete(&mut self, w: &Workspace) {
        if let Some(e) = w
            .metadata
            .name
            .as_ref()
            .and_then(|n| self.entries.get_mut(n))
        {
            e.described = "absent".into();
        }
    }
}

/// A running Workspace watch over one namespace and label selector; stops when dropped.
pub struct WorkspaceBoard {
    log: Arc<Mutex<Log>>,
    changed: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WorkspaceBoard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WorkspaceBoard {
    /// Starts the watch on the Workspaces of `namespace` that match `labels` and returns
    /// once its first list is in, or with why not within `first_list` (a named budget).
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        labels: &str,
        first_list: Duration,
    ) -> Result<Self, String> {
        let log = Arc::new(Mutex::new(Log::default()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(watch(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default().labels(labels),
            log.clone(),
            changed.clone(),
            ready_tx,
        ));
        let board = Self { log, changed, task };
        match tokio::time::timeout(first_list, ready_rx).await {
            Ok(Ok(Ok(()))) => Ok(board),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err("the Workspace watch ended before its first list".into()),
            Err(_) => Err(format!(
                "the Workspace watch did not list within {first_list:?}{}",
                board
                    .log()
                    .last_error
                    .as_ref()
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default()
            )),
        }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits, within `wf`'s budget, until Workspace `name` has been seen in `state`, and
    /// returns when it was first seen so (maybe before this call). `Ok(Err(uid))`: it was
    /// seen with another uid than `uid`, a namesake the caller must leave alone.
    pub async fn wait_state(
        &self,
        name: &str,
        uid: &str,
        state: WorkspaceState,
        wf: &WaitFor,
    ) -> Result<Result<Seen, String>, WaitError> {
        let deadline = Instant::now() + wf.budget;
        loop {
            let changed = self.changed.notified();
            {
                let log = self.log();
                if let Some(e) = log.entries.get(name) {
                    if let Some(other) = e.uid.as_deref().filter(|u| *u != uid) {
                        return Ok(Err(other.to_owned()));
                    }
                    if let Some((_, seen)) = e.first.iter().find(|(s, _)| *s == state) {
                        return Ok(Ok(*seen));
                    }
                }
                if log.fatal.is_some() || Instant::now() >= deadline {
                    return Err(WaitError::Budget {
                        phase: wf.phase.clone(),
                        budget: wf.budget,
                        object: format!("workspace {name}"),
                        what: wf.what.clone(),
                        last_state: log
                            .entries
                            .get(name)
                            .map_or_else(|| "absent".to_owned(), |e| e.described.clone()),
                        last_error: log.fatal.clone().or_else(|| log.last_error.clone()),
                    });
                }
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

async fn watch(
    api: Api<Workspace>,
    config: watcher::Config,
    log: Arc<Mutex<Log>>,
    changed: Arc<tokio::sync::Notify>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    let mut ready = Some(ready);
    let mut stream = watcher(api, config).default_backoff().boxed();
    while let Some(ev) = stream.next().await {
        {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            match ev {
                Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) => log.apply(&w),
                Ok(watcher::Event::Delete(w)) => log.delete(&w),
                Ok(watcher::Event::Init) => {}
                Ok(watcher::Event::InitDone) => {
                    if let Some(r) = ready.take() {
                        let _ = r.send(Ok(()));
                    }
                }
                Err(e) if permanent(&e) => {
                    let why = crate::output::one_line(&e);
                    log.fatal = Some(why.clone());
                    if let Some(r) = ready.take() {
                        let _ = r.send(Err(why));
                    }
                }
                Err(e) => log.last_error = Some(crate::output::one_line(&e)),
            }
        }
        changed.notify_waiters();
        if log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fatal
            .is_some()
        {
            return;
        }
    }
    if let Some(r) = ready.take() {
        let _ = r.send(Err("the Workspace watch ended".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::crd::WorkspaceStatus;

    fn workspace(name: &str, uid: &str, state: WorkspaceState) -> Workspace {
        let mut w = Workspace::new(name, crate::platform::crd::WorkspaceSpec::default());
        w.metadata.uid = Some(uid.into());
        w.status = Some(WorkspaceStatus {
            state,
            ..Default::default()
        });
        w
    }

    /// Each state is stamped the first time it is seen; later sightings keep that stamp.
    #[test]
    fn the_first_sighting_of_each_state_is_kept() {
        let mut log = Log::default();
        log.apply(&workspace("a", "u1", WorkspaceState::Pending));
        log.apply(&workspace("a", "u1", WorkspaceState::Running));
        let first_running = log.entries["a"].first[1].1;
        log.apply(&workspace("a", "u1", WorkspaceState::Running));
        let e = &log.entries["a"];
        assert_eq!(e.first.len(), 2);
        assert_eq!(e.first[1], (WorkspaceState::Running, first_running));
        log.delete(&workspace("a", "u1", WorkspaceState::Running));
        assert_eq!(log.entries["a"].described, "absent");
    }
}
