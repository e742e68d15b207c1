//! Benchmark of the simulator's API server through the real kube-rs client over HTTPS:
//! create/get/patch throughput on Workspaces, watch fan-out latency of 1,000 updates to 50
//! watchers, and resident memory with 10,000 stored objects. Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench sim_api`

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use wsgate::platform::crd::Workspace;
use wsgate::sim::{SimHandle, SimOptions};

const NS: &str = "wsgate-test";

fn workspace(name: &str) -> Workspace {
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
        "metadata": {"name": name, "labels": {"bench": "yes"}},
        "spec": {"paused": false, "kind": "jupyterlab-resumable",
                 "podTemplate": {"volumes": {"home": "h"}, "options": {"imageConfig": "i", "podConfig": "p"}}}
    }))
    .unwrap()
}

fn epoch_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn throughput(api: &Api<Workspace>, n: usize, concurrency: usize) {
    for (label, op) in [("create", 0), ("get", 1), ("patch", 2)] {
        let start = Instant::now();
        futures::stream::iter(0..n)
            .for_each_concurrent(concurrency, |i| {
                let api = api.clone();
                async move {
                    let name = format!("tp-{i}");
                    match op {
                        0 => drop(
                            api.create(&PostParams::default(), &workspace(&name))
                                .await
                                .unwrap(),
                        ),
                        1 => drop(api.get(&name).await.unwrap()),
                        _ => drop(
                            api.patch(
                                &name,
                                &PatchParams::default(),
                                &Patch::Merge(json!({"spec": {"paused": true}})),
                            )
                            .await
                            .unwrap(),
                        ),
                    }
                }
            })
            .await;
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{label:>7}: {n} ops in {secs:.2} s = {:.0} ops/s ({concurrency} concurrent)",
            n as f64 / secs
        );
    }
}

async fn fan_out(sim: &SimHandle, watchers: usize, updates: usize) {
    let client = sim.client().await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &workspace("fan"))
        .await
        .unwrap();
    let latencies: Arc<std::sync::Mutex<Vec<f64>>> = Default::default();
    let rv = api
        .get("fan")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let api = api.clone();
        let latencies = latencies.clone();
        let rv = rv.clone();
        let mut stream = api
            .watch(&WatchParams::default().fields("metadata.name=fan"), &rv)
            .await
            .unwrap()
            .boxed();
        tasks.push(tokio::spawn(async move {
            let mut seen = 0;
            while seen < updates {
                match stream.try_next().await {
                    Ok(Some(WatchEvent::Modified(w))) => {
                        let now = epoch_micros();
                        let sent = w
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get("sent-us"))
                            .and_then(|s| s.parse::<u128>().ok());
                        if let Some(t) = sent {
                            latencies
                                .lock()
                                .unwrap()
                                .push(now.saturating_sub(t) as f64 / 1000.0);
                        }
                        seen += 1;
                    }
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let store = sim.store().clone();
    let kind = wsgate::sim::kinds::find("kubeflow.org", "v1beta1", "workspaces").unwrap();
    // Updates go straight into the store so the figure is the server's fan-out, not the
    // client's request path (measured above).
    for _ in 0..updates {
        store
            .modify(kind, Some(NS), "fan", false, false, |cur| {
                let mut c = cur.clone();
                c["metadata"]["annotations"]["sent-us"] = json!(epoch_micros().to_string());
                Ok(c)
            })
            .unwrap();
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
    }
    let mut l = latencies.lock().unwrap().clone();
    l.sort_by(f64::total_cmp);
    println!(
        "fan-out: {updates} updates x {watchers} watchers: {} deliveries, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        l.len(),
        percentile(&l, 0.5),
        percentile(&l, 0.99),
        l.last().copied().unwrap_or(f64::NAN)
    );
}

async fn memory(sim: &SimHandle, n: usize) {
    let before = rss_mib();
    let store = sim.store().clone();
    let kind = wsgate::sim::kinds::find("kubeflow.org", "v1beta1", "workspaces").unwrap();
    for i in 0..n {
        store
            .create(
                kind,
                Some(NS),
                serde_json::to_value(workspace(&format!("mem-{i}"))).unwrap(),
                false,
            )
            .unwrap();
    }
    println!(
        "memory: {n} more stored Workspaces: RSS {before:.0} MiB -> {:.0} MiB (whole bench process, history included)",
        rss_mib()
    );
}

fn main() {
    wsgate::install_crypto_provider();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sim = SimHandle::start(SimOptions::default()).await.unwrap();
        let api: Api<Workspace> = Api::namespaced(sim.client().await.unwrap(), NS);
        println!(
            "simulator API benchmark (debug/release as built), {} CPUs",
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        );
        throughput(&api, 3000, 32).await;
        fan_out(&sim, 50, 1000).await;
        memory(&sim, 10_000).await;
    });
}
