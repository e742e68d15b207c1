//! The Jupyter side against real `jupyter server` processes from the simulator venv, each on
//! a free port under a workspace-style base URL with its own home directory:
//! `wsgate probe` mark/check across a freeze, a kernel restart and a server restart; the
//! evidence in detail; a kernel that dies mid-cell; reconnecting after a pause; bad input.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use wsgate::cli::probe::{ProbeArgs, ProbeCommand};
use wsgate::commands::probe;
use wsgate::exit_code;
use wsgate::session::probe_state::ProbeState;
use wsgate::session::{
    Auth, AuthScheme, Budgets, Cell, ClientOptions, ExecuteOptions, ExecuteStatus, JupyterClient,
    KernelChannel, MarkerObservation, Model, Secret, SessionError, collect_evidence,
};
use wsgate::sim::runtime::jupyter::{JupyterOptions, JupyterProcess};
use wsgate::sim::runtime::venv::{VenvPaths, ensure_venv};
use wsgate::verdict::{PlatformEvidence, VerdictKind, decide};

const BASE_URL: &str = "/workspace/connect/wsgate-test/nb-1/jupyterlab/";
/// Bounds each test, so a hang fails the test instead of the CI run.
const TEST_BUDGET: Duration = Duration::from_secs(240);

fn venv() -> &'static VenvPaths {
    static VENV: OnceLock<VenvPaths> = OnceLock::new();
    VENV.get_or_init(|| {
        wsgate::install_crypto_provider();
        ensure_venv().expect("the simulator venv builds")
    })
}

/// A server with its own home directory (standing in for the PVC) and a directory outside
/// it for the probe's state file.
struct Server {
    process: JupyterProcess,
    dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Server {
        Server::start_with(|_| Vec::new()).await
    }

    /// A server whose process gets the environment `env` makes from the test directory.
    async fn start_with(env: impl FnOnce(&Path) -> Vec<(String, String)>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut options = JupyterOptions::new(&home);
        options.home = Some(home);
        options.base_url = BASE_URL.to_owned();
        options.env = env(dir.path());
        Server {
            process: start_process(options).await,
            dir,
        }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn state_file(&self) -> PathBuf {
        self.dir.path().join("probe-state.json")
    }

    fn client(&self) -> JupyterClient {
        JupyterClient::new(
            self.process.url(),
            Auth::Token(Secret::new(self.process.token())),
            ClientOptions::default(),
        )
        .unwrap()
    }

    fn args(&self) -> ProbeArgs {
        ProbeArgs {
            url: self.process.url().to_owned(),
            token: Some(Secret::new(self.process.token())),
            auth: AuthScheme::Token,
            state: self.state_file(),
            kernel_id: None,
            model: Model::SimTiny,
            model_source: None,
            cell_budget: Duration::from_secs(60),
            model_budget: Duration::from_secs(120),
            connect_budget: Duration::from_secs(30),
            insecure_skip_tls_verify: false,
            json: true,
        }
    }
}

async fn start_process(options: JupyterOptions) -> JupyterProcess {
    let venv = venv();
    tokio::time::timeout(
        Duration::from_secs(90),
        JupyterProcess::start(venv, options),
    )
    .await
    .expect("jupyter server answered within 90 s")
    .expect("jupyter server starts")
}

async fn mark(server: &Server) -> ProbeState {
    let code = probe::run(&ProbeCommand::Mark(server.args()))
        .await
        .expect("probe mark succeeds");
    assert_eq!(code, exit_code::SUCCESS);
    ProbeState::read(&server.state_file()).unwrap()
}

async fn check(server: &Server) -> i32 {
    probe::run(&ProbeCommand::Check(server.args()))
        .await
        .expect("probe check produces a verdict")
}

/// The evidence after a resume of the kernel `mark` left in `state`, with default budgets.
async fn evidence_after(client: &JupyterClient, state: &ProbeState) -> wsgate::verdict::Evidence {
    let nonce = state.nonce.unseal().unwrap();
    collect_evidence(
        client,
        &state.kernel_id,
        &nonce,
        &state.plan,
        &Budgets::default(),
        Some(&state.before),
    )
    .await
    .unwrap()
}

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_BUDGET, f)
        .await
        .expect("the test finished within its budget")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_mark_freeze_thaw_check_is_restored() {
    within(async {
        let server = Server::start().await;
        let state = mark(&server).await;

        // The state file holds evidence and a sealed nonce, never the token.
        let text = std::fs::read_to_string(server.state_file()).unwrap();
        assert!(!text.contains(server.process.token()), "token leaked into the state file");
        let before = &state.before;
        let k = before.kernel.as_ref().expect("kernel evidence before pause");
        assert!(matches!(&k.marker, MarkerObservation::Present { digest } if *digest == state.marker_digest));
        assert_eq!(k.kernel_id_in_process.as_deref(), Some(state.kernel_id.as_str()));
        assert!(k.model.is_some() && k.ticker.as_ref().is_some_and(|t| t.alive));
        let scan = before.disk_scan.as_ref().unwrap();
        assert!(scan.hits.is_empty(), "nonce on disk before pause: {:?}", scan.hits);
        // IPython wrote its history database into the home directory and the scan read it.
        assert!(server.home().join(".ipython/profile_default/history.sqlite").exists());
        assert!(scan.files_scanned >= 4, "scan: {scan:?}");
        assert!(before.files_via_server.is_some(), "notes: {:?}", before.notes);

        let pids = server.process.freeze().unwrap();
        assert!(pids.len() >= 2, "server and kernel frozen: {pids:?}");
        let frozen_at = Instant::now();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let frozen_for = frozen_at.elapsed().as_secs_f64();
        server.process.thaw().unwrap();

        assert_eq!(check(&server).await, exit_code::SUCCESS);

        // The same evidence in detail: the same process, and the ticker saw the freeze.
        let nonce = state.nonce.unseal().unwrap();
        let after = collect_evidence(
            &server.client(),
            &state.kernel_id,
            &nonce,
            &state.plan,
            &Budgets::default(),
            Some(before),
        )
        .await
        .unwrap();
        let a = after.kernel.as_ref().unwrap();
        assert_eq!(a.pid, k.pid);
        assert_eq!(a.process_start, k.process_start);
        assert_eq!(a.execution_count, k.execution_count, "evidence cells stay out of history");
        assert_eq!(a.model, k.model, "same model object, weights and output");
        let ticker = a.ticker.as_ref().unwrap();
        assert!(
            ticker.max_gap_s >= frozen_for * 0.8,
            "ticker gap {} s, frozen {frozen_for} s",
            ticker.max_gap_s
        );
        let verdict = decide(before, &after, &PlatformEvidence::not_observed());
        assert_eq!(verdict.kind, VerdictKind::Restored, "{verdict}");
        assert_eq!(after.recovery, None, "no recovery when the process came back");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_mark_kernel_restart_check_is_fresh_session() {
    within(async {
        let server = Server::start().await;
        let state = mark(&server).await;
        let client = server.client();
        client.restart_kernel(&state.kernel_id).await.unwrap();

        assert_eq!(check(&server).await, exit_code::FRESH_SESSION);

        let nonce = state.nonce.unseal().unwrap();
        let (after, stamps) = wsgate::session::collect_evidence_stamped(
            &client,
            &state.kernel_id,
            &nonce,
            &state.plan,
            &Budgets::default(),
            Some(&state.before),
        )
        .await
        .unwrap();
        // Each step stamped as it happened, in order, not all at the end.
        let (Some(answered), Some(first_cell), Some(recovered)) = (
            stamps.kernel_answered,
            stamps.first_cell_done,
            stamps.recovery_done,
        ) else {
            panic!("every step stamped: {stamps:?}");
        };
        assert!(answered < first_cell, "{stamps:?}");
        assert!(first_cell < recovered, "{stamps:?}");
        assert!(recovered <= after.collected_at, "{stamps:?}");
        assert!(after.kernel_listed, "a restart keeps the kernel id");
        let a = after.kernel.as_ref().unwrap();
        assert_eq!(a.marker, MarkerObservation::Absent);
        assert_ne!(a.pid, state.before.kernel.as_ref().unwrap().pid);
        let recovery = after.recovery.as_ref().expect("recovery attempted");
        let model = state
            .before
            .kernel
            .as_ref()
            .unwrap()
            .model
            .as_ref()
            .unwrap();
        assert!(recovery.loaded, "{recovery:?}");
        assert_eq!(
            recovery.weight_hash.as_deref(),
            Some(model.weight_hash.as_str())
        );
        assert_eq!(
            recovery.output_digest.as_deref(),
            Some(model.output_digest.as_str())
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_mark_server_restart_check_is_fresh_session() {
    within(async {
        let mut server = Server::start().await;
        let state = mark(&server).await;
        let options = server.process.options();
        server.process.kill().unwrap();
        // A new server on the same root directory, port and token: the old kernel is gone.
        server.process = start_process(options).await;

        assert_eq!(check(&server).await, exit_code::FRESH_SESSION);

        // The scratch kernel the check started to read the files was deleted again.
        let kernels = server.client().kernels().await.unwrap();
        assert!(kernels.is_empty(), "left behind: {kernels:?}");
        assert!(!kernels.iter().any(|k| k.id == state.kernel_id));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_run_files_is_files_lost() {
    within(async {
        let server = Server::start().await;
        let state = mark(&server).await;
        let checkpoint = &state.plan.files()["checkpoint"];
        std::fs::remove_file(server.home().join(checkpoint)).unwrap();
        assert_eq!(check(&server).await, exit_code::FILES_LOST);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nonce_that_reaches_disk_is_found_and_invalidates_the_test() {
    within(async {
        let server = Server::start().await;
        let state = mark(&server).await;
        // Notebook code persists the marker: a fresh process could now read it back.
        let client = server.client();
        let mut ch = KernelChannel::connect(&client, &state.kernel_id)
            .await
            .unwrap();
        let leak = "open('notes.txt', 'w').write(_wsgate_marker.hex()) and None";
        let options = ExecuteOptions::new(Duration::from_secs(60)).no_history();
        ch.execute(leak, &options)
            .await
            .unwrap()
            .into_ok("leak")
            .unwrap();
        assert_eq!(check(&server).await, exit_code::INCONCLUSIVE);

        let after = evidence_after(&client, &state).await;
        let hits = &after.disk_scan.as_ref().unwrap().hits;
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert!(hits[0].ends_with("/notes.txt"), "{hits:?}");
    })
    .await;
}

/// The phases after a resume are as far apart as the cells behind them: with every cell
/// made 300 ms slower (an IPython input transformer that sleeps, which runs for silent cells
/// too), the first cell after the kernel answered completes at least 300 ms after it, and
/// the evidence (a further cell, the disk scan) at least 300 ms after that. Stamped at one
/// instant after all the evidence was in, as they once were, these spacings would be zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_cell_that_takes_300_ms_is_timed_300_ms_after_the_kernel_answered() {
    within(async {
        let server = Server::start().await;
        let state = mark(&server).await;
        let client = server.client();
        wsgate::session::slow_every_cell(
            &client,
            &state.kernel_id,
            Duration::from_millis(300),
            &Budgets::default(),
        )
        .await
        .unwrap();

        let nonce = state.nonce.unseal().unwrap();
        let (after, stamps) = wsgate::session::collect_evidence_stamped(
            &client,
            &state.kernel_id,
            &nonce,
            &state.plan,
            &Budgets::default(),
            Some(&state.before),
        )
        .await
        .unwrap();
        let (Some(answered), Some(first_cell)) = (stamps.kernel_answered, stamps.first_cell_done)
        else {
            panic!("both stamped: {stamps:?}");
        };
        let to_cell = (first_cell - answered).num_milliseconds();
        assert!(
            to_cell >= 300,
            "kernel -> next cell {to_cell} ms: {stamps:?}"
        );
        let to_end = (after.collected_at - first_cell).num_milliseconds();
        assert!(
            to_end >= 300,
            "next cell -> evidence in {to_end} ms: {stamps:?}"
        );
        let v = decide(&state.before, &after, &PlatformEvidence::not_observed());
        assert_eq!(v.kind, VerdictKind::Restored, "{v}");
    })
    .await;
}

/// Files the kernel wrote outside the test's directory, removed however the test ends.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disk_guard_covers_every_place_a_fresh_kernel_could_read_the_nonce_from() {
    within(async {
        // $TMPDIR and IPython's directory outside the home volume, as an image may set them.
        let server = Server::start_with(|dir| {
            for d in ["tmpdir", "ipython"] {
                std::fs::create_dir_all(dir.join(d)).unwrap();
            }
            vec![
                (
                    "TMPDIR".to_owned(),
                    dir.join("tmpdir").display().to_string(),
                ),
                (
                    "IPYTHONDIR".to_owned(),
                    dir.join("ipython").display().to_string(),
                ),
            ]
        })
        .await;
        let state = mark(&server).await;
        let before = state.before.disk_scan.as_ref().unwrap();
        let covered: Vec<&str> = before
            .places
            .iter()
            .filter(|p| p.exists && p.covered)
            .map(|p| p.what.as_str())
            .collect();
        for what in [
            "home",
            "cwd",
            "tmpdir",
            "tmp",
            "dev_shm",
            "ipython",
            "jupyter_runtime",
        ] {
            assert!(covered.contains(&what), "{what} not covered: {before:?}");
        }
        assert!(before.gaps().is_empty(), "{before:?}");
        assert!(
            before.since_epoch_s.is_some(),
            "the cut-off is the kernel's own clock"
        );

        // Notebook code persists the marker in six ways: under $TMPDIR, in /dev/shm, in
        // IPython's directory, at the end of a 65 MiB file (larger than any size limit the
        // scan once had), across the boundary of the scan's 1 MiB read chunks, and in a
        // file's name.
        let shm = format!(
            "wsgate-test-leak-{}",
            server.dir.path().file_name().unwrap().to_string_lossy()
        );
        // Removed however the test ends, written or not.
        let _shm = RemoveOnDrop(vec![Path::new("/dev/shm").join(&shm)]);
        let client = server.client();
        let mut ch = KernelChannel::connect(&client, &state.kernel_id)
            .await
            .unwrap();
        let leak = format!(
            r#"
import base64, os, tempfile
from IPython.paths import get_ipython_dir
m = _wsgate_marker
open(os.path.join(tempfile.gettempdir(), 'leak.txt'), 'w').write(m.hex())
open('/dev/shm/{shm}', 'wb').write(base64.b64encode(m))
open(os.path.join(get_ipython_dir(), 'leak.txt'), 'w').write(m.hex().upper())
with open('big.bin', 'wb') as f:
    f.write(bytes(65 << 20)); f.write(m)
with open('straddle.bin', 'wb') as f:
    f.write(bytes((1 << 20) - 5)); f.write(m.hex().encode())
open('notes-' + m.hex() + '.txt', 'w').write('nothing inside')
"#
        );
        let options = ExecuteOptions::new(Duration::from_secs(60)).no_history();
        ch.execute(&leak, &options)
            .await
            .unwrap()
            .into_ok("leak")
            .unwrap();

        let nonce = state.nonce.unseal().unwrap();
        let after = evidence_after(&client, &state).await;
        let scan = after.disk_scan.as_ref().unwrap();
        let mut found: Vec<String> = scan
            .hits
            .iter()
            .map(|h| {
                Path::new(h)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        found.sort();
        let mut expected = vec![
            "big.bin".to_owned(),
            "leak.txt".to_owned(),
            "leak.txt".to_owned(),
            "straddle.bin".to_owned(),
            shm.clone(),
            format!("notes-{}.txt", nonce.hex()),
        ];
        expected.sort();
        assert_eq!(found, expected, "{scan:?}");
        assert!(
            scan.bytes_scanned > 65 << 20,
            "the large file was read: {scan:?}"
        );
        let v = decide(&state.before, &after, &PlatformEvidence::not_observed());
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{v}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_that_could_not_cover_a_writable_place_leaves_a_surviving_nonce_inconclusive() {
    within(async {
        let server = Server::start().await;
        let state = mark(&server).await;
        let nonce = state.nonce.unseal().unwrap();
        let collect = |plan| {
            let client = server.client();
            let before = state.before.clone();
            let kernel_id = state.kernel_id.clone();
            let nonce = nonce.clone();
            async move {
                collect_evidence(
                    &client,
                    &kernel_id,
                    &nonce,
                    &plan,
                    &Budgets::default(),
                    Some(&before),
                )
                .await
                .unwrap()
            }
        };
        // The same process, scanned in full: Restored.
        let after = collect(state.plan.clone()).await;
        let v = decide(&state.before, &after, &PlatformEvidence::not_observed());
        assert_eq!(v.kind, VerdictKind::Restored, "{v}");

        // A walk cut short after one file leaves every writable place uncovered.
        let mut plan = state.plan.clone();
        plan.scan_max_files = 1;
        let after = collect(plan).await;
        let scan = after.disk_scan.as_ref().unwrap();
        assert!(scan.truncated, "{scan:?}");
        let v = decide(&state.before, &after, &PlatformEvidence::not_observed());
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{v}");
        let reason = v.reason.as_deref().unwrap();
        assert!(reason.contains("did not cover"), "{reason}");
        assert!(
            reason.contains("the file limit (1) was reached"),
            "{reason}"
        );
        assert!(
            reason.contains(&server.home().canonicalize().unwrap().display().to_string()),
            "{reason}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_that_dies_mid_cell_is_reported_at_once() {
    within(async {
        let server = Server::start().await;
        let client = server.client();
        let kernel = client.start_kernel(None).await.unwrap();
        let mut ch = KernelChannel::connect(&client, &kernel.id).await.unwrap();
        let options = ExecuteOptions::new(Duration::from_secs(200)).named("suicide", "cell");
        let err = ch
            .execute(
                "import os, time\ntime.sleep(0.3)\nos.kill(os.getpid(), 9)",
                &options,
            )
            .await
            .unwrap_err();
        match &err {
            SessionError::KernelDied {
                kernel_id,
                cell,
                event,
            } => {
                assert_eq!(kernel_id, &kernel.id);
                assert_eq!(cell.as_deref(), Some("suicide"));
                assert!(
                    event.contains("restart") || event.contains("dead"),
                    "{event}"
                );
            }
            other => panic!("expected KernelDied, got {other}"),
        }
        assert_eq!(err.exit_code(), exit_code::FAILED);
        assert!(err.to_string().contains("during cell `suicide`"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_mid_cell_closes_the_channel_at_once() {
    within(async {
        let mut server = Server::start().await;
        let client = server.client();
        let kernel = client.start_kernel(None).await.unwrap();
        let mut ch = KernelChannel::connect(&client, &kernel.id).await.unwrap();
        let options = ExecuteOptions::new(Duration::from_secs(200)).named("long", "cell");
        let running = ch.execute("import time\ntime.sleep(60)", &options);
        let kill = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            server.process.kill().unwrap();
        };
        let (result, ()) = tokio::join!(running, kill);
        match result.unwrap_err() {
            SessionError::ChannelClosed {
                kernel_id, cell, ..
            } => {
                assert_eq!(kernel_id, kernel.id);
                assert_eq!(cell.as_deref(), Some("long"));
            }
            other => panic!("expected ChannelClosed, got {other}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_channel_reconnects_after_a_pause_and_keeps_kernel_state() {
    within(async {
        let server = Server::start().await;
        let client = server.client();
        let kernel = client.start_kernel(None).await.unwrap();
        let mut ch = KernelChannel::connect(&client, &kernel.id).await.unwrap();
        let options = ExecuteOptions::new(Duration::from_secs(60));
        ch.execute("kept = 6 * 7", &options)
            .await
            .unwrap()
            .into_ok("set")
            .unwrap();

        server.process.freeze().unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.process.thaw().unwrap();

        ch.reconnect().await.unwrap();
        let out = ch
            .execute("kept", &options)
            .await
            .unwrap()
            .into_ok("get")
            .unwrap();
        assert_eq!(out.results, vec!["42".to_owned()]);
        let sessions = client.sessions().await.unwrap();
        assert!(
            sessions.is_empty(),
            "no notebook sessions were opened: {sessions:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cell_template_compiles_in_the_kernels_python() {
    within(async {
        let server = Server::start().await;
        let client = server.client();
        let kernel = client.start_kernel(None).await.unwrap();
        let mut ch = KernelChannel::connect(&client, &kernel.id).await.unwrap();
        let options = ExecuteOptions::new(Duration::from_secs(60)).no_history();
        for model in [Model::SimTiny, Model::Qwen25_3bT4] {
            for cell in Cell::ALL {
                let t = wsgate::session::cells::template(model, cell);
                let code = format!(
                    "compile(__import__('base64').b64decode({:?}).decode(), {:?}, 'exec') and None",
                    base64_of(t.source),
                    t.path
                );
                ch.execute(&code, &options)
                    .await
                    .unwrap()
                    .into_ok(t.path)
                    .unwrap();
            }
        }
    })
    .await;
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

// --- bad input ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_url_a_wrong_token_and_a_missing_kernel_are_named_with_exit_3() {
    within(async {
        let server = Server::start().await;

        let mut args = server.args();
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        args.url = format!("http://{free}{BASE_URL}");
        let err = probe::run(&ProbeCommand::Mark(args)).await.unwrap_err();
        assert_eq!(err.exit_code(), exit_code::TARGET, "{err}");
        assert!(
            err.to_string().contains("cannot reach the Jupyter server"),
            "{err}"
        );

        let mut args = server.args();
        args.token = Some(Secret::new("not-the-token-1234"));
        let err = probe::run(&ProbeCommand::Mark(args)).await.unwrap_err();
        assert_eq!(err.exit_code(), exit_code::TARGET, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("refused the credentials (HTTP 403)"), "{msg}");
        assert!(!msg.contains("not-the-token-1234") && !msg.contains(server.process.token()));

        let mut args = server.args();
        args.kernel_id = Some("00000000-0000-0000-0000-000000000000".to_owned());
        let err = probe::run(&ProbeCommand::Mark(args)).await.unwrap_err();
        assert_eq!(err.exit_code(), exit_code::TARGET, "{err}");
        assert!(err.to_string().contains("has no kernel 00000000-"), "{err}");

        let err = probe::run(&ProbeCommand::Check(server.args()))
            .await
            .unwrap_err();
        assert_eq!(err.exit_code(), exit_code::USAGE, "{err}");
        assert!(
            err.to_string().contains("run `wsgate probe mark` first"),
            "{err}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_that_raises_and_a_kernel_that_never_goes_idle_are_named() {
    within(async {
        let server = Server::start().await;
        let client = server.client();
        let kernel = client.start_kernel(None).await.unwrap();
        let mut ch = KernelChannel::connect(&client, &kernel.id).await.unwrap();

        let options = ExecuteOptions::new(Duration::from_secs(60)).named("divide", "cell");
        let outcome = ch.execute("1 / 0", &options).await.unwrap();
        assert_eq!(outcome.status, ExecuteStatus::Error);
        let err = outcome.into_ok("divide").unwrap_err();
        assert_eq!(err.to_string(), "cell `divide` raised ZeroDivisionError: division by zero");
        assert_eq!(err.exit_code(), exit_code::FAILED);

        let options = ExecuteOptions::new(Duration::from_millis(1500)).named("sleepy", "cell (--cell-budget)");
        let err = ch.execute("import time\ntime.sleep(30)", &options).await.unwrap_err();
        assert_eq!(err.exit_code(), exit_code::BUDGET);
        assert_eq!(
            err.to_string(),
            "budget `cell (--cell-budget)` (1.5 s) ran out during cell `sleepy`; last kernel state seen: busy"
        );
        // The kernel is usable again after an interrupt. A request that reached the kernel
        // before the interrupted cell ended is aborted (stop_on_error), so allow one retry.
        client.interrupt_kernel(&kernel.id).await.unwrap();
        let mut ch = KernelChannel::connect(&client, &kernel.id).await.unwrap();
        let options = ExecuteOptions::new(Duration::from_secs(60));
        let mut outcome = ch.execute("'alive'", &options).await.unwrap();
        if outcome.status == ExecuteStatus::Aborted {
            outcome = ch.execute("'alive'", &options).await.unwrap();
        }
        assert_eq!(outcome.status, ExecuteStatus::Ok, "{outcome:?}");
        assert_eq!(outcome.results, vec!["'alive'".to_owned()]);
    })
    .await;
}

/// `wsgate probe` against a server started as Kubeflow's images start it (no token, no
/// password; XSRF enforced on every POST): mark with no credential, freeze, thaw, and the
/// check is Restored. The state file names no credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_works_against_a_tokenless_server_like_kubeflows_images() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut options = JupyterOptions::new(&home);
        options.home = Some(home);
        options.base_url = BASE_URL.to_owned();
        options.auth = wsgate::sim::runtime::jupyter::ServerAuth::None;
        let server = Server {
            process: start_process(options).await,
            dir,
        };
        let args = ProbeArgs {
            token: None,
            ..server.args()
        };
        let code = probe::run(&ProbeCommand::Mark(args.clone()))
            .await
            .expect("probe mark succeeds without a token");
        assert_eq!(code, exit_code::SUCCESS);
        // `check` pointed at a server that takes the connection and never answers ends
        // within its connect budget, exit 3, instead of waiting for ever (#13).
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_url = format!("http://{}/", silent.local_addr().unwrap());
        let held = std::thread::spawn(move || {
            let mut conns = Vec::new();
            for c in silent.incoming().flatten().take(8) {
                conns.push(c);
            }
        });
        let err = probe::run(&ProbeCommand::Check(ProbeArgs {
            url: silent_url,
            connect_budget: Duration::from_secs(2),
            ..args.clone()
        }))
        .await
        .expect_err("a server that never answers is an error");
        assert_eq!(err.exit_code(), exit_code::TARGET, "{err}");
        assert!(err.to_string().contains("timed out"), "{err}");
        drop(held);
        server.process.freeze().unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.process.thaw().unwrap();
        let code = probe::run(&ProbeCommand::Check(args))
            .await
            .expect("probe check produces a verdict");
        assert_eq!(code, exit_code::SUCCESS, "Restored");
        let state = ProbeState::read(&server.state_file()).unwrap();
        assert!(!state.kernel_id.is_empty());
    })
    .await;
}

/// `probe check` with a real state file from `probe mark`, pointed at a server that never
/// answers, at one that is not Jupyter, and given a state file whose sealed nonce was
/// tampered with: each ends with its documented code and says what is wrong, within its
/// budget, and the kernel `mark` started is still there afterwards (check changes nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_check_against_a_silent_or_foreign_server_or_a_tampered_state_says_so() {
    within(async {
        let server = Server::start().await;
        let state = mark(&server).await;
        let state_path = server.state_file().display().to_string();
        let check_at = |url: String, state: String| {
            let mut c = crate::common::within(60, env!("CARGO_BIN_EXE_wsgate"));
            c.args(["probe", "check", "--url", &url, "--state", &state])
                .args(["--connect-budget", "2s"])
                .env("WSGATE_JUPYTER_TOKEN", server.process.token());
            c.output().expect("wsgate runs")
        };
        let says = |o: &std::process::Output, code: i32, words: &str| {
            let out = crate::common::text(o);
            assert_eq!(o.status.code(), Some(code), "{out}");
            assert!(out.contains(words), "expected {words:?} in:\n{out}");
            assert!(
                !out.contains(server.process.token()),
                "token in output:\n{out}"
            );
        };

        let silent = format!("http://127.0.0.1:{}/", crate::common::silent_server());
        // The command is a child process with its own budget; blocking this worker on it
        // is fine (the Jupyter server is a process of its own too).
        let started = Instant::now();
        let o = check_at(silent, state_path.clone());
        says(&o, exit_code::TARGET, "timed out");
        // Within its 2 s budget and a margin for a loaded machine, not the 60 s kill.
        assert!(
            started.elapsed() < Duration::from_secs(12),
            "{:?}",
            started.elapsed()
        );

        let foreign = format!("http://127.0.0.1:{}/", crate::common::not_jupyter_server());
        let o = check_at(foreign, state_path.clone());
        says(&o, exit_code::TARGET, "is not a Jupyter server");

        // The same state with its sealed nonce cut short: refused before the server is asked.
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(server.state_file()).unwrap()).unwrap();
        let sealed = json["nonce"]
            .as_str()
            .expect("the state holds a sealed nonce")
            .to_owned();
        json["nonce"] = serde_json::Value::String(sealed[..sealed.len() / 2].to_owned());
        let tampered = server.state_file().with_file_name("tampered.json");
        std::fs::write(&tampered, serde_json::to_string(&json).unwrap()).unwrap();
        let o = check_at(
            server.process.url().to_owned(),
            tampered.display().to_string(),
        );
        says(&o, exit_code::USAGE, "the sealed nonce is damaged");

        // None of that touched the kernel: the untampered state still checks as restored.
        assert_eq!(
            check(&server).await,
            exit_code::SUCCESS,
            "{}",
            state.kernel_id
        );
    })
    .await;
}
