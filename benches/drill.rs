//! Benchmark of `wsgate drill` at scale: 200 paused workspaces resume at once on 20 GPUs
//! (the simulator's `none` runtime, no kernel sample), through the harness's own
//! `drill::run` over HTTPS against the embedded simulator in this process. Prints figures;
//! asserts nothing.
//!
//! - wall time of the preparation (create, Running, pause, Paused, 20 at a time) and of the
//!   contended resume;
//! - API requests per workspace lifecycle (everything the harness sent, discovery included,
//!   divided by the workspaces), next to the target "watch-based: under 15";
//! - the simulator's own queueing: the sum and p99 of its controllers' reaction lag, and its
//!   deliberate delays (checkpoints, restores), next to the wall time;
//! - resident memory of the process (harness and simulator together: they share it).
//!
//! `cargo bench --bench drill` (optimised).

use std::time::Instant;

use wsgate::drill::{self, DrillPlan};
use wsgate::platform::ledger::{self, Ledger};
use wsgate::platform::retry::RetryPolicy;
use wsgate::platform::target;
use wsgate::sim::profile::{RuntimeKind, SimProfile};
use wsgate::sim::{SimHandle, SimOptions};

const WORKSPACES: usize = 200;
const GPUS: u32 = 20;

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let kb = s
                .lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()?;
            Some(kb / 1024.0)
        })
        .unwrap_or(f64::NAN)
}

fn main() {
    wsgate::install_crypto_provider();
    if cfg!(debug_assertions) {
        println!("NOTE: figures from a DEBUG build (unoptimised); a release build is faster");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut profile =
            SimProfile::parse("default", wsgate::sim::profile::DEFAULT_PROFILE).unwrap();
        profile.runtime.kind = RuntimeKind::None;
        for pool in profile.node_pools.iter_mut().filter(|p| p.gpus_per_node > 0) {
            pool.count = GPUS;
            pool.gpus_per_node = 1;
        }
        let mut opts = SimOptions::with_platform();
        opts.platform.as_mut().unwrap().profile = profile;
        let sim = SimHandle::start(opts).await.unwrap();
        let cfg = wsgate::config::load(&wsgate::config::LoadRequest {
            profile: None,
            env: Default::default(),
            overrides: Vec::new(),
        })
        .unwrap()
        .config;
        let client = target::connect(sim.config().await.unwrap(), RetryPolicy::default())
            .await
            .unwrap();
        let rss_before = rss_mib();
        let requests_before = sim.api_fault_counts().requests;
        let run_id = "bench-drill".to_string();
        let plan = DrillPlan {
            workspaces: WORKSPACES,
            gpus: GPUS,
            sample: 0,
            quota: false,
            sample_annotations: Default::default(),
            run_id: run_id.clone(),
            labels: ledger::labels(&run_id, chrono::Utc::now() + chrono::Duration::hours(1)),
            token: wsgate::session::Secret::new("bench-token"),
        };
        let mut ledger = Ledger::default();
        let started = Instant::now();
        let report = drill::run(&client, &cfg, &plan, &mut ledger, &|_| {})
            .await
            .unwrap();
        let wall = started.elapsed().as_secs_f64();
        let requests = sim.api_fault_counts().requests - requests_before;
        let rss_after = rss_mib();
        let restored = report
            .results
            .iter()
            .filter(|r| r.verdict.starts_with("Restored"))
            .count();
        println!(
            "drill: {WORKSPACES} workspaces on {GPUS} GPUs, runtime none: {restored} restored, \
             {} problems",
            report.problems().len()
        );
        println!(
            "wall time: {wall:.1} s in all; the contended resume (all at once -> the last one \
             checked) {:.1} s",
            report.wall_s
        );
        if let (Some(w), Some(r)) = (report.waited, report.to_running) {
            println!(
                "waited for a GPU: p50 {:.2} s, p95 {:.2} s, max {:.2} s; to Running: p50 {:.2} s, \
                 p95 {:.2} s, max {:.2} s",
                w.p50_s, w.p95_s, w.max_s, r.p50_s, r.p95_s, r.max_s
            );
        }
        let per = requests as f64 / WORKSPACES as f64;
        println!(
            "API requests: {requests} in all, {per:.1} per workspace lifecycle (create, Running, \
             pause, Paused, resume, Running, check, delete; target under 15: {})",
            if per < 15.0 { "met" } else { "MISSED" }
        );
        let reactions = sim.truth().reactions();
        let busy_total: f64 = reactions.iter().map(|r| r.busy_total_ms).sum();
        let lag_p99 = reactions
            .iter()
            .map(|r| r.lag_p99_ms)
            .fold(0.0, f64::max);
        let imposed: f64 = sim
            .truth()
            .events()
            .iter()
            .filter_map(|e| e.imposed_delay_ms)
            .sum();
        println!(
            "simulator: controllers busy {:.1} s in all, worst controller reaction p99 {lag_p99:.1} ms; \
             deliberate delays (checkpoints, restores) {:.1} s over {} workspaces, i.e. {:.1} s \
             per GPU lane, next to {wall:.1} s of wall time",
            busy_total / 1000.0,
            imposed / 1000.0,
            WORKSPACES,
            imposed / 1000.0 / f64::from(GPUS)
        );
        for r in &reactions {
            println!(
                "  {:<20} {:<26} {:>6} reconciles, lag p50 {:>7.2} ms, p99 {:>8.2} ms, max {:>8.1} ms; busy {:>7.0} ms",
                r.controller, r.kind, r.reconciles, r.lag_p50_ms, r.lag_p99_ms, r.lag_max_ms, r.busy_total_ms
            );
        }
        println!(
            "RSS (harness and simulator in one process): {rss_before:.0} MiB before, \
             {rss_after:.0} MiB after"
        );
        let _ = ledger.cleanup(&client, &wsgate::platform::ownership::Claim::Run(run_id.clone()), std::time::Duration::from_secs(60), false).await;
    });
}
