//! Benchmark of the simulated platform in a capacity drill: 200 Workspaces on the `none`
//! runtime over a 20-GPU pool (twenty nodes with one T4 each; the default profile's timings
//! otherwise). Each Workspace runs its full cycle create -> Running -> pause -> Paused ->
//! resume -> Running -> delete, at most 20 at a time, through the harness's own
//! `platform::workspace` and `platform::wait` code over HTTPS. Prints figures; asserts nothing.
//!
//! - wall time of the whole drill;
//! - controller reaction latency, from the simulator's ground truth: from just before the
//!   harness sends its pause patch to the pod's `CheckpointStarted`, and from just before the
//!   resume patch to the new pod's first scheduling decision (`PodScheduled` or
//!   `PodUnschedulable`; the patch's own round trip included), as p50/p99 next to the target
//!   "the simulator is never the bottleneck: p99 under 50 ms". The pause figure is judged
//!   without the profile's deliberate `addon_settle_ms`; resume -> `PodScheduled` is shown
//!   too, since it also counts any wait for a free GPU;
//! - per controller and kind: the reaction lag (change committed, or timer due -> reconcile
//!   starts) and the time spent inside reconciles, from the simulator's own bookkeeping; the
//!   slowest resume's ground truth, to show where its time went;
//! - the simulator's deliberate delays (`imposed_delay_ms`: checkpoints, restores) vs wall time;
//! - store writes (resourceVersion increments) per Workspace lifecycle, a cheap stand-in for
//!   API traffic (controllers' writes and Events included);
//! - resident memory of the process (VmRSS).
//!
//! Run without a release build: `cargo build --bench sim_platform`, then run the newest
//! `target/debug/deps/sim_platform-*` executable. (`cargo bench --bench sim_platform` runs it
//! optimised.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams};
use wsgate::platform::crd::{Workspace, WorkspaceState};
use wsgate::platform::ledger::Ledger;
use wsgate::platform::wait::{self, WaitFor};
use wsgate::platform::workspace::{self as ws, NewWorkspace};
use wsgate::sim::profile::{DEFAULT_PROFILE, SimProfile};
use wsgate::sim::truth::{Transition, TruthEvent};
use wsgate::sim::{SimHandle, SimOptions};

const NS: &str = wsgate::sim::server::TEST_NAMESPACE;
const WORKSPACES: usize = 200;
const GPUS: u32 = 20;
/// The budget of every wait; generous, as a debug build on two cores is slow.
const BUDGET: Duration = Duration::from_secs(300);
const TARGET_P99_MS: f64 = 50.0;

/// The default profile with a 20-node T4 pool and pods that run no process.
fn profile() -> SimProfile {
    let text = DEFAULT_PROFILE
        .replacen("count = 2\n", &format!("count = {GPUS}\n"), 1)
        .replace("kind = \"jupyter\"", "kind = \"none\"");
    let p = SimProfile::parse("bench", &text).expect("the bench profile parses");
    if p.total_gpus() != GPUS {
        panic!("the bench profile has {} GPUs, not {GPUS}", p.total_gpus());
    }
    p
}

/// When the harness asked one Workspace to pause and to resume.
struct Marks {
    name: String,
    pause: DateTime<Utc>,
    resume: DateTime<Utc>,
}

async fn wait_state(api: &Api<Workspace>, name: &str, state: WorkspaceState) {
    let mut w = WaitFor::new(format!("bench:{state}"), BUDGET, format!("be {state}"));
    w.progress_every = None;
    wait::until(api, name, &w, ws::describe, |o| ws::is_state(o, state))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// One full cycle; returns once the Workspace's pods are gone, so its GPU is free again.
async fn cycle(client: kube::Client, i: usize) -> Marks {
    let name = format!("bench-{i:03}");
    let new = NewWorkspace {
        namespace: NS.into(),
        name: name.clone(),
        kind: "jupyterlab-resumable".into(),
        image_config: "jupyterlab-gpu".into(),
        pod_config: "gpu_t4_spot".into(),
        home_pvc: format!("{name}-home"),
        home_size: "1Gi".into(),
        labels: Default::default(),
        annotations: Default::default(),
    };
    let mut ledger = Ledger::default();
    ws::create_home(&client, &mut ledger, &new).await.unwrap();
    let uid = ws::create(&client, &mut ledger, &new)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    wait_state(&api, &name, WorkspaceState::Running).await;
    let pause = Utc::now();
    ws::set_paused(&client, NS, &name, &uid, true)
        .await
        .unwrap();
    wait_state(&api, &name, WorkspaceState::Paused).await;
    let resume = Utc::now();
    ws::set_paused(&client, NS, &name, &uid, false)
        .await
        .unwrap();
    wait_state(&api, &name, WorkspaceState::Running).await;
    let pods = ws::pods(&client, NS, &name).await.unwrap();
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    pvcs.delete(&new.home_pvc, &DeleteParams::default())
        .await
        .unwrap();
    let pod_api: Api<Pod> = Api::namespaced(client, NS);
    for p in pods {
        let pod = p.metadata.name.unwrap_or_default();
        let mut w = WaitFor::new("bench:pod-gone", BUDGET, "be deleted");
        w.progress_every = None;
        wait::until(&pod_api, &pod, &w, |_| "present".into(), |o| o.is_none())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    Marks {
        name,
        pause,
        resume,
    }
}

/// Milliseconds from `since` to the first of `transitions` of a pod of `workspace` after it.
fn reaction(
    events: &[TruthEvent],
    workspace: &str,
    transitions: &[Transition],
    since: DateTime<Utc>,
) -> f64 {
    let prefix = format!("ws-{workspace}-");
    events
        .iter()
        .find(|e| {
            transitions.contains(&e.transition) && e.name.starts_with(&prefix) && e.at >= since
        })
        .map(|e| (e.at - since).as_seconds_f64() * 1000.0)
        .unwrap_or(f64::NAN)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// Prints p50/p99 of `values` (NaN = not seen) against the target.
/// The finite values, sorted.
fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

fn report(label: &str, values: &[f64], less_ms: f64) {
    let v: Vec<f64> = sorted(values).into_iter().map(|x| x - less_ms).collect();
    let p99 = percentile(&v, 0.99);
    let verdict = if p99 < TARGET_P99_MS { "met" } else { "MISSED" };
    println!(
        "  {label:<52} n={:<3} p50 {:>7.1} ms  p99 {p99:>7.1} ms  (target p99 < {TARGET_P99_MS} ms: {verdict})",
        v.len(),
        percentile(&v, 0.5),
    );
}

fn main() {
    wsgate::install_crypto_provider();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "simulated platform drill: {WORKSPACES} workspaces, {GPUS} GPUs, runtime none, {cpus} CPUs"
    );
    if cfg!(debug_assertions) {
        println!("NOTE: figures from a DEBUG build (unoptimised); a release build is faster");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut opts = SimOptions::with_platform();
        let settle_ms = {
            let platform = opts.platform.as_mut().unwrap();
            platform.profile = profile();
            platform.profile.timing.addon_settle_ms as f64
        };
        let sim = SimHandle::start(opts).await.unwrap();
        let client = sim.client().await.unwrap();
        let rv_before = sim.store().resource_version();
        let permits = Arc::new(tokio::sync::Semaphore::new(GPUS as usize));
        let start = Instant::now();
        let tasks: Vec<_> = (0..WORKSPACES)
            .map(|i| {
                let (client, permits) = (client.clone(), permits.clone());
                tokio::spawn(async move {
                    let _permit = permits.acquire_owned().await.unwrap();
                    cycle(client, i).await
                })
            })
            .collect();
        let mut marks = Vec::with_capacity(WORKSPACES);
        for t in tasks {
            marks.push(t.await.unwrap());
        }
        let wall = start.elapsed().as_secs_f64();
        let writes = sim.store().resource_version() - rv_before;
        let events = sim.truth().events();
        let pause: Vec<f64> = marks
            .iter()
            .map(|m| reaction(&events, &m.name, &[Transition::CheckpointStarted], m.pause))
            .collect();
        let resume: Vec<f64> = marks
            .iter()
            .map(|m| reaction(&events, &m.name, &[Transition::PodScheduled], m.resume))
            .collect();
        let decided: Vec<f64> = marks
            .iter()
            .map(|m| {
                let t = [Transition::PodScheduled, Transition::PodUnschedulable];
                reaction(&events, &m.name, &t, m.resume)
            })
            .collect();
        if let Some((worst, ms)) = marks
            .iter()
            .zip(&resume)
            .max_by(|a, b| a.1.total_cmp(b.1))
        {
            println!("slowest resume: {} ({ms:.1} ms); its ground truth from the resume on:", worst.name);
            let prefix = format!("ws-{}-", worst.name);
            for e in events.iter().filter(|e| {
                e.at >= worst.resume && (e.name == worst.name || e.name.starts_with(&prefix))
            }).take(8) {
                println!(
                    "  +{:>7.1} ms {:?} {} {}",
                    (e.at - worst.resume).as_seconds_f64() * 1000.0,
                    e.transition,
                    e.name,
                    e.detail.as_deref().unwrap_or("")
                );
            }
        }
        let imposed: f64 = events.iter().filter_map(|e| e.imposed_delay_ms).sum();
        println!(
            "wall time: {wall:.2} s for {WORKSPACES} full cycles ({:.1} cycles/s)",
            WORKSPACES as f64 / wall
        );
        println!("controller reaction latency (request sent -> ground-truth transition):");
        report("resume -> first scheduling decision", &decided, 0.0);
        println!(
            "  resume -> PodScheduled, waiting for a free GPU included: p50 {:.1} ms, p99 {:.1} ms",
            percentile(&sorted(&resume), 0.5),
            percentile(&sorted(&resume), 0.99)
        );
        println!(
            "  pause -> CheckpointStarted, the deliberate settle included: p50 {:.1} ms, p99 {:.1} ms",
            percentile(&sorted(&pause), 0.5),
            percentile(&sorted(&pause), 0.99)
        );
        report(
            &format!("pause -> CheckpointStarted, less addon_settle_ms={settle_ms}"),
            &pause,
            settle_ms,
        );
        let lanes = wall * GPUS as f64;
        println!(
            "imposed delays (checkpoint, restore): {:.1} s in all, {:.0} ms per workspace; \
             {:.0} % of the {lanes:.0} lane-seconds ({GPUS} lanes x wall)",
            imposed / 1000.0,
            imposed / WORKSPACES as f64,
            imposed / 1000.0 / lanes * 100.0
        );
        println!(
            "store writes: {writes} ({:.1} per workspace lifecycle, controllers and Events included)",
            writes as f64 / WORKSPACES as f64
        );
        println!(
            "per controller: reaction lag (change committed or timer due -> reconcile starts) \
             and time inside reconcile"
        );
        println!(
            "  {:<20} {:<26} {:>10} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11}",
            "controller", "kind", "reconciles", "lag p50", "lag p99", "lag max", "busy p99", "busy max", "busy total"
        );
        for r in sim.truth().reactions() {
            println!(
                "  {:<20} {:<26} {:>10} {:>6.2} ms {:>6.2} ms {:>6.1} ms {:>7.2} ms {:>7.1} ms {:>8.0} ms",
                r.controller,
                r.kind,
                r.reconciles,
                r.lag_p50_ms,
                r.lag_p99_ms,
                r.lag_max_ms,
                r.busy_p99_ms,
                r.busy_max_ms,
                r.busy_total_ms
            );
        }
        println!("RSS: {:.0} MiB (whole bench process)", rss_mib());
    });
}
