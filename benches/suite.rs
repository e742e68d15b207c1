//! Benchmark of the suite itself: the @nightly scenarios (`WSGATE_BENCH_TAGS` to choose
//! others, `all` for every scenario) run in this process against the embedded simulator
//! with real Jupyter kernels, the way `wsgate run` runs them (same configuration loading,
//! same client with its retry layer, same `bdd::run`; no reports are written and the GPU
//! sampler of `wsgate run` does not run). Prints figures; asserts nothing.
//!
//! - **Suite wall time**: from the start of `bdd::run` to its end (cleanup included); the
//!   simulator's start is shown apart.
//! - **Waits on the target**, timed from the `wsgate.wait` spans the harness opens around
//!   every wait (`platform::wait::SPAN`): `platform` (watches for a transition, cleanup
//!   watching a deletion), `api` (one API request, retries included), `jupyter` (Jupyter
//!   REST calls, kernel websockets, cells, waits for a server to come up). Each figure is the
//!   union of its intervals inside the suite, so nested or concurrent waits count once.
//! - **Harness overhead** = suite wall time − union(platform, api, jupyter waits), as a
//!   share of the wall time: the time in which the harness waited on neither the
//!   platform nor a kernel (its own CPU work, cucumber, cleanup bookkeeping, and the CPU
//!   the in-process simulator took from it). Also shown without `api` in the union
//!   (request round trips counted as harness time), which is stricter. Target: under 10%.
//! - **Simulator-imposed delays**, from the simulator's own record (`Truth::imposed`):
//!   pod start, restore, checkpoint upload, termination, add-on settle, with counts and
//!   sums; and how far a pod's start ran past its imposed delay (Jupyter server spawn and
//!   reconcile lag), from the `PodScheduled`/`PodRunning` ground truth.
//! - **Observation lag**: for each harness observation (`timeline::Mark`) that has a
//!   ground-truth counterpart, the time from the simulator's commit of the transition to
//!   the harness's mark; p50/p95/max and count per kind. Both times are UTC wall-clock
//!   readings (`chrono::Utc::now()`, the system's realtime clock) taken in this one
//!   process. Each mark is paired with the latest matching transition at or before it; or,
//!   when there is none, with the first one less than 100 ms after it (the simulator stamps
//!   a transition just after committing it, so a fast watcher can stamp first: a small
//!   negative lag, reported as such).
//!
//! `cargo bench --bench suite` (optimised; builds the simulator venv on first use, see README).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use wsgate::config::{self, LoadRequest, Override};
use wsgate::platform::retry::RetryPolicy;
use wsgate::platform::{target, wait};
use wsgate::sim::profile::{RuntimeKind, SimProfile};
use wsgate::sim::truth::{Transition, TruthEvent};
use wsgate::sim::{SimHandle, SimOptions};
use wsgate::timeline::Mark;

type Intervals = Arc<Mutex<Vec<(&'static str, Instant, Instant)>>>;

/// Times every `wsgate.wait` span from creation to close, by its `on` field.
struct WaitLayer {
    done: Intervals,
}

struct Open {
    on: &'static str,
    start: Instant,
}

struct OnField(&'static str);

impl Visit for OnField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "on" {
            self.0 = match value {
                "platform" => "platform",
                "api" => "api",
                "jupyter" => "jupyter",
                _ => "other",
            };
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for WaitLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != wait::SPAN {
            return;
        }
        let mut on = OnField("other");
        attrs.record(&mut on);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Open {
                on: on.0,
                start: Instant::now(),
            });
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let end = Instant::now();
        if let Some(span) = ctx.span(&id)
            && let Some(open) = span.extensions().get::<Open>()
        {
            self.done.lock().unwrap().push((open.on, open.start, end));
        }
    }
}

/// The length of the union of `intervals`, clipped to `[from, to]`.
fn union(mut intervals: Vec<(Instant, Instant)>, from: Instant, to: Instant) -> Duration {
    intervals.sort();
    let mut total = Duration::ZERO;
    let mut cur: Option<(Instant, Instant)> = None;
    for (s, e) in intervals {
        let (s, e) = (s.max(from), e.min(to));
        if s >= e {
            continue;
        }
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Which ground-truth transitions stand for a mark of the scenario whose workspace is `ws`.
fn pairs_with(
    mark: Mark,
    detail: Option<&str>,
    ws: &str,
    snaps: &[String],
    ev: &TruthEvent,
) -> bool {
    let pod_of_ws = ev.name.starts_with(&format!("ws-{ws}-"));
    let state = |s: &str| {
        ev.transition == Transition::WorkspaceState
            && ev.name == ws
            && ev.detail.as_deref() == Some(s)
    };
    match mark {
        Mark::WorkspaceRunning | Mark::WorkspaceResumed => state("Running"),
        Mark::WorkspacePaused => state("Paused"),
        Mark::PodGone => ev.transition == Transition::PodDeleted && pod_of_ws,
        Mark::GpuReleased => {
            ev.transition == Transition::GpuReleased
                && pod_of_ws
                && (detail.is_none() || ev.node.as_deref() == detail)
        }
        Mark::SnapshotReady => {
            ev.transition == Transition::CheckpointFinished
                && pod_of_ws
                && (detail.is_none() || ev.detail.as_deref() == detail)
        }
        Mark::PodRestored => ev.transition == Transition::PodRestoredWritten && pod_of_ws,
        // A pod that fits nowhere, or the Workspace's state that says it waits: upstream
        // derives `Error` with the StatefulSet's warning (a quota squeeze refuses the pod
        // itself, so there is none) or the pod's Unschedulable condition in its message.
        // `Pending` never names a cause ("Workspace is pending"), so it is no such state.
        Mark::WaitingForResources => {
            (ev.transition == Transition::PodUnschedulable && pod_of_ws) || state("Error")
        }
        Mark::Checkpointing => ev.transition == Transition::PauseHeld && ev.name == ws,
        Mark::PodScheduled => ev.transition == Transition::PodScheduled && pod_of_ws,
        Mark::SnapshotsCleanedUp => {
            ev.transition == Transition::SnapshotDeleted && snaps.contains(&ev.name)
        }
        _ => false,
    }
}

fn main() {
    wsgate::install_crypto_provider();
    let done: Intervals = Default::default();
    tracing_subscriber::registry()
        .with(
            WaitLayer { done: done.clone() }.with_filter(tracing_subscriber::filter::filter_fn(
                |m| m.name() == wait::SPAN,
            )),
        )
        .init();
    if cfg!(debug_assertions) {
        println!("NOTE: figures from a DEBUG build (unoptimised); a release build is faster");
    }
    let tags = std::env::var("WSGATE_BENCH_TAGS").unwrap_or_else(|_| "@nightly".into());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut overrides = Vec::new();
        if tags != "all" {
            overrides.push(Override::new("run.tags", tags.clone(), "WSGATE_BENCH_TAGS"));
        }
        let resolved = config::load(&LoadRequest {
            profile: None,
            env: std::env::vars().collect(),
            overrides,
        })
        .expect("configuration");
        let cfg = resolved.config.clone();

        let sim_started = Instant::now();
        let mut profile = SimProfile::load(&cfg.sim.profile).expect("simulator profile");
        profile.runtime.kind = match cfg.sim.runtime {
            config::SimRuntime::Jupyter => RuntimeKind::Jupyter,
            config::SimRuntime::None => RuntimeKind::None,
        };
        let mut opts = SimOptions::with_platform();
        opts.platform.as_mut().unwrap().profile = profile;
        let sim = SimHandle::start(opts).await.expect("simulator");
        let retry = RetryPolicy::from_config(&cfg.api);
        let client = target::connect(sim.config().await.unwrap(), retry)
            .await
            .expect("client");
        target::check_opt_in(&client, &cfg.target.namespace)
            .await
            .expect("opt-in namespace");
        let sim_start = sim_started.elapsed();

        let run_id = format!("r{}-bench", Utc::now().format("%Y%m%d-%H%M%S"));
        let ctx = Arc::new(wsgate::bdd::RunContext {
            client,
            run_id,
            token: wsgate::session::Secret::new(uuid::Uuid::new_v4().simple().to_string()),
            simulator: true,
            cleanup: Default::default(),
            shared: Default::default(),
            scenarios: Default::default(),
            config: cfg.clone(),
        });
        let suite_opts = wsgate::bdd::runner::SuiteOptions {
            features: "features".into(),
        };
        let t0 = Instant::now();
        let outcome = wsgate::bdd::run(ctx.clone(), &suite_opts)
            .await
            .expect("suite");
        let t1 = Instant::now();
        let wall = t1 - t0;

        // Waits on the target.
        let spans = done.lock().unwrap().clone();
        let of = |kinds: &[&str]| {
            union(
                spans
                    .iter()
                    .filter(|(on, _, _)| kinds.contains(on))
                    .map(|(_, s, e)| (*s, *e))
                    .collect(),
                t0,
                t1,
            )
        };
        let platform = of(&["platform"]);
        let api = of(&["api"]);
        let jupyter = of(&["jupyter"]);
        let all = of(&["platform", "api", "jupyter", "other"]);
        let no_api = of(&["platform", "jupyter", "other"]);
        let overhead = wall.saturating_sub(all);
        let overhead_strict = wall.saturating_sub(no_api);
        let share = |d: Duration| 100.0 * secs(d) / secs(wall);

        println!("\n=== suite bench: tags {tags}, embedded simulator, runtime {} ===", cfg.sim.runtime.as_str());
        println!(
            "scenarios: {} ({} passed, {} failed, {} skipped); concurrency {}",
            outcome.scenarios, outcome.passed, outcome.failed, outcome.skipped, cfg.run.concurrency
        );
        if outcome.failed + outcome.skipped > 0 {
            println!("NOTE: not every scenario passed; the figures cover a partial run");
        }
        println!(
            "simulator start and client connect (not in the wall time): {:.1} ms",
            secs(sim_start) * 1000.0
        );
        println!("suite wall time: {:.2} s", secs(wall));
        println!("\n-- where the wall time went (union of wait intervals inside the suite) --");
        println!(
            "waiting on platform transitions (watches, cleanup deletions): {:>7.2} s {:>5.1}%",
            secs(platform),
            share(platform)
        );
        println!(
            "API requests (round trips, retries included):                 {:>7.2} s {:>5.1}%",
            secs(api),
            share(api)
        );
        println!(
            "Jupyter (REST, kernel websocket, cells, server coming up):    {:>7.2} s {:>5.1}%",
            secs(jupyter),
            share(jupyter)
        );
        println!(
            "any of these (union):                                         {:>7.2} s {:>5.1}%",
            secs(all),
            share(all)
        );
        println!(
            "spans timed: {} ({} platform, {} api, {} jupyter)",
            spans.len(),
            spans.iter().filter(|s| s.0 == "platform").count(),
            spans.iter().filter(|s| s.0 == "api").count(),
            spans.iter().filter(|s| s.0 == "jupyter").count()
        );
        let verdict = |d: Duration| {
            if share(d) < 10.0 { "MET" } else { "NOT MET" }
        };
        println!("\nharness overhead = suite wall time - union(waits on platform transitions, API requests, Jupyter)");
        println!(
            "                 = {:.2} s = {:.1}% of the wall time; target under 10%: {}",
            secs(overhead),
            share(overhead),
            verdict(overhead)
        );
        println!(
            "stricter (API round trips counted as harness time): {:.2} s = {:.1}%; target under 10%: {}",
            secs(overhead_strict),
            share(overhead_strict),
            verdict(overhead_strict)
        );

        // What the simulator imposed, from its own record.
        let truth = sim.truth().events();
        let imposed = sim.truth().imposed();
        println!("\n-- delays the simulator imposed (its own record, Truth::imposed) --");
        let mut imposed_total = 0.0;
        for s in &imposed {
            println!(
                "{:<14} {:>4} x, {:>8.1} ms in all",
                format!("{:?}", s.delay),
                s.count,
                s.total_ms
            );
            imposed_total += s.total_ms;
        }
        println!(
            "sum: {:.2} s = {:.1}% of the wall time (a sum over all pods: concurrent delays each count)",
            imposed_total / 1000.0,
            100.0 * imposed_total / 1000.0 / secs(wall)
        );
        // How far each pod's start ran past its imposed delay: the Jupyter server's spawn
        // (or thaw) and the controllers' reaction lag.
        let mut scheduled: BTreeMap<&str, DateTime<Utc>> = BTreeMap::new();
        let mut beyond = Vec::new();
        for ev in &truth {
            match ev.transition {
                Transition::PodScheduled => {
                    scheduled.insert(&ev.name, ev.at);
                }
                Transition::PodRunning => {
                    if let (Some(s), Some(imposed)) = (scheduled.get(ev.name.as_str()), ev.imposed_delay_ms) {
                        let ms = (ev.at - *s).num_microseconds().unwrap_or(0) as f64 / 1000.0;
                        beyond.push(ms - imposed);
                    }
                }
                _ => {}
            }
        }
        beyond.sort_by(f64::total_cmp);
        println!(
            "pod start past its imposed delay (Jupyter server spawn/thaw, reconcile lag): p50 {:.1} ms, max {:.1} ms, sum {:.2} s, {} pods",
            pct(&beyond, 0.5),
            pct(&beyond, 1.0),
            beyond.iter().sum::<f64>() / 1000.0,
            beyond.len()
        );

        // Jupyter work the harness timed itself.
        let scenarios: Vec<_> = ctx
            .scenarios
            .lock()
            .unwrap()
            .iter()
            .map(|(_, r)| r.clone())
            .collect();
        let mut model_load = Vec::new();
        for r in &scenarios {
            let t = &r.timeline;
            if let (Some(a), Some(b)) = (t.last(Mark::KernelReachable), t.last(Mark::ModelLoaded))
                && b.offset >= a.offset
            {
                model_load.push(secs(b.offset - a.offset) * 1000.0);
            }
        }
        model_load.sort_by(f64::total_cmp);
        println!(
            "kernel reachable -> model loaded, marker and files stored (cells): p50 {:.0} ms, max {:.0} ms, {} scenarios",
            pct(&model_load, 0.5),
            pct(&model_load, 1.0),
            model_load.len()
        );

        // Observation lag.
        let mut lags: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut early: BTreeMap<String, usize> = BTreeMap::new();
        let mut unmatched: BTreeMap<String, usize> = BTreeMap::new();
        let mut slow: Vec<String> = Vec::new();
        for r in &scenarios {
            let t = &r.timeline;
            let Some(ws) = t
                .observations
                .iter()
                .find(|o| o.mark == Mark::WorkspaceCreated)
                .and_then(|o| o.detail.clone())
            else {
                continue;
            };
            let snaps: Vec<String> = truth
                .iter()
                .filter(|e| {
                    e.transition == Transition::CheckpointFinished
                        && e.name.starts_with(&format!("ws-{ws}-"))
                })
                .filter_map(|e| e.detail.clone())
                .collect();
            for o in &t.observations {
                // A mark that answers a pause or resume request pairs only with what came
                // after that request (not, say, the Pending state at creation).
                let after_request = matches!(
                    o.mark,
                    Mark::Checkpointing
                        | Mark::WorkspacePaused
                        | Mark::WorkspaceResumed
                        | Mark::WaitingForResources
                        | Mark::PodScheduled
                        | Mark::PodRestored
                );
                let since = t
                    .observations
                    .iter()
                    .filter(|r| {
                        matches!(r.mark, Mark::PauseRequested | Mark::ResumeRequested)
                            && r.at <= o.at
                    })
                    .map(|r| r.at - chrono::TimeDelta::milliseconds(100))
                    .next_back()
                    .filter(|_| after_request);
                let candidates: Vec<&TruthEvent> = truth
                    .iter()
                    .filter(|e| since.is_none_or(|since| e.at >= since))
                    .filter(|e| pairs_with(o.mark, o.detail.as_deref(), &ws, &snaps, e))
                    .collect();
                if candidates.is_empty() {
                    if !matches!(
                        o.mark,
                        Mark::WorkspaceCreated
                            | Mark::PauseRequested
                            | Mark::ResumeRequested
                            | Mark::KernelReachable
                            | Mark::ModelLoaded
                            | Mark::MarkerStored
                            | Mark::KernelReconnected
                            | Mark::NextCellDone
                            | Mark::RecoveryDone
                    ) {
                        *unmatched.entry(format!("{:?}", o.mark)).or_default() += 1;
                    }
                    continue;
                }
                let key = format!("{:?}", o.mark);
                let lag_ms = |e: &TruthEvent| {
                    (o.at - e.at).num_microseconds().unwrap_or(0) as f64 / 1000.0
                };
                // The simulator stamps a transition just after committing it, so a watcher
                // can see the commit and stamp its mark first: a small negative lag. Such a
                // mark pairs with the first transition after it, if that is within 100 ms.
                let paired = candidates
                    .iter()
                    .rev()
                    .find(|e| e.at <= o.at)
                    .or_else(|| candidates.iter().find(|e| lag_ms(e) > -100.0));
                match paired {
                    Some(e) => {
                        if lag_ms(e) > 100.0 {
                            slow.push(format!(
                                "{} ms  {key} in \"{}\" (paired with {:?} of {} at +{:.0} ms)",
                                lag_ms(e).round(),
                                r.name,
                                e.transition,
                                e.name,
                                e.since_start_ms
                            ));
                        }
                        lags.entry(key).or_default().push(lag_ms(e))
                    }
                    None => *early.entry(key).or_default() += 1,
                }
            }
        }
        println!("\n-- observation lag: simulator commit -> harness mark (UTC wall clock of this process) --");
        println!("{:<22} {:>6} {:>9} {:>9} {:>9}", "mark", "count", "p50 ms", "p95 ms", "max ms");
        let mut negative = (0, 0.0f64);
        for (k, v) in lags.iter_mut() {
            v.sort_by(f64::total_cmp);
            for l in v.iter().filter(|l| **l < 0.0) {
                negative = (negative.0 + 1, negative.1.min(*l));
            }
            println!(
                "{:<22} {:>6} {:>9.1} {:>9.1} {:>9.1}",
                k,
                v.len(),
                pct(v, 0.5),
                pct(v, 0.95),
                pct(v, 1.0)
            );
        }
        println!(
            "(Workspace*, Checkpointing, SnapshotReady, SnapshotsCleanedUp and PodRestored marks take the\n time the watch of the pause or resume saw the transition; PodScheduled the resume's pod\n watch; WaitingForResources the resume's watch\n first seeing a state whose message names the cause (paired with the Error state or an\n Unschedulable pod);\n GpuReleased ends a watch-driven re-check; PodGone is a check made after an earlier wait,\n so its lag is how much later the harness looked.)"
        );
        for line in &slow {
            println!("over 100 ms: {line}");
        }
        if negative.0 > 0 {
            println!(
                "NOTE: {} mark(s) were stamped before the simulator's record of the transition (by at most {:.1} ms): \n the simulator records a transition just after committing it, and the watcher was faster",
                negative.0, -negative.1
            );
        }
        for (k, n) in &early {
            println!("NOTE: {n} {k} mark(s) came more than 100 ms before any matching transition (a harness bug, or a wrong pairing)");
        }
        for (k, n) in &unmatched {
            println!("NOTE: {n} {k} mark(s) had no ground-truth transition to pair with");
        }
        for leak in &outcome.leaks {
            println!("leak: {leak}");
        }
        sim.shutdown().await;
    });
}
