//! The simulator's object store: JSON objects per kind with a cluster-wide monotonic
//! resourceVersion, uid, generation, creationTimestamp, deletionTimestamp + finalizers,
//! ownerReference cascade deletion, resource quantities stored as strings, and the change
//! history that watches replay.
//!
//! Every write takes one lock, bumps the resourceVersion and publishes its events while
//! still holding it, so watchers see changes in resourceVersion order with no gaps.

pub mod index;
pub mod meta;
pub mod quantity;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::sim::error::ApiError;
use crate::sim::json::Lookup as _;
use crate::sim::kinds::{self, KindInfo};
use crate::sim::selector::{FieldSelector, LabelSelector};
use meta::{check_name, finalizers, meta_mut, meta_str, now_rfc3339};
use watch::History;
pub use watch::{Event, EventType};

/// `(namespace or "", name)`.
pub type Key = (String, String);

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

/// Options of a delete call.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Propagation,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
    /// `gracePeriodSeconds`: a bound pod with a grace period is only marked for deletion
    /// (its kubelet finishes it); 0 deletes it at once.
    pub grace_period_seconds: Option<i64>,
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum DeleteOutcome {
    /// The object is gone; this is its last state.
    Deleted(Arc<Value>),
    /// Finalizers are pending: the object now carries a deletionTimestamp.
    Marked(Arc<Value>),
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum WatchStart {
    /// Current objects first (as ADDED), then live changes.
    Current,
    /// Every change after this resourceVersion.
    After(u64),
}

/// What a new watch receives: initial objects, replayed history and the live feed.
pub struct Subscription {
    pub initial: Vec<Arc<Value>>,
    pub replay: Vec<Arc<Event>>,
    pub resource_version: u64,
    pub live: broadcast::Receiver<Arc<Event>>,
}

/// What admission checks and mutating hooks read, under the store's lock: objects of a
/// kind in a namespace (`None`: all), one object by name, and the objects with a label
/// (through the store's label index, so a hook that looks for one Workspace's pods or one
/// Workspace reads those, not every object of the kind, as a webhook's `Get` or label-selected
/// list from its informer cache does).
pub trait Reader {
    /// Every object of `kind` in `ns`, sorted by key.
    fn list(&self, kind: &KindInfo, ns: Option<&str>) -> Vec<Arc<Value>>;

    /// The object of `kind` named `name` in `ns`, if any: a namespaced object only in the
    /// namespace named (none named finds none). Found in [`Self::list`] unless the reader
    /// has an index.
    fn get(&self, kind: &KindInfo, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        if kind.namespaced && ns.is_none() {
            return None;
        }
        self.list(kind, ns).into_iter().find(|o| {
            meta_str(o, "name") == Some(name)
                && (!kind.namespaced || meta_str(o, "namespace") == ns)
        })
    }

    /// The objects of `kind` in `ns` labelled `label=value`, sorted by key. Filtered from
    /// [`Self::list`] unless the reader has an index.
    fn labelled(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        label: &str,
        value: &str,
    ) -> Vec<Arc<Value>> {
        self.list(kind, ns)
            .into_iter()
            .filter(|o| {
                o.lookup("/metadata/labels")
                    .and_then(|l| l.get(label))
                    .and_then(Value::as_str)
                    == Some(value)
            })
            .collect()
    }
}

/// A plain list function reads as a store with no indexes (the hooks' unit tests use one).
impl<F: Fn(&KindInfo, Option<&str>) -> Vec<Arc<Value>>> Reader for F {
    fn list(&self, kind: &KindInfo, ns: Option<&str>) -> Vec<Arc<Value>> {
        self(kind, ns)
    }
}

/// The store read under its lock, through its indexes.
struct Locked<'a>(&'a Inner);

impl Reader for Locked<'_> {
    fn list(&self, kind: &KindInfo, ns: Option<&str>) -> Vec<Arc<Value>> {
        Store::list_locked(
            self.0,
            kind,
            ns,
            &LabelSelector::default(),
            &FieldSelector::default(),
        )
    }

    fn get(&self, kind: &KindInfo, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.0
            .objects
            .get(kind.kind)
            .and_then(|m| m.get(&key(kind, ns, name)))
            .cloned()
    }

    fn labelled(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        label: &str,
        value: &str,
    ) -> Vec<Arc<Value>> {
        let keys = self.0.index.labelled(kind.kind, label, value);
        Store::objects_at(self.0, kind, ns, keys)
    }
}

/// How admission checks and hooks are handed the store.
pub type Lister<'a> = &'a dyn Reader;

/// An admission check run on every create, under the store's lock: it sees the object
/// about to be stored (with its namespace) and may refuse it with an API error.
pub type Admission =
    dyn Fn(&KindInfo, &Value, Lister<'_>) -> Result<(), ApiError> + Send + Sync + 'static;

/// A mutating admission hook, run under the store's lock on every create (`old` is `None`)
/// and every write through the main resource (not `/status`), before the object is
/// validated and stored: it may change the object, like a mutating webhook.
pub type Mutation = dyn Fn(&KindInfo, Option<&Value>, &mut Value, Lister<'_>) -> Result<(), ApiError>
    + Send
    + Sync
    + 'static;

struct Inner {
    rv: u64,
    objects: HashMap<&'static str, BTreeMap<Key, Arc<Value>>>,
    /// Kept in step with `objects` by `commit`, the one place that writes them.
    index: index::Indexes,
    history: History,
}

/// The object store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    admission: std::sync::RwLock<Vec<Box<Admission>>>,
    mutations: std::sync::RwLock<Vec<Box<Mutation>>>,
    /// Whether a kubelet finishes pod deletion (graceful deletion); without one (the bare
    /// API server) bound pods are deleted at once.
    graceful_pods: std::sync::atomic::AtomicBool,
}

fn key(kind: &KindInfo, ns: Option<&str>, name: &str) -> Key {
    let ns = if kind.namespaced {
        ns.unwrap_or("")
    } else {
        ""
    };
    (ns.to_string(), name.to_string())
}

impl Store {
    /// A store that keeps `history` events for watches to resume from.
    pub fn new(history: usize) -> Arc<Self> {
        let (tx, _) = broadcast::channel(8192);
        Arc::new(Self {
            inner: Mutex::new(Inner {
                rv: 0,
                objects: HashMap::new(),
                index: index::Indexes::default(),
                history: History::new(history),
            }),
            tx,
            admission: std::sync::RwLock::new(Vec::new()),
            mutations: std::sync::RwLock::new(Vec::new()),
            graceful_pods: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written object (writes are a
        // single insert), so a poisoned lock is safe to keep using.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an admission check that every later create must pass.
    pub fn add_admission(&self, check: Box<Admission>) {
        self.admission
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(check);
    }

    /// Adds a mutating hook (see [`Mutation`]).
    pub fn add_mutation(&self, hook: Box<Mutation>) {
        self.mutations
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(hook);
    }

    fn mutate(
        &self,
        inner: &Inner,
        kind: &KindInfo,
        old: Option<&Value>,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let hooks = self.mutations.read().unwrap_or_else(|e| e.into_inner());
        if hooks.is_empty() {
            return Ok(());
        }
        let reader = Locked(inner);
        for hook in hooks.iter() {
            hook(kind, old, obj, &reader)?;
        }
        Ok(())
    }

    /// Turns on graceful pod deletion (a kubelet will finish it).
    pub fn enable_graceful_pod_deletion(&self) {
        self.graceful_pods
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The live feed of every committed change (for the simulator's controllers).
    pub fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Every object of a kind in a namespace (`None`: everywhere), sorted by key.
    pub fn all(&self, kind: &KindInfo, ns: Option<&str>) -> Vec<Arc<Value>> {
        let inner = self.lock();
        Self::list_locked(
            &inner,
            kind,
            ns,
            &LabelSelector::default(),
            &FieldSelector::default(),
        )
    }

    /// The object if it exists.
    pub fn find(&self, kind: &KindInfo, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.get(kind, ns, name).ok()
    }

    /// The objects of `kind` that name `owner_uid` among their owners, in `ns` (`None`:
    /// everywhere), sorted by key.
    pub fn owned_by(&self, kind: &KindInfo, ns: Option<&str>, owner_uid: &str) -> Vec<Arc<Value>> {
        let inner = self.lock();
        let places = inner.index.dependents(owner_uid);
        let keys = places.filter(|(k, _)| *k == kind.kind).map(|(_, key)| key);
        Self::objects_at(&inner, kind, ns, keys)
    }

    /// The objects of `kind` labelled `label=value` in `ns` (`None`: everywhere), sorted by key.
    pub fn labelled(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        label: &str,
        value: &str,
    ) -> Vec<Arc<Value>> {
        let inner = self.lock();
        let keys = inner.index.labelled(kind.kind, label, value);
        Self::objects_at(&inner, kind, ns, keys)
    }

    /// The objects of `kind` whose field at `pointer` (one of [`index::FIELDS`]; an absent
    /// field reads `""`) is `value`, in `ns` (`None`: everywhere), sorted by key.
    pub fn by_field(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        pointer: &'static str,
        value: &str,
    ) -> Vec<Arc<Value>> {
        // A pointer that is not indexed would read as "no such objects": refuse it.
        assert!(
            index::FIELDS.contains(&(kind.kind, pointer)),
            "{} {pointer} is not an indexed field",
            kind.kind
        );
        let inner = self.lock();
        let keys = inner.index.by_field(kind.kind, pointer, value);
        Self::objects_at(&inner, kind, ns, keys)
    }

    /// The objects of `kind` in `ns` (`None`: everywhere) whose label selector may select
    /// `labels` (see [`index::SELECTORS`]), sorted by key: a superset, so the caller matches
    /// each whole selector.
    pub fn selecting(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        labels: Option<&Value>,
    ) -> Vec<Arc<Value>> {
        // A pointer that is not indexed would read as "no such objects": refuse it.
        assert!(
            index::SELECTORS.iter().any(|(k, _)| *k == kind.kind),
            "{} has no indexed selector",
            kind.kind
        );
        let inner = self.lock();
        let keys = inner.index.selecting(kind.kind, labels);
        Self::objects_at(&inner, kind, ns, keys.into_iter())
    }

    /// The object with this uid, of any kind.
    pub fn by_uid(&self, uid: &str) -> Option<Arc<Value>> {
        let inner = self.lock();
        let (kind, key) = inner.index.by_uid(uid)?;
        inner.objects.get(kind).and_then(|m| m.get(key)).cloned()
    }

    /// The stored objects of `kind` at `keys` (sorted), kept to `ns` when it is given.
    fn objects_at<'a>(
        inner: &'a Inner,
        kind: &KindInfo,
        ns: Option<&str>,
        keys: impl Iterator<Item = &'a Key>,
    ) -> Vec<Arc<Value>> {
        let Some(map) = inner.objects.get(kind.kind) else {
            return Vec::new();
        };
        keys.filter(|(k_ns, _)| ns.is_none() || !kind.namespaced || ns == Some(k_ns.as_str()))
            .filter_map(|k| map.get(k).cloned())
            .collect()
    }

    /// The latest committed resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Forgets the change history up to now: older watches get 410 Expired.
    pub fn compact(&self) {
        let mut inner = self.lock();
        let rv = inner.rv;
        inner.history.compact(rv);
    }

    pub fn get(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        self.lock()
            .objects
            .get(kind.kind)
            .and_then(|m| m.get(&key(kind, ns, name)))
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))
    }

    /// Matching objects sorted by namespace and name, and the list's resourceVersion.
    pub fn list(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> (Vec<Arc<Value>>, u64) {
        let inner = self.lock();
        (
            Self::list_locked(&inner, kind, ns, labels, fields),
            inner.rv,
        )
    }

    fn list_locked(
        inner: &Inner,
        kind: &KindInfo,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Vec<Arc<Value>> {
        let Some(map) = inner.objects.get(kind.kind) else {
            return Vec::new();
        };
        let selected =
            |o: &&Arc<Value>| labels.matches(o.lookup("/metadata/labels")) && fields.matches(o);
        match (ns, fields.pinned_name()) {
            (Some(ns), Some(name)) if kind.namespaced => map
                .get(&(ns.to_string(), name.to_string()))
                .filter(selected)
                .cloned()
                .into_iter()
                .collect(),
            (Some(ns), _) if kind.namespaced => map
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v)
                .filter(selected)
                .cloned()
                .collect(),
            _ => map.values().filter(selected).cloned().collect(),
        }
    }

    /// Creates an object. `ns` is the namespace from the URL (ignored for cluster kinds).
    pub fn create(
        &self,
        kind: &'static KindInfo,
        ns: Option<&str>,
        mut obj: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let body_ns = meta_str(&obj, "namespace").map(str::to_string);
        let ns = if kind.namespaced {
            let ns = ns.map(str::to_string).or(body_ns.clone()).ok_or_else(|| {
                ApiError::bad_request(
                    "the namespace of the object must be set for a namespaced kind",
                )
            })?;
            if body_ns.as_deref().is_some_and(|b| !b.is_empty() && b != ns) {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(ns)
        } else {
            None
        };
        let mut name = meta_str(&obj, "name").unwrap_or("").to_string();
        if name.is_empty() {
            let Some(prefix) = meta_str(&obj, "generateName").filter(|p| !p.is_empty()) else {
                return Err(ApiError::invalid(
                    kind,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            };
            name = format!("{prefix}{}", meta::random_suffix());
        }
        check_name(kind, &name)?;
        if let Some(api_version) = obj.get("apiVersion").and_then(Value::as_str)
            && api_version != kind.api_version()
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                kind.api_version()
            )));
        }
        if kind.status && kind.kind != "Namespace" {
            // Like a real API server with a status subresource: status is not settable on create.
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
        let mut inner = self.lock();
        if let Some(ns) = &ns
            && !inner
                .objects
                .get("Namespace")
                .is_some_and(|m| m.contains_key(&(String::new(), ns.clone())))
        {
            return Err(ApiError::namespace_not_found(ns));
        }
        let k = key(kind, ns.as_deref(), &name);
        if inner
            .objects
            .get(kind.kind)
            .is_some_and(|m| m.contains_key(&k))
        {
            return Err(ApiError::already_exists(kind, &name));
        }
        obj["apiVersion"] = json!(kind.api_version());
        obj["kind"] = json!(kind.kind);
        if kind.kind == "Namespace" && obj.lookup("/status/phase").is_none() {
            obj["status"] = json!({"phase": "Active"});
        }
        meta::apply_create_defaults(kind, &name, &mut obj, inner.rv + 1)?;
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        if let Some(ns) = &ns {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
        m.insert("uid".into(), json!(meta::new_uid()));
        m.insert("generation".into(), json!(1));
        m.insert("creationTimestamp".into(), json!(now_rfc3339()));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
        ] {
            m.remove(f);
        }
        self.mutate(&inner, kind, None, &mut obj)?;
        // After the mutating hooks: what admission sees and what is stored is canonical.
        quantity::normalize(kind.kind, &mut obj);
        {
            let reader = Locked(&inner);
            for check in self
                .admission
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                check(kind, &obj, &reader)?;
            }
        }
        if dry_run {
            meta_mut(&mut obj).insert("resourceVersion".into(), json!(inner.rv.to_string()));
            return Ok(Arc::new(obj));
        }
        let dangling = Self::owners_all_absent(&inner, ns.as_deref(), &obj);
        let stored = self.commit(&mut inner, kind, k.clone(), obj, EventType::Added, None);
        if dangling {
            // The garbage collector's rule: a dependent whose owners are all gone is deleted.
            // A controller that read its owner just before the owner was deleted (and so
            // created this after the cascade) would otherwise leave it, and its pod's GPU,
            // for ever. The real collector does this within moments; here at once.
            let _ = self.delete_locked(&mut inner, kind, k, &DeleteOptions::default());
        }
        Ok(stored)
    }

    /// Whether `obj` names owners and none of them exists any more (by uid, in the object's
    /// namespace or at cluster scope). A reference to a kind this store does not serve counts
    /// as present: the collector cannot tell, and keeps the dependent.
    fn owners_all_absent(inner: &Inner, ns: Option<&str>, obj: &Value) -> bool {
        let Some(refs) = obj
            .lookup("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .filter(|r| !r.is_empty())
        else {
            return false;
        };
        refs.iter().all(|r| {
            let field = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("");
            let Some(owner_kind) = kinds::find_by_kind(field("apiVersion"), field("kind")) else {
                return false;
            };
            let scope = if owner_kind.namespaced { ns } else { None };
            !inner
                .index
                .by_uid(field("uid"))
                .is_some_and(|(k, (k_ns, _))| {
                    *k == owner_kind.kind && (scope.is_none() || Some(k_ns.as_str()) == scope)
                })
        })
    }

    /// Stores `obj` under `k` with a new resourceVersion and publishes the event.
    fn commit(
        &self,
        inner: &mut Inner,
        kind: &'static KindInfo,
        k: Key,
        mut obj: Value,
        etype: EventType,
        previous: Option<Arc<Value>>,
    ) -> Arc<Value> {
        inner.rv += 1;
        let rv = inner.rv;
        meta::drop_empty_metadata(&mut obj);
        if kind.kind == "Secret" {
            meta::secret_on_write(&mut obj);
        }
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let obj = Arc::new(obj);
        let map = inner.objects.entry(kind.kind).or_default();
        let replaced = if etype == EventType::Deleted {
            map.remove(&k)
        } else {
            map.insert(k.clone(), obj.clone())
        };
        if let Some(old) = replaced {
            inner.index.remove(kind.kind, &k, &old);
        }
        if etype != EventType::Deleted {
            inner.index.insert(kind.kind, &k, &obj);
        }
        let event = Arc::new(Event {
            rv,
            kind,
            namespace: kind.namespaced.then(|| k.0.clone()),
            etype,
            object: obj.clone(),
            previous,
            encoded: Default::default(),
            at: std::time::Instant::now(),
        });
        inner.history.push(event.clone());
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(event);
        obj
    }

    /// Replaces or modifies an object. `change` gets the current object and returns the
    /// desired one; a `metadata.resourceVersion` in it must equal the current one
    /// (409 Conflict otherwise). `status_write` selects the `/status` subresource rules.
    pub fn modify(
        &self,
        kind: &'static KindInfo,
        ns: Option<&str>,
        name: &str,
        status_write: bool,
        dry_run: bool,
        change: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.lock();
        let k = key(kind, ns, name);
        let current = inner
            .objects
            .get(kind.kind)
            .and_then(|m| m.get(&k))
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        let desired = change(&current)?;
        if !desired.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        if let Some(body_name) = meta_str(&desired, "name")
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(rv) = meta_str(&desired, "resourceVersion")
            && !rv.is_empty()
            && Some(rv) != meta_str(&current, "resourceVersion")
        {
            return Err(ApiError::stale(kind, name));
        }
        let mut next = meta::merge_for_write(kind, &current, desired, status_write);
        if !status_write {
            self.mutate(&inner, kind, Some(&current), &mut next)?;
        }
        quantity::normalize(kind.kind, &mut next);
        // Compare and store without empty metadata collections (see `commit`).
        meta::drop_empty_metadata(&mut next);
        next["apiVersion"] = json!(kind.api_version());
        next["kind"] = json!(kind.kind);
        let deleting = meta_str(&current, "deletionTimestamp").is_some();
        let new_finalizers = finalizers(&next);
        if deleting {
            let old = finalizers(&current);
            if new_finalizers.iter().any(|f| !old.contains(f)) {
                return Err(ApiError::invalid(
                    kind,
                    name,
                    "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being deleted",
                ));
            }
        }
        if !status_write && !meta::same_spec_part(&next, &current) {
            let g = current
                .lookup("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            meta_mut(&mut next).insert("generation".into(), json!(g + 1));
        }
        if dry_run {
            return Ok(Arc::new(next));
        }
        if next == *current {
            // A no-op write keeps the resourceVersion and emits nothing, as a real server does.
            return Ok(current);
        }
        if deleting && new_finalizers.is_empty() {
            let gone = self.commit(&mut inner, kind, k, next, EventType::Deleted, Some(current));
            self.cascade(&mut inner, &gone, Propagation::Background);
            return Ok(gone);
        }
        Ok(self.commit(
            &mut inner,
            kind,
            k,
            next,
            EventType::Modified,
            Some(current),
        ))
    }

    /// Deletes an object: at once when it has no finalizers, otherwise by marking it.
    pub fn delete(
        &self,
        kind: &'static KindInfo,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        let mut inner = self.lock();
        self.delete_locked(&mut inner, kind, key(kind, ns, name), opts)
    }

    fn delete_locked(
        &self,
        inner: &mut Inner,
        kind: &'static KindInfo,
        k: Key,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        let current = inner
            .objects
            .get(kind.kind)
            .and_then(|m| m.get(&k))
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, &k.1))?;
        if let Some(uid) = &opts.precondition_uid
            && Some(uid.as_str()) != meta_str(&current, "uid")
        {
            return Err(ApiError::conflict(
                kind,
                &k.1,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&current, "uid").unwrap_or("")
                ),
            ));
        }
        if let Some(rv) = &opts.precondition_rv
            && Some(rv.as_str()) != meta_str(&current, "resourceVersion")
        {
            return Err(ApiError::conflict(
                kind,
                &k.1,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&current, "resourceVersion").unwrap_or("")
                ),
            ));
        }
        if opts.dry_run {
            return Ok(DeleteOutcome::Deleted(current));
        }
        let graceful = kind.kind == "Pod"
            && self
                .graceful_pods
                .load(std::sync::atomic::Ordering::Relaxed)
            && current
                .lookup("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
            && opts.grace_period_seconds != Some(0);
        if graceful {
            if meta_str(&current, "deletionTimestamp").is_some() {
                return Ok(DeleteOutcome::Marked(current));
            }
            let grace = opts.grace_period_seconds.unwrap_or(30);
            let mut next = (*current).clone();
            let m = meta_mut(&mut next);
            m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
            let marked = self.commit(inner, kind, k, next, EventType::Modified, Some(current));
            return Ok(DeleteOutcome::Marked(marked));
        }
        if !finalizers(&current).is_empty() {
            if meta_str(&current, "deletionTimestamp").is_some() {
                return Ok(DeleteOutcome::Marked(current));
            }
            let mut next = (*current).clone();
            let m = meta_mut(&mut next);
            m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            let marked = self.commit(inner, kind, k, next, EventType::Modified, Some(current));
            return Ok(DeleteOutcome::Marked(marked));
        }
        let mut last = (*current).clone();
        if meta_str(&last, "deletionTimestamp").is_none() {
            meta_mut(&mut last).insert("deletionTimestamp".into(), json!(now_rfc3339()));
        }
        let gone = self.commit(inner, kind, k, last, EventType::Deleted, Some(current));
        self.cascade(inner, &gone, opts.propagation);
        Ok(DeleteOutcome::Deleted(gone))
    }

    /// Deletes (or orphans) the dependents of a deleted owner, and a namespace's contents.
    fn cascade(&self, inner: &mut Inner, owner: &Value, propagation: Propagation) {
        let owner_uid = meta_str(owner, "uid").unwrap_or("").to_string();
        let owner_ns = meta_str(owner, "namespace").map(str::to_string);
        let is_namespace = owner.get("kind").and_then(Value::as_str) == Some("Namespace");
        let ns_name = meta_str(owner, "name").unwrap_or("").to_string();
        // Ordered as a scan of every kind would find them: by kind (`KINDS`), then key.
        let position = |name: &str| kinds::KINDS.iter().position(|k| k.kind == name);
        let mut dependents: BTreeSet<(usize, Key)> = BTreeSet::new();
        // Owner references only bind within the owner's namespace (or cluster scope).
        for (kind, k) in inner.index.dependents(&owner_uid) {
            if (owner_ns.is_none() || owner_ns.as_deref() == Some(k.0.as_str()))
                && let Some(i) = position(kind)
            {
                dependents.insert((i, k.clone()));
            }
        }
        if is_namespace {
            for (i, kind) in kinds::KINDS
                .iter()
                .enumerate()
                .filter(|(_, k)| k.namespaced)
            {
                let Some(map) = inner.objects.get(kind.kind) else {
                    continue;
                };
                let contents = map
                    .range((ns_name.clone(), String::new())..)
                    .take_while(|((n, _), _)| *n == ns_name);
                dependents.extend(contents.map(|(k, _)| (i, k.clone())));
            }
        }
        let dependents = dependents.into_iter().map(|(i, k)| (&kinds::KINDS[i], k));
        for (kind, k) in dependents {
            if propagation == Propagation::Orphan && !is_namespace {
                let Some(current) = inner
                    .objects
                    .get(kind.kind)
                    .and_then(|m| m.get(&k))
                    .cloned()
                else {
                    continue;
                };
                let mut next = (*current).clone();
                if let Some(refs) = next
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| {
                        r.get("uid").and_then(Value::as_str) != Some(owner_uid.as_str())
                    });
                }
                self.commit(inner, kind, k, next, EventType::Modified, Some(current));
            } else {
                // Already gone (a deeper cascade got it first) is fine.
                let _ = self.delete_locked(inner, kind, k, &DeleteOptions::default());
            }
        }
    }

    /// Opens a watch: initial objects (for [`WatchStart::Current`]) or the replayed history,
    /// and the live feed, taken under one lock so that nothing is missed or repeated.
    pub fn subscribe(
        &self,
        kind: &KindInfo,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        start: WatchStart,
    ) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let live = self.tx.subscribe();
        let (initial, replay) = match start {
            WatchStart::Current => (
                Self::list_locked(&inner, kind, ns, labels, fields),
                Vec::new(),
            ),
            WatchStart::After(rv) => {
                let replay = inner
                    .history
                    .since(rv)
                    .map_err(|oldest| ApiError::expired(rv, oldest))?;
                (Vec::new(), replay)
            }
        };
        Ok(Subscription {
            initial,
            replay,
            resource_version: inner.rv,
            live,
        })
    }
}

#[cfg(test)]
mod tests;
