//! Activity probing and auto-pause (kubeflow-workspaces.md §5): when a probe is due, the
//! Jupyter `/api/status` probe, the first-match-wins `activityRules`, and the pause rule.
//! Everything but [`probe_jupyter`] is pure; the controller feeds it simulator-scaled
//! durations (`profile.timing.scaled`), so idle drills take seconds.

use std::time::Duration;

use serde_json::{Value, json};

use crate::sim::json::Lookup as _;
use crate::sim::json::now_epoch_ms;
use crate::sim::selector::LabelSelector;

/// Upstream's timeout for one Jupyter probe request.
pub const JUPYTER_PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Upstream's cap on a probe response body.
const MAX_BODY: usize = 1 << 20;

pub const MSG_JUPYTER_FAILED: &str = "Jupyter probe failed: ";
pub const MSG_JUPYTER_SUCCEEDED: &str = "Jupyter probe succeeded";
pub const MSG_POD_NOT_READY: &str = "probe failed: Workspace Pod is not ready";
pub const MSG_EXEC_NOT_CONFIGURED: &str = "PodExec probe failed: exec is not configured";
pub const MSG_NO_TYPE: &str = "probe failed: no probe type configured";

/// A WorkspaceKind's `activityRules` entry that cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActivityError {
    #[error("activityRule[{index}] has an invalid selector: {reason}")]
    Selector { index: usize, reason: String },
}

/// `status.activity.lastProbe.result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    Success,
    Failure,
    Timeout,
}

impl ProbeOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "Success",
            Self::Failure => "Failure",
            Self::Timeout => "Timeout",
        }
    }
}

/// One probe's result; times in epoch ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    pub start_ms: i64,
    pub end_ms: i64,
    pub outcome: ProbeOutcome,
    pub message: String,
    /// The activity the probe reported (only on success).
    pub last_activity_ms: Option<i64>,
}

impl ProbeResult {
    /// A failure that ran no request (no pod IP, no port, an unsupported probe type).
    pub fn failed_now(now_ms: i64, message: impl Into<String>) -> Self {
        Self {
            start_ms: now_ms,
            end_ms: now_ms,
            outcome: ProbeOutcome::Failure,
            message: message.into(),
            last_activity_ms: None,
        }
    }

    pub fn succeeded(&self) -> bool {
        self.outcome == ProbeOutcome::Success
    }

    /// Applies the result to `status.activity`: `lastProbe` always; on success
    /// `lastActivity` (when reported) and `lastUpdate`.
    pub fn apply(&self, activity: &mut Value) {
        activity["lastProbe"] = json!({
            "startTime": self.start_ms,
            "endTime": self.end_ms,
            "result": self.outcome.as_str(),
            "message": self.message,
        });
        if self.succeeded() {
            if let Some(t) = self.last_activity_ms {
                activity["lastActivity"] = json!(t);
            }
            activity["lastUpdate"] = json!(self.end_ms);
        }
    }
}

/// The kind's `activityProbe`, with intervals already scaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeConfig {
    /// `jupyter.portId`; `None` for a `podExec` probe (the simulator has no exec).
    pub jupyter_port: Option<String>,
    pub has_exec: bool,
    pub min_interval: Duration,
    pub interval: Duration,
}

/// Reads `spec.podTemplate.activityProbe` (defaults 300 / 3600 s), scaling with `scale`.
pub fn probe_config(kind: &Value, scale: impl Fn(i64) -> Duration) -> Option<ProbeConfig> {
    let p = kind.lookup("/spec/podTemplate/activityProbe")?;
    let secs = |field: &str, default: i64| p.get(field).and_then(Value::as_i64).unwrap_or(default);
    Some(ProbeConfig {
        jupyter_port: p
            .lookup("/jupyter/portId")
            .and_then(Value::as_str)
            .map(str::to_string),
        has_exec: p.get("podExec").is_some(),
        min_interval: scale(secs("minProbeIntervalSeconds", 300)),
        interval: scale(secs("probeIntervalSeconds", 3600)),
    })
}

/// Whether a probe is due: no probe yet, or `probeInterval` (last one succeeded) or
/// `minProbeInterval` (it failed) since the last probe started. `Err` is the time left.
pub fn probe_due(
    last_probe: Option<&Value>,
    now_ms: i64,
    cfg: &ProbeConfig,
) -> Result<(), Duration> {
    let Some(last) = last_probe.filter(|p| p.is_object()) else {
        return Ok(());
    };
    let start = last.get("startTime").and_then(Value::as_i64).unwrap_or(0);
    if start <= 0 {
        return Ok(());
    }
    let required = if last.get("result").and_then(Value::as_str) == Some("Success") {
        cfg.interval
    } else {
        cfg.min_interval
    };
    let elapsed = Duration::from_millis((now_ms - start).max(0) as u64);
    if elapsed < required {
        Err(required - elapsed)
    } else {
        Ok(())
    }
}

/// The first rule that configures `pauseWorkspace` and matches, with its durations scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseRule {
    pub pause: bool,
    pub since_active: Duration,
    pub min_running: Duration,
}

/// Converts a `metav1.LabelSelector` (`matchLabels`, `matchExpressions`) into requirements.
fn selector(v: &Value) -> Result<LabelSelector, String> {
    LabelSelector::from_object(v).map_err(|e| e.reason)
}

/// Evaluates `activityRules` for the `pauseWorkspace` effect: first match wins, an absent
/// or empty `match` matches everything, `matchNamespace` and `matchPodConfig` are ANDed.
pub fn pause_rule(
    rules: &[Value],
    namespace_labels: &Value,
    pod_config_labels: &Value,
    scale: impl Fn(i64) -> Duration,
) -> Result<Option<PauseRule>, ActivityError> {
    for (index, rule) in rules.iter().enumerate() {
        let Some(pause) = rule
            .lookup("/effect/pauseWorkspace")
            .and_then(Value::as_bool)
        else {
            continue;
        };
        let mut matched = true;
        for (field, labels) in [
            ("matchNamespace", namespace_labels),
            ("matchPodConfig", pod_config_labels),
        ] {
            if let Some(sel) = rule.lookup(&format!("/match/{field}/selector")) {
                let sel =
                    selector(sel).map_err(|reason| ActivityError::Selector { index, reason })?;
                matched &= sel.matches(Some(labels));
            }
        }
        if !matched {
            continue;
        }
        let secs = |f: &str| {
            rule.lookup(&format!("/config/{f}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        return Ok(Some(PauseRule {
            pause,
            since_active: scale(secs("secondsSinceActive")),
            min_running: scale(secs("minRunningSeconds")),
        }));
    }
    Ok(None)
}

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

/// `lastActivity + secondsSinceActive`, or 0 while the activity is unknown.
pub fn eligible_after(last_activity_ms: i64, since_active: Duration) -> i64 {
    if last_activity_ms <= 0 {
        0
    } else {
        last_activity_ms + ms(since_active)
    }
}

/// Whether an idle Workspace may be paused now (upstream `IsEligibleForPause`): the activity
/// is known, `now ≥ lastActivity + secondsSinceActive`, and it has run for `minRunningSeconds`.
pub fn eligible_for_pause(
    last_activity_ms: i64,
    last_running_ms: i64,
    now_ms: i64,
    since_active: Duration,
    min_running: Duration,
) -> bool {
    if last_activity_ms <= 0 || now_ms < eligible_after(last_activity_ms, since_active) {
        return false;
    }
    if !min_running.is_zero()
        && (last_running_ms <= 0 || now_ms - last_running_ms < ms(min_running))
    {
        return false;
    }
    true
}

/// What the rules say about one Workspace now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseDecision {
    /// Pause the Workspace.
    pub pause: bool,
    /// `rules.pauseWorkspace.eligibleAfter`; `None` clears it (no rule, or one that exempts).
    pub eligible_after: Option<i64>,
}

/// The pause rule of §5 step 4: pause only if the matched rule says `pauseWorkspace: true`,
/// the Workspace is eligible, and a fresh probe succeeded in this same reconcile.
pub fn decide(
    rule: Option<&PauseRule>,
    last_activity_ms: i64,
    last_running_ms: i64,
    now_ms: i64,
    fresh_probe_succeeded: bool,
) -> PauseDecision {
    let Some(rule) = rule.filter(|r| r.pause) else {
        return PauseDecision {
            pause: false,
            eligible_after: None,
        };
    };
    let eligible = eligible_for_pause(
        last_activity_ms,
        last_running_ms,
        now_ms,
        rule.since_active,
        rule.min_running,
    );
    PauseDecision {
        pause: eligible && fresh_probe_succeeded,
        eligible_after: Some(eligible_after(last_activity_ms, rule.since_active)),
    }
}

/// Writes a decision's `eligibleAfter` into `status.activity` (or clears it as upstream does).
pub fn apply_decision(activity: &mut Value, decision: &PauseDecision) {
    match decision.eligible_after {
        Some(t) => activity["rules"] = json!({"pauseWorkspace": {"eligibleAfter": t}}),
        None => {
            if let Some(rules) = activity.get_mut("rules").and_then(Value::as_object_mut) {
                rules.remove("pauseWorkspace");
            }
        }
    }
}

/// `GET http://<host>:<port><base path without trailing slash>/api/status`, with `timeout`:
/// success carries `last_activity`; connection errors, non-2xx answers, bad bodies are
/// failures and an expired timeout is `Timeout`. Never panics.
pub async fn probe_jupyter(
    http: &reqwest::Client,
    host: &str,
    port: i64,
    base_path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> ProbeResult {
    let start = now_epoch_ms();
    let url = format!(
        "http://{host}:{port}{}/api/status",
        base_path.trim_end_matches('/')
    );
    let fail = |outcome: ProbeOutcome, end_ms: i64, detail: String| ProbeResult {
        start_ms: start,
        end_ms,
        outcome,
        message: format!("{MSG_JUPYTER_FAILED}{detail}"),
        last_activity_ms: None,
    };
    let mut req = http.get(&url).timeout(timeout);
    if let Some(t) = token {
        req = req.header(reqwest::header::AUTHORIZATION, format!("token {t}"));
    }
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            return fail(
                ProbeOutcome::Timeout,
                now_epoch_ms(),
                format!("timeout after {}ms", timeout.as_millis()),
            );
        }
        Err(e) => return fail(ProbeOutcome::Failure, now_epoch_ms(), error_chain(&e)),
    };
    let end = now_epoch_ms();
    if !resp.status().is_success() {
        return fail(
            ProbeOutcome::Failure,
            end,
            format!("HTTP {}", resp.status().as_u16()),
        );
    }
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                body.extend_from_slice(&c);
                if body.len() >= MAX_BODY {
                    body.truncate(MAX_BODY);
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                return fail(
                    ProbeOutcome::Failure,
                    now_epoch_ms(),
                    format!("unable to read response body: {}", error_chain(&e)),
                );
            }
        }
    }
    let Ok(status) = serde_json::from_slice::<Value>(&body) else {
        return fail(
            ProbeOutcome::Failure,
            now_epoch_ms(),
            "invalid response body".into(),
        );
    };
    let raw = status
        .get("last_activity")
        .and_then(Value::as_str)
        .unwrap_or("");
    match chrono::DateTime::parse_from_rfc3339(raw) {
        Ok(t) => ProbeResult {
            start_ms: start,
            end_ms: end,
            outcome: ProbeOutcome::Success,
            message: MSG_JUPYTER_SUCCEEDED.into(),
            last_activity_ms: Some(t.timestamp_millis()),
        },
        Err(e) => fail(
            ProbeOutcome::Failure,
            now_epoch_ms(),
            format!("invalid last_activity: {e}"),
        ),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests;
