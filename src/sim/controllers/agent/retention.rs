//! A policy's side of the agent: the storage permission check (`Ready`, or
//! `Ready=False/TriggerFailed` when the storage config cannot be used, after writing the
//! `_perm_check` probe object) and retention: snapshots not accessed for
//! `retentionConfig.lastAccessTimeout` are deleted, and with
//! `snapshotGroupingRules.groupByLabelValue.groupRetentionPolicy.maxSnapshotCountPerGroup`
//! only the newest Ready snapshots of each group are kept (oldest pruned first).
//!
//! Timeouts are taken literally (not scaled by the profile), so tests use short ones
//! ("2s"); the policy is reconciled again when the next snapshot would expire.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    CHECKPOINTED_AT, LAST_ACCESS, annotation, condition_status, delete_snapshot, grouping_labels,
    is_deleting, label, name_of, set_cr_condition, storage_of_policy, str_at,
};
use crate::sim::controllers::{Ctx, Next, ObjKey, kind};
use crate::sim::json::Lookup as _;

/// Parses a retention duration: one or more `<number><unit>` with units `d`, `h`, `m`,
/// `s` (and `ms`), e.g. `7d`, `30m`, `1h30m`, `2s`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "d" => 86_400.0,
            "h" => 3_600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += Duration::from_secs_f64(n * secs);
    }
    Some(total)
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// When a snapshot was last accessed: its last-access annotation, else its creation.
fn last_access(snapshot: &Value) -> Option<DateTime<Utc>> {
    annotation(snapshot, LAST_ACCESS)
        .or_else(|| str_at(snapshot, "/metadata/creationTimestamp"))
        .and_then(parse_time)
}

/// Validates the policy's storage and applies its retention rules.
pub fn reconcile_policy(ctx: &Ctx, key: &ObjKey) -> Next {
    let Some(policy) = ctx.store.find(key.kind, key.ns(), &key.name) else {
        return Next::Done;
    };
    if is_deleting(&policy) {
        return Next::Done;
    }
    check_storage(ctx, key, &policy);
    let ns = key.namespace.as_str();
    let snapshots: Vec<_> = ctx
        .store
        .by_field(kind("PodSnapshot"), key.ns(), "/spec/policyName", &key.name)
        .into_iter()
        .filter(|s| !is_deleting(s))
        // A checkpoint still uploading is not subject to retention yet.
        .filter(|s| condition_status(s, "Checkpoint").is_some_and(|c| c != "Unknown"))
        .collect();
    let mut next: Option<Duration> = None;
    let mut doomed: Vec<String> = Vec::new();
    let timeout = policy
        .lookup("/spec/retentionConfig/lastAccessTimeout")
        .and_then(Value::as_str)
        .and_then(parse_duration);
    if let Some(timeout) = timeout {
        let now = Utc::now();
        for s in &snapshots {
            let Some(at) = last_access(s) else { continue };
            let age = (now - at).to_std().unwrap_or(Duration::ZERO);
            if age >= timeout {
                doomed.push(name_of(s).to_string());
            } else {
                let left = timeout - age;
                next = Some(next.map_or(left, |n| n.min(left)));
            }
        }
    }
    let max = policy
        .lookup("/spec/snapshotGroupingRules/groupByLabelValue/groupRetentionPolicy/maxSnapshotCountPerGroup")
        .and_then(Value::as_u64);
    if let Some(max) = max {
        let keys = grouping_labels(&policy);
        let mut groups: BTreeMap<Vec<Option<String>>, Vec<&Value>> = BTreeMap::new();
        for s in snapshots
            .iter()
            .filter(|s| condition_status(s, "Ready") == Some("True"))
        {
            let group = keys
                .iter()
                .map(|k| label(s, k).map(str::to_string))
                .collect();
            groups.entry(group).or_default().push(s);
        }
        for members in groups.values_mut() {
            members.sort_by(|a, b| {
                annotation(b, CHECKPOINTED_AT).cmp(&annotation(a, CHECKPOINTED_AT))
            });
            for old in members.iter().skip(max as usize) {
                doomed.push(name_of(old).to_string());
            }
        }
    }
    doomed.sort();
    doomed.dedup();
    for name in doomed {
        tracing::debug!(snapshot = %name, policy = %key.name, "retention deletes a snapshot");
        delete_snapshot(ctx, ns, &name);
    }
    next.map_or(Next::Done, |d| Next::After(d + Duration::from_millis(10)))
}

/// Writes the `_perm_check` probe and reports the result as the policy's `Ready` condition.
fn check_storage(ctx: &Ctx, key: &ObjKey, policy: &Value) {
    // A policy whose current generation was validated is not probed again: the agent
    // validates storage access when a policy is created or changed (and retries a failed
    // check), not on every snapshot change. Writing the probe object each time stalled the
    // agent on the filesystem under load.
    let generation = policy.lookup("/metadata/generation");
    if condition_status(policy, "Ready") == Some("True")
        && generation.is_some()
        && policy.lookup("/status/observedGeneration") == generation
    {
        return;
    }
    let result = storage_of_policy(ctx, policy).and_then(|(bucket, path)| {
        ctx.bucket
            .write_perm_check(&bucket, &path)
            .map_err(|e| {
                format!(
                    "failed to validate GCS access in storage config {:?}: storage.objects.create validation failed for path gs://{bucket}/{}_perm_check: {e}",
                    str_at(policy, "/spec/storageConfigName").unwrap_or(""),
                    if path.is_empty() { String::new() } else { format!("{}/", path.trim_matches('/')) },
                )
            })
    });
    let (status, reason, message) = match &result {
        Ok(()) => ("True", "Ready", "storage access validated".to_string()),
        Err(e) => ("False", "TriggerFailed", e.clone()),
    };
    if condition_status(policy, "Ready") == Some(status) {
        return;
    }
    let _ = ctx
        .store
        .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
            let mut c = cur.clone();
            set_cr_condition(&mut c, "Ready", status, reason, &message);
            c["status"]["observedGeneration"] = cur
                .lookup("/metadata/generation")
                .cloned()
                .unwrap_or(serde_json::json!(1));
            Ok(c)
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_durations_parse() {
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1_500)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        for bad in ["", "7", "d", "7x", "-1s", "1s2"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
