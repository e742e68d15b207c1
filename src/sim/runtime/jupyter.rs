//! One `jupyter lab` process: the simulator's stand-in for a workspace pod's container.
//!
//! It is started the way Kubeflow's example notebook images start it
//! (`components/example-notebook-servers/jupyter/s6/services.d/jupyterlab/run`): JupyterLab,
//! `--notebook-dir` and working directory the home volume, `allow_origin='*'`,
//! `allow_remote_access`, no Prometheus auth, the path prefix as `base_url`, and (with
//! [`ServerAuth::None`], the images' way) no token and no password. Tokenless, jupyter_server
//! still enforces XSRF on POST, PUT, PATCH and DELETE: a client echoes the `_xsrf` cookie.
//!
//! It runs from the simulator venv in a process group of its own (so signalling it never
//! hits the test runner), with a private runtime directory (kernel connection files and,
//! with the `ipc` transport, the kernels' sockets, kept short for the Unix socket path
//! limit; the server log; files the pod mounts under `/etc/jupyter/`, on
//! `JUPYTER_CONFIG_PATH`) and an optional `HOME` (the directory standing in for the PVC). Freezing it
//! is a checkpoint, killing it and starting another on the same root and port is a cold
//! start. Dropping a [`JupyterProcess`] kills the whole tree.

use std::fs::{self, File};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use rand::RngExt;

use super::freeze::{self, FreezeError, FrozenTree, Pid};
use super::venv::VenvPaths;

/// How a server authenticates requests (simulator profile `runtime.jupyter_auth`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerAuth {
    /// `--ServerApp.token="" --ServerApp.password=""`, as Kubeflow's images: anyone who
    /// reaches the port is in (XSRF still applies to mutating requests).
    #[default]
    None,
    /// `--IdentityProvider.token=<token>`: requests need the token.
    Token,
}

/// How to start a server.
#[derive(Debug, Clone)]
pub struct JupyterOptions {
    /// `--ServerApp.root_dir`: the directory the server serves and kernels start in.
    pub root_dir: PathBuf,
    /// The loopback address to listen on; `None` is 127.0.0.1. Simulated pods get their own
    /// 127.0.x.y so that every pod can serve on its container port.
    pub ip: Option<String>,
    /// The port; `None` picks a free one.
    pub port: Option<u16>,
    /// Whether the server checks a token.
    pub auth: ServerAuth,
    /// The token (`--IdentityProvider.token`) under [`ServerAuth::Token`]; `None` generates a
    /// random one. A tokenless server ignores it.
    pub token: Option<String>,
    /// `--ServerApp.base_url`, e.g. `/workspace/connect/<ns>/<ws>/jupyterlab/`.
    pub base_url: String,
    /// `HOME` for the server and its kernels (IPython's profile and history live there).
    pub home: Option<PathBuf>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Files a pod mounts under `/etc/jupyter/` (file name, content), e.g. the snapshot
    /// add-on's `jupyter_server_config.py`. The images find them because `/etc/jupyter` is on
    /// Jupyter's config path; here they go into a directory of the server's own, put first
    /// on `JUPYTER_CONFIG_PATH`.
    pub etc_jupyter: Vec<(String, String)>,
}

impl JupyterOptions {
    /// A server on `root_dir` with a random free port, a random token and base URL `/`.
    pub fn new(root_dir: impl Into<PathBuf>) -> Self {
        JupyterOptions {
            root_dir: root_dir.into(),
            ip: None,
            port: None,
            auth: ServerAuth::Token,
            token: None,
            base_url: "/".to_owned(),
            home: None,
            env: Vec::new(),
            etc_jupyter: Vec::new(),
        }
    }
}

/// Why a server could not be started or controlled.
#[derive(Debug, thiserror::Error)]
pub enum JupyterProcessError {
    /// No free port could be found or the runtime directory could not be made.
    #[error("cannot {action}: {source}")]
    Setup {
        action: &'static str,
        #[source]
        source: io::Error,
    },
    /// `jupyter lab` could not be spawned.
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The server exited before it answered.
    #[error(
        "jupyter lab (pid {pid}) exited with {status} before it answered; log tail:\n{log_tail}"
    )]
    Exited {
        pid: Pid,
        status: String,
        log_tail: String,
    },
    /// Freezing, thawing or killing its process tree failed.
    #[error("jupyter lab (pid {pid}): {source}")]
    Signal {
        pid: Pid,
        #[source]
        source: FreezeError,
    },
}

/// A running `jupyter lab` (see the module docs).
#[derive(Debug)]
pub struct JupyterProcess {
    child: Option<Child>,
    pid: Pid,
    port: u16,
    token: String,
    base_url: String,
    url: String,
    options: JupyterOptions,
    runtime: tempfile::TempDir,
    frozen: Mutex<Option<FrozenTree>>,
}

impl JupyterProcess {
    /// Spawns the server and waits until it answers `GET <base>/api/status`. There is no
    /// timeout inside: wrap the call in a named budget. If the future is dropped while
    /// waiting, the half-started server is killed.
    pub async fn start(
        venv: &VenvPaths,
        options: JupyterOptions,
    ) -> Result<Self, JupyterProcessError> {
        let mut process = Self::spawn(venv, options)?;
        process.wait_ready().await?;
        Ok(process)
    }

    /// Spawns the server without waiting for it to answer.
    pub fn spawn(venv: &VenvPaths, options: JupyterOptions) -> Result<Self, JupyterProcessError> {
        let port = match options.port {
            Some(port) => port,
            None => free_port().map_err(|source| JupyterProcessError::Setup {
                action: "find a free port on 127.0.0.1",
                source,
            })?,
        };
        let ip = options.ip.clone().unwrap_or_else(|| "127.0.0.1".to_owned());
        let token = options.token.clone().unwrap_or_else(random_token);
        let base_url = normalize_base_url(&options.base_url);
        let runtime = tempfile::Builder::new()
            .prefix("wsgate-jupyter-")
            .tempdir_in(short_temp_dir())
            .map_err(|source| JupyterProcessError::Setup {
                action: "create the server's runtime directory",
                source,
            })?;
        let config_dir = runtime.path().join("config");
        fs::create_dir_all(&config_dir).map_err(|source| JupyterProcessError::Setup {
            action: "create the server's config directory",
            source,
        })?;
        // The simulator's own setting, in the user's config directory: no language-server
        // autodetection. JupyterLab's jupyter-lsp would otherwise run the machine's `npm`
        // and `node` at every start (0.9 s of the 4.2 s of CPU a server start takes here),
        // for a feature no harness check touches. Kubeflow's flags and the add-on's mounted
        // /etc/jupyter config are unchanged.
        fs::write(
            config_dir.join("jupyter_server_config.json"),
            r#"{"LanguageServerManager": {"autodetect": false}}"#,
        )
        .map_err(|source| JupyterProcessError::Setup {
            action: "write the server's config",
            source,
        })?;
        let etc_jupyter = runtime.path().join("etc-jupyter");
        for (name, content) in &options.etc_jupyter {
            fs::create_dir_all(&etc_jupyter)
                .and_then(|()| fs::write(etc_jupyter.join(name), content))
                .map_err(|source| JupyterProcessError::Setup {
                    action: "write a mounted /etc/jupyter file",
                    source,
                })?;
        }
        let log = File::create(runtime.path().join("server.log")).map_err(|source| {
            JupyterProcessError::Setup {
                action: "create the server log",
                source,
            }
        })?;
        let log_err = log
            .try_clone()
            .map_err(|source| JupyterProcessError::Setup {
                action: "open the server log",
                source,
            })?;

        let mut cmd = Command::new(&venv.jupyter);
        cmd.arg("lab")
            .arg(format!("--notebook-dir={}", options.root_dir.display()))
            .arg(format!("--ip={ip}"))
            .args(["--no-browser", "--allow-root"])
            .arg(format!("--port={port}"))
            .arg("--ServerApp.port_retries=0")
            .args(auth_args(options.auth, &token))
            .arg("--ServerApp.allow_origin=*")
            .arg("--ServerApp.allow_remote_access=True")
            .arg("--ServerApp.authenticate_prometheus=False")
            .arg(format!("--ServerApp.base_url={base_url}"))
            .env("JUPYTER_RUNTIME_DIR", runtime.path())
            .env("JUPYTER_CONFIG_DIR", &config_dir)
            .env("PYDEVD_DISABLE_FILE_VALIDATION", "1")
            .env("PATH", prepend_path(&venv.bin))
            .current_dir(&options.root_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .process_group(0);
        if let Some(home) = &options.home {
            cmd.env("HOME", home);
        }
        if !options.etc_jupyter.is_empty() {
            cmd.env("JUPYTER_CONFIG_PATH", &etc_jupyter);
        }
        for (key, value) in &options.env {
            cmd.env(key, value);
        }
        let child = cmd.spawn().map_err(|source| JupyterProcessError::Spawn {
            program: venv.jupyter.clone(),
            source,
        })?;
        let pid = child.id() as Pid;
        Ok(JupyterProcess {
            child: Some(child),
            pid,
            port,
            url: format!("http://{ip}:{port}{base_url}"),
            token,
            base_url,
            options,
            runtime,
            frozen: Mutex::new(None),
        })
    }

    /// Polls `GET <base>/api/status` every 100 ms until it answers 200, or fails when the
    /// process exits. No timeout inside: the caller wraps it in a named budget.
    pub async fn wait_ready(&mut self) -> Result<(), JupyterProcessError> {
        let status_url = format!("{}api/status", self.url);
        let token = self.token.clone();
        super::poll_until_ready(
            &status_url,
            Some(&token),
            || {
                let status = self.child.as_mut()?.try_wait().ok().flatten()?;
                Some(JupyterProcessError::Exited {
                    pid: self.pid,
                    status: status.to_string(),
                    log_tail: self.log_tail(20),
                })
            },
            |e| JupyterProcessError::Setup {
                action: "build an HTTP client",
                source: io::Error::other(e),
            },
        )
        .await
    }

    /// The server's base URL, e.g. `http://127.0.0.1:8888/workspace/connect/ns/ws/jupyterlab/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's token (under [`ServerAuth::None`] one it ignores).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether the server checks its token.
    pub fn auth(&self) -> ServerAuth {
        self.options.auth
    }

    /// The server's PID (= its process group id).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The normalised base URL path (leading and trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The options it was started with; with `port` and `token` filled in, so that
    /// starting another server from them reuses the same root, port and token.
    pub fn options(&self) -> JupyterOptions {
        JupyterOptions {
            port: Some(self.port),
            token: Some(self.token.clone()),
            ..self.options.clone()
        }
    }

    /// The root directory it serves.
    pub fn root_dir(&self) -> &Path {
        &self.options.root_dir
    }

    /// `JUPYTER_RUNTIME_DIR`: kernel connection files (`kernel-<id>.json`) and the log.
    pub fn runtime_dir(&self) -> &Path {
        self.runtime.path()
    }

    /// The connection file of a kernel this server started.
    pub fn kernel_connection_file(&self, kernel_id: &str) -> PathBuf {
        self.runtime.path().join(format!("kernel-{kernel_id}.json"))
    }

    /// The last `lines` non-empty lines of the server log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(self.runtime.path().join("server.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the server and every descendant (kernels and their children). Returns the
    /// stopped PIDs, server first. Freezing a frozen server is a no-op.
    pub fn freeze(&self) -> Result<Vec<Pid>, JupyterProcessError> {
        let mut frozen = self.frozen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tree) = frozen.as_ref() {
            return Ok(tree.pids().to_vec());
        }
        let tree = freeze::freeze_tree(self.pid).map_err(|source| JupyterProcessError::Signal {
            pid: self.pid,
            source,
        })?;
        let pids = tree.pids().to_vec();
        *frozen = Some(tree);
        Ok(pids)
    }

    /// Continues what [`freeze`](Self::freeze) stopped, deepest first, the server last.
    pub fn thaw(&self) -> Result<(), JupyterProcessError> {
        let mut frozen = self.frozen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tree) = frozen.take() {
            tree.thaw().map_err(|source| JupyterProcessError::Signal {
                pid: self.pid,
                source,
            })?;
        }
        Ok(())
    }

    /// Whether the server is frozen now.
    pub fn is_frozen(&self) -> bool {
        self.frozen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The server's exit status once it has exited on its own (reaped here), else `None`.
    /// A frozen server has not exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Kills the server and every descendant with SIGKILL and reaps the server.
    pub fn kill(&mut self) -> Result<(), JupyterProcessError> {
        let result = freeze::kill_tree(self.pid).map_err(|source| JupyterProcessError::Signal {
            pid: self.pid,
            source,
        });
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Kernels run in sessions of their own; once the server has died they are no longer
        // its descendants. Each names its connection file in this server's runtime
        // directory on its command line.
        kill_by_argument(self.runtime.path());
        if let Ok(mut frozen) = self.frozen.lock() {
            *frozen = None;
        }
        result
    }
}

impl Drop for JupyterProcess {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.kill();
        }
    }
}

/// SIGKILLs every process of this user whose command line mentions `dir` (a server's
/// runtime directory: its kernels' `-f <dir>/kernel-<id>.json`).
fn kill_by_argument(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    if needle.len() < 8 {
        return;
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) {
            // SAFETY: kill(2) has no memory-safety preconditions; the process names this
            // server's private runtime directory, so it is one of its kernels.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// The flags that set the server's authentication.
fn auth_args(auth: ServerAuth, token: &str) -> Vec<String> {
    match auth {
        ServerAuth::None => vec![
            "--ServerApp.token=".to_owned(),
            "--ServerApp.password=".to_owned(),
        ],
        ServerAuth::Token => vec![format!("--IdentityProvider.token={token}")],
    }
}

/// Where runtime directories go: the system temp directory, or `/tmp` when its path is long.
/// With `c.KernelManager.transport = 'ipc'` a kernel's sockets sit beside its connection
/// file (`<runtime>/kernel-<uuid>-ipc-<port>`), and a Unix socket path has about 107 bytes.
fn short_temp_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    if tmp.as_os_str().len() <= 24 {
        tmp
    } else {
        PathBuf::from("/tmp")
    }
}

fn normalize_base_url(base: &str) -> String {
    let trimmed = base.trim_matches('/');
    if trimmed.is_empty() {
        "/".to_owned()
    } else {
        format!("/{trimmed}/")
    }
}

fn free_port() -> io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

fn random_token() -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill(&mut bytes[..]);
    hex::encode(bytes)
}

fn prepend_path(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_owned()];
    if let Some(existing) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&existing));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_normalised() {
        assert_eq!(normalize_base_url(""), "/");
        assert_eq!(normalize_base_url("/"), "/");
        assert_eq!(
            normalize_base_url("workspace/connect/ns/ws/jupyterlab"),
            "/workspace/connect/ns/ws/jupyterlab/"
        );
        assert_eq!(normalize_base_url("/a/b/"), "/a/b/");
    }

    #[test]
    fn tokenless_servers_get_the_kubeflow_image_flags() {
        assert_eq!(
            auth_args(ServerAuth::None, "t"),
            ["--ServerApp.token=", "--ServerApp.password="]
        );
        assert_eq!(
            auth_args(ServerAuth::Token, "t"),
            ["--IdentityProvider.token=t"]
        );
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (random_token(), random_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
    }
}
