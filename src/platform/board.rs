//! One Workspace watch for many waiters: the drill resumes hundreds of Workspaces at once and
//! waits for each to be Running. A watch per Workspace would hold a stream (and a connection)
//! per Workspace for as long as it queues for a GPU; the board holds one stream for all of
//! them (label-selected: only the run's own), records when each state was first seen, and
//! wakes the waiters on every change. Each wait keeps its own named budget.

use std::collections::HashMap;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::watcher;
use tokio::time::Instant;

use super::attempts::Seen;
use super::crd::{Workspace, WorkspaceState};
use super::wait::{WaitError, WaitFor};
use super::watched::{Observe, Watched};
use super::workspace as ws;

/// When each state of a Workspace was first seen.
#[derive(Debug, Clone, Default)]
pub struct FirstStates(Vec<(WorkspaceState, Seen)>);

impl FirstStates {
    /// Stamps `state` now, unless it was seen before (that stamp stays).
    pub fn saw(&mut self, state: WorkspaceState) {
        if !self.0.iter().any(|(s, _)| *s == state) {
            self.0.push((state, Seen::now()));
        }
    }

    /// When `state` was first seen.
    pub fn get(&self, state: WorkspaceState) -> Option<Seen> {
        self.0.iter().find(|(s, _)| *s == state).map(|(_, at)| *at)
    }
}

/// What the board knows of one Workspace.
#[derive(Debug, Clone, Default)]
struct Entry {
    uid: Option<String>,
    /// The state in words, for budget messages (`ws::describe`).
    described: String,
    first: FirstStates,
}

#[derive(Debug, Default)]
struct Log {
    entries: HashMap<String, Entry>,
}

impl Log {
    fn apply(&mut self, w: &Workspace) {
        let Some(name) = w.metadata.name.clone() else {
            return;
        };
        let e = self.entries.entry(name).or_default();
        e.uid = w.metadata.uid.clone();
        e.described = ws::describe(Some(w));
        if let Some(state) = w.status.as_ref().map(|s| s.state) {
            e.first.saw(state);
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

impl Observe<Workspace> for Log {
    fn event(&mut self, ev: watcher::Event<Workspace>) {
        match ev {
            watcher::Event::Apply(w) | watcher::Event::InitApply(w) => self.apply(&w),
            watcher::Event::Delete(w) => self.delete(&w),
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

/// A running Workspace watch over one namespace and label selector; stops when dropped.
pub struct WorkspaceBoard {
    watch: Watched<Log>,
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
        let watch = Watched::start(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default().labels(labels),
            Log::default(),
            first_list,
            "the Workspace watch",
        )
        .await?;
        Ok(Self { watch })
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
        let span = tracing::info_span!(super::wait::SPAN, on = "platform", phase = %wf.phase);
        let wait = async {
            let deadline = Instant::now() + wf.budget;
            loop {
                let changed = self.watch.changed();
                {
                    let shared = self.watch.shared();
                    if let Some(e) = shared.log.entries.get(name) {
                        if let Some(other) = e.uid.as_deref().filter(|u| *u != uid) {
                            return Ok(Err(other.to_owned()));
                        }
                        if let Some(seen) = e.first.get(state) {
                            return Ok(Ok(seen));
                        }
                    }
                    if shared.fatal.is_some() || Instant::now() >= deadline {
                        return Err(WaitError::Budget {
                            phase: wf.phase.clone(),
                            budget: wf.budget,
                            object: format!("workspace {name}"),
                            what: wf.what.clone(),
                            last_state: shared
                                .log
                                .entries
                                .get(name)
                                .map_or_else(|| "absent".to_owned(), |e| e.described.clone()),
                            last_error: shared.fatal.clone().or_else(|| shared.last_error.clone()),
                        });
                    }
                }
                tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
            }
        };
        tracing::Instrument::instrument(wait, span).await
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
        let first_running = log.entries["a"].first.get(WorkspaceState::Running);
        assert!(first_running.is_some());
        log.apply(&workspace("a", "u1", WorkspaceState::Running));
        let e = &log.entries["a"];
        assert_eq!(e.first.0.len(), 2);
        assert_eq!(e.first.get(WorkspaceState::Running), first_running);
        log.delete(&workspace("a", "u1", WorkspaceState::Running));
        assert_eq!(log.entries["a"].described, "absent");
    }
}
