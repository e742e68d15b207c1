//! The release gate that spans a platform upgrade: [`prepare`] (before the upgrade) creates
//! a workspace, loads the model, stores the marker and the files, pauses, and writes a
//! [`GateState`]; [`verify`] (after the upgrade, possibly in another process on another
//! machine) resumes from that state alone and decides. The state file is the only hand-off
//! and holds no secret: the Jupyter token stays in the namespace's Secret, the nonce is sealed.
//!
//! Also the pieces the suite's kernel steps share with the gate: the session budgets from the
//! config, the model by name, and a Jupyter client for a workspace's pod.

mod prepare;
mod state;
mod verify;

use std::time::Duration;

pub use prepare::{PrepareOptions, prepare};
pub use state::{GateState, SCHEMA, StateError};
pub use verify::{GateOutcome, GateVerdict, VerifyOptions, read_token, verify};

use crate::config::Config;
use crate::platform::pause::PauseError;
use crate::platform::wait::WaitError;
use crate::platform::workspace::{self as ws, WorkspaceError};
use crate::session::protocol::Budgets;
use crate::session::{Auth, Budget, ClientOptions, JupyterClient, Model, Secret, SessionError};

/// Why a gate step could not complete (the gate's verdict is separate: [`GateVerdict`]).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Wait(Box<WaitError>),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("cannot {what}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The cluster no longer holds what the state file describes.
    #[error("{0}")]
    Gone(String),
    /// A budget ran out outside a watch (starting a kernel).
    #[error("budget `{budget}` ({limit:?}) ran out {what}")]
    Budget {
        budget: &'static str,
        limit: Duration,
        what: String,
    },
    /// A config value the gate needs is missing.
    #[error("{0}")]
    Config(String),
    /// The watch over the workspace's pods during the resume could not start.
    #[error("cannot watch the workspace's pods: {0}")]
    PodWatch(String),
    /// The pause before the upgrade left no Ready snapshot: the platform failed already.
    #[error("{0}")]
    NoSnapshot(String),
}

impl From<WaitError> for GateError {
    fn from(e: WaitError) -> Self {
        GateError::Wait(Box::new(e))
    }
}

/// A pause whose checkpoint failed left no snapshot: the platform failed already.
impl From<PauseError> for GateError {
    fn from(e: PauseError) -> Self {
        match e {
            PauseError::Wait(e) => GateError::Wait(Box::new(e)),
            e @ PauseError::CheckpointFailed { .. } => GateError::NoSnapshot(e.to_string()),
        }
    }
}

impl GateError {
    pub fn exit_code(&self) -> i32 {
        use crate::exit_code::*;
        match self {
            GateError::Wait(_) | GateError::Budget { .. } => BUDGET,
            GateError::Session(e) => e.exit_code(),
            GateError::State(_) | GateError::Config(_) => USAGE,
            GateError::NoSnapshot(_) => FAILED,
            GateError::Workspace(_)
            | GateError::Api { .. }
            | GateError::Gone(_)
            | GateError::PodWatch(_) => TARGET,
        }
    }
}

/// The named budget `name` from the config.
pub fn budget(cfg: &Config, name: &str) -> Result<Duration, GateError> {
    cfg.budgets
        .named()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| b.duration())
        .ok_or_else(|| GateError::Config(format!("unknown budget {name:?}")))
}

/// The session budgets (kernel reachable, cell, model load) from the config.
pub fn session_budgets(cfg: &Config) -> Result<Budgets, GateError> {
    Ok(Budgets {
        connect: Budget::new("kernel_reachable", budget(cfg, "kernel_reachable")?),
        cell: Budget::new("cell", budget(cfg, "cell")?),
        model: Budget::new("model_load", budget(cfg, "model_load")?),
    })
}

/// The model `workspace.model` names.
pub fn model(cfg: &Config) -> Model {
    match cfg.workspace.model.as_str() {
        "qwen2.5-3b-t4" => Model::Qwen25_3bT4,
        _ => Model::SimTiny,
    }
}

/// Prints the way Jupyter is reached the first time each way is taken in this process.
fn say_route_once(route: &crate::platform::forward::Route) {
    use std::sync::Mutex;
    static SAID: Mutex<Vec<std::mem::Discriminant<crate::platform::forward::Route>>> =
        Mutex::new(Vec::new());
    let kind = std::mem::discriminant(route);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.contains(&kind) {
        said.push(kind);
        println!("session: {}", route.describe());
    }
}

/// A Jupyter client for the workspace's current (not terminating) pod, reached the way
/// `session.connect` says ([`crate::platform::forward`]).
pub async fn jupyter_for(
    client: &kube::Client,
    cfg: &Config,
    namespace: &str,
    name: &str,
    token: &Secret,
) -> Result<JupyterClient, GateError> {
    let pods = ws::pods(client, namespace, name).await?;
    let pod = pods
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .ok_or_else(|| {
            GateError::Gone(format!(
                "workspace {namespace}/{name} has no running pod to reach Jupyter on"
            ))
        })?;
    use crate::platform::forward::{self, ForwardError};
    let api_path = format!("{}api", ws::path_prefix(namespace, name));
    let probe = forward::StatusProbe { path: &api_path };
    let route = forward::route(client, cfg.session.connect, pod, ws::JUPYTER_PORT, probe)
        .await
        .map_err(|e| match e {
            ForwardError::NoAddress(_) => GateError::Gone(format!(
                "the pod of workspace {namespace}/{name} has no IP yet"
            )),
            refused @ ForwardError::Refused { .. } => {
                GateError::Config(format!("session.connect: {refused}"))
            }
            other => GateError::Gone(format!("session.connect: {other}")),
        })?;
    say_route_once(&route);
    let url = ws::jupyter_url_at(route.addr(), namespace, name);
    let options = ClientOptions {
        insecure_skip_tls_verify: cfg.target.insecure_skip_tls_verify,
        // No single REST request outlives the budget for reaching the kernel.
        request_timeout: Some(cfg.budgets.kernel_reachable.duration()),
    };
    Ok(JupyterClient::new(
        &url,
        Auth::Token(token.clone()),
        options,
    )?)
}

/// Starts a kernel, retrying while the server is still coming up, within `kernel_reachable`.
pub async fn start_kernel(jc: &JupyterClient, budgets: &Budgets) -> Result<String, GateError> {
    let limit = budgets.connect.limit;
    let started = tokio::time::timeout(limit, async {
        loop {
            match jc.start_kernel(None).await {
                Ok(k) => return Ok(k.id),
                Err(e) if e.is_transient() => {
                    // Waiting for the server to come up is a wait on Jupyter.
                    let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
                    tracing::Instrument::instrument(
                        tokio::time::sleep(Duration::from_millis(200)),
                        span,
                    )
                    .await
                }
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .map_err(|_| GateError::Budget {
        budget: "kernel_reachable",
        limit,
        what: "starting a kernel".into(),
    })?;
    Ok(started?)
}
