//! The arguments of `wsgate drill` (the command itself is `crate::commands::drill`).

use std::path::PathBuf;

use clap::Args;

use super::TargetArgs;

#[derive(Debug, Clone, Args)]
pub struct DrillArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// N: workspaces paused, then resumed at the same moment (at most 5000)
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "N",
        default_value_t = 6,
        value_parser = super::count
    )]
    pub workspaces: usize,
    /// M: the GPUs they compete for (fewer than N)
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "M",
        default_value_t = 2
    )]
    pub gpus: u32,
    /// How many workspaces get the full kernel check (marker, model, files)
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "K",
        default_value_t = 1,
        value_parser = super::count
    )]
    pub sample: usize,
    /// Profile file layered over the embedded defaults (budgets, workspace options)
    #[arg(long, value_name = "FILE", env = "WSGATE_PROFILE")]
    pub profile: Option<PathBuf>,
    /// Override one config key, e.g. --set budgets.drill_resume=3600 (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Where the drill writes its report (reports/<run-id>/drill.json)
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
}
