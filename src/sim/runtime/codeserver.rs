//! One code-server process: the simulator's stand-in for a VS Code workspace pod's
//! container (GKE Workspaces' `codeserver` kind, Kubeflow's codeserver images).
//!
//! Upstream's image starts `code-server --bind-addr 0.0.0.0:8888 --auth none "${HOME}"`
//! after `cd "${HOME}"`; the simulator runs the same arguments through a small stdlib
//! Python server (`fixtures/sim/code_server.py`, built into the binary) that answers what
//! code-server answers where a platform or harness looks: `/healthz` with its status and
//! last heartbeat, the editor page, the heartbeat file and the user data directory
//! (`${XDG_DATA_HOME:-$HOME/.local/share}/code-server`, settings and extensions). No editor
//! runs, so no process state exists that a pause could keep or lose: the kind's promise is
//! its files. It runs in a process group of its own; dropping it kills the group.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use super::freeze::{self, FreezeError, FrozenTree, Pid};
use super::venv::VenvPaths;

/// The stand-in's source, run with the simulator venv's Python.
pub const SCRIPT: &str = include_str!("../../../fixtures/sim/code_server.py");

/// How to start one.
#[derive(Debug, Clone)]
pub struct CodeServerOptions {
    /// `HOME` and working directory: the home volume.
    pub home: PathBuf,
    /// The pod's address and container port.
    pub ip: String,
    pub port: u16,
    /// The container's environment (the kind's `extraEnv`), set after `HOME`.
    pub env: Vec<(String, String)>,
}

/// Why it could not start.
#[derive(Debug, thiserror::Error)]
pub enum CodeServerError {
    #[error("cannot {action}: {source}")]
    Setup {
        action: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "code-server (pid {pid}) exited with {status} before it answered; log tail:\n{log_tail}"
    )]
    Exited {
        pid: Pid,
        status: String,
        log_tail: String,
    },
}

/// A running code-server stand-in.
#[derive(Debug)]
pub struct CodeServerProcess {
    child: Option<Child>,
    pid: Pid,
    url: String,
    log: tempfile::NamedTempFile,
    frozen: Mutex<Option<FrozenTree>>,
}

impl CodeServerProcess {
    /// Spawns it without waiting for it to answer.
    pub fn spawn(venv: &VenvPaths, options: &CodeServerOptions) -> Result<Self, CodeServerError> {
        let log = tempfile::Builder::new()
            .prefix("wsgate-code-server-")
            .suffix(".log")
            .tempfile()
            .map_err(|source| CodeServerError::Setup {
                action: "create the code-server log",
                source,
            })?;
        let out = File::options()
            .append(true)
            .open(log.path())
            .and_then(|f| Ok((f.try_clone()?, f)))
            .map_err(|source| CodeServerError::Setup {
                action: "open the code-server log",
                source,
            })?;
        let mut cmd = Command::new(&venv.python);
        cmd.arg("-c")
            .arg(SCRIPT)
            .arg("--bind-addr")
            .arg(format!("{}:{}", options.ip, options.port))
            .args([
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                "--auth",
                "none",
            ])
            .arg(&options.home)
            .current_dir(&options.home)
            .env("HOME", &options.home)
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.0))
            .stderr(Stdio::from(out.1))
            .process_group(0);
        let child = cmd.spawn().map_err(|source| CodeServerError::Setup {
            action: "start the code-server stand-in",
            source,
        })?;
        Ok(Self {
            pid: child.id() as Pid,
            child: Some(child),
            url: format!("http://{}:{}/", options.ip, options.port),
            log,
            frozen: Mutex::new(None),
        })
    }

    /// Polls `GET /healthz` every 100 ms until it answers, or fails when the process exits.
    /// No timeout inside: the caller wraps it in a named budget.
    pub async fn wait_ready(&mut self) -> Result<(), CodeServerError> {
        let health = format!("{}healthz", self.url);
        super::poll_until_ready(
            &health,
            None,
            || {
                let status = self.exited()?;
                Some(CodeServerError::Exited {
                    pid: self.pid,
                    status: status.to_string(),
                    log_tail: self.log_tail(20),
                })
            },
            |e| CodeServerError::Setup {
                action: "build an HTTP client",
                source: io::Error::other(e),
            },
        )
        .await
    }

    /// `http://<ip>:<port>/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The last `lines` non-empty lines of its output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops its process tree (a checkpoint, where a kind snapshot-enables these pods).
    pub fn freeze(&self) -> Result<(), FreezeError> {
        let mut frozen = self.frozen.lock().unwrap_or_else(|e| e.into_inner());
        if frozen.is_none() {
            *frozen = Some(freeze::freeze_tree(self.pid)?);
        }
        Ok(())
    }

    /// Continues what [`Self::freeze`] stopped.
    pub fn thaw(&self) -> Result<(), FreezeError> {
        match self.frozen.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(tree) => tree.thaw(),
            None => Ok(()),
        }
    }

    /// Its exit status once it has exited on its own, else `None`.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }
}

impl Drop for CodeServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = freeze::kill_tree(self.pid);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
