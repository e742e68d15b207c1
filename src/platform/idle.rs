//! Auto-pause by a WorkspaceKind's activity rules (kubeflow-workspaces.md §5), as the
//! harness sees it from outside: which rule applies to a podConfig in a namespace (first
//! match wins), what the platform states in `status.activity` (`lastActivity`,
//! `rules.pauseWorkspace.eligibleAfter`, `lastProbe`), and whether an observed pause or a
//! busy kernel kept to that statement. Everything but [`rule_for`] is pure.
//!
//! The harness reads only the platform's own statements: a simulator that scales its
//! timings shows up as a [`timescale`] (the stated threshold over the rule's), never as a
//! setting the harness knows about.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use serde_json::Value;

use super::crd::{Workspace, WorkspaceKind, WorkspaceKindSpec};
use super::status::CHECKPOINT_STATE;

/// Why an idle scenario cannot run, or what the platform did wrong.
#[derive(Debug, thiserror::Error)]
pub enum IdleError {
    #[error("cannot read {object}")]
    Api {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "podConfig {pod_config:?} is not an option of WorkspaceKind {kind} (offered: {offered:?}): \
         set workspace.idle_pod_config to one of them"
    )]
    UnknownPodConfig {
        kind: String,
        pod_config: String,
        offered: Vec<String>,
    },
    #[error(
        "the kind {kind} has no activityProbe, so it never pauses idle workspaces: nothing to test"
    )]
    NoProbe { kind: String },
    #[error(
        "the kind {kind} has no activity rule that pauses workspaces of podConfig {pod_config:?} \
         in namespace {namespace}: nothing to test"
    )]
    NoRule {
        kind: String,
        pod_config: String,
        namespace: String,
    },
    #[error(
        "the kind {kind}'s activityRules[{index}] matches podConfig {pod_config:?} and exempts it \
         (pauseWorkspace: false): nothing to test; set workspace.idle_pod_config to an option \
         that a pausing rule matches"
    )]
    Exempt {
        kind: String,
        pod_config: String,
        index: usize,
    },
    #[error("the kind {kind}'s activityRules[{index}] has an invalid selector: {reason}")]
    Selector {
        kind: String,
        index: usize,
        reason: String,
    },
    #[error(
        "the kind {kind}'s activityRules[{index}] pauses after secondsSinceActive={seconds} s: \
         the workspace becomes eligible in {eligible_in:?}, plus up to one probe interval \
         ({probe:?}), beyond budget `idle_pause` ({budget:?}); point workspace.idle_pod_config \
         at an option with a shorter rule, or raise budgets.idle_pause"
    )]
    BeyondBudget {
        kind: String,
        index: usize,
        seconds: u64,
        eligible_in: Duration,
        probe: Duration,
        budget: Duration,
    },
    #[error(
        "the platform paused the workspace without stating when it became eligible \
         (status.activity.rules.pauseWorkspace.eligibleAfter is {eligible_after})"
    )]
    PausedWithoutEligibility { eligible_after: i64 },
    #[error(
        "the platform paused the workspace before it was eligible: its last probe ended at \
         {decided_at} ms, eligibleAfter is {eligible_after} ms ({early_ms} ms early)"
    )]
    PausedEarly {
        eligible_after: i64,
        decided_at: i64,
        early_ms: i64,
    },
}

/// The rule that decides when an idle Workspace is paused, and the kind's probe intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseRule {
    /// Its index in `spec.activityRules`.
    pub index: usize,
    pub seconds_since_active: u64,
    pub min_running_seconds: u64,
    /// `activityProbe.probeIntervalSeconds` (default 3600): after a successful probe.
    pub probe_interval_seconds: u64,
}

/// A label selector (`matchLabels`, `matchExpressions`) against a label set; an empty
/// selector matches everything, as `metav1.LabelSelectorAsSelector` does. The matching is
/// kube-core's; the checks before it are the API server's `ValidateLabelSelectorRequirement`
/// (In and NotIn need values, Exists and DoesNotExist take none), which kube-core leaves out.
pub fn selector_matches(
    selector: &Value,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::core::{Selector, SelectorExt};
    let parsed: LabelSelector = serde_json::from_value(selector.clone())
        .map_err(|e| format!("not a label selector: {e}"))?;
    for e in parsed.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default();
        let fits = match e.operator.as_str() {
            "In" | "NotIn" => !values.is_empty(),
            "Exists" | "DoesNotExist" => values.is_empty(),
            other => return Err(format!("unknown operator {other:?} for key {:?}", e.key)),
        };
        if !fits {
            return Err(format!(
                "operator {} with values {values:?} for key {:?}",
                e.operator, e.key
            ));
        }
    }
    let selector = Selector::try_from(parsed).map_err(|e| e.to_string())?;
    Ok(selector.matches(labels))
}

/// The spawner labels of podConfig option `pod_config`, or `None` if the kind lacks it;
/// `Err` lists the offered ids.
fn pod_config_labels(
    spec: &WorkspaceKindSpec,
    pod_config: &str,
) -> Result<BTreeMap<String, String>, Vec<String>> {
    super::options::pod_option(spec, pod_config)
        .map(super::options::labels)
        .ok_or_else(|| super::options::pod_ids(spec))
}

/// The rule that pauses Workspaces of `pod_config` in a namespace with `namespace_labels`:
/// rules without a `pauseWorkspace` effect are skipped, the first that matches wins
/// (`matchNamespace` and `matchPodConfig` ANDed, an absent `match` matches everything), and
/// it must say `pauseWorkspace: true`. The kind must have an `activityProbe`: without one the
/// controller never evaluates the rules.
pub fn pause_rule(
    kind: &str,
    spec: &WorkspaceKindSpec,
    pod_config: &str,
    namespace: &str,
    namespace_labels: &BTreeMap<String, String>,
) -> Result<PauseRule, IdleError> {
    let pod_labels =
        pod_config_labels(spec, pod_config).map_err(|offered| IdleError::UnknownPodConfig {
            kind: kind.into(),
            pod_config: pod_config.into(),
            offered,
        })?;
    let Some(probe) = spec
        .pod_template
        .get("activityProbe")
        .filter(|p| p.is_object())
    else {
        return Err(IdleError::NoProbe { kind: kind.into() });
    };
    let probe_interval_seconds = probe
        .get("probeIntervalSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(3600);
    for (index, rule) in spec.activity_rules.iter().enumerate() {
        let Some(pause) = rule
            .pointer("/effect/pauseWorkspace")
            .and_then(Value::as_bool)
        else {
            continue;
        };
        let mut matched = true;
        for (field, labels) in [
            ("matchNamespace", namespace_labels),
            ("matchPodConfig", &pod_labels),
        ] {
            if let Some(sel) = rule.pointer(&format!("/match/{field}/selector")) {
                matched &= selector_matches(sel, labels).map_err(|reason| IdleError::Selector {
                    kind: kind.into(),
                    index,
                    reason,
                })?;
            }
        }
        if !matched {
            continue;
        }
        if !pause {
            return Err(IdleError::Exempt {
                kind: kind.into(),
                pod_config: pod_config.into(),
                index,
            });
        }
        let secs = |f: &str| {
            rule.pointer(&format!("/config/{f}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        return Ok(PauseRule {
            index,
            seconds_since_active: secs("secondsSinceActive"),
            min_running_seconds: secs("minRunningSeconds"),
            probe_interval_seconds,
        });
    }
    Err(IdleError::NoRule {
        kind: kind.into(),
        pod_config: pod_config.into(),
        namespace: namespace.into(),
    })
}

/// Reads the WorkspaceKind and the namespace's labels and finds the pause rule.
pub async fn rule_for(
    client: &kube::Client,
    kind: &str,
    pod_config: &str,
    namespace: &str,
) -> Result<PauseRule, IdleError> {
    let kinds: Api<WorkspaceKind> = Api::all(client.clone());
    let wsk = kinds.get(kind).await.map_err(|source| IdleError::Api {
        object: format!("WorkspaceKind {kind}"),
        source,
    })?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = namespaces
        .get(namespace)
        .await
        .map_err(|source| IdleError::Api {
            object: format!("Namespace {namespace}"),
            source,
        })?;
    let labels = ns.metadata.labels.unwrap_or_default();
    pause_rule(kind, &wsk.spec, pod_config, namespace, &labels)
}

/// What the platform states about a Workspace's activity (epoch ms; 0 = unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Statement {
    pub last_activity: i64,
    /// `rules.pauseWorkspace.eligibleAfter`; `None` when no pausing rule applies.
    pub eligible_after: Option<i64>,
    /// `lastProbe.endTime`.
    pub last_probe_end: Option<i64>,
}

/// The statement in a Workspace's status.
pub fn statement(ws: &Workspace) -> Statement {
    let Some(a) = ws.status.as_ref().map(|s| &s.activity) else {
        return Statement::default();
    };
    Statement {
        last_activity: a.last_activity,
        eligible_after: a
            .rules
            .as_ref()
            .and_then(|r| r.pointer("/pauseWorkspace/eligibleAfter"))
            .and_then(Value::as_i64),
        last_probe_end: a
            .last_probe
            .as_ref()
            .and_then(|p| p.get("endTime"))
            .and_then(Value::as_i64),
    }
}

/// Whether the statement says when the Workspace becomes eligible (activity known).
pub fn states_eligibility(s: &Statement) -> bool {
    s.last_activity > 0 && s.eligible_after.is_some_and(|e| e > 0)
}

/// Whether a pause of the Workspace is under way or done: `spec.paused`, or the GKE
/// Workspaces add-on holding the pause for its checkpoint (`checkpoint-state:
/// Checkpointing`, with `spec.paused` rewritten back to false; kubeflow-workspaces.md §10).
pub fn pause_started(ws: &Workspace) -> bool {
    ws.spec.paused
        || ws
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CHECKPOINT_STATE))
            .is_some_and(|s| s == "Checkpointing")
}

/// How the platform's clock runs against the rule's seconds: the stated threshold
/// (`eligibleAfter - lastActivity`) over `secondsSinceActive`. 1.0 on a real cluster; a
/// simulator that scales its timings shows its scale here. `None` until both are stated.
pub fn timescale(rule: &PauseRule, s: &Statement) -> Option<f64> {
    if !states_eligibility(s) || rule.seconds_since_active == 0 {
        return None;
    }
    let stated = s.eligible_after? - s.last_activity;
    (stated > 0).then(|| stated as f64 / (rule.seconds_since_active as f64 * 1000.0))
}

/// `seconds` of the rule's clock on the platform's clock.
pub fn scaled(seconds: u64, scale: f64) -> Duration {
    Duration::from_secs_f64(seconds as f64 * scale)
}

/// Fails at once when the stated eligibility plus one probe interval lies beyond `budget`
/// from `now_ms`, naming the rule's threshold and the budget (no 4-hour wait to find out).
pub fn check_budget(
    kind: &str,
    rule: &PauseRule,
    s: &Statement,
    now_ms: i64,
    budget: Duration,
) -> Result<(), IdleError> {
    let eligible_in =
        Duration::from_millis(s.eligible_after.unwrap_or(0).saturating_sub(now_ms).max(0) as u64);
    let probe = scaled(
        rule.probe_interval_seconds,
        timescale(rule, s).unwrap_or(1.0),
    );
    if eligible_in + probe > budget {
        return Err(IdleError::BeyondBudget {
            kind: kind.into(),
            index: rule.index,
            seconds: rule.seconds_since_active,
            eligible_in,
            probe,
            budget,
        });
    }
    Ok(())
}

/// Checks the statement that came with a pause: the platform said when the Workspace would
/// become eligible, and the probe its decision rests on (upstream pauses only on a fresh
/// probe in the same reconcile) ended no earlier than that. Both times are the platform's
/// own clock, so a skew between it and the harness cannot fail this check.
pub fn check_pause(s: &Statement) -> Result<i64, IdleError> {
    let eligible_after = s.eligible_after.unwrap_or(0);
    if eligible_after <= 0 {
        return Err(IdleError::PausedWithoutEligibility { eligible_after });
    }
    let decided_at = s.last_probe_end.unwrap_or(0);
    if decided_at < eligible_after {
        return Err(IdleError::PausedEarly {
            eligible_after,
            decided_at,
            early_ms: eligible_after - decided_at,
        });
    }
    Ok(eligible_after)
}

/// How long a busy cell must run so that an idle kernel would surely have been paused
/// meanwhile: the threshold plus two probe intervals, on the platform's clock.
pub fn busy_cell_length(rule: &PauseRule, scale: f64) -> Duration {
    scaled(
        rule.seconds_since_active + 2 * rule.probe_interval_seconds,
        scale,
    )
}

/// How often the busy cell prints: four times per threshold or probe interval, whichever
/// is shorter, so every probe finds fresh output (at least every 100 ms, at most every 60 s).
pub fn busy_print_every(rule: &PauseRule, scale: f64) -> Duration {
    let shortest = rule.seconds_since_active.min(rule.probe_interval_seconds);
    (scaled(shortest, scale) / 4).clamp(Duration::from_millis(100), Duration::from_secs(60))
}

/// One look at the Workspace while the busy cell ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusySample {
    pub pause_started: bool,
    pub last_activity: i64,
}

/// What the watch saw while the busy cell ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BusyRecord {
    /// `lastActivity` when the cell started.
    pub activity_at_start: i64,
    pub samples: Vec<BusySample>,
    /// The stated threshold (`eligibleAfter - lastActivity`) on the platform's clock.
    pub threshold: Duration,
}

impl BusyRecord {
    /// Whether a pause started while the cell ran.
    pub fn paused(&self) -> bool {
        self.samples.iter().any(|s| s.pause_started)
    }

    /// The newest `lastActivity` seen.
    pub fn latest_activity(&self) -> i64 {
        self.samples
            .iter()
            .map(|s| s.last_activity)
            .fold(self.activity_at_start, i64::max)
    }

    /// How far `lastActivity` moved while the cell ran.
    pub fn advance(&self) -> Duration {
        Duration::from_millis((self.latest_activity() - self.activity_at_start).max(0) as u64)
    }

    /// Whether the activity advanced by more than the threshold: proof that the platform
    /// saw the cell as activity all along (an idle kernel's `lastActivity` stands still).
    pub fn advanced_past_threshold(&self) -> bool {
        self.advance() > self.threshold
    }
}

#[cfg(test)]
mod tests;
