//! Watch-based waiting inside a named budget. The wait itself has no hidden timeout: the
//! budget is the caller's, and running out names the phase, the last state and message seen.
//! Long waits print progress (elapsed/budget, current state) every few seconds.
//!
//! A watch the server drops is resumed by kube-runtime's watcher from the last
//! resourceVersion it saw (an event or a bookmark), with backoff between failed attempts;
//! only an expired resourceVersion (410) makes it list again. Transient watch errors are
//! retried within the budget and the last one is named if the budget runs out; an error
//! that retrying cannot fix (401, 403, 404 ...) ends the wait at once.
//!
//! Every wait of the harness on its target runs inside a `tracing` span named [`SPAN`]
//! with a field `on`: `platform` (a watch for a transition, here and in cleanup), `api` (one
//! API request, retries included) or `jupyter` (a Jupyter REST call, a kernel websocket, a
//! cell). A subscriber can time them: `benches/suite.rs` subtracts them from the wall time
//! to get the harness's own overhead.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tracing::Instrument;

/// A wait that ran out of budget or could not watch.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error(
        "budget `{phase}` ({budget:?}) ran out waiting for {object} to {what}; last state: \
         {last_state}{}",
        WaitError::budget_detail(.last_error)
    )]
    Budget {
        phase: String,
        budget: Duration,
        object: String,
        what: String,
        last_state: String,
        /// The last watch error seen, when the watch was failing as the budget ran out.
        last_error: Option<String>,
    },
    #[error("the watch on {object} ended unexpectedly")]
    Ended { object: String },
    #[error("cannot watch {object}")]
    Watch {
        object: String,
        #[source]
        source: watcher::Error,
    },
}

impl WaitError {
    /// The budget message with the last watch error, if there was one.
    fn budget_detail(last_error: &Option<String>) -> String {
        last_error
            .as_ref()
            .map(|e| format!("; last watch error: {e}"))
            .unwrap_or_default()
    }
}

/// Whether a watch error is one that retrying cannot fix: the server refused the request
/// itself (bad request, credentials, permissions, unknown resource). Throttling, server
/// errors, expired resourceVersions and dropped connections are transient.
pub fn permanent(e: &watcher::Error) -> bool {
    let refused = |code: u16| (400..500).contains(&code) && !matches!(code, 408 | 409 | 410 | 429);
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => refused(s.code),
        watcher::Error::WatchError(s) => refused(s.code),
        _ => false,
    }
}

/// The name of the span around every wait of the harness on its target (see the module doc).
pub const SPAN: &str = "wsgate.wait";

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
    let span = tracing::info_span!(SPAN, on = "platform", phase = %wait.phase);
    until_unspanned(api, name, wait, describe, done)
        .instrument(span)
        .await
}

/// [`until`] without its span: for a watch that runs beside another wait (the span's time
/// would be counted twice).
pub async fn until_unspanned<K>(
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
    let mut last_error: Option<String> = None;
    loop {
        // Wake for the next event, the next progress line or the end of the budget, whichever
        // comes first (and never before: a wake-up that is already due would spin).
        let wake = match wait.progress_every {
            Some(every) => deadline.min(last_progress + every),
            None => deadline,
        };
        let next = tokio::time::timeout_at(wake, stream.next()).await;
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
                        last_error,
                    });
                }
                crate::say_err!(
                    "  waiting for {object} to {} ({}): {:.0}s of {:.0}s, now: {}",
                    wait.what,
                    wait.phase,
                    now.duration_since(start).as_secs_f64(),
                    wait.budget.as_secs_f64(),
                    describe(current.as_ref())
                );
                last_progress = now;
                continue;
            }
            Ok(None) => return Err(WaitError::Ended { object }),
            Ok(Some(ev)) => ev,
        };
        // `Init` opens every (re)list, before its request: only data shows the watch works.
        if event
            .as_ref()
            .is_ok_and(|e| !matches!(e, watcher::Event::Init))
        {
            last_error = None;
        }
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
            Err(e) if permanent(&e) => return Err(WaitError::Watch { object, source: e }),
            // Transient watch errors are retried with backoff; the budget bounds the wait.
            Err(e) => {
                tracing::debug!(error = %e, %object, "watch error; retrying");
                last_error = Some(e.to_string());
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
    tokio::time::timeout(within, wait)
        .instrument(tracing::info_span!(
            SPAN,
            on = "platform",
            phase = "next_change"
        ))
        .await
        .unwrap_or(false)
}
