//! `wsgate probe`: the marker protocol by hand, against any Jupyter server.
//!
//! `probe mark` stores a marker in a kernel (one it starts, or `--kernel-id`) and writes the
//! evidence to a state file; `probe check` collects the evidence again and prints the
//! verdict with everything that decided it. The exit code of `check` is the verdict's:
//!
//! | code | meaning |
//! |------|---------|
//! | 0  | Restored (for `mark`: the marker is stored) |
//! | 10 | FreshSession |
//! | 11 | FilesLost |
//! | 12 | Inconclusive |
//! | 1  | the kernel died, the channel closed, or a cell raised |
//! | 2  | bad flags, or a missing or invalid state file |
//! | 3  | server unreachable, credentials refused (401/403), no such kernel, a Python module missing |
//! | 13 | a budget ran out (`--connect-budget`, `--cell-budget`, `--model-budget`) |
//! | 70 | a wsgate bug |

use chrono::Utc;

use crate::cli::probe::{ProbeArgs, ProbeCommand};
use crate::exit_code;
use crate::session::auth::Auth;
use crate::session::budget::Budget;
use crate::session::client::{ClientOptions, JupyterClient};
use crate::session::error::SessionError;
use crate::session::marker::Nonce;
use crate::session::probe_state::{self, ProbeState, SCHEMA};
use crate::session::protocol::{Budgets, MarkerPlan, collect_evidence, mark};
use crate::session::state_file::StateFileError;
use crate::verdict::{MarkerObservation, PlatformEvidence, decide};

/// Why a probe could not produce its answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Talking to the server or the kernel failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The state file could not be read or written.
    #[error(transparent)]
    State(#[from] StateFileError),
}

impl ProbeError {
    /// The process exit code (see the module docs).
    pub fn exit_code(&self) -> i32 {
        match self {
            ProbeError::Session(e) => e.exit_code(),
            ProbeError::State(_) => exit_code::USAGE,
        }
    }
}

/// Runs a probe command; returns the exit code (for `check`, the verdict's).
pub async fn run(cmd: &ProbeCommand) -> Result<i32, ProbeError> {
    match cmd {
        ProbeCommand::Mark(args) => run_mark(args).await,
        ProbeCommand::Check(args) => run_check(args).await,
    }
}

/// Fails fast on a wrong URL or token, and says so plainly when the URL answers but is not
/// a Jupyter server (a 404 or a page where `api/status` should be).
async fn is_jupyter(client: &JupyterClient) -> Result<(), SessionError> {
    match client.status().await {
        Ok(_) => Ok(()),
        Err(SessionError::UnexpectedStatus { status: 404, .. } | SessionError::Decode { .. }) => {
            Err(SessionError::NotJupyter {
                url: client.base_url().to_string(),
            })
        }
        Err(e) => Err(e),
    }
}

fn client_for(args: &ProbeArgs) -> Result<JupyterClient, SessionError> {
    if args.insecure_skip_tls_verify {
        crate::say_err!(
            "wsgate: WARNING: TLS certificate verification is OFF (--insecure-skip-tls-verify); \
             anyone on the path can read the token. Use this only against test servers."
        );
        tracing::warn!("TLS certificate verification disabled by --insecure-skip-tls-verify");
    }
    let auth = match &args.token {
        Some(t) => Auth::from_scheme(args.auth, t.clone()),
        None => Auth::None,
    };
    JupyterClient::new(
        &args.url,
        auth,
        ClientOptions {
            insecure_skip_tls_verify: args.insecure_skip_tls_verify,
            // --connect-budget bounds every REST request, not only the first connection.
            request_timeout: Some(args.connect_budget),
        },
    )
}

fn budgets(args: &ProbeArgs) -> Budgets {
    Budgets {
        connect: Budget::new("connect (--connect-budget)", args.connect_budget),
        cell: Budget::new("cell (--cell-budget)", args.cell_budget),
        model: Budget::new("model (--model-budget)", args.model_budget),
    }
}

async fn run_mark(args: &ProbeArgs) -> Result<i32, ProbeError> {
    let client = client_for(args)?;
    is_jupyter(&client).await?; // fails fast on a wrong URL or token
    let (kernel_id, started) = match &args.kernel_id {
        Some(id) => (client.kernel(id).await?.id, false),
        None => (client.start_kernel(None).await?.id, true),
    };
    let nonce = Nonce::generate();
    let run_id = format!(
        "{}-{}",
        Utc::now().format("%Y%m%dT%H%M%SZ"),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let mut plan = MarkerPlan::new(args.model, run_id);
    if let Some(source) = &args.model_source {
        plan.model_source = source.clone();
    }
    let before = match mark(&client, &kernel_id, &nonce, &plan, &budgets(args)).await {
        Ok(evidence) => evidence,
        Err(e) => {
            if started {
                let _ = client.delete_kernel(&kernel_id).await;
            }
            return Err(e.into());
        }
    };
    let digest = match before.kernel.as_ref().map(|k| &k.marker) {
        Some(MarkerObservation::Present { digest }) => digest.clone(),
        _ => String::new(),
    };
    let state = ProbeState {
        schema: SCHEMA.to_owned(),
        url: client.base_url().to_string(),
        kernel_id: kernel_id.clone(),
        kernel_started_by_probe: started,
        nonce: nonce.seal(),
        marker_digest: digest,
        plan,
        marked_at: Utc::now(),
        before: before.clone(),
    };
    state.write(&args.state)?;
    let k = before.kernel.as_ref();
    crate::say!(
        "marked kernel {kernel_id} at {} (pid {}, execution count {}, model {}{}); state written to {}",
        client.base_url(),
        k.map(|k| k.pid).unwrap_or_default(),
        k.map(|k| k.execution_count).unwrap_or_default(),
        state.plan.model,
        k.and_then(|k| k.model.as_ref())
            .map(|m| format!(
                ", weight hash {}",
                crate::verdict::short_hash(&m.weight_hash)
            ))
            .unwrap_or_default(),
        args.state.display()
    );
    for note in &before.notes {
        crate::say!("note: {note}");
    }
    Ok(exit_code::SUCCESS)
}

async fn run_check(args: &ProbeArgs) -> Result<i32, ProbeError> {
    let state = ProbeState::read(&args.state)?;
    let nonce = state
        .nonce
        .unseal()
        .ok_or_else(|| probe_state::KIND.invalid(&args.state, "the sealed nonce is damaged"))?;
    let client = client_for(args)?;
    is_jupyter(&client).await?; // fails fast on a wrong URL or token
    let kernel_id = args
        .kernel_id
        .clone()
        .unwrap_or_else(|| state.kernel_id.clone());
    let after = collect_evidence(
        &client,
        &kernel_id,
        &nonce,
        &state.plan,
        &budgets(args),
        Some(&state.before),
    )
    .await?;
    let verdict = decide(&state.before, &after, &PlatformEvidence::not_observed());
    if args.json {
        let doc = serde_json::json!({
            "verdict": verdict,
            "exit_code": verdict.exit_code(),
            "before": state.before,
            "after": after,
        });
        crate::say!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        crate::say!(
            "wsgate probe check: kernel {kernel_id} at {} (marked {}, model {})",
            client.base_url(),
            state.marked_at.to_rfc3339(),
            state.plan.model
        );
        crate::output::say_text(&verdict.to_string());
        for note in &after.notes {
            crate::say!("note: {note}");
        }
        crate::say!("exit code {} ({})", verdict.exit_code(), verdict.kind);
    }
    Ok(verdict.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::cells::Model;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        probe: ProbeCommand,
    }

    #[test]
    fn flags_parse_and_debug_hides_the_token() {
        let cli = Cli::try_parse_from([
            "probe",
            "check",
            "--url",
            "http://h/",
            "--token",
            "sekrit",
            "--state",
            "/tmp/s.json",
            "--cell-budget",
            "5s",
        ])
        .unwrap();
        let ProbeCommand::Check(args) = &cli.probe else {
            panic!()
        };
        assert_eq!(args.cell_budget, Duration::from_secs(5));
        assert_eq!(args.model, Model::SimTiny);
        assert!(!format!("{args:?}").contains("sekrit"));
    }
}
