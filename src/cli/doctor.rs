//! The arguments of `wsgate doctor` (the command itself is `crate::commands::doctor`).

use std::path::PathBuf;

use clap::Args;

use super::TargetArgs;

#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Profile file layered over the embedded defaults (the WorkspaceKind and options to check)
    #[arg(long, value_name = "FILE", env = "WSGATE_PROFILE")]
    pub profile: Option<PathBuf>,
    /// Override one config key, e.g. --set workspace.kind=NAME (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the checks as JSON
    #[arg(long)]
    pub json: bool,
}
