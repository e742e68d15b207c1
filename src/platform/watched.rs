//! One long-lived watch that writes what it sees into a log, for the harness's observers:
//! the Workspace watch of a pause or resume (`pause::WorkspaceWatch`), the PodSnapshots of
//! that Workspace, the pod watch that counts restore attempts (`attempts::AttemptWatch`)
//! and the drill's board of resumed Workspaces (`board::WorkspaceBoard`). Each of them
//! needs the same things, written once here: the first list in within a named budget (so
//! a change after `start` returns is not missed, and a target that never lists is an error
//! that says so), the watcher's retries kept for budget messages, an error that retrying
//! cannot fix (403, 404 ...) ending the watch with its reason, waiters woken on every
//! change, and the task stopped when the observer is dropped.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;

use super::wait::permanent;

/// What one observer does with the watch's events. `Init`, `InitApply`, `InitDone` mark a
/// (re)list: the objects of a relist are all that exist then; one deleted while the watch
/// was down sends no `Delete`.
pub trait Observe<K>: Send + 'static {
    fn event(&mut self, ev: watcher::Event<K>);
}

/// The log and what the watch itself went through.
#[derive(Debug, Default)]
pub struct Shared<L> {
    pub log: L,
    /// The last error the watcher is retrying past, named when a budget runs out.
    pub last_error: Option<String>,
    /// An error that retrying cannot fix; the watch has ended with it.
    pub fatal: Option<String>,
}

/// A running watch; stops when dropped.
pub struct Watched<L> {
    shared: Arc<Mutex<Shared<L>>>,
    changed: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl<L> Drop for Watched<L> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<L> Watched<L> {
    /// Starts watching `api` with `config`, writing into `log`, and returns once the first
    /// list is in, or with why not within `first_list` (the caller's named budget). `what`
    /// names the watch in messages ("the Workspace watch").
    pub async fn start<K>(
        api: Api<K>,
        config: watcher::Config,
        log: L,
        first_list: Duration,
        what: &str,
    ) -> Result<Self, String>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        L: Observe<K>,
    {
        let shared = Arc::new(Mutex::new(Shared {
            log,
            last_error: None,
            fatal: None,
        }));
        let changed = Arc::new(tokio::sync::Notify::new());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(run(api, config, shared.clone(), changed.clone(), ready_tx));
        let watched = Self {
            shared,
            changed,
            task,
        };
        match tokio::time::timeout(first_list, ready_rx).await {
            Ok(Ok(Ok(()))) => Ok(watched),
            Ok(Ok(Err(e))) => Err(format!("{what} failed: {e}")),
            Ok(Err(_)) => Err(format!("{what} ended before its first list")),
            Err(_) => Err(format!(
                "{what} did not list within {first_list:?}{}",
                watched
                    .shared()
                    .last_error
                    .as_ref()
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default()
            )),
        }
    }

    /// A log that no watch feeds: for tests of what an observer does with its log.
    #[cfg(test)]
    pub(crate) fn idle(log: L) -> Self {
        Self {
            shared: Arc::new(Mutex::new(Shared {
                log,
                last_error: None,
                fatal: None,
            })),
            changed: Arc::new(tokio::sync::Notify::new()),
            task: tokio::spawn(async {}),
        }
    }

    /// The log, with the watch's own errors beside it.
    pub fn shared(&self) -> MutexGuard<'_, Shared<L>> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The log.
    pub fn log(&self) -> LogGuard<'_, L> {
        LogGuard(self.shared())
    }

    /// Resolves at the next change the watch applies (create it before reading the log, so
    /// a change in between is not missed).
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

/// The log of a [`Watched`], locked.
pub struct LogGuard<'a, L>(MutexGuard<'a, Shared<L>>);

impl<L> std::ops::Deref for LogGuard<'_, L> {
    type Target = L;
    fn deref(&self) -> &L {
        &self.0.log
    }
}

impl<L> std::ops::DerefMut for LogGuard<'_, L> {
    fn deref_mut(&mut self) -> &mut L {
        &mut self.0.log
    }
}

async fn run<K, L>(
    api: Api<K>,
    config: watcher::Config,
    shared: Arc<Mutex<Shared<L>>>,
    changed: Arc<tokio::sync::Notify>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    L: Observe<K>,
{
    let mut ready = Some(ready);
    let mut stream = watcher(api, config).default_backoff().boxed();
    while let Some(ev) = stream.next().await {
        let fatal = {
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            match ev {
                Ok(ev) => {
                    let listed = matches!(ev, watcher::Event::InitDone);
                    s.log.event(ev);
                    if listed && let Some(r) = ready.take() {
                        let _ = r.send(Ok(()));
                    }
                    false
                }
                Err(e) if permanent(&e) => {
                    let why = crate::output::one_line(&e);
                    s.fatal = Some(why.clone());
                    if let Some(r) = ready.take() {
                        let _ = r.send(Err(why));
                    }
                    true
                }
                Err(e) => {
                    s.last_error = Some(crate::output::one_line(&e));
                    false
                }
            }
        };
        changed.notify_waiters();
        if fatal {
            return;
        }
    }
    if let Some(r) = ready.take() {
        let _ = r.send(Err("the watch stream ended".into()));
    }
}
