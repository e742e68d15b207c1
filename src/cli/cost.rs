//! The arguments of `wsgate cost` (the command itself is `crate::commands::cost`).

use std::path::PathBuf;
use std::time::Duration;

use crate::config::parse_duration;

#[derive(Debug, Clone, clap::Args)]
pub struct CostArgs {
    /// JSON reports written by `wsgate run` (reports/<run-id>/report.json)
    #[arg(required = true, value_name = "REPORT.json")]
    pub reports: Vec<PathBuf>,
    /// Hours a week the notebook is in use (of 168)
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 40.0,
        value_name = "HOURS"
    )]
    pub active_hours: f64,
    /// Pauses a week, each followed by a resume
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 5,
        value_name = "N"
    )]
    pub pauses_per_week: u32,
    /// Measured idle periods for the break-even, comma-separated (e.g. 30s,8m,1h30m,14h)
    #[arg(long, value_delimiter = ',', value_name = "DURATIONS", value_parser = parse_duration,
        allow_hyphen_values = true)]
    pub idle_periods: Vec<Duration>,
    /// GPU nodes are dedicated to the workspace (otherwise reclaimed hours are an upper bound)
    #[arg(long)]
    pub dedicated_nodes: bool,
    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,
}
