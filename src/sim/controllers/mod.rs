//! The simulator's controllers: each one watches the store's change feed, keeps a queue of
//! object keys to reconcile (deduplicated, with delays for timed work), and writes back
//! through the store, exactly as a controller writes through the API.

pub mod addon;
pub mod agent;
pub mod events;
pub mod kubelet;
pub mod quota;
pub mod scheduler;
pub mod statefulset;
pub mod workspace;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::bucket::Bucket;
use super::kinds::{self, KindInfo};
use super::pods::PodProcesses;
use super::profile::SimProfile;
use super::store::{Event, Store};
use super::truth::Truth;

/// What every controller shares.
#[derive(Clone)]
pub struct Ctx {
    pub store: Arc<Store>,
    pub profile: Arc<SimProfile>,
    pub truth: Arc<Truth>,
    pub pods: Arc<PodProcesses>,
    /// The snapshot bucket (`<state dir>/bucket`).
    pub bucket: Arc<Bucket>,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Set once, by the first controller that panics: the simulator then stops at once and
    /// kills every pod process (see [`crate::sim::SimHandle::failure`]).
    pub failure: Arc<tokio::sync::watch::Sender<Option<String>>>,
}

impl Ctx {
    /// Stops the simulated platform because of `message`: every pod process is killed at
    /// once, and the simulator's server and controllers shut down. Only the first call counts.
    pub fn fail(&self, message: String) {
        let first = self.failure.send_if_modified(|m| {
            if m.is_some() {
                return false;
            }
            *m = Some(message.clone());
            true
        });
        if first {
            tracing::error!("{message}");
            let killed = self.pods.kill_all();
            tracing::error!(killed, "the simulator stops; every pod process was killed");
        }
    }
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// An object a controller reconciles: kind, namespace ("" for cluster scope), name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjKey {
    pub kind: &'static KindInfo,
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    pub fn of(kind: &'static KindInfo, obj: &Value) -> Self {
        Self {
            kind,
            namespace: obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            name: obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        }
    }

    pub fn ns(&self) -> Option<&str> {
        (!self.namespace.is_empty()).then_some(self.namespace.as_str())
    }
}

/// Looks up a served kind by its Kind name (the registry is fixed, so this cannot fail
/// for the kinds the simulator's own controllers use).
pub fn kind(name: &str) -> &'static KindInfo {
    kinds::KINDS
        .iter()
        .find(|k| k.kind == name)
        .unwrap_or_else(|| panic!("kind {name} is served"))
}

/// What a reconcile asks for next.
pub enum Next {
    Done,
    After(Duration),
}

/// One controller.
pub trait Reconciler: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// The kinds whose objects are listed at start (each becomes a key via [`Self::keys_for`]).
    fn primary(&self) -> &'static [&'static str];
    /// The keys an event affects.
    fn keys_for(&self, event: &Event) -> Vec<ObjKey>;
    /// Brings one object towards its desired state.
    fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> impl Future<Output = Next> + Send;
}

fn initial_keys<R: Reconciler>(ctx: &Ctx, r: &R) -> Vec<ObjKey> {
    r.primary()
        .iter()
        .flat_map(|k| {
            let kind = kind(k);
            ctx.store
                .all(kind, None)
                .into_iter()
                .map(move |o| ObjKey::of(kind, &o))
        })
        .collect()
}

/// Runs a controller until the simulator shuts down.
pub fn spawn<R: Reconciler>(ctx: Ctx, r: R) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = ctx.store.events();
        let mut shutdown = ctx.shutdown.clone();
        // Each key is due at an instant; the sequence number keeps keys that fall due at the
        // same instant in the order they were queued, so work is done first come, first
        // served (the scheduler binds pods in the order they were created, as kube-scheduler's
        // queue does).
        let mut due: HashMap<ObjKey, (Instant, u64)> = HashMap::new();
        let mut seq = 0u64;
        // A key already queued keeps the earlier of its two due instants.
        let mut queue = |due: &mut HashMap<ObjKey, (Instant, u64)>, k: ObjKey, at: Instant| {
            seq += 1;
            match due.get(&k) {
                Some((t, _)) if *t <= at => {}
                _ => {
                    due.insert(k, (at, seq));
                }
            }
        };
        for k in initial_keys(&ctx, &r) {
            queue(&mut due, k, Instant::now());
        }
        loop {
            let next_due = due.values().map(|(t, _)| *t).min();
            let sleep = async {
                match next_due {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.changed() => return,
                ev = events.recv() => match ev {
                    Ok(ev) => {
                        let at = Instant::from_std(ev.at);
                        for k in r.keys_for(&ev) {
                            queue(&mut due, k, at);
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let now = Instant::now();
                        for k in initial_keys(&ctx, &r) {
                            queue(&mut due, k, now);
                        }
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = sleep => {
                    let now = Instant::now();
                    let mut ready: Vec<(ObjKey, (Instant, u64))> = due
                        .iter()
                        .filter(|(_, (t, _))| *t <= now)
                        .map(|(k, d)| (k.clone(), *d))
                        .collect();
                    ready.sort_by_key(|(_, d)| *d);
                    for (k, (at, _)) in ready {
                        due.remove(&k);
                        let started = Instant::now();
                        let next = match AssertUnwindSafe(r.reconcile(&ctx, &k)).catch_unwind().await {
                            Ok(next) => next,
                            Err(payload) => {
                                ctx.fail(format!(
                                    "simulator controller {} panicked while reconciling {} {}/{}: {}",
                                    r.name(),
                                    k.kind.kind,
                                    k.namespace,
                                    k.name,
                                    panic_text(&*payload)
                                ));
                                return;
                            }
                        };
                        ctx.truth.record_reaction(r.name(), k.kind.kind, started - at, started.elapsed());
                        match next {
                            Next::Done => {}
                            Next::After(d) => {
                                queue(&mut due, k, Instant::now() + d);
                            }
                        }
                    }
                }
            }
        }
    })
}

/// Starts every controller of the simulated platform.
pub fn start_all(ctx: &Ctx) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        spawn(ctx.clone(), statefulset::StatefulSetController),
        spawn(ctx.clone(), scheduler::Scheduler),
        spawn(ctx.clone(), kubelet::Kubelet::default()),
        kubelet::watch_processes(ctx.clone()),
        spawn(ctx.clone(), agent::Agent::default()),
        spawn(ctx.clone(), addon::SnapshotAddon::default()),
        spawn(ctx.clone(), quota::QuotaController),
        spawn(ctx.clone(), workspace::WorkspaceController::new(ctx)),
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::sim::profile::{DEFAULT_PROFILE, RuntimeKind};

    /// Records the names it reconciles, in order.
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Reconciler for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn primary(&self) -> &'static [&'static str] {
            &[]
        }
        fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
            vec![ObjKey::of(ev.kind, &ev.object)]
        }
        async fn reconcile(&self, _: &Ctx, key: &ObjKey) -> Next {
            self.0.lock().unwrap().push(key.name.clone());
            Next::Done
        }
    }

    #[tokio::test]
    async fn keys_are_reconciled_in_the_order_their_changes_were_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let ctx = Ctx {
            store: Store::new(1000),
            profile: Arc::new(SimProfile::parse("default", DEFAULT_PROFILE).unwrap()),
            truth: Arc::new(Truth::default()),
            pods: Arc::new(PodProcesses::new(
                dir.path().join("volumes"),
                RuntimeKind::None,
            )),
            bucket: Arc::new(Bucket::new(dir.path().join("bucket"))),
            shutdown,
            failure: Arc::new(tokio::sync::watch::channel(None).0),
        };
        ctx.store
            .create(
                kind("Namespace"),
                None,
                json!({"metadata": {"name": "ns"}}),
                false,
            )
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        spawn(ctx.clone(), Recorder(seen.clone()));
        // On this single-threaded runtime the controller subscribes before the burst below,
        // and the whole burst falls due in one batch.
        tokio::task::yield_now().await;
        let names: Vec<String> = (0..64)
            .map(|i| format!("cm-{:02}", (i * 37) % 64))
            .collect();
        for n in &names {
            ctx.store
                .create(
                    kind("ConfigMap"),
                    Some("ns"),
                    json!({"metadata": {"name": n}}),
                    false,
                )
                .unwrap();
        }
        tokio::time::timeout(Duration::from_secs(10), async {
            while seen.lock().unwrap().len() < names.len() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("every key reconciled");
        assert_eq!(*seen.lock().unwrap(), names);
        let stats = ctx.truth.reactions();
        assert_eq!(stats.len(), 1);
        assert_eq!(
            (stats[0].controller, stats[0].kind),
            ("recorder", "ConfigMap")
        );
        assert_eq!(stats[0].reconciles, 64);
        assert!(stats[0].lag_p50_ms <= stats[0].lag_max_ms);
    }
}
