//! The indexes the store keeps beside its objects, updated on every commit under the same
//! lock, so that the simulator's controllers find what they own or select without scanning
//! every object of a kind (client-go's informers keep the same kinds of index: by namespace,
//! by owner, by label, by a field).
//!
//! - uid -> the object (`Store::by_uid`);
//! - owner uid -> its dependents, from `metadata.ownerReferences` (`Store::owned_by`, and
//!   the cascade on delete);
//! - `(kind, label=value)` -> objects (`Store::labelled`);
//! - `(kind, field, value)` for the few fields in [`FIELDS`] (`Store::by_field`); an absent
//!   field is indexed as `""`;
//! - `(kind, label=value)` for each `matchLabels` pair of the label selectors in
//!   [`SELECTORS`], and `(kind, "")` for a selector with none (`Store::selecting`: the
//!   objects whose selector may select a set of labels, without reading every selector).
//!
//! Namespaces need no index: objects are kept sorted by `(namespace, name)`.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::Key;
use crate::sim::json::Lookup as _;

/// The fields indexed per kind, as `(kind, JSON pointer)`.
pub const FIELDS: &[(&str, &str)] = &[
    // The WorkspaceKind controller's "Workspaces of this kind".
    ("Workspace", "/spec/kind"),
    // The scheduler's pending pods (`""`) and each node's pods.
    ("Pod", "/spec/nodeName"),
    // The Workspace controller's warnings about one object.
    ("Event", "/involvedObject/uid"),
    // The snapshot agent's snapshots of one policy, and of one trigger (the agent's own
    // annotation `sim.wsgate.dev/trigger-uid`).
    ("PodSnapshot", "/spec/policyName"),
    (
        "PodSnapshot",
        "/metadata/annotations/sim.wsgate.dev~1trigger-uid",
    ),
];

/// The label selectors indexed per kind, as `(kind, JSON pointer)`: the snapshot agent's
/// "which PodSnapshotPolicy selects this pod".
pub const SELECTORS: &[(&str, &str)] = &[("PodSnapshotPolicy", "/spec/selector")];

/// An object's place in the store.
pub type Place = (&'static str, Key);

#[derive(Debug, Default)]
pub(super) struct Indexes {
    uids: HashMap<String, Place>,
    dependents: HashMap<String, BTreeSet<Place>>,
    labels: HashMap<(&'static str, String), BTreeSet<Key>>,
    fields: HashMap<(&'static str, &'static str, String), BTreeSet<Key>>,
    selects: HashMap<(&'static str, String), BTreeSet<Key>>,
}

/// Adds `item` to the set under `at`.
fn add<K: std::hash::Hash + Eq, T: Ord>(map: &mut HashMap<K, BTreeSet<T>>, at: K, item: T) {
    map.entry(at).or_default().insert(item);
}

/// Removes `item` from the set under `at`, and the set when it is left empty.
fn take<K: std::hash::Hash + Eq, T: Ord>(map: &mut HashMap<K, BTreeSet<T>>, at: K, item: &T) {
    if let Some(set) = map.get_mut(&at) {
        set.remove(item);
        if set.is_empty() {
            map.remove(&at);
        }
    }
}

/// What an object contributes to the indexes.
struct Entries<'a> {
    uid: Option<&'a str>,
    owners: Vec<&'a str>,
    labels: Vec<String>,
    fields: Vec<(&'static str, String)>,
    selects: Vec<String>,
}

fn entries<'a>(kind: &'static str, obj: &'a Value) -> Entries<'a> {
    let text = |p: &str| obj.lookup(p).and_then(Value::as_str);
    let owners = obj
        .lookup("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
        .collect();
    let labels = obj
        .lookup("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
        .collect();
    let fields = FIELDS
        .iter()
        .filter(|(k, _)| *k == kind)
        .map(|(_, p)| (*p, text(p).unwrap_or("").to_string()))
        .collect();
    let selects = SELECTORS
        .iter()
        .filter(|(k, _)| *k == kind)
        .flat_map(|(_, p)| {
            let pairs: Vec<String> = obj
                .lookup(&format!("{p}/matchLabels"))
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            if pairs.is_empty() {
                vec![String::new()]
            } else {
                pairs
            }
        })
        .collect();
    Entries {
        uid: text("/metadata/uid"),
        owners,
        labels,
        fields,
        selects,
    }
}

impl Indexes {
    /// Indexes `obj`, stored under `(kind, key)`.
    pub(super) fn insert(&mut self, kind: &'static str, key: &Key, obj: &Value) {
        let e = entries(kind, obj);
        let place = || (kind, key.clone());
        if let Some(uid) = e.uid {
            self.uids.insert(uid.to_string(), place());
        }
        for owner in e.owners {
            add(&mut self.dependents, owner.to_string(), place());
        }
        for label in e.labels {
            add(&mut self.labels, (kind, label), key.clone());
        }
        for (pointer, value) in e.fields {
            add(&mut self.fields, (kind, pointer, value), key.clone());
        }
        for pair in e.selects {
            add(&mut self.selects, (kind, pair), key.clone());
        }
    }

    /// Forgets `obj`, which was stored under `(kind, key)`.
    pub(super) fn remove(&mut self, kind: &'static str, key: &Key, obj: &Value) {
        let e = entries(kind, obj);
        let place = (kind, key.clone());
        if let Some(uid) = e.uid
            && self.uids.get(uid) == Some(&place)
        {
            self.uids.remove(uid);
        }
        for owner in e.owners {
            take(&mut self.dependents, owner.to_string(), &place);
        }
        for label in e.labels {
            take(&mut self.labels, (kind, label), key);
        }
        for (pointer, value) in e.fields {
            take(&mut self.fields, (kind, pointer, value), key);
        }
        for pair in e.selects {
            take(&mut self.selects, (kind, pair), key);
        }
    }

    pub(super) fn by_uid(&self, uid: &str) -> Option<&Place> {
        self.uids.get(uid)
    }

    /// The places of the objects that name `owner_uid` among their owners.
    pub(super) fn dependents(&self, owner_uid: &str) -> impl Iterator<Item = &Place> {
        self.dependents.get(owner_uid).into_iter().flatten()
    }

    /// The keys of `kind` objects labelled `label=value`.
    pub(super) fn labelled(
        &self,
        kind: &'static str,
        label: &str,
        value: &str,
    ) -> impl Iterator<Item = &Key> {
        self.labels
            .get(&(kind, format!("{label}={value}")))
            .into_iter()
            .flatten()
    }

    /// The keys of `kind` objects whose `pointer` (one of [`FIELDS`]) reads `value`.
    pub(super) fn by_field(
        &self,
        kind: &'static str,
        pointer: &'static str,
        value: &str,
    ) -> impl Iterator<Item = &Key> {
        self.fields
            .get(&(kind, pointer, value.to_string()))
            .into_iter()
            .flatten()
    }

    /// The keys of `kind` objects whose selector (one of [`SELECTORS`]) may select
    /// `labels`: one of its `matchLabels` pairs is among them, or it has none. A superset:
    /// the caller still matches the whole selector.
    pub(super) fn selecting(&self, kind: &'static str, labels: Option<&Value>) -> BTreeSet<&Key> {
        let pairs = labels
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")));
        std::iter::once(String::new())
            .chain(pairs)
            .filter_map(|pair| self.selects.get(&(kind, pair)))
            .flatten()
            .collect()
    }

    /// How many entries each index holds, every key's set counted whole (for tests:
    /// nothing is left behind).
    #[cfg(test)]
    pub(super) fn sizes(&self) -> [usize; 5] {
        fn entries<K, T>(map: &HashMap<K, BTreeSet<T>>) -> usize {
            map.values().map(BTreeSet::len).sum()
        }
        [
            self.uids.len(),
            entries(&self.dependents),
            entries(&self.labels),
            entries(&self.fields),
            entries(&self.selects),
        ]
    }
}
