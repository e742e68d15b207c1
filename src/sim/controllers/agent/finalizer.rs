//! The snapshot finalizer: the bucket's objects and the memory image are deleted before
//! the PodSnapshot may go (never, with `snapshot-stuck-deleting`).

use serde_json::Value;

use super::{Agent, FINALIZER, fault_on, storage_of};
use crate::sim::bucket::SnapshotLocation;
use crate::sim::controllers::{Ctx, ObjKey, events, kind};
use crate::sim::faults::Fault;
use crate::sim::json::{Lookup as _, str_at, uid_of};
use crate::sim::store::DeleteOptions;
use crate::sim::truth::Transition;

impl Agent {
    /// The finalizer: delete the bucket objects and the image, then let the object go. With
    /// `snapshot-stuck-deleting` (the service agent lacks storage permission) it never does.
    pub(super) fn finalize(&self, ctx: &Ctx, key: &ObjKey, snap: &Value) {
        let has_finalizer = snap
            .lookup("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(FINALIZER)));
        if !has_finalizer {
            return;
        }
        let uid = uid_of(snap).to_string();
        let ns = key.namespace.as_str();
        if fault_on(ctx, Fault::SnapshotStuckDeleting, &[snap]) {
            let first = self
                .stuck
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(uid.clone());
            if first {
                ctx.truth.record_fault(Fault::SnapshotStuckDeleting);
                let url = storage_of(ctx, ns, str_at(snap, "/spec/policyName").unwrap_or(""))
                    .map(|(bucket, path)| {
                        SnapshotLocation {
                            bucket,
                            path,
                            snapshot_uid: uid.clone(),
                        }
                        .url()
                    })
                    .unwrap_or_default();
                events::record(
                    ctx,
                    snap,
                    "Warning",
                    "SnapshotDeletionFailed",
                    &format!(
                        "failed to delete snapshot objects {url}: googleapi: Error 403: service-000000000000@container-engine-robot.iam.gserviceaccount.com does not have storage.objects.delete access"
                    ),
                    "gke-pod-snapshot-controller",
                );
            }
            return;
        }
        match storage_of(ctx, ns, str_at(snap, "/spec/policyName").unwrap_or("")) {
            Ok((bucket, path)) => {
                let loc = SnapshotLocation {
                    bucket,
                    path,
                    snapshot_uid: uid.clone(),
                };
                if let Err(e) = ctx.bucket.delete_snapshot(&loc) {
                    tracing::warn!(error = %e, "cannot delete the snapshot's objects; retrying");
                    return;
                }
            }
            // Deleting the policy first orphans the files (gke-pod-snapshots.md §3).
            Err(why) => {
                tracing::warn!(snapshot = %key.name, %why, "bucket unknown: the snapshot's objects are orphaned")
            }
        }
        ctx.pods.drop_image(&uid);
        self.inflight().remove(&uid);
        let removed = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
                let mut c = cur.clone();
                if let Some(f) = c
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    f.retain(|x| x.as_str() != Some(FINALIZER));
                }
                Ok(c)
            });
        if removed.is_ok() {
            ctx.truth.record(
                Transition::SnapshotDeleted,
                Some(ns),
                &key.name,
                None,
                Some(uid),
            );
        }
    }
}

/// Deletes a snapshot (it then goes through the finalizer).
pub(crate) fn delete_snapshot(ctx: &Ctx, ns: &str, name: &str) {
    let _ = ctx.store.delete(
        kind("PodSnapshot"),
        Some(ns),
        name,
        &DeleteOptions::default(),
    );
}
