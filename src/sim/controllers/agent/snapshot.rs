//! A PodSnapshot's checkpoint in flight: the upload's outcome (Ready, failed, hung), the
//! trigger completed or failed with it, and the pod thawed or completed afterwards.

use serde_json::{Value, json};

use super::trigger::set_triggered;
use super::{Agent, InFlight, LAST_ACCESS, Outcome};
use crate::sim::controllers::scheduler::set_condition;
use crate::sim::controllers::{Ctx, Next, ObjKey, kind};
use crate::sim::json::{Lookup as _, is_deleting, now_rfc3339_ms, set_cr_condition, uid_of};
use crate::sim::store::meta::now_rfc3339;
use crate::sim::truth::{Imposed, Transition};

impl Agent {
    pub(super) fn reconcile_snapshot(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let Some(snap) = ctx.store.find(key.kind, key.ns(), &key.name) else {
            return Next::Done;
        };
        let uid = uid_of(&snap).to_string();
        if is_deleting(&snap) {
            self.finalize(ctx, key, &snap);
            return Next::Done;
        }
        let Some(job) = self.inflight().get(&uid).cloned() else {
            return Next::Done;
        };
        let elapsed = job.started.elapsed();
        if elapsed < job.duration {
            return Next::After(job.duration - elapsed);
        }
        let ns = key.namespace.as_str();
        if job.outcome != Outcome::Hang {
            ctx.truth.record_imposed(Imposed::Checkpoint, job.duration);
        }
        match job.outcome {
            Outcome::Hang => {
                // A hung checkpoint stays AwaitingCheckpoint, with an InProgress condition.
                set_snapshot_conditions(
                    ctx,
                    key,
                    &[(
                        "InProgress",
                        "True",
                        "AwaitingCheckpoint",
                        "the checkpoint upload has not completed",
                    )],
                );
                self.inflight().remove(&uid);
            }
            Outcome::Fail => {
                self.inflight().remove(&uid);
                self.fail_checkpoint(
                    ctx,
                    key,
                    &job,
                    "runsc checkpoint failed: the sandbox could not be checkpointed",
                );
            }
            Outcome::Succeed => {
                self.inflight().remove(&uid);
                if let Err(e) = ctx.bucket.write_pages(&job.location, job.resident_bytes) {
                    self.fail_checkpoint(
                        ctx,
                        key,
                        &job,
                        &format!("upload to {} failed: {e}", job.location.url()),
                    );
                    return Next::Done;
                }
                let stored = format!("snapshot stored at {}", job.location.url());
                set_snapshot_conditions(
                    ctx,
                    key,
                    &[
                        ("Checkpoint", "True", "Succeeded", "checkpoint completed"),
                        ("StorageReplicated", "True", "Succeeded", &stored),
                        (
                            "Ready",
                            "True",
                            "AllSnapshotsAvailable",
                            "all snapshots are available",
                        ),
                    ],
                );
                let now = now_rfc3339_ms();
                let _ = ctx
                    .store
                    .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
                        let mut c = cur.clone();
                        c["metadata"]["annotations"][LAST_ACCESS] = json!(now);
                        Ok(c)
                    });
                set_triggered(
                    ctx,
                    &job.trigger(ns),
                    "True",
                    "Complete",
                    "checkpoint completed successfully",
                    Some(&key.name),
                );
                ctx.truth.record_delayed(
                    Transition::CheckpointFinished,
                    Some(ns),
                    &job.pod_name,
                    Some(&job.node),
                    Some(key.name.clone()),
                    Some(job.duration),
                );
                if job.post_stop {
                    complete_pod(ctx, ns, &job.pod_name, &job.pod_uid);
                } else if let Err(e) = ctx.pods.restore(&uid, &job.pod_uid) {
                    tracing::warn!(error = %e, "cannot resume the checkpointed pod");
                }
            }
        }
        Next::Done
    }

    pub(super) fn fail_checkpoint(&self, ctx: &Ctx, key: &ObjKey, job: &InFlight, message: &str) {
        let ns = key.namespace.as_str();
        set_snapshot_conditions(
            ctx,
            key,
            &[
                ("Checkpoint", "False", "Failed", message),
                ("Ready", "False", "Failed", message),
            ],
        );
        set_triggered(ctx, &job.trigger(ns), "False", "Failed", message, None);
        ctx.truth.record(
            Transition::CheckpointFailed,
            Some(ns),
            &job.pod_name,
            Some(&job.node),
            Some(format!("{}: {message}", key.name)),
        );
        // A frozen pod thaws and keeps running; its image is no snapshot.
        if ctx.pods.has_image(&job.location.snapshot_uid) {
            let _ = ctx.pods.restore(&job.location.snapshot_uid, &job.pod_uid);
            ctx.pods.drop_image(&job.location.snapshot_uid);
        }
    }
}

/// Writes conditions (type, status, reason, message) into a PodSnapshot's status.
fn set_snapshot_conditions(ctx: &Ctx, key: &ObjKey, conditions: &[(&str, &str, &str, &str)]) {
    let _ = ctx
        .store
        .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
            let mut c = cur.clone();
            for (type_, status, reason, message) in conditions {
                set_cr_condition(&mut c, type_, status, reason, message);
            }
            Ok(c)
        });
}

/// `postCheckpoint: stop`: the checkpointed pod ends `Completed` (phase `Succeeded`).
fn complete_pod(ctx: &Ctx, ns: &str, name: &str, uid: &str) {
    let now = now_rfc3339();
    let _ = ctx
        .store
        .modify(kind("Pod"), Some(ns), name, true, false, |cur| {
            let mut c = cur.clone();
            if uid_of(cur) != uid || is_deleting(cur) {
                return Ok(c);
            }
            c["status"]["phase"] = json!("Succeeded");
            if let Some(cs) = c
                .pointer_mut("/status/containerStatuses")
                .and_then(Value::as_array_mut)
            {
                for s in cs {
                    let started = s.lookup("/state/running/startedAt").cloned();
                    s["ready"] = json!(false);
                    s["started"] = json!(false);
                    s["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": started, "finishedAt": now}});
                }
            }
            set_condition(
                &mut c,
                "ContainersReady",
                "False",
                Some("PodCompleted"),
                None,
                &now,
            );
            set_condition(&mut c, "Ready", "False", Some("PodCompleted"), None, &now);
            Ok(c)
        });
}
