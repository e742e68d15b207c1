//! Round trip of a trivial execute (`pass`), p50/p99 over 200 runs, side by side in one run:
//!
//! - wsgate: `KernelChannel::execute` over the kernel websocket through a real
//!   `jupyter server` (reply and idle both awaited);
//! - the floor: jupyter_client's `BlockingKernelClient` talking ZeroMQ straight to the same
//!   kernel (`fixtures/sim/zmq_floor.py`), with no server in between.
//!
//! Prints both, the difference (what the server hop costs) and the ratio.
//! Run: `cargo bench --bench session_roundtrip` (builds the simulator venv on first use).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use wsgate::session::{Auth, ClientOptions, ExecuteOptions, JupyterClient, KernelChannel, Secret};
use wsgate::sim::runtime::jupyter::{JupyterOptions, JupyterProcess};
use wsgate::sim::runtime::venv::ensure_venv;

const RUNS: usize = 200;
const WARMUP: usize = 30;

struct Stats {
    p50: f64,
    p99: f64,
    mean: f64,
    min: f64,
}

fn stats(mut ms: Vec<f64>) -> Stats {
    ms.sort_by(f64::total_cmp);
    let pick = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
    Stats {
        p50: pick(0.50),
        p99: pick(0.99),
        mean: ms.iter().sum::<f64>() / ms.len() as f64,
        min: ms[0],
    }
}

#[tokio::main]
async fn main() {
    wsgate::install_crypto_provider();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = ensure_venv().expect("the simulator venv builds");
    let home = tempfile::tempdir().expect("temp dir");
    let mut options = JupyterOptions::new(home.path());
    options.home = Some(home.path().to_owned());
    options.base_url = "/workspace/connect/bench/nb/jupyterlab/".to_owned();
    let server = tokio::time::timeout(
        Duration::from_secs(90),
        JupyterProcess::start(&venv, options),
    )
    .await
    .expect("jupyter server answered within 90 s")
    .expect("jupyter server starts");
    let client = JupyterClient::new(
        server.url(),
        Auth::Token(Secret::new(server.token())),
        ClientOptions::default(),
    )
    .expect("client");
    let kernel = client.start_kernel(None).await.expect("kernel starts");

    // wsgate over the websocket, through the server.
    let mut ch = KernelChannel::connect(&client, &kernel.id)
        .await
        .expect("channel");
    let opts = ExecuteOptions::new(Duration::from_secs(30)).no_history();
    for _ in 0..WARMUP {
        ch.execute("pass", &opts).await.expect("warm-up execute");
    }
    let mut ws_ms = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        ch.execute("pass", &opts).await.expect("execute");
        ws_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ch.close().await;

    // The floor: ZeroMQ straight to the same kernel.
    let out = Command::new(&venv.python)
        .arg(root.join("fixtures/sim/zmq_floor.py"))
        .arg(server.kernel_connection_file(&kernel.id))
        .arg(RUNS.to_string())
        .arg(WARMUP.to_string())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "zmq_floor.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("zmq_floor.py prints JSON");
    let floor_ms: Vec<f64> = doc["samples_ms"]
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();

    let ws = stats(ws_ms);
    let floor = stats(floor_ms);
    println!(
        "session round trip: trivial execute (`pass`), {RUNS} runs each after {WARMUP} warm-up, same kernel"
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>9}",
        "", "p50 ms", "p99 ms", "mean ms", "min ms"
    );
    for (name, s) in [
        ("jupyter_client, ZeroMQ direct (floor)", &floor),
        ("wsgate KernelChannel, websocket via server", &ws),
    ] {
        println!(
            "{name:<44} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            s.p50, s.p99, s.mean, s.min
        );
    }
    println!(
        "server hop: {:+.3} ms at p50, {:+.3} ms at p99; ratio wsgate/floor {:.2}x at p50, {:.2}x at p99",
        ws.p50 - floor.p50,
        ws.p99 - floor.p99,
        ws.p50 / floor.p50,
        ws.p99 / floor.p99
    );
    drop(server);
}
