//! The arguments of `wsgate janitor` (the command itself is `crate::commands::janitor`).

use clap::Args;

use super::TargetArgs;

#[derive(Debug, Clone, Args)]
pub struct JanitorArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Remove everything of this run (default: everything whose expiry has passed)
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub run_id: Option<String>,
    /// List what would be removed; remove nothing
    #[arg(long)]
    pub dry_run: bool,
}
