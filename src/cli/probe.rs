//! The arguments of `wsgate probe mark|check` (the command is `commands/probe.rs`).

use std::path::PathBuf;
use std::time::Duration;

use crate::config::parse_duration;
use crate::session::{AuthScheme, Model, Secret};

pub(crate) const EXIT_CODES: &str = "Exit codes: 0 Restored (mark: marker stored); 10 FreshSession; \
11 FilesLost; 12 Inconclusive; 1 kernel died, channel closed or a cell raised; 2 bad flags or \
state file; 3 server unreachable, credentials refused, no such kernel or a Python module \
missing; 13 a budget ran out; 70 a wsgate bug.";

/// `wsgate probe ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ProbeCommand {
    /// Store a marker in a kernel and write the evidence to the state file.
    #[command(after_help = EXIT_CODES)]
    Mark(ProbeArgs),
    /// Collect the evidence again and print the verdict (exit code = verdict).
    #[command(after_help = EXIT_CODES)]
    Check(ProbeArgs),
}

/// Flags shared by `probe mark` and `probe check`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// The Jupyter server's base URL, e.g. https://host/workspace/connect/ns/ws/jupyterlab/
    /// (a `?token=` in it is used as the token and never stored).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// The credential (a Jupyter token, a bearer token or a cookie header; see --auth).
    #[arg(long, env = "WSGATE_JUPYTER_TOKEN", hide_env_values = true, value_name = "TOKEN",
          value_parser = parse_secret)]
    pub token: Option<Secret>,
    /// How the credential is sent.
    #[arg(long, value_enum, default_value_t = AuthScheme::Token)]
    pub auth: AuthScheme,
    /// The state file (`mark` writes it, `check` reads it). Holds no token.
    #[arg(long, value_name = "FILE")]
    pub state: PathBuf,
    /// The kernel to mark or check (mark: default, start a new one; check: default, the
    /// one in the state file).
    #[arg(long, value_name = "ID")]
    pub kernel_id: Option<String>,
    /// mark: the model the cells load.
    #[arg(long, value_enum, default_value_t = Model::SimTiny)]
    pub model: Model,
    /// mark: for qwen2.5-3b-t4, the hub id or local directory of the model.
    #[arg(long, value_name = "ID_OR_DIR")]
    pub model_source: Option<String>,
    /// The budget for each ordinary cell (e.g. 30s, 2m).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "60s", value_name = "DURATION")]
    pub cell_budget: Duration,
    /// The budget for loading, checking or recovering the model.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "10m", value_name = "DURATION")]
    pub model_budget: Duration,
    /// The budget for reaching the kernel again (retrying while the server does not answer).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "60s", value_name = "DURATION")]
    pub connect_budget: Duration,
    /// Accept any TLS certificate. Test servers only; logged loudly.
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
    /// check: print the verdict and both evidence sets as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_secret(s: &str) -> Result<Secret, std::convert::Infallible> {
    Ok(Secret::new(s))
}
