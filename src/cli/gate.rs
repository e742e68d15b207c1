//! The arguments of `wsgate gate` (the command itself is `crate::commands::gate`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::TargetArgs;

#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    #[command(subcommand)]
    pub command: GateCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum GateCommand {
    /// Before the upgrade: create a workspace, load the model, store the marker, pause, write the state file
    Prepare(PrepareArgs),
    /// After the upgrade: resume the workspace from the state file and decide
    Verify(VerifyArgs),
}

/// Flags both halves take.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// The state file prepare writes and verify reads (holds no secret)
    #[arg(long, value_name = "FILE")]
    pub state: PathBuf,
    /// Profile file layered over the embedded defaults (budgets, workspace options)
    #[arg(long, value_name = "FILE", env = "WSGATE_PROFILE")]
    pub profile: Option<PathBuf>,
    /// Override one config key, e.g. --set budgets.resume_to_running=600 (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Where verify writes its result (reports/<gate-run-id>/gate-verify.json)
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct PrepareArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Hours after which `wsgate janitor` may remove the prepared workspace if verify never
    /// runs (1 to 8760, a year)
    #[arg(allow_negative_numbers = true, long, value_name = "HOURS", default_value_t = 72,
          value_parser = clap::value_parser!(u32).range(1..=8760))]
    pub expires_in_hours: u32,
}

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Leave the workspace and its objects in place after deciding
    #[arg(long)]
    pub keep: bool,
    /// Fail (exit 10) when the upgrade invalidated the snapshot, instead of passing with a warning
    #[arg(long)]
    pub require_restore: bool,
}
