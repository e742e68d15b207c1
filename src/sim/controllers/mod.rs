//! The simulator's controllers: each one watches the store's change feed, keeps a queue of
//! object keys to reconcile (each key once, repeated changes coalesced, with delays for timed
//! work; see `Queue`), and writes back
//! through the store, exactly as a controller writes through the API. A controller reconciles
//! one key at a time unless it asks for more workers ([`Reconciler::workers`], upstream's
//! `MaxConcurrentReconciles`; see `SharedQueue`). A controller working through a long queue
//! steps aside every millisecond (see `Nudge`), so a controller it woke is not held behind it.

pub mod addon;
pub mod agent;
pub mod events;
pub mod kubelet;
pub mod quota;
pub mod scheduler;
pub mod statefulset;
pub mod workspace;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;

use super::bucket::Bucket;
use super::json::Lookup as _;
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
    /// The profile's delays, drawn once per object from `sim.seed`'s streams.
    pub delays: Arc<crate::sim::delay::Delays>,
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
                .lookup("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            name: obj
                .lookup("/metadata/name")
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
    /// How many keys may be reconciled at once (controller-runtime's
    /// `MaxConcurrentReconciles`, 1 unless the controller sets it): never one key twice.
    fn workers(&self) -> usize {
        1
    }
    /// Called when the controller missed events (its feed lagged) and relists: whatever it
    /// kept from the events it saw may be stale.
    fn missed_events(&self) {}
}

/// Reconciles `k` (due at `at`) and records the reaction; `None` when the reconcile
/// panicked (the simulator is then stopped through [`Ctx::fail`]).
async fn reconcile_one<R: Reconciler>(ctx: &Ctx, r: &R, k: &ObjKey, at: Instant) -> Option<Next> {
    let started = Instant::now();
    let next = match AssertUnwindSafe(r.reconcile(ctx, k)).catch_unwind().await {
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
            return None;
        }
    };
    ctx.truth
        .record_reaction(r.name(), k.kind.kind, started - at, started.elapsed());
    Some(next)
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

/// Every primary key again, due now, after the controller missed events (see
/// [`Reconciler::missed_events`]).
fn relisted<R: Reconciler>(ctx: &Ctx, r: &R) -> Vec<ObjKey> {
    r.missed_events();
    initial_keys(ctx, r)
}

/// A queue shared by a controller's workers, as client-go's workqueue is: a key is handed to
/// one worker at a time, and a key queued again while a worker has it waits until that
/// worker is done, then joins the queue at the earliest instant it was queued for.
#[derive(Default)]
struct SharedQueue {
    queue: Queue,
    processing: std::collections::HashSet<ObjKey>,
    waiting: HashMap<ObjKey, Instant>,
}

impl SharedQueue {
    fn push(&mut self, k: ObjKey, at: Instant) {
        if self.processing.contains(&k) {
            let due = self.waiting.entry(k).or_insert(at);
            *due = (*due).min(at);
        } else {
            self.queue.push(k, at);
        }
    }

    /// The first key due by `now`, now being processed.
    fn take(&mut self, now: Instant) -> Option<(ObjKey, Instant)> {
        let (k, at) = self.queue.pop_due(now)?;
        self.processing.insert(k.clone());
        Some((k, at))
    }

    /// A worker is done with `k`; `again` is when it asked to see it next.
    fn done(&mut self, k: &ObjKey, again: Option<Instant>) {
        self.processing.remove(k);
        let at = match (self.waiting.remove(k), again) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = at {
            self.queue.push(k.clone(), at);
        }
    }
}

/// Runs a controller until the simulator shuts down: [`Reconciler::workers`] workers (one
/// unless the controller asks for more) over one [`SharedQueue`]. One task takes the change
/// feed into the queue, each worker takes the first due key.
pub fn spawn<R: Reconciler>(ctx: Ctx, r: R) -> tokio::task::JoinHandle<()> {
    let r = Arc::new(r);
    let workers = r.workers();
    let shared = Arc::new(std::sync::Mutex::new(SharedQueue::default()));
    let wake = Arc::new(tokio::sync::Notify::new());
    let mut events = ctx.store.events();
    {
        let mut q = lock(&shared);
        for k in initial_keys(&ctx, &*r) {
            q.push(k, Instant::now());
        }
    }
    for _ in 0..workers {
        tokio::spawn(work(ctx.clone(), r.clone(), shared.clone(), wake.clone()));
    }
    tokio::spawn(async move {
        let mut shutdown = ctx.shutdown.clone();
        loop {
            let mut batch = Vec::new();
            tokio::select! {
                _ = shutdown.changed() => return,
                ev = events.recv() => match ev {
                    Ok(ev) => batch.push(Some(ev)),
                    Err(RecvError::Lagged(_)) => batch.push(None),
                    Err(RecvError::Closed) => return,
                },
            }
            // Every change already published joins the queue at once, before a worker is
            // woken, so a burst of changes to one object (or to a WorkspaceKind's Workspaces)
            // becomes one reconcile, as a controller-runtime queue coalesces keys.
            loop {
                match events.try_recv() {
                    Ok(ev) => batch.push(Some(ev)),
                    Err(TryRecvError::Lagged(_)) => batch.push(None),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => return,
                }
            }
            let mut pushed = 0;
            {
                let mut q = lock(&shared);
                for ev in batch {
                    let keys = match ev {
                        Some(ev) => {
                            let at = Instant::from_std(ev.at);
                            r.keys_for(&ev).into_iter().map(|k| (k, at)).collect()
                        }
                        None => {
                            let now = Instant::now();
                            let all = relisted(&ctx, &*r);
                            all.into_iter().map(|k| (k, now)).collect::<Vec<_>>()
                        }
                    };
                    for (k, at) in keys {
                        q.push(k, at);
                        pushed += 1;
                    }
                }
            }
            for _ in 0..pushed.min(workers) {
                wake.notify_one();
            }
        }
    })
}

/// Locks `m`, taking the value as it is if a panicking holder poisoned it (a controller's
/// panic stops the simulator anyway; see [`Ctx::fail`]).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One worker of [`spawn`].
async fn work<R: Reconciler>(
    ctx: Ctx,
    r: Arc<R>,
    shared: Arc<std::sync::Mutex<SharedQueue>>,
    wake: Arc<tokio::sync::Notify>,
) {
    let mut shutdown = ctx.shutdown.clone();
    let mut since_nudge = Instant::now();
    loop {
        // Registered for a wake-up before looking at the queue (none is missed between the
        // look and the wait), and dropped before reconciling: a wake-up it took while this
        // worker is busy passes on to an idle one.
        let (k, at) = {
            let woken = wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let (job, next_due) = {
                let mut q = lock(&shared);
                match q.take(Instant::now()) {
                    Some(job) => (Some(job), None),
                    None => (None, q.queue.next_due()),
                }
            };
            match job {
                Some(job) => job,
                None => {
                    let sleep = async {
                        match next_due {
                            Some(t) => tokio::time::sleep_until(t).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = woken => {}
                        _ = sleep => {}
                    }
                    since_nudge = Instant::now();
                    continue;
                }
            }
        };
        let Some(next) = reconcile_one(&ctx, &*r, &k, at).await else {
            return;
        };
        let again = match next {
            Next::Done => None,
            Next::After(d) => Some(Instant::now() + d),
        };
        lock(&shared).done(&k, again);
        // A key that waited for this one may be due now: another worker may take it.
        wake.notify_one();
        if since_nudge.elapsed() >= NUDGE_EVERY {
            Nudge(false).await;
            since_nudge = Instant::now();
        }
    }
}

/// How long a controller works through its queue before it lets the task it woke last
/// run elsewhere (see [`Nudge`]).
const NUDGE_EVERY: Duration = Duration::from_millis(1);

/// Wakes its own task and returns pending once. On tokio's multi-threaded runtime a task
/// woken from a worker (a controller woken by another's commit) waits in that worker's LIFO
/// slot, which the other worker cannot steal: it would wait out the whole batch of the
/// controller that woke it, with a core idle. A task that wakes itself while it runs is
/// rescheduled as a yield (to the back of the run queue, with an idle worker told to look),
/// so the task in the LIFO slot runs next on this core, and the controller goes on as soon as
/// either worker takes it up.
struct Nudge(bool);

impl Future for Nudge {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// A controller's work queue: each key at most once, due at the earlier of the instants it
/// was queued for (repeated changes to one object coalesce into one reconcile). Keys that
/// fall due at the same instant come out in the order they were queued (the sequence
/// number), so work is first come, first served: the scheduler binds pods in the order
/// they were created, as kube-scheduler's queue does. Both operations are logarithmic.
#[derive(Default)]
struct Queue {
    order: BTreeMap<(Instant, u64), ObjKey>,
    due: HashMap<ObjKey, (Instant, u64)>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, k: ObjKey, at: Instant) {
        self.seq += 1;
        match self.due.get(&k) {
            Some((t, _)) if *t <= at => {}
            previous => {
                if let Some(previous) = previous.copied() {
                    self.order.remove(&previous);
                }
                self.order.insert((at, self.seq), k.clone());
                self.due.insert(k, (at, self.seq));
            }
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.order.keys().next().map(|(t, _)| *t)
    }

    /// The first key due by `now`, with the instant it was due.
    fn pop_due(&mut self, now: Instant) -> Option<(ObjKey, Instant)> {
        let entry = self.order.first_entry().filter(|e| e.key().0 <= now)?;
        let ((at, _), k) = entry.remove_entry();
        self.due.remove(&k);
        Some((k, at))
    }
}

/// Starts every controller of the simulated platform.
pub fn start_all(ctx: &Ctx) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        spawn(ctx.clone(), statefulset::StatefulSetController),
        spawn(ctx.clone(), scheduler::Scheduler::default()),
        spawn(ctx.clone(), kubelet::Kubelet::default()),
        kubelet::watch_processes(ctx.clone()),
        spawn(ctx.clone(), agent::Agent::default()),
        spawn(ctx.clone(), addon::SnapshotAddon::default()),
        spawn(ctx.clone(), quota::QuotaController),
        spawn(ctx.clone(), workspace::WorkspaceController::new(ctx)),
        spawn(ctx.clone(), workspace::WorkspaceKindController),
    ]
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::sim::profile::{DEFAULT_PROFILE, RuntimeKind};

    /// A context over a bare store (no controllers running) with the `none` runtime; keep
    /// the sender while the context is used.
    pub(crate) fn test_ctx(dir: &std::path::Path) -> (tokio::sync::watch::Sender<bool>, Ctx) {
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let ctx = Ctx {
            store: Store::new(1000),
            profile: Arc::new(SimProfile::parse("default", DEFAULT_PROFILE).unwrap()),
            delays: Arc::new(crate::sim::delay::Delays::new(
                &SimProfile::parse("default", DEFAULT_PROFILE)
                    .unwrap()
                    .timing,
                0,
            )),
            truth: Arc::new(Truth::default()),
            pods: Arc::new(PodProcesses::new(dir.join("volumes"), RuntimeKind::None)),
            bucket: Arc::new(Bucket::new(dir.join("bucket"))),
            shutdown,
            failure: Arc::new(tokio::sync::watch::channel(None).0),
        };
        (stop, ctx)
    }

    /// [`test_ctx`] with the namespace `ns` created.
    pub(crate) fn test_ctx_with_ns(
        dir: &std::path::Path,
    ) -> (tokio::sync::watch::Sender<bool>, Ctx) {
        let (stop, ctx) = test_ctx(dir);
        ctx.store
            .create(
                kind("Namespace"),
                None,
                json!({"metadata": {"name": "ns"}}),
                false,
            )
            .unwrap();
        (stop, ctx)
    }

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

    #[test]
    fn the_queue_coalesces_a_key_at_its_earliest_instant_and_keeps_arrival_order() {
        let key = |name: &str| ObjKey {
            kind: kind("Pod"),
            namespace: "ns".into(),
            name: name.into(),
        };
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(5);
        let mut q = Queue::default();
        q.push(key("b"), t0);
        q.push(key("a"), t0);
        q.push(key("b"), later); // already due earlier: stays at t0, in its first place
        q.push(key("c"), later);
        q.push(key("c"), t0); // due earlier now: moves up, after the keys queued before it
        assert_eq!(q.next_due(), Some(t0));
        let mut out = Vec::new();
        while let Some((k, at)) = q.pop_due(t0) {
            out.push((k.name, at));
        }
        assert_eq!(
            out,
            [
                ("b".to_string(), t0),
                ("a".to_string(), t0),
                ("c".to_string(), t0)
            ]
        );
        assert_eq!(q.next_due(), None, "each key once");
        q.push(key("d"), later);
        assert!(q.pop_due(t0).is_none(), "not due yet");
        assert_eq!(q.next_due(), Some(later));
    }

    #[tokio::test]
    async fn keys_are_reconciled_in_the_order_their_changes_were_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, ctx) = test_ctx_with_ns(dir.path());
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

    #[test]
    fn a_shared_queue_hands_a_key_to_one_worker_and_requeues_it_when_done() {
        let key = |name: &str| ObjKey {
            kind: kind("Pod"),
            namespace: "ns".into(),
            name: name.into(),
        };
        let t0 = Instant::now();
        let (t1, t2) = (t0 + Duration::from_secs(1), t0 + Duration::from_secs(2));
        let mut q = SharedQueue::default();
        q.push(key("a"), t0);
        q.push(key("b"), t0);
        let (a, at) = q.take(t0).unwrap();
        assert_eq!((a.name.as_str(), at), ("a", t0));
        // Queued again while a worker has it: it waits, and "b" is the only key to take.
        q.push(key("a"), t2);
        q.push(key("a"), t1);
        assert_eq!(q.take(t2).unwrap().0.name, "b");
        assert!(q.take(t2).is_none(), "a is being processed");
        // Done: it joins the queue at the earliest instant it was queued for, or the one
        // the reconcile asked for when that is earlier.
        q.done(&key("a"), Some(t2));
        assert_eq!(q.queue.next_due(), Some(t1));
        assert_eq!(q.take(t2).unwrap(), (key("a"), t1));
        q.done(&key("a"), None);
        q.done(&key("b"), Some(t2));
        assert_eq!(q.take(t2).unwrap(), (key("b"), t2));
        q.done(&key("b"), None);
        assert!(
            q.take(t2 + Duration::from_secs(60)).is_none(),
            "nothing left"
        );
    }

    /// Reconciles slowly (it sleeps), counting the keys in flight at once.
    struct Slow {
        in_flight: Mutex<Vec<String>>,
        most: Mutex<usize>,
        twice: Mutex<Vec<String>>,
        done: Mutex<Vec<String>>,
    }

    impl Reconciler for Arc<Slow> {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn primary(&self) -> &'static [&'static str] {
            &[]
        }
        fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
            vec![ObjKey::of(ev.kind, &ev.object)]
        }
        fn workers(&self) -> usize {
            4
        }
        async fn reconcile(&self, _: &Ctx, key: &ObjKey) -> Next {
            {
                let mut f = self.in_flight.lock().unwrap();
                if f.contains(&key.name) {
                    self.twice.lock().unwrap().push(key.name.clone());
                }
                f.push(key.name.clone());
                let mut most = self.most.lock().unwrap();
                *most = (*most).max(f.len());
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            self.in_flight.lock().unwrap().retain(|n| n != &key.name);
            self.done.lock().unwrap().push(key.name.clone());
            Next::Done
        }
    }

    #[tokio::test]
    async fn workers_reconcile_different_keys_at_once_and_never_one_key_twice() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, ctx) = test_ctx_with_ns(dir.path());
        let slow = Arc::new(Slow {
            in_flight: Mutex::new(Vec::new()),
            most: Mutex::new(0),
            twice: Mutex::new(Vec::new()),
            done: Mutex::new(Vec::new()),
        });
        spawn(ctx.clone(), slow.clone());
        tokio::task::yield_now().await;
        let cm = kind("ConfigMap");
        // Fewer keys than workers: an idle worker would take "a" again at once, were it not
        // held while its first reconcile runs.
        for n in ["a", "b"] {
            ctx.store
                .create(cm, Some("ns"), json!({"metadata": {"name": n}}), false)
                .unwrap();
        }
        // "a" changes again while it is being reconciled: once more, after the first.
        tokio::time::sleep(Duration::from_millis(10)).await;
        ctx.store
            .modify(cm, Some("ns"), "a", false, false, |cur| {
                let mut c = cur.clone();
                c["data"] = json!({"k": "v"});
                Ok(c)
            })
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), async {
            while slow.done.lock().unwrap().len() < 3 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("every key reconciled, and a once more");
        assert_eq!(*slow.most.lock().unwrap(), 2, "both keys at once");
        assert!(
            slow.twice.lock().unwrap().is_empty(),
            "no key twice at once"
        );
        let done = slow.done.lock().unwrap();
        assert_eq!(done.iter().filter(|n| *n == "a").count(), 2);
        assert_eq!(ctx.truth.reactions()[0].reconciles, 3);
    }
}
