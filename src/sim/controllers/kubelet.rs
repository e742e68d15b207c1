//! The kubelet of every simulated node: starts the process behind a bound pod (after the
//! profile's start delay), reports phase, IP, container status and the Ready condition
//! (readiness gates included), holds a pod whose ConfigMap volume is missing in
//! `ContainerCreating` (a `FailedMount` event), and finishes graceful deletion, after which
//! the pod's GPU is free again. A process that cannot start leaves its container waiting in
//! `RunContainerError` with a Warning `Failed` event, tried again after the kubelet's
//! back-off; one that exits on its own is shown `terminated` and restarted in the same pod
//! (restart policy `Always`), in `CrashLoopBackOff` between tries. A restored pod's
//! `PodRestored` condition comes the profile's `pod_restored_after_ready_ms` after the pod
//! turned Ready, as on GKE, which streams the memory in lazily and writes the condition last.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::agent::{self, RestorePlan};
use super::scheduler::{LEAKED_GPUS, gpu_request, set_condition};
use super::{Ctx, Next, ObjKey, Reconciler, events, kind};
use crate::sim::faults::Fault;
use crate::sim::json::str_at;
use crate::sim::pods::{JupyterSpec, Program, StartState, Started};
use crate::sim::store::meta::now_rfc3339;
use crate::sim::store::{DeleteOptions, Event};
use crate::sim::truth::{Imposed, Transition};

#[derive(Default)]
pub struct Kubelet {
    /// When each pod (by uid) was first seen bound, or marked for deletion.
    seen: Mutex<HashMap<String, Instant>>,
    /// Restored pods (by uid) whose `PodRestored` condition is still to be written.
    pending_restored: Mutex<HashMap<String, PendingRestored>>,
    /// Pods (by uid) last seen Ready, whoever wrote it (the snapshot add-on writes `Ready`
    /// with its readiness gate, as upstream's), so each turn to Ready is noted once.
    ready: Mutex<std::collections::HashSet<String>>,
    /// Pods (by uid) whose process failed to start, and how many times.
    /// Pods (by uid) whose process failed to start: how many times, and not before when
    /// the next try may begin (the kubelet's own status write wakes the pod at once).
    failed_starts: Mutex<HashMap<String, (u32, Instant)>>,
    /// The uid each pod key was last seen bound with: a pod removed at once (a delete with
    /// grace 0), or replaced by one of the same name, still has its process stopped and
    /// what the kubelet and the delays kept of it forgotten.
    bound: Mutex<HashMap<(String, String), String>>,
}

/// A restore whose `PodRestored` condition the kubelet has yet to write.
#[derive(Debug, Clone)]
struct PendingRestored {
    /// The PodSnapshot's name (GKE's message carries the name, not the uid).
    snapshot_name: String,
    /// When the kubelet wrote Ready=True on the pod; `None` while it is not Ready.
    ready_at: Option<Instant>,
}

fn condition_true(pod: &Value, type_: &str) -> bool {
    pod.lookup("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| str_at(c, "/type") == Some(type_) && str_at(c, "/status") == Some("True"))
        })
}

/// Ready = containers ready and every readiness gate's condition True.
fn gates_pass(pod: &Value) -> bool {
    pod.lookup("/spec/readinessGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| str_at(g, "/conditionType"))
        .all(|t| condition_true(pod, t))
}

impl Kubelet {
    fn elapsed_since_first_seen(&self, uid: &str, tag: &str) -> Duration {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.entry(format!("{tag}/{uid}"))
            .or_insert_with(Instant::now)
            .elapsed()
    }

    /// The rest of the back-off after a failed start, if one is still running.
    fn backing_off(&self, uid: &str) -> Option<Duration> {
        let f = self.failed_starts.lock().unwrap_or_else(|e| e.into_inner());
        let (_, not_before) = f.get(uid)?;
        let now = Instant::now();
        (*not_before > now).then(|| *not_before - now)
    }

    /// Notes that `key` now holds the pod `uid` (`None`: no pod); a pod it held before is
    /// gone: its process is stopped and what was kept of it forgotten.
    fn gone(&self, ctx: &Ctx, key: &ObjKey, uid: Option<&str>) {
        let k = (key.ns().unwrap_or("").to_string(), key.name.clone());
        let old = {
            let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
            match uid {
                Some(u) => bound.insert(k, u.to_string()).filter(|o| o != u),
                None => bound.remove(&k),
            }
        };
        if let Some(old) = old {
            ctx.pods.stop(&old);
            self.forget(&old);
            ctx.delays.forget(&old);
        }
    }

    fn forget(&self, uid: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|k, _| !k.ends_with(uid));
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.pending_restored
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.failed_starts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }

    /// Notes whether the pod is Ready now: a turn to Ready is recorded (ground truth, and
    /// the start of a pending `PodRestored` lag) once, whoever wrote it.
    fn note_ready(&self, ctx: &Ctx, key: &ObjKey, uid: &str, node: &str, ready: bool) {
        let turned = {
            let mut seen = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            if ready {
                seen.insert(uid.to_string())
            } else {
                seen.remove(uid);
                false
            }
        };
        if turned {
            self.stamp_ready(uid);
            ctx.truth
                .record(Transition::PodReady, key.ns(), &key.name, Some(node), None);
        }
    }

    /// Notes that the pod (by uid) was just marked Ready, for a pending `PodRestored`.
    fn stamp_ready(&self, uid: &str) {
        let mut pending = self
            .pending_restored
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pending.get_mut(uid)
            && p.ready_at.is_none()
        {
            p.ready_at = Some(Instant::now());
        }
    }

    /// Writes the pod's `PodRestored` condition once the lag after Ready has passed; how
    /// long to wait before asking again while it has not.
    fn write_pod_restored(&self, ctx: &Ctx, key: &ObjKey, uid: &str) -> Option<Duration> {
        let lag = ctx.delays.of(crate::sim::delay::Purpose::PodRestored, uid);
        let pending = self
            .pending_restored
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()?;
        let elapsed = pending.ready_at?.elapsed();
        if elapsed < lag {
            return Some(lag - elapsed);
        }
        let message = format!("Restored from snapshot {}", pending.snapshot_name);
        let now = now_rfc3339();
        let written = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                let mut c = cur.clone();
                set_condition(
                    &mut c,
                    names::POD_RESTORED,
                    "True",
                    Some("Restored"),
                    Some(&message),
                    &now,
                );
                Ok(c)
            });
        self.pending_restored
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        if written.is_ok() {
            ctx.truth.record_imposed(Imposed::PodRestoredLag, lag);
            ctx.truth.record(
                Transition::PodRestoredWritten,
                key.ns(),
                &key.name,
                None,
                Some(pending.snapshot_name.clone()),
            );
        }
        None
    }
}

impl Reconciler for Kubelet {
    fn name(&self) -> &'static str {
        "kubelet"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["Pod"]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        if ev.kind.kind == "Pod"
            && str_at(&ev.object, "/spec/nodeName").is_some_and(|n| !n.is_empty())
        {
            vec![ObjKey::of(ev.kind, &ev.object)]
        } else {
            Vec::new()
        }
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let Some(pod) = ctx.store.find(key.kind, key.ns(), &key.name) else {
            self.gone(ctx, key, None);
            return Next::Done;
        };
        let uid = str_at(&pod, "/metadata/uid").unwrap_or("").to_string();
        self.gone(ctx, key, Some(&uid));
        let Some(node) = str_at(&pod, "/spec/nodeName")
            .filter(|n| !n.is_empty())
            .map(str::to_string)
        else {
            return Next::Done;
        };
        if pod.lookup("/metadata/deletionTimestamp").is_some() {
            let wait = ctx.delays.of(crate::sim::delay::Purpose::Termination, &uid);
            let elapsed = self.elapsed_since_first_seen(&uid, "delete");
            if elapsed < wait {
                return Next::After(wait - elapsed);
            }
            ctx.pods.stop(&uid);
            let opts = DeleteOptions {
                grace_period_seconds: Some(0),
                precondition_uid: Some(uid.clone()),
                ..Default::default()
            };
            if ctx
                .store
                .delete(key.kind, key.ns(), &key.name, &opts)
                .is_ok()
            {
                self.forget(&uid);
                ctx.delays.forget(&uid);
                ctx.truth.record_imposed(Imposed::Termination, wait);
                ctx.truth.record(
                    Transition::PodDeleted,
                    key.ns(),
                    &key.name,
                    Some(&node),
                    None,
                );
                let gpus = gpu_request(&pod);
                if gpus > 0 {
                    if agent::fault_for_pod(ctx, &pod, Fault::GpuNotReleased) {
                        ctx.truth.record_fault(Fault::GpuNotReleased);
                        leak_gpus(ctx, &node, gpus);
                    } else {
                        ctx.truth.record(
                            Transition::GpuReleased,
                            key.ns(),
                            &key.name,
                            Some(&node),
                            Some(format!("{gpus} GPU")),
                        );
                    }
                }
            }
            return Next::Done;
        }
        let phase = str_at(&pod, "/status/phase").unwrap_or("Pending");
        if phase == "Pending" {
            let (plan, faults) = agent::restore_plan_and_faults(ctx, &pod);
            let restore_delay = plan.as_ref().map(|p| p.delay).unwrap_or_default();
            let start = ctx.delays.of(crate::sim::delay::Purpose::PodStart, &uid);
            let wait = start + restore_delay;
            let elapsed = self.elapsed_since_first_seen(&uid, "bind");
            if elapsed < wait {
                // A cold container's own process starts within the pod start, as on a node
                // (the delay is bind -> started, the server's start included): the runtime's
                // real process is begun now, and the pod turns Running when both are done.
                // Only a pod with no restore plan and no pin to a snapshot: a pinned one
                // whose snapshot is not ready yet may still be restored when its wait is over.
                let pinned = crate::sim::json::annotation(&pod, agent::PS_NAME).is_some();
                if plan.is_none() && !pinned && self.backing_off(&uid).is_none() {
                    if missing_config_map(ctx, &pod).is_some() {
                        // Not before its volumes are there: look again soon, not only when
                        // the delay is over.
                        return Next::After((wait - elapsed).min(MOUNT_RETRY));
                    }
                    if let Err(message) = self.start_process(ctx, &pod, &uid, None) {
                        return Next::After(self.fail_start(ctx, key, &pod, &uid, &message));
                    }
                }
                return Next::After(wait - elapsed);
            }
            if let Some((volume, map)) = missing_config_map(ctx, &pod) {
                self.hold_for_mount(ctx, key, &pod, &uid, &volume, &map);
                return Next::After(MOUNT_RETRY);
            }
            if let Some(wait) = self.backing_off(&uid) {
                return Next::After(wait);
            }
            let (started, restored) = match self.start_process(ctx, &pod, &uid, plan.as_ref()) {
                Ok(Some(s)) => s,
                Ok(None) => return Next::After(Duration::from_millis(50)),
                Err(message) => {
                    return Next::After(self.fail_start(ctx, key, &pod, &uid, &message));
                }
            };
            for f in faults {
                ctx.truth.record_fault(f);
            }
            ctx.truth.record_imposed(Imposed::PodStart, start);
            if let Some(plan) = &restored {
                ctx.truth.record_imposed(Imposed::Restore, plan.delay);
            }
            let now = now_rfc3339();
            let image = pod
                .lookup("/spec/containers/0/image")
                .cloned()
                .unwrap_or(json!(""));
            let name = pod
                .lookup("/spec/containers/0/name")
                .cloned()
                .unwrap_or(json!("main"));
            let _ = ctx.store.modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                let mut c = cur.clone();
                c["status"]["phase"] = json!("Running");
                let ip = ctx.pods.reported_ip(&started.pod_ip);
                c["status"]["podIP"] = json!(ip);
                c["status"]["podIPs"] = json!([{"ip": ip}]);
                c["status"]["hostIP"] = json!("10.128.0.2");
                c["status"]["startTime"] = json!(now);
                c["status"]["containerStatuses"] = json!([{
                    "name": name, "ready": true, "restartCount": 0, "started": true,
                    "image": image, "imageID": format!("sim://{}", image.as_str().unwrap_or("")),
                    "containerID": format!("sim://{uid}"),
                    "state": {"running": {"startedAt": now}},
                }]);
                set_condition(&mut c, "Initialized", "True", None, None, &now);
                set_condition(&mut c, "ContainersReady", "True", None, None, &now);
                let ready = gates_pass(&c);
                set_condition(&mut c, "Ready", if ready { "True" } else { "False" }, (!ready).then_some("ReadinessGatesNotReady"), None, &now);
                Ok(c)
            });
            ctx.truth.record_delayed(
                Transition::PodRunning,
                key.ns(),
                &key.name,
                Some(&node),
                None,
                Some(wait),
            );
            match &restored {
                Some(plan) => {
                    self.pending_restored
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(
                            uid.clone(),
                            PendingRestored {
                                snapshot_name: plan.snapshot_name.clone(),
                                ready_at: None,
                            },
                        );
                    if agent::fault_for_pod(ctx, &pod, Fault::KernelDies) {
                        let killed = ctx.pods.kill_kernels(&uid);
                        if killed > 0 {
                            ctx.truth.record_fault(Fault::KernelDies);
                        }
                        tracing::info!(killed, pod = %key.name, "fault kernel-dies: killed the kernels");
                    }
                    ctx.truth.record_delayed(
                        Transition::Restored,
                        key.ns(),
                        &key.name,
                        Some(&node),
                        Some(plan.snapshot_name.clone()),
                        Some(plan.delay),
                    );
                    events::record(
                        ctx,
                        &pod,
                        "Normal",
                        names::RESTORE_EVENT,
                        &format!(
                            "Successfully restored the pod from PodSnapshot {}/{}",
                            key.namespace, plan.snapshot_name
                        ),
                        "gke-pod-snapshot-agent",
                    );
                }
                None if is_workspace_pod(&pod) => {
                    ctx.truth.record(
                        Transition::ColdStarted,
                        key.ns(),
                        &key.name,
                        Some(&node),
                        None,
                    );
                }
                None => {}
            }
            if let Some(p) = ctx.store.find(key.kind, key.ns(), &key.name) {
                self.note_ready(ctx, key, &uid, &node, condition_true(&p, "Ready"));
            }
            return self
                .write_pod_restored(ctx, key, &uid)
                .map_or(Next::Done, Next::After);
        }
        if phase == "Running" && container_down(&pod) {
            return self.restart(ctx, key, &pod, &uid, &node);
        }
        if phase == "Running" {
            let want = gates_pass(&pod);
            if want != condition_true(&pod, "Ready") {
                let now = now_rfc3339();
                let _ = ctx
                    .store
                    .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                        let mut c = cur.clone();
                        set_condition(
                            &mut c,
                            "Ready",
                            if want { "True" } else { "False" },
                            (!want).then_some("ReadinessGatesNotReady"),
                            None,
                            &now,
                        );
                        Ok(c)
                    });
            }
            self.note_ready(ctx, key, &uid, &node, want);
            if let Some(wait) = self.write_pod_restored(ctx, key, &uid) {
                return Next::After(wait);
            }
        }
        Next::Done
    }
}

impl Kubelet {
    /// Restarts the container of a Running pod whose process exited (restart policy
    /// `Always`, as a StatefulSet's pods have): at once the first time, then after the
    /// crash-loop back-off (10 s, doubling, at most 300 s), waiting in `CrashLoopBackOff`
    /// with a Warning `BackOff` event meanwhile. The new server is a fresh process on the
    /// pod's same IP and home volume; the container shows `restartCount` + 1 and the exit
    /// in `lastState.terminated`.
    fn restart(&self, ctx: &Ctx, key: &ObjKey, pod: &Value, uid: &str, node: &str) -> Next {
        let prev = pod.lookup("/status/containerStatuses/0");
        let restarts = prev
            .and_then(|p| p.get("restartCount"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let container = str_at(pod, "/spec/containers/0/name").unwrap_or("main");
        let wait = if restarts == 0 {
            Duration::ZERO
        } else {
            Duration::from_secs(10u64 << (restarts - 1).min(5)).min(MAX_BACKOFF)
        };
        let elapsed = self.elapsed_since_first_seen(uid, &format!("crash{restarts}"));
        if elapsed < wait {
            let waiting = prev.and_then(|p| str_at(p, "/state/waiting/reason"));
            if waiting != Some("CrashLoopBackOff") {
                let name = &key.name;
                let ns = &key.namespace;
                let message = format!(
                    "back-off {} restarting failed container={container} pod={name}_{ns}({uid})",
                    go_duration(wait)
                );
                let _ = ctx
                    .store
                    .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                        let mut c = cur.clone();
                        let cs = &mut c["status"]["containerStatuses"][0];
                        if let Some(t) = cs.lookup("/state/terminated").cloned() {
                            cs["lastState"] = json!({"terminated": t});
                        }
                        cs["state"] = json!({"waiting": {
                            "reason": "CrashLoopBackOff", "message": message}});
                        Ok(c)
                    });
                events::record(
                    ctx,
                    pod,
                    "Warning",
                    "BackOff",
                    &format!(
                        "Back-off restarting failed container {container} in pod {name}_{ns}({uid})"
                    ),
                    "kubelet",
                );
            }
            return Next::After(wait - elapsed);
        }
        if let Some(wait) = self.backing_off(uid) {
            return Next::After(wait);
        }
        let started = match ctx.pods.poll_start(uid) {
            Some(StartState::Starting) => return Next::After(Duration::from_millis(100)),
            Some(StartState::Ready(s)) => s,
            Some(StartState::Failed(e)) => {
                return Next::After(self.fail_start(ctx, key, pod, uid, &e));
            }
            None => match ctx.pods.running(uid) {
                Some(s) => s,
                None => {
                    let mut spec = jupyter_spec(ctx, pod);
                    spec.pod_ip = str_at(pod, "/status/podIP").map(|ip| ctx.pods.reachable_ip(ip));
                    ctx.pods.begin_jupyter(uid, spec, true);
                    return Next::After(Duration::from_millis(100));
                }
            },
        };
        // The pod was not Ready while its container was down: its next turn is noted.
        self.note_ready(ctx, key, uid, node, false);
        let now = now_rfc3339();
        let _ = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                let mut c = cur.clone();
                let cs = &mut c["status"]["containerStatuses"][0];
                let last = cs
                    .lookup("/state/terminated")
                    .cloned()
                    .map(|t| json!({"terminated": t}))
                    .or_else(|| cs.get("lastState").cloned())
                    .unwrap_or(json!({}));
                cs["lastState"] = last;
                cs["restartCount"] = json!(restarts + 1);
                cs["ready"] = json!(true);
                cs["started"] = json!(true);
                cs["state"] = json!({"running": {"startedAt": now}});
                set_condition(&mut c, "ContainersReady", "True", None, None, &now);
                let ready = gates_pass(&c);
                set_condition(
                    &mut c,
                    "Ready",
                    if ready { "True" } else { "False" },
                    (!ready).then_some("ReadinessGatesNotReady"),
                    None,
                    &now,
                );
                Ok(c)
            });
        tracing::info!(pod = %key.name, restarts = restarts + 1, ip = %started.pod_ip, "container restarted");
        if is_workspace_pod(pod) {
            ctx.truth.record(
                Transition::ColdStarted,
                key.ns(),
                &key.name,
                Some(node),
                None,
            );
        }
        if let Some(p) = ctx.store.find(key.kind, key.ns(), &key.name) {
            self.note_ready(ctx, key, uid, node, condition_true(&p, "Ready"));
        }
        Next::Done
    }
}

/// Whether a Running pod's container is down: terminated (its process exited) or waiting
/// to be started again.
fn container_down(pod: &Value) -> bool {
    pod.lookup("/status/containerStatuses/0/state")
        .is_some_and(|s| s.get("terminated").is_some() || s.get("waiting").is_some())
}

/// Watches the pod processes for one that exits on its own (every second, until the
/// simulator stops) and shows it on its pod as a kubelet does: the container `terminated`
/// (exit code, reason `Error`, start and finish times), not ready, the pod not Ready. The
/// kubelet's reconcile, woken by that write, restarts the container ([`Kubelet::restart`]).
pub fn watch_processes(ctx: Ctx) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut shutdown = ctx.shutdown.clone();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            for (uid, status) in ctx.pods.reap_exited() {
                show_exit(&ctx, &uid, status);
            }
        }
    })
}

fn show_exit(ctx: &Ctx, uid: &str, status: std::process::ExitStatus) {
    use std::os::unix::process::ExitStatusExt;
    let Some(pod) = ctx
        .store
        .by_uid(uid)
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("Pod"))
    else {
        return;
    };
    // A container's exit code: its own, or 128 + the signal that ended it.
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    let key = ObjKey::of(kind("Pod"), &pod);
    let container = str_at(&pod, "/spec/containers/0/name").unwrap_or("main");
    let now = now_rfc3339();
    tracing::warn!(pod = %key.name, code, "the pod's server exited on its own");
    let _ = ctx
        .store
        .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
            let mut c = cur.clone();
            let cs = &mut c["status"]["containerStatuses"][0];
            let started_at = cs
                .lookup("/state/running/startedAt")
                .cloned()
                .unwrap_or(json!(null));
            cs["ready"] = json!(false);
            cs["started"] = json!(false);
            cs["state"] = json!({"terminated": {
                "exitCode": code, "reason": "Error", "startedAt": started_at,
                "finishedAt": now, "containerID": format!("sim://{uid}"),
            }});
            containers_not_ready(&mut c, container, &now);
            Ok(c)
        });
}

/// `ContainersReady` and `Ready` False as the kubelet writes them while `container` is not
/// running: reason `ContainersNotReady`, "containers with unready status: [<container>]".
fn containers_not_ready(pod: &mut Value, container: &str, now: &str) {
    let unready = format!("containers with unready status: [{container}]");
    for type_ in ["ContainersReady", "Ready"] {
        set_condition(
            pod,
            type_,
            "False",
            Some("ContainersNotReady"),
            Some(&unready),
            now,
        );
    }
}

/// A whole-second duration as Go prints it in the kubelet's messages: `10s`, `5m0s`.
fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{}s", s / 60, s % 60)
    }
}

/// The kubelet's longest back-off between two tries of a container (`MaxContainerBackOff`).
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The runtime's error as a container status and an event carry it: the first line and
/// the last three lines of the server log at most, with any `token=` value blanked.
fn start_failure_message(error: &str) -> String {
    let mut lines: Vec<&str> = error.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() > 4 {
        let tail = lines.split_off(lines.len() - 3);
        lines.truncate(1);
        lines.extend(tail);
    }
    let text = lines.join("\n");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find("token=") {
        out.push_str(&rest[..i + "token=".len()]);
        rest = &rest[i + "token=".len()..];
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '&' || c == '"' || c == '\'')
            .unwrap_or(rest.len());
        if end > 0 {
            out.push_str("[redacted]");
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

use crate::platform::names;
pub use crate::platform::names::WORKSPACE_LABEL;
use crate::sim::json::Lookup as _;

fn is_workspace_pod(pod: &Value) -> bool {
    pod.lookup("/metadata/labels")
        .and_then(|l| l.get(WORKSPACE_LABEL))
        .is_some()
}

impl Kubelet {
    /// Starts the pod's process: restores the planned snapshot's image, or cold-starts.
    /// Starts the pod's process: restores the planned snapshot's image, or cold-starts
    /// (a Jupyter server for workspace pods under the jupyter runtime). `Ok(None)` while a
    /// cold start is still coming up.
    fn start_process(
        &self,
        ctx: &Ctx,
        pod: &Value,
        uid: &str,
        plan: Option<&RestorePlan>,
    ) -> Result<Option<(Started, Option<RestorePlan>)>, String> {
        match ctx.pods.poll_start(uid) {
            Some(StartState::Starting) => return Ok(None),
            Some(StartState::Ready(s)) => return Ok(Some((s, None))),
            Some(StartState::Failed(e)) => return Err(e),
            None => {}
        }
        if let Some(s) = ctx.pods.running(uid) {
            return Ok(Some((s, None)));
        }
        if let Some(plan) = plan {
            match ctx.pods.restore(&plan.snapshot_uid, uid) {
                Ok(started) => return Ok(Some((started, Some(plan.clone())))),
                Err(e) => tracing::warn!(error = %e, "restore failed; cold start"),
            }
        }
        if !is_workspace_pod(pod) {
            return Ok(Some((ctx.pods.start_none(uid), None)));
        }
        let sampled = agent::workspace_of(ctx, pod).is_some_and(|w| {
            w.lookup("/metadata/annotations")
                .and_then(|a| a.get(crate::sim::pods::RUNTIME_ANNOTATION))
                .and_then(Value::as_str)
                == Some("jupyter")
        });
        ctx.pods.begin_jupyter(uid, jupyter_spec(ctx, pod), sampled);
        Ok(None)
    }

    /// A volume cannot be mounted: the pod stays Pending with its container waiting in
    /// `ContainerCreating`, and one `FailedMount` Warning says why, in the kubelet's words.
    fn hold_for_mount(
        &self,
        ctx: &Ctx,
        key: &ObjKey,
        pod: &Value,
        uid: &str,
        volume: &str,
        map: &str,
    ) {
        let first = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            let k = format!("mount/{uid}");
            let first = !seen.contains_key(&k);
            seen.entry(k).or_insert_with(Instant::now);
            first
        };
        if !first {
            return;
        }
        events::record(
            ctx,
            pod,
            "Warning",
            "FailedMount",
            &format!(
                "MountVolume.SetUp failed for volume \"{volume}\" : configmap \"{map}\" not found"
            ),
            "kubelet",
        );
        let name = pod
            .lookup("/spec/containers/0/name")
            .cloned()
            .unwrap_or(json!("main"));
        let image = pod
            .lookup("/spec/containers/0/image")
            .cloned()
            .unwrap_or(json!(""));
        let now = now_rfc3339();
        let _ = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                let mut c = cur.clone();
                c["status"]["containerStatuses"] = json!([{
                    "name": name, "ready": false, "restartCount": 0, "started": false,
                    "image": image, "imageID": "",
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }]);
                set_condition(&mut c, "Initialized", "True", None, None, &now);
                containers_not_ready(&mut c, name.as_str().unwrap_or("main"), &now);
                Ok(c)
            });
    }

    /// A pod whose process could not start, shown as a kubelet shows a container the
    /// runtime could not start: the container `waiting` in `RunContainerError` with the
    /// runtime's message, `ContainersReady` and `Ready` False ("containers with unready
    /// status: [main]"), the phase still Pending, and a Warning `Failed` event from the
    /// kubelet, "Error: <message>" (which the workspace controller turns into the Workspace's
    /// state message). The start is tried again after the kubelet's back-off: 10 s, doubling
    /// on each failure, at most 300 s. Returns that back-off.
    fn fail_start(
        &self,
        ctx: &Ctx,
        key: &ObjKey,
        pod: &Value,
        uid: &str,
        message: &str,
    ) -> Duration {
        let (failures, backoff) = {
            let mut f = self.failed_starts.lock().unwrap_or_else(|e| e.into_inner());
            let entry = f.entry(uid.to_string()).or_insert((0, Instant::now()));
            entry.0 += 1;
            let backoff = Duration::from_secs(10u64 << (entry.0 - 1).min(5)).min(MAX_BACKOFF);
            entry.1 = Instant::now() + backoff;
            (entry.0, backoff)
        };
        let message = start_failure_message(message);
        let container = str_at(pod, "/spec/containers/0/name").unwrap_or("main");
        let image = str_at(pod, "/spec/containers/0/image").unwrap_or("");
        let now = now_rfc3339();
        let _ = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                let mut c = cur.clone();
                let prev = cur.lookup("/status/containerStatuses/0");
                let restarts = prev
                    .and_then(|p| p.get("restartCount"))
                    .cloned()
                    .unwrap_or(json!(0));
                let last = prev
                    .and_then(|p| p.get("lastState"))
                    .cloned()
                    .unwrap_or(json!({}));
                c["status"]["containerStatuses"] = json!([{
                    "name": container, "ready": false, "restartCount": restarts,
                    "started": false, "image": image, "imageID": "", "lastState": last,
                    "state": {"waiting": {"reason": "RunContainerError", "message": message}},
                }]);
                containers_not_ready(&mut c, container, &now);
                Ok(c)
            });
        events::record(
            ctx,
            pod,
            "Warning",
            "Failed",
            &format!("Error: {message}"),
            "kubelet",
        );
        tracing::warn!(pod = %key.name, failures, ?backoff, "{message}");
        backoff
    }
}

fn env_value<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    pod.lookup("/spec/containers/0/env")
        .and_then(Value::as_array)?
        .iter()
        .find(|e| str_at(e, "/name") == Some(name))
}

/// Reads `key` of Secret `name` in `namespace` from the store (base64 `data`).
fn secret_value(ctx: &Ctx, namespace: &str, name: &str, key: &str) -> Option<String> {
    secret_in(&ctx.store, namespace, name, key)
}

fn secret_in(
    store: &crate::sim::store::Store,
    namespace: &str,
    name: &str,
    key: &str,
) -> Option<String> {
    use base64::Engine;
    let secret = store.find(kind("Secret"), Some(namespace), name)?;
    let encoded = secret.lookup("/data")?.get(key)?.as_str()?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(raw).ok()
}

/// What the runtime needs to start a workspace pod's Jupyter server: its home PVC, the
/// `NB_PREFIX` path, the token from `JUPYTER_TOKEN` (resolving a secretKeyRef) and the port.
/// The PVC a pod's home volume comes from: the volume `home-volume`, else its first PVC
/// volume (`no-home` when it has none).
pub(crate) fn home_claim(pod: &Value) -> &str {
    let volumes = pod.lookup("/spec/volumes").and_then(Value::as_array);
    volumes
        .into_iter()
        .flatten()
        .find(|v| str_at(v, "/name") == Some("home-volume"))
        .or_else(|| {
            volumes
                .into_iter()
                .flatten()
                .find(|v| v.get("persistentVolumeClaim").is_some())
        })
        .and_then(|v| str_at(v, "/persistentVolumeClaim/claimName"))
        .unwrap_or("no-home")
}

/// The first container's environment as its process gets it: each `value`, each
/// `valueFrom.secretKeyRef` read from the store, and each `valueFrom.fieldRef` the
/// kubelet resolves from the pod itself (`metadata.name`, `metadata.namespace`,
/// `metadata.uid`, `metadata.labels['k']`, `metadata.annotations['k']`, `spec.nodeName`,
/// `spec.serviceAccountName`, `status.podIP`); one that cannot be resolved is left out.
pub(crate) fn container_env(
    store: &crate::sim::store::Store,
    pod: &Value,
) -> Vec<(String, String)> {
    let ns = str_at(pod, "/metadata/namespace").unwrap_or("default");
    pod.lookup("/spec/containers/0/env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let name = str_at(e, "/name")?.to_string();
            let value = match str_at(e, "/value") {
                Some(v) => v.to_string(),
                None => match e.lookup("/valueFrom/fieldRef") {
                    Some(f) => field_ref(pod, str_at(f, "/fieldPath")?)?,
                    None => {
                        let r = e.lookup("/valueFrom/secretKeyRef")?;
                        secret_in(store, ns, str_at(r, "/name")?, str_at(r, "/key")?)?
                    }
                },
            };
            Some((name, value))
        })
        .collect()
}

/// The value of a downward-API `fieldRef` path on `pod`, as the kubelet resolves it
/// (kubernetes `pkg/kubelet/kubelet_pods.go` `podFieldSelectorRuntimeValue`, then
/// `fieldpath.ExtractFieldPathAsString`): a label or annotation the pod does not carry is
/// `""`. `None` for a path the simulator does not resolve (a real kubelet fails the
/// container's start on one it does not support).
fn field_ref(pod: &Value, path: &str) -> Option<String> {
    let keyed = |prefix: &str| {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        Some(key.to_string())
    };
    for (prefix, map) in [
        ("metadata.labels", "/metadata/labels"),
        ("metadata.annotations", "/metadata/annotations"),
    ] {
        if let Some(key) = keyed(prefix) {
            let value = pod.lookup(map).and_then(|m| m.get(&key));
            return Some(value.and_then(Value::as_str).unwrap_or("").to_string());
        }
    }
    let pointer = match path {
        "metadata.name" => "/metadata/name",
        "metadata.namespace" => "/metadata/namespace",
        "metadata.uid" => "/metadata/uid",
        "spec.nodeName" => "/spec/nodeName",
        "spec.serviceAccountName" => "/spec/serviceAccountName",
        "status.podIP" => "/status/podIP",
        _ => return None,
    };
    str_at(pod, pointer).map(str::to_string)
}

/// What a workspace pod's image runs: code-server for Kubeflow's codeserver images (and
/// builds named after them, as gke-labs/workspaces' `codeserver-python`), else JupyterLab.
/// A real kubelet runs the image's entrypoint; the simulator has no images, so the name
/// decides.
pub(crate) fn program_of(image: &str) -> Program {
    let repository = image.rsplit('/').next().unwrap_or(image);
    let repository = repository.split(['@', ':']).next().unwrap_or(repository);
    if repository.starts_with("codeserver") {
        Program::CodeServer
    } else {
        Program::JupyterLab
    }
}

fn jupyter_spec(ctx: &Ctx, pod: &Value) -> JupyterSpec {
    let ns = str_at(pod, "/metadata/namespace").unwrap_or("default");
    let claim = home_claim(pod);
    let ws = pod
        .lookup("/metadata/labels")
        .and_then(|l| l.get(WORKSPACE_LABEL))
        .and_then(Value::as_str)
        .unwrap_or("");
    let base_url = env_value(pod, "NB_PREFIX")
        .and_then(|e| str_at(e, "/value"))
        .map(str::to_string)
        .unwrap_or_else(|| format!("/workspace/connect/{ns}/{ws}/jupyterlab/"));
    let token = env_value(pod, "JUPYTER_TOKEN").and_then(|e| match str_at(e, "/value") {
        Some(v) => Some(v.to_string()),
        None => {
            let r = e.lookup("/valueFrom/secretKeyRef")?;
            secret_value(ctx, ns, str_at(r, "/name")?, str_at(r, "/key")?)
        }
    });
    let port = pod
        .lookup("/spec/containers/0/ports/0/containerPort")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(8888);
    JupyterSpec {
        program: program_of(str_at(pod, "/spec/containers/0/image").unwrap_or("")),
        env: container_env(&ctx.store, pod),
        home: ctx.pods.volume_dir(ns, claim),
        base_url,
        token,
        port,
        etc_jupyter: etc_jupyter_mounts(ctx, pod),
        pod_ip: None,
    }
}

/// How often the kubelet tries a held pod's volumes again. A real kubelet backs off from
/// half a second to about two minutes; the simulator retries at this steady pace.
const MOUNT_RETRY: Duration = Duration::from_secs(1);

/// The first ConfigMap volume of `pod` (not marked `optional`) whose ConfigMap is not in the
/// pod's namespace, as (volume, ConfigMap). A real kubelet mounts every volume of the pod
/// before it starts a container, so such a pod stays in `ContainerCreating` until the
/// ConfigMap exists (the snapshot add-on's pod webhook mounts `jupyter-ipc-config`, which
/// its reconciler creates: in a namespace it has not reconciled yet, pods wait for it).
fn missing_config_map(ctx: &Ctx, pod: &Value) -> Option<(String, String)> {
    let ns = str_at(pod, "/metadata/namespace").unwrap_or("default");
    pod.lookup("/spec/volumes")
        .and_then(Value::as_array)?
        .iter()
        .filter(|v| v.lookup("/configMap/optional").and_then(Value::as_bool) != Some(true))
        .filter_map(|v| Some((str_at(v, "/name")?, str_at(v, "/configMap/name")?)))
        .find(|(_, map)| ctx.store.find(kind("ConfigMap"), Some(ns), map).is_none())
        .map(|(volume, map)| (volume.to_string(), map.to_string()))
}

/// The files the pod's first container mounts under `/etc/jupyter/` from ConfigMap
/// volumes (`subPath` a key, or the whole map), with their content from the store now
/// (every one exists: [`missing_config_map`] holds the pod until it does).
fn etc_jupyter_mounts(ctx: &Ctx, pod: &Value) -> Vec<(String, String)> {
    let ns = str_at(pod, "/metadata/namespace").unwrap_or("default");
    let volumes = pod.lookup("/spec/volumes").and_then(Value::as_array);
    let mounts = pod
        .lookup("/spec/containers/0/volumeMounts")
        .and_then(Value::as_array);
    let mut files = Vec::new();
    for m in mounts.into_iter().flatten() {
        let Some(path) = str_at(m, "/mountPath").and_then(|p| p.strip_prefix("/etc/jupyter"))
        else {
            continue;
        };
        let Some(map) = volumes
            .into_iter()
            .flatten()
            .find(|v| str_at(v, "/name") == str_at(m, "/name"))
            .and_then(|v| str_at(v, "/configMap/name"))
        else {
            continue;
        };
        let Some(data) = ctx
            .store
            .find(kind("ConfigMap"), Some(ns), map)
            .and_then(|cm| cm.get("data").cloned())
        else {
            tracing::warn!(
                configmap = map,
                "a mounted ConfigMap is missing; its files are not there"
            );
            continue;
        };
        let path = path.trim_start_matches('/');
        match str_at(m, "/subPath") {
            Some(key) if !path.is_empty() && !path.contains('/') => {
                if let Some(v) = data.get(key).and_then(Value::as_str) {
                    files.push((path.to_string(), v.to_string()));
                }
            }
            _ if path.is_empty() => {
                if let Some(d) = data.as_object() {
                    files.extend(
                        d.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))),
                    );
                }
            }
            _ => {}
        }
    }
    files
}

/// Fault `gpu-not-released`: the GPU stays allocated on the node with no pod.
fn leak_gpus(ctx: &Ctx, node: &str, gpus: i64) {
    let _ = ctx
        .store
        .modify(kind("Node"), None, node, false, false, |cur| {
            let mut c = cur.clone();
            let before = c
                .lookup("/metadata/annotations")
                .and_then(|a| a.get(LEAKED_GPUS))
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0);
            c["metadata"]["annotations"][LEAKED_GPUS] = json!((before + gpus).to_string());
            Ok(c)
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_refs_resolve_as_the_kubelet_resolves_them() {
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                "labels": {"notebooks.kubeflow.org/workspace-name": "ws1"},
                "annotations": {"a": "b"}},
            "spec": {"nodeName": "n1", "serviceAccountName": "sa"},
            "status": {"podIP": "10.0.0.9"},
        });
        for (path, want) in [
            ("metadata.name", Some("p")),
            ("metadata.namespace", Some("ns")),
            ("metadata.uid", Some("u1")),
            (
                "metadata.labels['notebooks.kubeflow.org/workspace-name']",
                Some("ws1"),
            ),
            ("metadata.labels['missing']", Some("")),
            ("metadata.annotations['a']", Some("b")),
            ("metadata.annotations['missing']", Some("")),
            ("spec.nodeName", Some("n1")),
            ("spec.serviceAccountName", Some("sa")),
            ("status.podIP", Some("10.0.0.9")),
            ("spec.containers", None),
            ("metadata.labels", None),
        ] {
            assert_eq!(field_ref(&pod, path).as_deref(), want, "{path}");
        }
        let env_pod = json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"l": "v"}},
            "spec": {"containers": [{"env": [
                {"name": "A", "value": "1"},
                {"name": "WS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['l']"}}},
                {"name": "BAD", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}},
            ]}]},
        });
        let store = crate::sim::store::Store::new(16);
        assert_eq!(
            container_env(&store, &env_pod),
            vec![("A".into(), "1".into()), ("WS".into(), "v".into())]
        );
    }

    #[test]
    fn a_start_failure_keeps_its_first_and_last_lines_and_no_token() {
        let error = "jupyter lab (pid 7) exited with exit status: 1 before it answered; log tail:\n\
                     line a\nline b\n  http://10.0.0.1:8888/lab?token=s3cret&x=1 and token=abc\n\
                     line d\nOSError: [Errno 98] Address already in use";
        let m = start_failure_message(error);
        assert!(!m.contains("s3cret") && !m.contains("abc"), "{m}");
        assert!(m.starts_with("jupyter lab (pid 7) exited"), "{m}");
        assert!(m.ends_with("Address already in use"), "{m}");
        assert!(!m.contains("line a") && !m.contains("line b"), "{m}");
        assert!(
            m.contains("token=[redacted]&x=1 and token=[redacted]"),
            "{m}"
        );
        assert_eq!(start_failure_message("short"), "short");
    }

    #[test]
    fn back_offs_read_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_secs(160)), "2m40s");
        assert_eq!(go_duration(MAX_BACKOFF), "5m0s");
    }
}
