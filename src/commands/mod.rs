//! What each subcommand does, and the one error type the binary maps to exit codes.

pub mod cost;
pub mod doctor;
pub mod drill;
pub mod gate;
pub mod janitor;
pub mod probe;
pub mod report;
pub(crate) mod run;
pub mod shell;
mod sim;
mod status;

use crate::cli::Command;
use crate::config::ConfigError;
use crate::exit_code;
use crate::platform::target::TargetError;
use crate::sim::SimError;

/// Every failure a command can end with; [`CommandError::exit_code`] is the table's only use.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("the embedded simulator failed")]
    Sim(#[from] SimError),
    #[error(transparent)]
    Probe(#[from] probe::ProbeError),
    #[error(transparent)]
    Suite(#[from] crate::bdd::SuiteError),
    #[error("the simulator profile cannot be used: {0}")]
    SimProfile(String),
    #[error("{0}")]
    Usage(String),
    #[error("the simulator's Jupyter runtime is not available")]
    Runtime(#[from] crate::sim::runtime::venv::VenvError),
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    #[error(transparent)]
    Cost(#[from] crate::cost::CostError),
    #[error(transparent)]
    Trial(Box<crate::trial::TrialError>),
    #[error(transparent)]
    GateState(#[from] crate::gate::StateError),
    #[error(transparent)]
    Options(#[from] crate::platform::options::OptionsError),
    #[error("cannot install the signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// A directory for reports that cannot be written (`flag` names where to choose another).
    #[error("{source}: choose another {flag}")]
    ReportsDir {
        #[source]
        source: crate::report::ReportError,
        flag: &'static str,
    },
    #[error("cannot {what}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::trial::TrialError> for CommandError {
    fn from(e: crate::trial::TrialError) -> Self {
        CommandError::Trial(Box::new(e))
    }
}

impl CommandError {
    /// `e` as a reports directory that cannot be written when it is one (the machine's,
    /// exit 74), as the caller's input otherwise; `flag` names where to choose another.
    pub(crate) fn writing_reports(e: crate::report::ReportError, flag: &'static str) -> Self {
        match e {
            e @ crate::report::ReportError::Io { .. } => {
                CommandError::ReportsDir { source: e, flag }
            }
            e => CommandError::Report(e),
        }
    }

    /// The process exit code for this error (see [`crate::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::Config(_)
            | CommandError::Suite(_)
            | CommandError::SimProfile(_)
            | CommandError::Usage(_)
            | CommandError::Report(_)
            | CommandError::Cost(_) => exit_code::USAGE,
            CommandError::Target(_) | CommandError::Runtime(_) => exit_code::TARGET,
            // A port in use is the caller's to change, not a bug in wsgate.
            CommandError::Sim(SimError::Bind { .. }) => exit_code::USAGE,
            // A kubeconfig path or state directory that cannot be written is the machine's
            // or the caller's, not a bug in wsgate.
            CommandError::Sim(SimError::WriteKubeconfig { .. } | SimError::StateDir(_)) => {
                exit_code::OUTPUT
            }
            CommandError::Sim(_) | CommandError::Signals(_) => exit_code::INTERNAL,
            // A temporary directory or a file that cannot be written is the machine's, not a
            // bug in wsgate.
            CommandError::Io { .. } | CommandError::ReportsDir { .. } => exit_code::OUTPUT,
            CommandError::Probe(e) => e.exit_code(),
            CommandError::Trial(e) => e.exit_code(),
            CommandError::GateState(_) => exit_code::USAGE,
            CommandError::Options(e) => e.exit_code(),
        }
    }
}

/// Resolves the configuration for a command: the embedded defaults, `profile`, the
/// environment, then the target flags, `--reports` and every `--set`, in that order.
pub(crate) fn load_config(
    target: &crate::cli::TargetArgs,
    profile: Option<&std::path::Path>,
    reports: Option<&std::path::Path>,
    set: &[String],
) -> Result<crate::config::Resolved, CommandError> {
    use crate::config::Override;
    let mut overrides = target.overrides();
    if let Some(r) = reports {
        overrides.push(Override::new(
            "reports.dir",
            r.display().to_string(),
            "--reports",
        ));
    }
    for s in set {
        overrides.push(Override::from_assignment(s, "--set")?);
    }
    Ok(crate::config::load(&crate::config::LoadRequest {
        profile: profile.map(std::path::Path::to_path_buf),
        env: crate::config::process_env()?,
        overrides,
    })?)
}

/// Runs one subcommand and returns its exit code, or the error that ended it.
pub async fn dispatch(command: Command) -> Result<i32, CommandError> {
    match command {
        Command::Run(args) => run::run(args).await,
        Command::Sim(args) => sim::sim(args).await,
        Command::Probe(args) => Ok(probe::run(&args.command).await?),
        Command::Cost(args) => cost::run(args).await,
        Command::Report(args) => report::run(args).await,
        Command::Status(args) => status::status(args.target).await,
        Command::Janitor(args) => janitor::janitor(args).await,
        Command::Gate(args) => gate::gate(args).await,
        Command::Drill(args) => drill::drill(args).await,
        Command::Doctor(args) => doctor::doctor(args).await,
    }
}

/// SIGINT and SIGTERM, caught from the moment [`Interrupts::install`] returns (a signal
/// before that ends the process, as it would without a handler).
pub struct Interrupts {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Interrupts {
    /// Installs the handlers now.
    pub fn install() -> Result<Self, CommandError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Interrupts {
            term: signal(SignalKind::terminate()).map_err(CommandError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(CommandError::Signals)?,
        })
    }

    /// Waits for the next one; returns its name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
