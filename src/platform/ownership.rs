//! The one rule for what wsgate may delete, patch or overwrite: only what it created.
//!
//! An object is wsgate's to touch when it carries `app.kubernetes.io/managed-by=wsgate` and
//! the claimed run's id (or, for the janitor's expiry sweep, an expiry in the past), lives in
//! a namespace that opted in (`wsgate.dev/test-namespace=true`), and, when the caller knows a
//! uid, has that uid (the delete then carries it as a precondition). The only cluster-scoped
//! things wsgate touches are its own squeeze taints on nodes, whose value names the run.
//! Whatever a state file, a flag or a ledger entry claims, the live object decides: a ledger
//! entry that fails the rule is reported and left alone.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;

use super::names::{EXPIRES_LABEL, MANAGED_BY, RUN_ID_LABEL};
use super::taint::{NodeTaint, SQUEEZE_TAINT};

/// Longest run id: a squeeze taint's value is `<run-id>.<10-digit expiry>`, and a label
/// value holds at most 63 characters.
pub const MAX_RUN_ID: usize = 52;

/// Whose objects a cleanup may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Everything one run created (its id, checked by [`check_run_id`]).
    Run(String),
    /// Everything wsgate created whose `wsgate.dev/expires` is before `now`.
    ExpiredBefore(chrono::DateTime<chrono::Utc>),
}

/// Why an object is not wsgate's to touch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object} is not wsgate's to touch ({why}); left alone")]
pub struct NotOurs {
    /// The object, e.g. `Secret wsgate-test/jupyter-token`.
    pub object: String,
    /// What failed, naming the owner where the labels say one.
    pub why: String,
}

/// Checks a run id as given on a command line or read from a state file: non-empty, at
/// most [`MAX_RUN_ID`] characters, and a valid label value (letters, digits, `-`, `_`, `.`,
/// beginning and ending with a letter or digit). An empty id would select every object
/// whose run-id label is empty.
pub fn check_run_id(id: &str) -> Result<(), String> {
    let valid_chars = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if id.is_empty() {
        Err("a run id cannot be empty".into())
    } else if id.len() > MAX_RUN_ID {
        Err(format!(
            "a run id has at most {MAX_RUN_ID} characters, this one {}",
            id.len()
        ))
    } else if !valid_chars || !ends(id.chars().next()) || !ends(id.chars().last()) {
        Err(format!(
            "`{id}` is not a valid run id: use letters, digits, `-`, `_` and `.`, beginning \
             and ending with a letter or digit (as wsgate's own ids, e.g. r20261203-151600-1a2b)"
        ))
    } else {
        Ok(())
    }
}

/// Who the labels say owns an object, for messages: `managed-by=helm, run-id=none`.
pub fn owner(labels: Option<&BTreeMap<String, String>>) -> String {
    let get = |k: &str| {
        labels
            .and_then(|l| l.get(k))
            .map_or("none".to_string(), |v| format!("{v:?}"))
    };
    format!(
        "{}={}, {RUN_ID_LABEL}={}",
        MANAGED_BY.0,
        get(MANAGED_BY.0),
        get(RUN_ID_LABEL)
    )
}

/// Whether the labels make an object wsgate's under `claim`.
pub fn labels_claimed(labels: Option<&BTreeMap<String, String>>, claim: &Claim) -> bool {
    let Some(labels) = labels else {
        return false;
    };
    if labels.get(MANAGED_BY.0).map(String::as_str) != Some(MANAGED_BY.1) {
        return false;
    }
    match claim {
        Claim::Run(id) => !id.is_empty() && labels.get(RUN_ID_LABEL) == Some(id),
        Claim::ExpiredBefore(now) => labels
            .get(EXPIRES_LABEL)
            .and_then(|v| v.parse::<i64>().ok())
            .is_some_and(|t| t < now.timestamp()),
    }
}

/// The rule on a live object's metadata: wsgate's labels under `claim`, and `expected_uid`
/// when one is known. `object` names it in the refusal.
pub fn check_meta(
    object: &str,
    meta: &ObjectMeta,
    claim: &Claim,
    expected_uid: Option<&str>,
) -> Result<(), NotOurs> {
    let refuse = |why: String| NotOurs {
        object: object.to_string(),
        why,
    };
    if !labels_claimed(meta.labels.as_ref(), claim) {
        let wanted = match claim {
            Claim::Run(id) => format!("{}={} and {RUN_ID_LABEL}={id}", MANAGED_BY.0, MANAGED_BY.1),
            Claim::ExpiredBefore(_) => format!(
                "{}={} and {EXPIRES_LABEL} in the past",
                MANAGED_BY.0, MANAGED_BY.1
            ),
        };
        return Err(refuse(format!(
            "it carries {}, not {wanted}",
            owner(meta.labels.as_ref())
        )));
    }
    if let Some(want) = expected_uid
        && meta.uid.as_deref() != Some(want)
    {
        return Err(refuse(format!(
            "its uid is {}, not the {want} wsgate created",
            meta.uid.as_deref().unwrap_or("unknown")
        )));
    }
    Ok(())
}

/// The rule for a node taint: the squeeze key, and a value naming the claimed run (or an
/// expiry in the past).
pub fn check_taint(t: &NodeTaint, claim: &Claim) -> Result<(), NotOurs> {
    let refuse = |why: String| NotOurs {
        object: t.describe(),
        why,
    };
    if t.key != SQUEEZE_TAINT {
        return Err(refuse(format!(
            "wsgate only removes its own `{SQUEEZE_TAINT}` taints"
        )));
    }
    let Some((run, expires)) = t.run_and_expiry() else {
        return Err(refuse("its value names no run and expiry".into()));
    };
    match claim {
        Claim::Run(id) if !id.is_empty() && run == id => Ok(()),
        Claim::Run(id) => Err(refuse(format!("it belongs to run {run}, not {id}"))),
        Claim::ExpiredBefore(now) if expires < now.timestamp() => Ok(()),
        Claim::ExpiredBefore(_) => Err(refuse("it has not expired".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)], uid: &str) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    const OURS: &[(&str, &str)] = &[
        ("app.kubernetes.io/managed-by", "wsgate"),
        ("wsgate.dev/run-id", "r1"),
        ("wsgate.dev/expires", "100"),
    ];

    #[test]
    fn run_ids_are_label_values_that_select_something() {
        for ok in ["r20261203-151600-1a2b", "gate-0123abcd", "a", "A.b_c-1"] {
            assert_eq!(check_run_id(ok), Ok(()), "{ok}");
        }
        for bad in ["", " ", "-r1", "r1-", "r 1", "r1,x", "r1=x", "r\u{e9}"] {
            assert!(check_run_id(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_run_id(&"r".repeat(MAX_RUN_ID)).is_ok());
        assert!(check_run_id(&"r".repeat(MAX_RUN_ID + 1)).is_err());
    }

    #[test]
    fn only_wsgate_labels_of_the_claimed_run_make_an_object_ours() {
        let run = Claim::Run("r1".into());
        let o = "Secret ns/s";
        assert_eq!(check_meta(o, &meta(OURS, "u1"), &run, Some("u1")), Ok(()));
        assert_eq!(check_meta(o, &meta(OURS, "u1"), &run, None), Ok(()));
        // Another uid: the object wsgate made is gone and someone made a new one.
        let e = check_meta(o, &meta(OURS, "u2"), &run, Some("u1")).unwrap_err();
        assert!(e.why.contains("u2"), "{e}");
        // Another run, no managed-by, an empty run id, no labels at all.
        assert!(check_meta(o, &meta(OURS, "u1"), &Claim::Run("r2".into()), None).is_err());
        let foreign = meta(&[("wsgate.dev/run-id", "r1")], "u1");
        let e = check_meta(o, &foreign, &run, None).unwrap_err();
        assert!(e.to_string().contains("managed-by=none"), "{e}");
        let empty = meta(
            &[
                ("app.kubernetes.io/managed-by", "wsgate"),
                ("wsgate.dev/run-id", ""),
            ],
            "u1",
        );
        assert!(check_meta(o, &empty, &Claim::Run(String::new()), None).is_err());
        let bare = ObjectMeta::default();
        assert!(check_meta(o, &bare, &run, None).is_err());
    }

    #[test]
    fn expiry_claims_need_wsgate_labels_and_a_past_expiry() {
        let at = |s| chrono::DateTime::from_timestamp(s, 0).unwrap();
        let o = "Pod ns/p";
        assert!(check_meta(o, &meta(OURS, "u"), &Claim::ExpiredBefore(at(101)), None).is_ok());
        assert!(check_meta(o, &meta(OURS, "u"), &Claim::ExpiredBefore(at(100)), None).is_err());
        let foreign = meta(&[("wsgate.dev/expires", "1")], "u");
        assert!(check_meta(o, &foreign, &Claim::ExpiredBefore(at(101)), None).is_err());
    }

    #[test]
    fn only_squeeze_taints_of_the_claimed_run_are_ours() {
        let at = |s| chrono::DateTime::from_timestamp(s, 0).unwrap();
        let t = NodeTaint::squeeze("gpu-a", "r1", at(100));
        assert!(check_taint(&t, &Claim::Run("r1".into())).is_ok());
        assert!(check_taint(&t, &Claim::Run("r2".into())).is_err());
        assert!(check_taint(&t, &Claim::Run(String::new())).is_err());
        assert!(check_taint(&t, &Claim::ExpiredBefore(at(101))).is_ok());
        assert!(check_taint(&t, &Claim::ExpiredBefore(at(99))).is_err());
        let other = NodeTaint {
            key: "nvidia.com/gpu".into(),
            ..t.clone()
        };
        assert!(check_taint(&other, &Claim::Run("r1".into())).is_err());
        let nameless = NodeTaint {
            value: ".100".into(),
            ..t
        };
        assert!(check_taint(&nameless, &Claim::Run(String::new())).is_err());
    }
}
