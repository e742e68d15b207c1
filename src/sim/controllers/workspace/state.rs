//! The Workspace state and the status fields derived with it (kubeflow-workspaces.md §3,
//! §4.4): the first-match-wins state rules with upstream's state messages, `pauseTime`,
//! `podTemplatePod`, the transition into Running (`lastRunningTime`, activity reset), and a
//! status with every field the CRD requires. Pure functions over JSON objects.

use std::sync::Arc;

use serde_json::{Value, json};

use super::template::CONTAINER;
use crate::platform::crd::WorkspaceState;
use crate::sim::json::Lookup as _;
use crate::sim::json::str_at;

pub const MSG_PAUSED: &str = "Workspace is paused";
pub const MSG_PENDING: &str = "Workspace is pending";
pub const MSG_RUNNING: &str = "Workspace is running";
pub const MSG_TERMINATING: &str = "Workspace is terminating";
pub const MSG_UNKNOWN: &str = "Workspace is in an unknown state";

/// `Workspace references unknown WorkspaceKind: <kind>`.
pub fn msg_unknown_kind(kind: &str) -> String {
    format!("Workspace references unknown WorkspaceKind: {kind}")
}

/// A derived state and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub state: WorkspaceState,
    pub message: String,
    /// The pod is Pending with no warning: upstream requeues after 15 s to look for events.
    pub pending: bool,
}

impl Derived {
    fn new(state: WorkspaceState, message: impl Into<String>) -> Self {
        Self {
            state,
            message: message.into(),
            pending: false,
        }
    }
}

fn condition<'a>(pod: &'a Value, type_: &str) -> Option<&'a Value> {
    pod.lookup("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == Some(type_))
}

/// Derives the state, first match wins (upstream `generateWorkspaceState`). The warning
/// lookups run only when their rule is reached; each returns the message of the latest
/// Warning event about the StatefulSet or the current pod.
pub fn derive(
    paused: bool,
    pod: Option<&Value>,
    statefulset_warning: impl FnOnce() -> Option<String>,
    pod_warning: impl FnOnce() -> Option<String>,
) -> Derived {
    use WorkspaceState::*;
    let Some(pod) = pod else {
        if paused {
            return Derived::new(Paused, MSG_PAUSED);
        }
        if let Some(m) = statefulset_warning() {
            return Derived::new(
                Error,
                format!("Workspace StatefulSet has warning event: {m}"),
            );
        }
        return Derived::new(Unknown, MSG_UNKNOWN);
    };
    if pod.lookup("/metadata/deletionTimestamp").is_some() {
        return Derived::new(Terminating, MSG_TERMINATING);
    }
    let scheduled = condition(pod, "PodScheduled");
    if scheduled.and_then(|c| str_at(c, "/status")) != Some("True") {
        let reason = scheduled.and_then(|c| str_at(c, "/reason")).unwrap_or("");
        let message = scheduled.and_then(|c| str_at(c, "/message")).unwrap_or("");
        let prefix = match reason {
            "Unschedulable" => Some("Workspace Pod is unschedulable"),
            "SchedulingGated" => Some("Workspace Pod is waiting for scheduling gate"),
            "SchedulerError" => Some("Workspace Pod has scheduler error"),
            _ => None,
        };
        if let Some(prefix) = prefix {
            return Derived::new(Error, format!("{prefix}: {message}"));
        }
    }
    let phase = str_at(pod, "/status/phase").unwrap_or("");
    let ready = condition(pod, "Ready").and_then(|c| str_at(c, "/status")) == Some("True");
    if phase == "Running" && ready {
        return Derived::new(Running, MSG_RUNNING);
    }
    let waiting = pod
        .lookup("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| str_at(c, "/name") == Some(CONTAINER)))
        .and_then(|c| str_at(c, "/state/waiting/reason"));
    match waiting {
        Some("CrashLoopBackOff") => {
            return Derived::new(
                Error,
                "Workspace Container is not running (CrashLoopBackOff)",
            );
        }
        Some("ImagePullBackOff") => {
            return Derived::new(
                Error,
                "Workspace Container is not running (ImagePullBackOff)",
            );
        }
        _ => {}
    }
    if let Some(m) = pod_warning() {
        return Derived::new(Error, format!("Workspace Pod has warning event: {m}"));
    }
    if phase == "Pending" {
        return Derived {
            pending: true,
            ..Derived::new(Pending, MSG_PENDING)
        };
    }
    Derived::new(Unknown, MSG_UNKNOWN)
}

/// The message of the latest Warning event about the object with `uid` (by lastTimestamp,
/// then by resourceVersion), as upstream picks it.
pub fn latest_warning(events: &[Arc<Value>], uid: &str) -> Option<String> {
    let rv = |e: &Value| {
        str_at(e, "/metadata/resourceVersion")
            .and_then(|r| r.parse::<u64>().ok())
            .unwrap_or(0)
    };
    events
        .iter()
        .filter(|e| {
            str_at(e, "/type") == Some("Warning") && str_at(e, "/involvedObject/uid") == Some(uid)
        })
        .max_by(|a, b| {
            let ta = str_at(a, "/lastTimestamp").unwrap_or("");
            let tb = str_at(b, "/lastTimestamp").unwrap_or("");
            ta.cmp(tb).then(rv(a).cmp(&rv(b)))
        })
        .map(|e| str_at(e, "/message").unwrap_or("").to_string())
}

/// `status.podTemplatePod`: empty names when there is no pod; the ServiceAccount always.
pub fn pod_template_pod(pod: Option<&Value>, service_account: &str) -> Value {
    let names = |ptr: &str| -> Vec<Value> {
        pod.and_then(|p| p.lookup(ptr))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| json!({"name": str_at(c, "/name").unwrap_or("")}))
            .collect()
    };
    json!({
        "name": pod.and_then(|p| str_at(p, "/metadata/name")).unwrap_or(""),
        "nodeName": pod.and_then(|p| str_at(p, "/spec/nodeName")).unwrap_or(""),
        "serviceAccountName": service_account,
        "containers": names("/spec/containers"),
        "initContainers": names("/spec/initContainers"),
    })
}

/// `status.pauseTime`: kept once set while paused, now when first seen paused, 0 unpaused.
pub fn pause_time(paused: bool, current: i64, now_ms: i64) -> i64 {
    match (paused, current) {
        (true, 0) => now_ms,
        (true, t) => t,
        (false, _) => 0,
    }
}

/// A status with every field the CRD requires, keeping what `current` already has.
pub fn complete(current: Option<&Value>) -> Value {
    let mut s = current
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut default = |ptr: &str, v: Value| {
        if s.lookup(ptr).is_none_or(Value::is_null) {
            let (parent, key) = ptr.rsplit_once('/').expect("absolute pointer");
            let target = if parent.is_empty() {
                &mut s
            } else {
                s.pointer_mut(parent).expect("parents are defaulted first")
            };
            target[key] = v;
        }
    };
    default("/state", json!(WorkspaceState::Unknown.to_string()));
    default("/stateMessage", json!(""));
    default("/pauseTime", json!(0));
    default("/lastRunningTime", json!(0));
    default("/pendingRestart", json!(false));
    default("/activity", json!({}));
    default("/activity/lastActivity", json!(0));
    default("/activity/lastUpdate", json!(0));
    default("/podTemplateOptions", json!({}));
    for option in ["imageConfig", "podConfig"] {
        default(
            &format!("/podTemplateOptions/{option}"),
            json!({"desired": "", "redirectChain": []}),
        );
    }
    default("/podTemplatePod", json!({}));
    default("/podTemplatePod/name", json!(""));
    default("/podTemplatePod/nodeName", json!(""));
    s
}

/// On entering Running (or Running with no `lastRunningTime` yet): `lastRunningTime = now`
/// and the activity is reset, so stale activity cannot cause an immediate re-pause.
pub fn record_running_transition(status: &mut Value, previous_state: &str, now_ms: i64) {
    if status["state"] != json!("Running") {
        return;
    }
    let last = status["lastRunningTime"].as_i64().unwrap_or(0);
    if previous_state != "Running" || last == 0 {
        status["lastRunningTime"] = json!(now_ms);
        status["activity"] = json!({"lastActivity": 0, "lastUpdate": 0});
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use WorkspaceState::*;

    fn none() -> Option<String> {
        None
    }

    fn pod(phase: &str, conditions: Value) -> Value {
        json!({"metadata": {"name": "ws-a-x-0", "uid": "p1"}, "spec": {"nodeName": "n1", "containers": [{"name": "main"}]},
               "status": {"phase": phase, "conditions": conditions}})
    }

    #[test]
    fn no_pod_is_paused_error_or_unknown() {
        assert_eq!(derive(true, None, none, none).state, Paused);
        let d = derive(false, None, || Some("quota".into()), none);
        assert_eq!(
            (d.state, d.message.as_str()),
            (Error, "Workspace StatefulSet has warning event: quota")
        );
        assert_eq!(derive(false, None, none, none).message, MSG_UNKNOWN);
    }

    #[test]
    fn rules_apply_in_upstream_order() {
        let mut p = pod(
            "Pending",
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]),
        );
        let d = derive(false, Some(&p), none, || Some("FailedScheduling".into()));
        assert_eq!(d.state, Error);
        assert_eq!(d.message, "Workspace Pod is unschedulable: 0/3 nodes");
        // A deletionTimestamp wins over everything about the pod.
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(derive(true, Some(&p), none, none).state, Terminating);

        let running = pod(
            "Running",
            json!([{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]),
        );
        // Running + Ready wins over a stale warning event.
        let d = derive(false, Some(&running), none, || Some("old".into()));
        assert_eq!((d.state, d.message.as_str()), (Running, MSG_RUNNING));

        let gated = pod(
            "Running",
            json!([{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False", "reason": "ReadinessGatesNotReady"}]),
        );
        assert_eq!(derive(false, Some(&gated), none, none).state, Unknown);

        let mut crash = gated.clone();
        crash["status"]["containerStatuses"] =
            json!([{"name": "main", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]);
        assert_eq!(
            derive(false, Some(&crash), none, none).message,
            "Workspace Container is not running (CrashLoopBackOff)"
        );

        let pending = pod(
            "Pending",
            json!([{"type": "PodScheduled", "status": "True"}]),
        );
        let d = derive(false, Some(&pending), none, || Some("FailedMount".into()));
        assert_eq!(d.message, "Workspace Pod has warning event: FailedMount");
        let d = derive(false, Some(&pending), none, none);
        assert!(d.pending);
        assert_eq!(d.state, Pending);
    }

    #[test]
    fn latest_warning_is_about_the_pod_and_newest() {
        let ev = |uid: &str, t: &str, ts: &str, rv: &str, m: &str| {
            Arc::new(
                json!({"metadata": {"resourceVersion": rv}, "type": t, "lastTimestamp": ts,
                            "involvedObject": {"uid": uid}, "message": m}),
            )
        };
        let events = vec![
            ev("p1", "Warning", "2026-01-01T00:00:02Z", "5", "second"),
            ev("p1", "Warning", "2026-01-01T00:00:01Z", "9", "first"),
            ev("p1", "Normal", "2026-01-01T00:00:09Z", "10", "normal"),
            ev("p0", "Warning", "2026-01-01T00:00:09Z", "11", "old pod"),
            ev(
                "p1",
                "Warning",
                "2026-01-01T00:00:02Z",
                "6",
                "second, later",
            ),
        ];
        assert_eq!(
            latest_warning(&events, "p1").as_deref(),
            Some("second, later")
        );
        assert_eq!(latest_warning(&events, "p2"), None);
    }

    #[test]
    fn pause_time_and_running_transition() {
        assert_eq!(pause_time(true, 0, 50), 50);
        assert_eq!(pause_time(true, 7, 50), 7);
        assert_eq!(pause_time(false, 7, 50), 0);

        let mut s = complete(None);
        assert_eq!(
            s["podTemplateOptions"]["podConfig"]["redirectChain"],
            json!([])
        );
        s["state"] = json!("Running");
        s["activity"]["lastActivity"] = json!(5);
        record_running_transition(&mut s, "Pending", 100);
        assert_eq!(s["lastRunningTime"], 100);
        assert_eq!(s["activity"]["lastActivity"], 0);
        s["activity"]["lastActivity"] = json!(150);
        record_running_transition(&mut s, "Running", 200);
        assert_eq!(
            s["lastRunningTime"], 100,
            "only a transition into Running counts"
        );
        assert_eq!(s["activity"]["lastActivity"], 150);
    }

    #[test]
    fn pod_template_pod_always_names_the_service_account() {
        let p = pod("Running", json!([]));
        let v = pod_template_pod(Some(&p), "ws-a");
        assert_eq!(v["name"], "ws-a-x-0");
        assert_eq!(v["nodeName"], "n1");
        assert_eq!(v["containers"], json!([{"name": "main"}]));
        let v = pod_template_pod(None, "ws-a");
        assert_eq!(
            (v["name"].as_str(), v["serviceAccountName"].as_str()),
            (Some(""), Some("ws-a"))
        );
    }
}
