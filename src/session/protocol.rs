//! The marker protocol over a kernel channel: [`mark`] before the pause (load the model,
//! store the nonce silently, write the input, application checkpoint and output files, use
//! the model, then collect the evidence), [`collect_evidence`] after the resume (reconnect,
//! check the marker, scan the disk, recover from the checkpoint when the process is new).
//!
//! Both open fresh websocket connections: old connections do not survive a restore.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::budget::Budget;
use super::cells::{Cell, CellValues, Model, parse_result, template};
use super::channel::{ExecuteOptions, KernelChannel};
use super::client::JupyterClient;
use super::error::SessionError;
use super::marker::Nonce;
use crate::verdict::{
    DiskScan, Evidence, FileState, KernelEvidence, MarkerObservation, ModelEvidence, Phase,
    ProcessStart, RecoveryEvidence, TickerEvidence,
};

/// What a run stores and where (serialisable into a state file; holds no secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerPlan {
    /// The model the cells load.
    pub model: Model,
    /// This run's id (names its directory).
    pub run_id: String,
    /// The directory for the run's files, relative to the kernel's working directory
    /// (`/`-separated; not hidden, so the Contents API serves it).
    pub work_dir: String,
    /// Seed for sim-tiny's weights and input.
    pub seed: u64,
    /// Memory (MiB) the model cell also holds in the kernel (`workspace.model_ballast_mib`).
    #[serde(default)]
    pub ballast_mib: u64,
    /// For `qwen2.5-3b-t4`: the hub id or local directory of the model.
    pub model_source: String,
    /// For `qwen2.5-3b-t4`: the prompt.
    pub prompt: String,
    /// The disk scan stops after visiting this many files (the places it did not finish are
    /// reported as not covered).
    pub scan_max_files: u64,
    /// The disk scan's cut-off for a kernel that has no marker (a fresh process after the
    /// resume) and no cut-off from the scan before the pause: files not written or changed
    /// since then (UTC epoch seconds) are not read. Ten minutes before the plan was made, a
    /// margin for clock skew between harness and kernel. A kernel that holds the marker
    /// uses its own clock at the moment it stored it.
    pub scan_modified_since_epoch_s: i64,
}

impl MarkerPlan {
    /// A plan with defaults for `model`, its files under `wsgate-probe/<run_id>/`.
    pub fn new(model: Model, run_id: impl Into<String>) -> Self {
        MarkerPlan {
            model,
            run_id: run_id.into(),
            work_dir: "wsgate-probe".to_owned(),
            seed: 20_261_104,
            ballast_mib: 0,
            model_source: "Qwen/Qwen2.5-3B-Instruct".to_owned(),
            prompt: "In one sentence: why does pausing an idle GPU notebook save money?".to_owned(),
            scan_max_files: 1_000_000,
            scan_modified_since_epoch_s: Utc::now().timestamp() - 600,
        }
    }

    /// The run's files: name (`input`, `checkpoint`, `output`) to path relative to the
    /// kernel's working directory.
    pub fn files(&self) -> BTreeMap<String, String> {
        self.model
            .file_names()
            .iter()
            .map(|(name, file)| {
                let dir = self.work_dir.trim_end_matches('/');
                ((*name).to_owned(), format!("{dir}/{}/{file}", self.run_id))
            })
            .collect()
    }

    fn values(&self, nonce: &Nonce) -> CellValues {
        let needles: Vec<String> = nonce.disk_needles().iter().map(hex::encode).collect();
        [
            ("nonce_hex", json!(nonce.hex())),
            ("files", json!(self.files())),
            ("seed", json!(self.seed)),
            ("ballast_mib", json!(self.ballast_mib)),
            ("model_id", json!(self.model_source)),
            ("prompt", json!(self.prompt)),
            ("needles_hex", json!(needles)),
            ("max_files", json!(self.scan_max_files)),
            (
                "modified_since_epoch_s",
                json!(self.scan_modified_since_epoch_s),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// The budgets the protocol runs under (the names appear in messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets {
    /// Reaching the server and opening the channel (retrying while it does not answer).
    pub connect: Budget,
    /// Each ordinary cell.
    pub cell: Budget,
    /// Loading or recovering the model.
    pub model: Budget,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            connect: Budget::new("connect", Duration::from_secs(60)),
            cell: Budget::new("cell", Duration::from_secs(60)),
            model: Budget::new("model", Duration::from_secs(600)),
        }
    }
}

/// Starts a kernel, retrying while the server is still coming up, within `budget` (the
/// `kernel_reachable` budget in the harness); returns its id.
pub async fn start_kernel(client: &JupyterClient, budget: &Budget) -> Result<String, SessionError> {
    retry_transient(budget, || async { Ok(client.start_kernel(None).await?.id) }).await
}

/// Before the pause: loads the model, stores the nonce (silent, no history), writes the
/// files, uses the model, and returns the evidence (phase `BeforePause`).
pub async fn mark(
    client: &JupyterClient,
    kernel_id: &str,
    nonce: &Nonce,
    plan: &MarkerPlan,
    budgets: &Budgets,
) -> Result<Evidence, SessionError> {
    let values = plan.values(nonce);
    let mut ch = KernelChannel::connect_within(client, kernel_id, &budgets.connect).await?;
    for cell in [
        Cell::LoadModel,
        Cell::StoreMarker,
        Cell::WriteFiles,
        Cell::UseModel,
    ] {
        let budget = if cell == Cell::LoadModel {
            &budgets.model
        } else {
            &budgets.cell
        };
        if cell == Cell::StoreMarker {
            // The nonce's cell is silent: nothing of it reaches the history.
            let store = opts(budget, cell).silent();
            execute_ok(&mut ch, plan.model, cell, &values, &store).await?;
        } else {
            run_cell(&mut ch, plan.model, cell, &values, opts(budget, cell)).await?;
        }
    }
    let kernel = kernel_evidence(&mut ch, kernel_id, plan, &values, budgets).await?;
    let scan = evidence_cell::<DiskScan>(&mut ch, Cell::ScanDisk, plan, &values, budgets).await?;
    ch.close().await;
    let mut notes = Vec::new();
    let files_via_server = files_via_server(client, plan, None, &mut notes).await?;
    Ok(Evidence {
        phase: Phase::BeforePause,
        collected_at: Utc::now(),
        kernel_id: kernel_id.to_owned(),
        kernel_listed: true,
        kernel: Some(kernel),
        files_via_server,
        disk_scan: Some(scan),
        recovery: None,
        notes,
    })
}

/// After the resume (or at any later time): reconnects to `kernel_id` and collects the same
/// evidence. If the server no longer lists the kernel, a scratch kernel reads the files,
/// scans the disk and tries the checkpoint, and is deleted afterwards. When the marker is
/// gone, the model is recovered from the application checkpoint. `before` says whether the
/// Contents API could serve the files before the pause (only then is it asked again).
pub async fn collect_evidence(
    client: &JupyterClient,
    kernel_id: &str,
    nonce: &Nonce,
    plan: &MarkerPlan,
    budgets: &Budgets,
    before: Option<&Evidence>,
) -> Result<Evidence, SessionError> {
    collect_evidence_stamped(client, kernel_id, nonce, plan, budgets, before)
        .await
        .map(|(evidence, _)| evidence)
}

/// When each step of [`collect_evidence_stamped`] happened, taken as it happened (not when
/// all the evidence is in): the phases after a resume are built on these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamps {
    /// The kernel's channel answered (`kernel_info_reply` on a new connection).
    pub kernel_answered: Option<chrono::DateTime<Utc>>,
    /// The first cells after the resume, the ones that read the marker and use the loaded
    /// model, completed.
    pub first_cell_done: Option<chrono::DateTime<Utc>>,
    /// The recovery from the files and the application checkpoint finished (only when the
    /// marker was gone and the recovery loaded).
    pub recovery_done: Option<chrono::DateTime<Utc>>,
}

/// [`collect_evidence`], with the moment of each step.
pub async fn collect_evidence_stamped(
    client: &JupyterClient,
    kernel_id: &str,
    nonce: &Nonce,
    plan: &MarkerPlan,
    budgets: &Budgets,
    before: Option<&Evidence>,
) -> Result<(Evidence, Stamps), SessionError> {
    let mut stamps = Stamps::default();
    let mut values = plan.values(nonce);
    // A fresh process has no marker, so no clock reading of its own from when it was stored:
    // it uses the cut-off the scan before the pause took from the marker's process.
    if let Some(since) = before
        .and_then(|b| b.disk_scan.as_ref())
        .and_then(|s| s.since_epoch_s)
    {
        values.insert("modified_since_epoch_s".to_owned(), json!(since));
    }
    let mut notes = Vec::new();
    let listed = match retry_transient(&budgets.connect, || client.kernel(kernel_id)).await {
        Ok(_) => true,
        Err(SessionError::KernelNotFound { .. }) => false,
        Err(e) => return Err(e),
    };
    let (asked_id, scratch) = if listed {
        (kernel_id.to_owned(), false)
    } else {
        let k = client.start_kernel(None).await?;
        notes.push(format!(
            "kernel {kernel_id} is no longer listed by the server; scratch kernel {} read the files",
            k.id
        ));
        (k.id, true)
    };

    let result = async {
        // One connect budget for the socket and the kernel's own answer.
        let deadline = tokio::time::Instant::now() + budgets.connect.limit;
        let mut ch = KernelChannel::connect_within(client, &asked_id, &budgets.connect).await?;
        // The kernel itself answered (jupyter_server may open the socket without it, after
        // its kernel_info_timeout).
        ch.kernel_info(&budgets.connect, deadline).await?;
        stamps.kernel_answered = Some(Utc::now());
        let kernel = kernel_evidence(&mut ch, &asked_id, plan, &values, budgets).await?;
        stamps.first_cell_done = Some(Utc::now());
        let scan =
            evidence_cell::<DiskScan>(&mut ch, Cell::ScanDisk, plan, &values, budgets).await?;
        let recovery = if kernel.marker == MarkerObservation::Absent {
            let r: RecoveryEvidence =
                evidence_cell(&mut ch, Cell::RecoverCheckpoint, plan, &values, budgets).await?;
            if r.loaded {
                stamps.recovery_done = Some(Utc::now());
            }
            Some(r)
        } else {
            None
        };
        ch.close().await;
        Ok::<_, SessionError>((kernel, scan, recovery))
    }
    .await;
    if scratch && let Err(e) = client.delete_kernel(&asked_id).await {
        notes.push(format!("deleting scratch kernel {asked_id} failed: {e}"));
    }
    let (kernel, scan, recovery) = result?;
    let fetch = before.is_none_or(|b| b.files_via_server.is_some());
    let files_via_server = if fetch {
        files_via_server(client, plan, before, &mut notes).await?
    } else {
        None
    };
    let evidence = Evidence {
        phase: Phase::AfterResume,
        collected_at: Utc::now(),
        kernel_id: kernel_id.to_owned(),
        kernel_listed: listed,
        kernel: Some(kernel),
        files_via_server,
        disk_scan: Some(scan),
        recovery,
        notes,
    };
    Ok((evidence, stamps))
}

fn opts(budget: &Budget, cell: Cell) -> ExecuteOptions {
    ExecuteOptions::new(budget.limit).named(cell.name(), budget.name.to_string())
}

/// What the busy cell reports.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct BusyOutcome {
    /// Progress lines printed.
    pub lines: u64,
    /// How long it ran, by the kernel's clock.
    pub seconds: f64,
}

/// Runs the `busy_progress` cell: busy for `length`, printing every `every`, within `budget`.
/// The channel's liveness poll (`GET /api/kernels/<id>`) is off while it runs: jupyter_server
/// counts every API request as activity, so the poll would keep the Workspace "active" by
/// itself and hide what the kernel's own output does.
pub async fn busy_cell(
    client: &JupyterClient,
    kernel_id: &str,
    length: Duration,
    every: Duration,
    budgets: &Budgets,
    budget: &Budget,
) -> Result<BusyOutcome, SessionError> {
    let mut ch = KernelChannel::connect_within(client, kernel_id, &budgets.connect).await?;
    ch.set_liveness_interval(None);
    let mut values = CellValues::new();
    values.insert("seconds".into(), serde_json::json!(length.as_secs_f64()));
    values.insert("every_s".into(), serde_json::json!(every.as_secs_f64()));
    let options = ExecuteOptions::new(budget.limit)
        .no_history()
        .named(Cell::BusyProgress.name(), budget.name.clone());
    // The model does not matter: the cell is common to all.
    let result = run_cell(
        &mut ch,
        Model::SimTiny,
        Cell::BusyProgress,
        &values,
        options,
    )
    .await;
    ch.close().await;
    decode(Cell::BusyProgress, result?)
}

/// Makes every later cell of the kernel `delay` longer (the `slow_cells` template: an IPython
/// input transformer that sleeps, kept in the kernel process only). Timing scenarios use it
/// to show that the phases after a resume are as far apart as the cells behind them.
pub async fn slow_every_cell(
    client: &JupyterClient,
    kernel_id: &str,
    delay: Duration,
    budgets: &Budgets,
) -> Result<(), SessionError> {
    let mut ch = KernelChannel::connect_within(client, kernel_id, &budgets.connect).await?;
    let mut values = CellValues::new();
    values.insert("seconds".into(), serde_json::json!(delay.as_secs_f64()));
    let options = opts(&budgets.cell, Cell::SlowCells).no_history();
    let result = run_cell(&mut ch, Model::SimTiny, Cell::SlowCells, &values, options).await;
    ch.close().await;
    result.map(|_| ())
}

async fn execute_ok(
    ch: &mut KernelChannel,
    model: Model,
    cell: Cell,
    values: &CellValues,
    options: &ExecuteOptions,
) -> Result<String, SessionError> {
    let code = template(model, cell).render(values)?;
    Ok(ch
        .execute(&code, options)
        .await?
        .into_ok(cell.name())?
        .stdout)
}

async fn run_cell(
    ch: &mut KernelChannel,
    model: Model,
    cell: Cell,
    values: &CellValues,
    options: ExecuteOptions,
) -> Result<Value, SessionError> {
    let stdout = execute_ok(ch, model, cell, values, &options).await?;
    parse_result(&stdout).ok_or_else(|| SessionError::CellOutput {
        cell: cell.name().to_owned(),
        detail: format!(
            "printed no WSGATE-RESULT line (stdout: {:?})",
            stdout.chars().take(300).collect::<String>()
        ),
    })
}

fn decode<T: for<'de> Deserialize<'de>>(cell: Cell, value: Value) -> Result<T, SessionError> {
    serde_json::from_value(value).map_err(|e| SessionError::CellOutput {
        cell: cell.name().to_owned(),
        detail: format!("unexpected result: {e}"),
    })
}

/// What check_marker prints.
#[derive(Deserialize)]
struct KernelReport {
    marker: MarkerObservation,
    pid: u32,
    process_start: Option<ProcessStart>,
    hostname: Option<String>,
    execution_count: u64,
    kernel_id_in_process: Option<String>,
    model: Option<ModelEvidence>,
    gpu_memory_allocated: Option<u64>,
    #[serde(default)]
    resident_bytes: Option<u64>,
    ticker: Option<TickerEvidence>,
    files: BTreeMap<String, FileState>,
}

async fn kernel_evidence(
    ch: &mut KernelChannel,
    kernel_id: &str,
    plan: &MarkerPlan,
    values: &CellValues,
    budgets: &Budgets,
) -> Result<KernelEvidence, SessionError> {
    // The model hook re-runs the model (greedy generation for an LLM): the model budget.
    let r: KernelReport = evidence_cell(ch, Cell::CheckMarker, plan, values, budgets).await?;
    Ok(KernelEvidence {
        kernel_id: kernel_id.to_owned(),
        kernel_id_in_process: r.kernel_id_in_process,
        marker: r.marker,
        pid: r.pid,
        process_start: r.process_start,
        hostname: r.hostname,
        execution_count: r.execution_count,
        model: r.model,
        gpu_memory_allocated: r.gpu_memory_allocated,
        resident_bytes: r.resident_bytes,
        ticker: r.ticker,
        files: r.files,
    })
}

/// Runs one of the evidence cells (under the model budget, out of the history) and decodes
/// its JSON result.
async fn evidence_cell<T: serde::de::DeserializeOwned>(
    ch: &mut KernelChannel,
    cell: Cell,
    plan: &MarkerPlan,
    values: &CellValues,
    budgets: &Budgets,
) -> Result<T, SessionError> {
    let options = opts(&budgets.model, cell).no_history();
    decode(cell, run_cell(ch, plan.model, cell, values, options).await?)
}

async fn files_via_server(
    client: &JupyterClient,
    plan: &MarkerPlan,
    before: Option<&Evidence>,
    notes: &mut Vec<String>,
) -> Result<Option<BTreeMap<String, FileState>>, SessionError> {
    let mut out = BTreeMap::new();
    for (name, path) in plan.files() {
        out.insert(name, client.file_state(&path).await?);
    }
    let none_served = out.values().all(|s| *s == FileState::Missing);
    if before.is_none() && none_served {
        notes.push(
            "the Contents API does not serve the run's files (the kernel's working directory is \
             not the server root); files are checked inside the kernel only"
                .to_owned(),
        );
        return Ok(None);
    }
    Ok(Some(out))
}

/// Runs `f` until it succeeds or fails definitely, retrying transient failures every
/// 250 ms within `budget`.
async fn retry_transient<T, F, Fut>(budget: &Budget, mut f: F) -> Result<T, SessionError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SessionError>>,
{
    let deadline = Instant::now() + budget.limit;
    loop {
        match tokio::time::timeout_at(deadline, f()).await {
            Ok(Err(e)) if e.is_transient() && Instant::now() < deadline => {
                // Waiting for the server to come up is a wait on Jupyter.
                let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
                tracing::Instrument::instrument(
                    tokio::time::sleep(Duration::from_millis(250)),
                    span,
                )
                .await;
            }
            Ok(result) => return result,
            Err(_) => {
                return Err(SessionError::Budget {
                    budget: budget.name.to_string(),
                    limit: budget.limit,
                    cell: None,
                    last_state: "the server did not answer".to_owned(),
                });
            }
        }
    }
}
