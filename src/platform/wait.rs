//! Watch-based waiting inside a named budget. The wait itself has no hidden timeout: the
//! budget is the caller's, and running out names the phase, the last state and message seen.
//! Long waits print progress (elapsed/budget, current state) every few seconds.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// A wait that ran out of budget or could not watch.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error(
        "budget `{phase}` ({budget:?}) ran out waiting for {object} to {what}; last state: {last_state}"
    )]
    Budget {
        phase: String,
        budget: Duration,
        object: String,
        what: String,
        last_state: String,
    },
    #[error("the watch on {object} ended unexpectedly")]
    Ended { object: String },
}

/// What a wait is for: the budget's name and limit, and a description for messages.
#[derive(Debug, Clone)]
pub struct WaitFor {
    pub phase: String,
    pub budget: Duration,
    pub what: String,
    /// How often to print progress; `None` prints none.
    pub progress_every: Option<Duration>,
}

impl WaitFor {
    pub fn new(phase: impl Into<String>, budget: Duration, what: impl Into<String>) -> Self {
        Self {
            phase: phase.into(),
            budget,
            what: what.into(),
            progress_every: Some(Duration::from_secs(5)),
        }
    }
}

/// Waits until `done(object)` holds for the object `name` (`None` = it does not exist).
/// `describe` renders the object's current state for progress and timeout messages.
pub async fn until<K>(
    api: &Api<K>,
    name: &str,
    wait: &WaitFor,
    describe: impl Fn(Option<&K>) -> String,
    done: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>, WaitError>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher(api.clone(), config).default_backoff().boxed();
    let object = format!("{} {name}", K::kind(&Default::default()));
    let start = Instant::now();
    let deadline = start + wait.budget;
    let mut current: Option<K> = None;
    let mut initial: Vec<K> = Vec::new();
    let mut last_progress = start;
    loop {
        let next = tokio::time::timeout_at(
            deadline.min(last_progress + Duration::from_secs(1)),
            stream.next(),
        )
        .await;
        let event = match next {
            Err(_) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(WaitError::Budget {
                        phase: wait.phase.clone(),
                        budget: wait.budget,
                        object,
                        what: wait.what.clone(),
                        last_state: describe(current.as_ref()),
                    });
                }
                if let Some(every) = wait.progress_every
                    && now.duration_since(last_progress) >= every
                {
                    eprintln!(
                        "  waiting for {object} to {} ({}): {:.0}s of {:.0}s, now: {}",
                        wait.what,
                        wait.phase,
                        now.duration_since(start).as_secs_f64(),
                        wait.budget.as_secs_f64(),
                        describe(current.as_ref())
                    );
                    last_progress = now;
                } else if wait.progress_every.is_none() {
                    last_progress = now;
                }
                continue;
            }
            Ok(None) => return Err(WaitError::Ended { object }),
            Ok(Some(ev)) => ev,
        };
        let changed = match event {
            Ok(watcher::Event::Init) => {
                initial.clear();
                false
            }
            Ok(watcher::Event::InitApply(o)) => {
                initial.push(o);
                false
            }
            Ok(watcher::Event::InitDone) => {
                current = initial.pop();
                true
            }
            Ok(watcher::Event::Apply(o)) => {
                current = Some(o);
                true
            }
            Ok(watcher::Event::Delete(_)) => {
                current = None;
                true
            }
            // Watch errors are retried with backoff; the budget bounds the whole wait.
            Err(e) => {
                tracing::debug!(error = %e, "watch error; retrying");
                false
            }
        };
        if changed && done(current.as_ref()) {
            return Ok(current);
        }
    }
}

/// Waits (at most `within`) for the next change to any object of `api` matching `labels`,
/// so that a caller re-evaluating a derived condition (GPU usage, snapshot lists) wakes on
/// changes instead of polling. Returns whether a change was seen.
pub async fn next_change<K>(api: &Api<K>, labels: Option<&str>, within: Duration) -> bool
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let mut config = watcher::Config::default();
    if let Some(l) = labels {
        config = config.labels(l);
    }
    let mut stream = watcher(api.clone(), config).default_backoff().boxed();
    let wait = async {
        let mut initialised = false;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::InitDone) => initialised = true,
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) if initialised => {
                    return true;
                }
                _ => {}
            }
        }
        false
    };
    tokio::time::timeout(within, wait).await.unwrap_or(false)
}
