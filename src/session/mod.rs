//! The Jupyter side: a Jupyter Server REST client, the kernel websocket channel, the cell
//! templates and the marker protocol that collects restore evidence.
//!
//! - [`client`]: `JupyterClient`, REST (`/api/status`, `/api/kernels`, `/api/sessions`,
//!   `/api/contents`) with token, bearer or cookie auth as headers; [`auth`] holds them.
//! - [`xsrf`]: the `_xsrf` cookie a tokenless jupyter_server wants on POST/PUT/PATCH/DELETE.
//! - [`channel`]: `KernelChannel`, the kernel websocket (messaging protocol 5.3) with
//!   budgeted `execute`; [`matcher`] matches replies by parent msg_id (pure).
//! - [`cells`]: the embedded cell templates and their safe parameter filling.
//! - [`marker`]: the nonce; [`protocol`]: `mark` and `collect_evidence`.
//! - [`probe_state`]: the state file of `wsgate probe` (the command is `commands/probe.rs`).
//!
//! The evidence types are pure data and live in `crate::verdict::evidence`; they are
//! re-exported here.

pub mod auth;
pub mod budget;
pub mod cells;
pub mod channel;
pub mod client;
pub mod error;
pub mod marker;
pub mod matcher;
pub mod models;
pub mod probe_state;
pub mod protocol;
pub mod state_file;
mod tls;
pub mod wire;
pub mod xsrf;

pub use auth::{Auth, AuthScheme, Secret};
pub use budget::Budget;
pub use cells::{Cell, CellTemplate, Model};
pub use channel::{ExecuteOptions, KernelChannel};
pub use client::{ClientOptions, JupyterClient};
pub use error::SessionError;
pub use marker::{Nonce, SealedNonce};
pub use matcher::{CellException, ExecuteOutcome, ExecuteStatus};
pub use models::{KernelModel, ServerStatus, SessionModel};
pub use protocol::{
    Budgets, MarkerPlan, Stamps, collect_evidence, collect_evidence_stamped, mark, slow_every_cell,
    start_kernel,
};

pub use crate::verdict::evidence::{
    DiskScan, Evidence, FileState, KernelEvidence, MarkerObservation, ModelEvidence, Phase,
    PlatformEvidence, ProcessStart, RecoveryEvidence, TickerEvidence,
};
