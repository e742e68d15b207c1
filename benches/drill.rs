//! Benchmark of `wsgate drill` at scale: N paused workspaces resume at once on M GPUs (the
//! simulator's `none` runtime, no kernel sample), through the harness's own `drill::run`
//! over HTTPS. Prints figures; asserts nothing.
//!
//! `cargo bench --bench drill [-- N M [--sim-process]]` (optimised; default 200 on 20).
//!
//! - wall time of the preparation (create, Running, pause, Paused, M at a time) and of the
//!   contended resume, next to the delays the simulator imposed on each GPU lane's critical
//!   path (pod start, restore, `PodRestored` lag, termination; see `print_lanes`);
//! - API requests per workspace lifecycle (everything the harness sent, discovery included,
//!   divided by the workspaces), next to the target "watch-based: under 15";
//! - the simulator's own queueing: the sum and p99 of its controllers' reaction lag;
//! - memory. In-process (the default) harness and simulator share one process, so only
//!   their sum is known. With `--sim-process` the simulator runs as `wsgate sim` (the
//!   binary this bench was built with, from a profile written here), and the figures are
//!   apart: the harness's peak RSS (this process's `VmHWM`) and the simulator's. The
//!   simulator's controller and request figures live in its process and are not printed
//!   then.

use std::time::Instant;

use wsgate::drill::{self, DrillPlan};
use wsgate::platform::ledger::{self, Ledger};
use wsgate::platform::retry::RetryPolicy;
use wsgate::platform::target;
use wsgate::sim::profile::{RuntimeKind, SimProfile};
use wsgate::sim::truth::{Imposed, ImposedStats};
use wsgate::sim::{SimHandle, SimOptions};

/// A figure of `/proc/<pid>/status` in MiB (`VmRSS` now, `VmHWM` the peak).
fn mem_mib(pid: &str, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let kb = s
                .lines()
                .find(|l| l.starts_with(field))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()?;
            Some(kb / 1024.0)
        })
        .unwrap_or(f64::NAN)
}

fn rss_mib() -> f64 {
    mem_mib("self", "VmRSS:")
}

/// The bench's arguments: N, M and `--sim-process`, in any order (cargo adds `--bench`).
struct Size {
    workspaces: usize,
    gpus: u32,
    sim_process: bool,
}

fn size() -> Size {
    let mut numbers = Vec::new();
    let mut sim_process = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--sim-process" => sim_process = true,
            "--bench" => {}
            n => numbers.push(n.parse::<u64>().unwrap_or_else(|_| {
                eprintln!(
                    "usage: cargo bench --bench drill -- [N M] [--sim-process]; not a number: {n}"
                );
                std::process::exit(2)
            })),
        }
    }
    let (workspaces, gpus) = match numbers[..] {
        [] => (200, 20),
        [n, m] if m > 0 && m < n => (n as usize, m as u32),
        _ => {
            eprintln!("usage: cargo bench --bench drill -- [N M] [--sim-process], 0 < M < N");
            std::process::exit(2)
        }
    };
    Size {
        workspaces,
        gpus,
        sim_process,
    }
}

/// `wsgate sim` in its own process, stopped (SIGTERM, then killed) when dropped.
struct SimProcess {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl SimProcess {
    fn start(gpus: u32) -> SimProcess {
        let default = wsgate::sim::profile::DEFAULT_PROFILE;
        let profile = default
            .replacen("count = 2", &format!("count = {gpus}"), 1)
            .replace("kind = \"jupyter\"", "kind = \"none\"");
        assert!(
            profile.contains(&format!("count = {gpus}")) && profile.contains("kind = \"none\""),
            "the default profile changed its layout: edit the bench"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drill-bench.toml");
        std::fs::write(&path, profile).unwrap();
        let kubeconfig = dir.path().join("kubeconfig.yaml");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_wsgate"))
            .arg("sim")
            .arg("--sim-profile")
            .arg(&path)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start wsgate sim");
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while !kubeconfig.exists() {
            assert!(
                Instant::now() < deadline,
                "wsgate sim wrote no kubeconfig in 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        SimProcess {
            child,
            _dir: dir,
            kubeconfig,
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    wsgate::install_crypto_provider();
    let size = size();
    if cfg!(debug_assertions) {
        println!("NOTE: figures from a DEBUG build (unoptimised); a release build is faster");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let cfg = wsgate::config::load(&wsgate::config::LoadRequest {
            profile: None,
            env: Default::default(),
            overrides: Vec::new(),
        })
        .unwrap()
        .config;
        let run_id = "bench-drill".to_string();
        let plan = DrillPlan {
            workspaces: size.workspaces,
            gpus: size.gpus,
            sample: 0,
            quota: false,
            sample_annotations: Default::default(),
            run_id: run_id.clone(),
            labels: ledger::labels(&run_id, chrono::Utc::now() + chrono::Duration::hours(1)),
            token: wsgate::session::Secret::new("bench-token"),
        };
        if size.sim_process {
            let sim = SimProcess::start(size.gpus);
            let yaml = std::fs::read_to_string(&sim.kubeconfig).unwrap();
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::from_yaml(&yaml).unwrap(),
                &Default::default(),
            )
            .await
            .unwrap();
            let client = target::connect(config, RetryPolicy::default()).await.unwrap();
            let harness_before = rss_mib();
            let sim_before = mem_mib(&sim.pid(), "VmRSS:");
            let mut ledger = Ledger::default();
            let started = Instant::now();
            let report = drill::run(&client, &cfg, &plan, &mut ledger, &|_| {})
                .await
                .unwrap();
            let wall = started.elapsed().as_secs_f64();
            print_drill(&size, &report, wall);
            println!(
                "memory, apart (the simulator is `wsgate sim`, pid {}): harness RSS {harness_before:.0} \
                 MiB before, {:.0} MiB after, peak {:.0} MiB; simulator RSS {sim_before:.0} MiB \
                 before, {:.0} MiB after, peak {:.0} MiB",
                sim.pid(),
                rss_mib(),
                mem_mib("self", "VmHWM:"),
                mem_mib(&sim.pid(), "VmRSS:"),
                mem_mib(&sim.pid(), "VmHWM:"),
            );
            clean_up(&client, &mut ledger, &run_id).await;
            drop(sim);
            return;
        }
        let mut profile =
            SimProfile::parse("default", wsgate::sim::profile::DEFAULT_PROFILE).unwrap();
        profile.runtime.kind = RuntimeKind::None;
        for pool in profile.node_pools.iter_mut().filter(|p| p.gpus_per_node > 0) {
            pool.count = size.gpus;
            pool.gpus_per_node = 1;
        }
        let mut opts = SimOptions::with_platform();
        opts.platform.as_mut().unwrap().profile = profile;
        let sim = SimHandle::start(opts).await.unwrap();
        let client = target::connect(sim.config().await.unwrap(), RetryPolicy::default())
            .await
            .unwrap();
        let rss_before = rss_mib();
        let requests_before = sim.api_fault_counts().requests;
        let mut ledger = Ledger::default();
        let started = Instant::now();
        let report = drill::run(&client, &cfg, &plan, &mut ledger, &|_| {})
            .await
            .unwrap();
        let wall = started.elapsed().as_secs_f64();
        let requests = sim.api_fault_counts().requests - requests_before;
        let rss_after = rss_mib();
        print_drill(&size, &report, wall);
        let per = requests as f64 / size.workspaces as f64;
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
        println!(
            "simulator: controllers busy {:.1} s in all, worst controller reaction p99 {lag_p99:.1} ms",
            busy_total / 1000.0,
        );
        print_lanes(&size, &report, &sim.truth().imposed());
        for r in &reactions {
            println!(
                "  {:<20} {:<26} {:>6} reconciles, lag p50 {:>7.2} ms, p99 {:>8.2} ms, max {:>8.1} ms; busy {:>7.0} ms",
                r.controller, r.kind, r.reconciles, r.lag_p50_ms, r.lag_p99_ms, r.lag_max_ms, r.busy_total_ms
            );
        }
        println!(
            "RSS (harness and simulator in one process; --sim-process for them apart): \
             {rss_before:.0} MiB before, {rss_after:.0} MiB after, peak {:.0} MiB",
            mem_mib("self", "VmHWM:")
        );
        clean_up(&client, &mut ledger, &run_id).await;
    });
}

/// The contended resume next to the delays the simulator imposed on each GPU lane's
/// critical path. A lane serves N/M workspaces one after another, and each holds the GPU
/// through its pod start, its restore and the `PodRestored` lag (the drill waits for the
/// platform's word before it deletes the workspace); between one and the next, the pod's
/// termination (the GPU is free when the pod is gone). The drill's clock stops at the last
/// check, before the last termination. Each is the mean the simulator served (`Truth::imposed`; pod
/// starts and terminations also happen while preparing, with the same profile delays).
/// Checkpoints and the add-on's settle happen while preparing, not on the resume's path.
fn print_lanes(size: &Size, report: &drill::DrillReport, imposed: &[ImposedStats]) {
    let mean = |what: Imposed| {
        imposed
            .iter()
            .find(|s| s.delay == what)
            .filter(|s| s.count > 0)
            .map_or(0.0, |s| s.total_ms / s.count as f64)
    };
    let parts = [
        ("pod start", mean(Imposed::PodStart)),
        ("restore", mean(Imposed::Restore)),
        ("PodRestored lag", mean(Imposed::PodRestoredLag)),
    ];
    let termination = mean(Imposed::Termination);
    let holding: f64 = parts.iter().map(|(_, ms)| ms).sum();
    let per_lane = size.workspaces.div_ceil(size.gpus as usize) as f64;
    let lane_s = (per_lane * holding + (per_lane - 1.0) * termination) / 1000.0;
    let words: Vec<String> = parts
        .iter()
        .map(|(what, ms)| format!("{what} {ms:.0}"))
        .collect();
    if lane_s <= 0.0 {
        println!("deliberate delays per GPU lane: none served (nothing to set the resume beside)");
        return;
    }
    let over = report.wall_s / lane_s - 1.0;
    println!(
        "deliberate delays per GPU lane on the contended resume: {per_lane:.0} workspaces x ({} ms) \
         + {:.0} terminations x {termination:.0} ms = {lane_s:.1} s; the contended resume took {:.1} s, \
         {:+.1}% (target within 10%: {})",
        words.join(" + "),
        per_lane - 1.0,
        report.wall_s,
        over * 100.0,
        if over.abs() <= 0.10 { "met" } else { "MISSED" }
    );
}

/// Removes what the drill recorded in `ledger` (both modes), within two minutes.
async fn clean_up(client: &kube::Client, ledger: &mut Ledger, run_id: &str) {
    let _ = ledger
        .cleanup(
            client,
            &wsgate::platform::ownership::Claim::Run(run_id.to_string()),
            std::time::Duration::from_secs(120),
            false,
        )
        .await;
}

/// The figures every mode prints: verdicts, wall times and waits.
fn print_drill(size: &Size, report: &drill::DrillReport, wall: f64) {
    let restored = report
        .results
        .iter()
        .filter(|r| r.verdict.starts_with("Restored") || r.verdict.starts_with("PlatformRestored"))
        .count();
    println!(
        "drill: {} workspaces on {} GPUs, runtime none: {restored} restored, {} problems",
        size.workspaces,
        size.gpus,
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
}
