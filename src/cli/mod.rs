//! Command-line definitions (clap). Parsing only: `main.rs` maps each command to the code
//! that runs it and every error to an exit code (see [`crate::exit_code`]).

pub mod cost;
pub mod doctor;
pub mod drill;
pub mod gate;
pub mod janitor;
pub mod probe;
pub mod report;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::Override;

/// Release gate and resilience harness for GPU notebook workspaces on Kubernetes.
///
/// With no target named, commands run against the embedded simulator (a Kubernetes API
/// server with simulated GKE Workspaces and real Jupyter kernels). A real cluster is used
/// only when named with `--target cluster`.
#[derive(Debug, Parser)]
#[command(name = "wsgate", version, propagate_version = true)]
#[command(after_help = crate::cli::EXIT_CODES_HELP)]
pub struct Cli {
    /// Log filter (tracing syntax, e.g. `info`, `wsgate=debug`); also WSGATE_LOG.
    #[arg(long, global = true, env = "WSGATE_LOG", default_value = "warn")]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

/// Appended to `--help`: the exit code table.
pub const EXIT_CODES_HELP: &str = "Exit codes: 0 passed; 1 failed; 2 usage or config error; 3 target unreachable or \
prerequisite missing; 4 cleanup leak; 10 FreshSession; 11 FilesLost; 12 Inconclusive; \
13 budget exhausted; 70 internal error; 130 interrupted.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the verification suite (default target: the embedded simulator)
    Run(RunArgs),
    /// Run the embedded simulator on its own and write a kubeconfig for kubectl
    Sim(SimArgs),
    /// Mark a Jupyter kernel's process and later check whether it came back
    Probe(ProbeArgs),
    /// Release gate across an upgrade: prepare before it, verify after it
    Gate(gate::GateArgs),
    /// Capacity-contention drill: N paused workspaces resume on M < N GPUs
    Drill(drill::DrillArgs),
    /// Workspaces in plain words: ready, paused, waiting for a GPU, restoring, error
    Status(StatusArgs),
    /// Check a target's prerequisites (CRDs, add-on, GPU pool, RBAC) and print fixes
    Doctor(doctor::DoctorArgs),
    /// Remove objects that earlier wsgate runs left behind (expired or by run id)
    Janitor(janitor::JanitorArgs),
    /// GPU-hour accounting and idle-threshold break-even from JSON reports
    Cost(cost::CostArgs),
    /// Re-render Markdown and HTML from a JSON report, or compare two reports
    Report(report::ReportArgs),
}

impl Command {
    /// The subcommand's name as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Run(_) => "run",
            Command::Sim(_) => "sim",
            Command::Probe(_) => "probe",
            Command::Gate(_) => "gate",
            Command::Drill(_) => "drill",
            Command::Status(_) => "status",
            Command::Doctor(_) => "doctor",
            Command::Janitor(_) => "janitor",
            Command::Cost(_) => "cost",
            Command::Report(_) => "report",
        }
    }
}

/// Where a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TargetKindArg {
    /// The embedded simulator, started in-process on a loopback port.
    Sim,
    /// A real cluster, from --kubeconfig/--context or kube's usual inference.
    Cluster,
}

/// The target flags every command that talks to a cluster takes.
#[derive(Debug, Clone, Default, Args)]
pub struct TargetArgs {
    /// The target: `sim` (default, the embedded simulator) or `cluster`
    #[arg(long, value_enum)]
    pub target: Option<TargetKindArg>,
    /// Kubeconfig file for a cluster target (default: KUBECONFIG, then ~/.kube/config, then in-cluster)
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for a cluster target (never defaults to your current context silently: see --help)
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Test namespace (must carry the label wsgate.dev/test-namespace=true for destructive steps)
    #[arg(short = 'n', long, value_name = "NAME")]
    pub namespace: Option<String>,
}

impl TargetArgs {
    /// The flags as config overrides (the last layer).
    pub fn overrides(&self) -> Vec<Override> {
        let mut out = Vec::new();
        if let Some(t) = self.target {
            let v = match t {
                TargetKindArg::Sim => "sim",
                TargetKindArg::Cluster => "cluster",
            };
            out.push(Override::new("target.kind", v, "--target"));
        }
        if let Some(p) = &self.kubeconfig {
            out.push(Override::new(
                "target.kubeconfig",
                p.display().to_string(),
                "--kubeconfig",
            ));
        }
        if let Some(c) = &self.context {
            out.push(Override::new("target.context", c.clone(), "--context"));
        }
        if let Some(n) = &self.namespace {
            out.push(Override::new("target.namespace", n.clone(), "--namespace"));
        }
        out
    }
}

/// What to keep in the cluster after a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeepArg {
    Never,
    Failed,
    Always,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Profile layered over the embedded defaults: a shipped name (nightly, release-gate,
    /// capacity-drill, gke-t4, sim-default) or a TOML file
    #[arg(long, value_name = "NAME|FILE", env = "WSGATE_PROFILE")]
    pub profile: Option<PathBuf>,
    /// Run the .feature files under DIR (or the one file) instead of the shipped features
    #[arg(long, value_name = "DIR")]
    pub features: Option<PathBuf>,
    /// Cucumber tag expression, e.g. '@nightly and not @slow'
    #[arg(long, value_name = "EXPR")]
    pub tags: Option<String>,
    /// Run only scenarios whose name matches this regex
    #[arg(long, value_name = "REGEX")]
    pub name: Option<String>,
    /// Scenarios run at once
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// Stop at the first failed scenario
    #[arg(long)]
    pub fail_fast: bool,
    /// What to leave in the cluster after a scenario
    #[arg(long, value_enum)]
    pub keep: Option<KeepArg>,
    /// Where reports go (a run writes reports/<run-id>/)
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
    /// Set any config key, e.g. --set budgets.resume_to_running=90 (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the resolved configuration and plan; touch nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// Loopback port to listen on (0 picks a free one)
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = port)]
    pub port: u16,
    /// Where to write the kubeconfig for kubectl and kube-rs
    #[arg(
        long,
        value_name = "PATH",
        default_value = "reports/sim-kubeconfig.yaml"
    )]
    pub kubeconfig: PathBuf,
    /// The simulated cluster: a shipped simulator profile by name (default, api-trouble,
    /// field-restore-lag) or a TOML file like fixtures/sim/default.toml
    #[arg(long, value_name = "NAME|PATH")]
    pub sim_profile: Option<PathBuf>,
    /// Seeds the profile's drawn delays (a calibrated profile's distributions)
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,
    /// Only install the Jupyter runtime (the Python venv in ~/.cache/wsgate/) and exit
    #[arg(long)]
    pub prepare_runtime: bool,
}

/// What `wsgate sim` does besides serving.
#[derive(Debug, Clone, Subcommand)]
pub enum SimCommand {
    /// Derive a simulator profile from a real cluster's JSON reports: its timings as
    /// distributions, checkpoint time fitted against resident memory
    Calibrate(CalibrateArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// JSON reports of `wsgate run` against the cluster (reports/<run-id>/report.json)
    #[arg(value_name = "REPORT.json", required = true)]
    pub reports: Vec<PathBuf>,
    /// Where to write the profile (a file this command wrote before is overwritten; any
    /// other existing file is refused)
    #[arg(long, value_name = "PROFILE.toml")]
    pub out: PathBuf,
    /// The profile whose node pools, storage, faults and add-on settings the calibrated one
    /// keeps: a shipped name or a TOML file
    #[arg(long, value_name = "NAME|PATH", default_value = "default")]
    pub base: PathBuf,
    /// Take reports of simulator runs too (for tests of calibration itself)
    #[arg(long)]
    pub allow_simulated: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub command: probe::ProbeCommand,
}

#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: TargetArgs,
}

/// A `--port`: a whole number from 0 to 65535, said so when it is not.
fn port(text: &str) -> Result<u16, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text} is not a port: a whole number from 0 to 65535"))
}

/// A count (`--workspaces`, `--sample`): a whole number from 0 up, said so when it is not.
pub(crate) fn count(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text} is not a whole number from 0 up"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed_and_every_subcommand_has_one_line_help() {
        Cli::command().debug_assert();
        for sub in Cli::command().get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(
                !about.is_empty() && !about.contains('\n'),
                "{}",
                sub.get_name()
            );
        }
    }

    #[test]
    fn target_flags_become_overrides() {
        let cli = Cli::try_parse_from([
            "wsgate",
            "run",
            "--target",
            "cluster",
            "--context",
            "gke",
            "-n",
            "team-a",
            "--dry-run",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("run")
        };
        let keys: Vec<_> = run
            .target
            .overrides()
            .into_iter()
            .map(|o| (o.key, o.value))
            .collect();
        assert_eq!(
            keys,
            [
                ("target.kind".to_string(), "cluster".to_string()),
                ("target.context".to_string(), "gke".to_string()),
                ("target.namespace".to_string(), "team-a".to_string())
            ]
        );
        assert!(run.dry_run);
    }
}
