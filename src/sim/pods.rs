//! The processes behind simulated pods. With the `jupyter` runtime every running workspace
//! pod is a real `jupyter lab` over the workspace's home directory, listening on the
//! pod's own loopback IP; with `none` a pod is Ready with no process. A checkpoint freezes
//! the whole process tree and keeps it as the snapshot's memory image; a restore thaws that
//! image into the new pod; a cold start starts a fresh server on the same home directory.
//! Dropping the registry kills every process it holds, frozen ones included.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::profile::RuntimeKind;
use super::runtime::codeserver::{CodeServerOptions, CodeServerProcess};
use super::runtime::freeze::{self, Pid};
use super::runtime::jupyter::{JupyterOptions, JupyterProcess, ServerAuth};
use super::runtime::venv::{self, VenvPaths};

/// What a started pod reports.
#[derive(Debug, Clone, Default)]
pub struct Started {
    /// `status.podIP`.
    pub pod_ip: String,
    /// Where the harness reaches the server (`http://<ip>:8888<prefix>`), if any.
    pub url: Option<String>,
    /// The server's process id (ground truth for tests).
    pub pid: Option<u32>,
}

/// A snapshot's memory image.
#[derive(Debug, Clone, Copy)]
pub struct Image {
    pub resident_bytes: u64,
}

/// What a workspace pod's image runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Program {
    /// JupyterLab, as Kubeflow's notebook images start it.
    #[default]
    JupyterLab,
    /// code-server, as Kubeflow's codeserver images start it (the stand-in of
    /// [`super::runtime::codeserver`]).
    CodeServer,
}

/// How to start a workspace pod's server. Its `Debug` names the environment's variables
/// and the token's presence, never their values (they can come from Secrets).
#[derive(Clone)]
pub struct JupyterSpec {
    /// What runs: JupyterLab or code-server.
    pub program: Program,
    /// The container's environment from its spec (code-server gets it; `XDG_DATA_HOME`
    /// decides where its settings live).
    pub env: Vec<(String, String)>,
    /// The home directory (the PVC) the server serves and kernels start in.
    pub home: PathBuf,
    /// The path prefix, e.g. `/workspace/connect/<ns>/<ws>/jupyterlab/`.
    pub base_url: String,
    /// The token from the pod's `JUPYTER_TOKEN` (None: a random one nobody knows).
    pub token: Option<String>,
    pub port: u16,
    /// Files the pod mounts under `/etc/jupyter/` from ConfigMaps (file name, content), read
    /// from the store when the pod starts: the snapshot add-on's IPC kernel config.
    pub etc_jupyter: Vec<(String, String)>,
    /// The pod's IP when its container is restarted (a restart keeps the pod's address);
    /// `None` for a first start, which allocates one.
    pub pod_ip: Option<String>,
}

impl std::fmt::Debug for JupyterSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JupyterSpec")
            .field("program", &self.program)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("home", &self.home)
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("port", &self.port)
            .field("etc_jupyter", &self.etc_jupyter.len())
            .field("pod_ip", &self.pod_ip)
            .finish()
    }
}

/// Why a pod's process could not be started, checkpointed or restored.
#[derive(Debug, thiserror::Error)]
pub enum PodProcessError {
    #[error("no running process for pod {0}")]
    NoProcess(String),
    #[error("no memory image for snapshot {0} (never taken, already restored, or deleted)")]
    NoImage(String),
    #[error("the Jupyter runtime is unavailable: {0}")]
    Runtime(String),
}

/// A start in progress or finished.
#[derive(Debug, Clone)]
pub enum StartState {
    Starting,
    Ready(Started),
    Failed(String),
}

/// A pod's server process.
#[derive(Debug)]
enum Server {
    Jupyter(Box<JupyterProcess>),
    CodeServer(CodeServerProcess),
}

impl Server {
    fn pid(&self) -> Pid {
        match self {
            Server::Jupyter(p) => p.pid(),
            Server::CodeServer(p) => p.pid(),
        }
    }

    fn freeze(&self) -> Result<(), String> {
        match self {
            Server::Jupyter(p) => p.freeze().map(drop).map_err(|e| e.to_string()),
            Server::CodeServer(p) => p.freeze().map_err(|e| format!("code-server: {e}")),
        }
    }

    fn thaw(&self) -> Result<(), String> {
        match self {
            Server::Jupyter(p) => p.thaw().map_err(|e| e.to_string()),
            Server::CodeServer(p) => p.thaw().map_err(|e| format!("code-server: {e}")),
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        match self {
            Server::Jupyter(p) => p.exited(),
            Server::CodeServer(p) => p.exited(),
        }
    }
}

struct Running {
    started: Started,
    process: Option<Server>,
}

struct Frozen {
    image: Image,
    started: Started,
    process: Option<Server>,
}

#[derive(Default)]
struct Inner {
    running: HashMap<String, Running>,
    starting: HashMap<String, StartState>,
    images: HashMap<String, Frozen>,
}

/// The registry of pod processes and snapshot images.
pub struct PodProcesses {
    /// Where home directories (the PVCs) live: `<root>/<namespace>/<pvc>`.
    pub volumes_root: PathBuf,
    runtime: RuntimeKind,
    auth: ServerAuth,
    /// Set once the tokenless notice has been printed.
    told_tokenless: std::sync::atomic::AtomicBool,
    venv: tokio::sync::OnceCell<Result<VenvPaths, String>>,
    /// Set by [`Self::kill_all`]: no process starts after it.
    closed: std::sync::atomic::AtomicBool,
    inner: Arc<Mutex<Inner>>,
    next_ip: Mutex<u32>,
    /// Profile `runtime.pod_network = "isolated"`: pods report addresses the harness cannot
    /// reach ([`Self::reported_ip`]).
    isolated: bool,
}

/// The resident memory of a process and its descendants, from /proc.
pub fn tree_resident_bytes(root: Pid) -> u64 {
    let mut pids = vec![root];
    pids.extend(freeze::descendants(root).unwrap_or_default());
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .sum()
}

/// Workspace annotation: `jupyter` runs this workspace's pods as real Jupyter servers even
/// under the `none` runtime (a drill's kernel-checked sample).
pub const RUNTIME_ANNOTATION: &str = "sim.wsgate.dev/runtime";

/// What the simulator says once when it starts its first tokenless server.
pub const TOKENLESS_NOTICE: &str = "simulator: workspace Jupyter servers run without a token or password, as in Kubeflow's notebook images; any local user on this machine can reach them while the run lasts (set jupyter_auth = \"token\" under [runtime] in the simulator profile to require a token)";

/// The nominal resident memory of a pod with no process (`none` runtime).
pub const NOMINAL_RESIDENT_BYTES: u64 = 512 << 20;

impl PodProcesses {
    pub fn new(volumes_root: PathBuf, runtime: RuntimeKind) -> Self {
        Self {
            volumes_root,
            runtime,
            auth: ServerAuth::default(),
            told_tokenless: std::sync::atomic::AtomicBool::new(false),
            venv: tokio::sync::OnceCell::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
            inner: Arc::new(Mutex::new(Inner::default())),
            // A random start, so that simulators running side by side (parallel tests)
            // hand out different pod IPs and their servers can all bind port 8888.
            next_ip: Mutex::new({
                use rand::RngExt;
                rand::rng().random_range(2..0xF000)
            }),
            isolated: false,
        }
    }

    pub fn runtime(&self) -> RuntimeKind {
        self.runtime
    }

    /// Profile `runtime.pod_network`: with `isolated` the pods' addresses in their status
    /// are not reachable from the harness, as from a CI runner outside the cluster.
    pub fn with_pod_network(mut self, network: crate::sim::profile::PodNetwork) -> Self {
        self.isolated = network == crate::sim::profile::PodNetwork::Isolated;
        self
    }

    /// The address a pod's status carries for a server listening on `real`: the same, or
    /// with an isolated pod network `198.18.x.y` for `127.1.x.y` (RFC 2544's benchmarking
    /// range, never routed, so nothing else answers there).
    pub fn reported_ip(&self, real: &str) -> String {
        match real.strip_prefix("127.1.") {
            Some(rest) if self.isolated => format!("198.18.{rest}"),
            _ => real.to_string(),
        }
    }

    /// Where the simulated platform itself (kubelet, port-forward, activity probes) reaches
    /// a pod whose status says `reported`: inside the cluster network the pod is reachable.
    pub fn reachable_ip(&self, reported: &str) -> String {
        match reported.strip_prefix("198.18.") {
            Some(rest) => format!("127.1.{rest}"),
            None => reported.to_string(),
        }
    }

    /// Sets how the pods' Jupyter servers authenticate (profile `runtime.jupyter_auth`).
    pub fn with_auth(mut self, auth: ServerAuth) -> Self {
        self.auth = auth;
        self
    }

    /// Says once, on stderr, that this simulator's servers take requests without a token.
    fn tell_tokenless(&self) {
        use std::sync::atomic::Ordering;
        if self.auth == ServerAuth::None && !self.told_tokenless.swap(true, Ordering::SeqCst) {
            crate::say_err!("{TOKENLESS_NOTICE}");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh loopback address for a pod (127.0.x.y).
    pub fn allocate_ip(&self) -> String {
        let mut n = self.next_ip.lock().unwrap_or_else(|e| e.into_inner());
        let ip = *n;
        *n = if ip >= 0xFEFE { 2 } else { ip + 1 };
        format!(
            "127.{}.{}.{}",
            1 + (ip >> 16),
            (ip >> 8) & 0xFF,
            (ip & 0xFF).max(1)
        )
    }

    /// The home directory of a PVC.
    pub fn volume_dir(&self, namespace: &str, pvc: &str) -> PathBuf {
        self.volumes_root.join(namespace).join(pvc)
    }

    /// Starts a pod with no process.
    pub fn start_none(&self, pod_uid: &str) -> Started {
        let started = Started {
            pod_ip: self.allocate_ip(),
            ..Default::default()
        };
        self.lock().running.insert(
            pod_uid.to_string(),
            Running {
                started: started.clone(),
                process: None,
            },
        );
        started
    }

    async fn venv(&self) -> Result<VenvPaths, String> {
        self.venv
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || venv::ensure_venv().map_err(|e| format!("{e}")))
                    .await
                    .unwrap_or_else(|e| Err(format!("venv setup panicked: {e}")))
            })
            .await
            .clone()
    }

    /// Begins a cold start of a Jupyter pod in the background; poll with [`Self::poll_start`].
    /// Under the `none` runtime the pod gets no process unless `force_jupyter` (its Workspace
    /// carries [`RUNTIME_ANNOTATION`] `jupyter`: the sampled workspaces of a large drill).
    pub fn begin_jupyter(self: &Arc<Self>, pod_uid: &str, spec: JupyterSpec, force_jupyter: bool) {
        if self.is_closed() {
            return;
        }
        if self.runtime == RuntimeKind::None && !force_jupyter {
            let started = self.start_none(pod_uid);
            self.lock()
                .starting
                .insert(pod_uid.to_string(), StartState::Ready(started));
            return;
        }
        {
            let mut inner = self.lock();
            if inner.starting.contains_key(pod_uid) || inner.running.contains_key(pod_uid) {
                return;
            }
            inner
                .starting
                .insert(pod_uid.to_string(), StartState::Starting);
        }
        let this = self.clone();
        let uid = pod_uid.to_string();
        tokio::spawn(async move {
            let state = match this.start_jupyter(&uid, spec).await {
                Ok(s) => StartState::Ready(s),
                Err(e) => StartState::Failed(e),
            };
            this.lock().starting.insert(uid, state);
        });
    }

    async fn start_jupyter(&self, pod_uid: &str, spec: JupyterSpec) -> Result<Started, String> {
        let venv = self.venv().await?;
        std::fs::create_dir_all(&spec.home)
            .map_err(|e| format!("cannot create {}: {e}", spec.home.display()))?;
        let ip = spec.pod_ip.clone().unwrap_or_else(|| self.allocate_ip());
        if spec.program == Program::CodeServer {
            let options = CodeServerOptions {
                home: spec.home.clone(),
                ip: ip.clone(),
                port: spec.port,
                env: spec.env.clone(),
            };
            let mut process =
                CodeServerProcess::spawn(&venv, &options).map_err(|e| e.to_string())?;
            match tokio::time::timeout(Duration::from_secs(60), process.wait_ready()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("code-server did not answer within 60 s".into()),
            }
            let started = Started {
                pod_ip: ip,
                url: Some(process.url().to_string()),
                pid: Some(process.pid() as u32),
            };
            return self.keep_started(pod_uid, started, Server::CodeServer(process));
        }
        self.tell_tokenless();
        let options = JupyterOptions {
            ip: Some(ip.clone()),
            port: Some(spec.port),
            auth: self.auth,
            token: spec.token.clone(),
            base_url: spec.base_url.clone(),
            home: Some(spec.home.clone()),
            etc_jupyter: spec.etc_jupyter.clone(),
            ..JupyterOptions::new(&spec.home)
        };
        let mut process = JupyterProcess::spawn(&venv, options).map_err(|e| e.to_string())?;
        match tokio::time::timeout(Duration::from_secs(120), process.wait_ready()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("jupyter lab did not answer within 120 s".into()),
        }
        let started = Started {
            pod_ip: ip,
            url: Some(process.url().to_string()),
            pid: Some(process.pid() as u32),
        };
        self.keep_started(pod_uid, started, Server::Jupyter(Box::new(process)))
    }

    /// Keeps a started server as the pod's, unless the simulator stopped or the pod was
    /// deleted while it started (then the server is killed).
    fn keep_started(
        &self,
        pod_uid: &str,
        started: Started,
        process: Server,
    ) -> Result<Started, String> {
        let mut inner = self.lock();
        if self.is_closed() {
            drop(inner);
            drop(process);
            return Err("the simulator stopped".into());
        }
        if !inner.starting.contains_key(pod_uid) {
            // The pod was deleted while its server started ([`Self::stop`]).
            drop(inner);
            drop(process);
            return Err("the pod was deleted while its server started".into());
        }
        inner.running.insert(
            pod_uid.to_string(),
            Running {
                started: started.clone(),
                process: Some(process),
            },
        );
        Ok(started)
    }

    /// The state of a start begun with [`Self::begin_jupyter`].
    pub fn poll_start(&self, pod_uid: &str) -> Option<StartState> {
        let mut inner = self.lock();
        match inner.starting.get(pod_uid) {
            Some(StartState::Starting) => Some(StartState::Starting),
            Some(_) => inner.starting.remove(pod_uid),
            None => None,
        }
    }

    /// The resident memory a checkpoint of this pod would write.
    pub fn resident_bytes(&self, pod_uid: &str) -> u64 {
        let inner = self.lock();
        match inner.running.get(pod_uid).and_then(|r| r.process.as_ref()) {
            Some(p) => tree_resident_bytes(p.pid()),
            None => NOMINAL_RESIDENT_BYTES,
        }
    }

    /// Checkpoints a pod: its process tree is frozen and becomes the image of `snapshot_uid`.
    pub fn checkpoint(
        &self,
        pod_uid: &str,
        snapshot_uid: &str,
        resident_bytes: u64,
    ) -> Result<Image, PodProcessError> {
        let mut inner = self.lock();
        let running = inner
            .running
            .remove(pod_uid)
            .ok_or_else(|| PodProcessError::NoProcess(pod_uid.to_string()))?;
        if let Some(p) = &running.process
            && let Err(e) = p.freeze()
        {
            return Err(PodProcessError::Runtime(e));
        }
        let image = Image { resident_bytes };
        inner.images.insert(
            snapshot_uid.to_string(),
            Frozen {
                image,
                started: running.started,
                process: running.process,
            },
        );
        Ok(image)
    }

    /// Restores the image of `snapshot_uid` into a new pod: the frozen process is thawed and
    /// belongs to the new pod. An image restores once.
    pub fn restore(&self, snapshot_uid: &str, pod_uid: &str) -> Result<Started, PodProcessError> {
        let mut inner = self.lock();
        let frozen = inner
            .images
            .get_mut(snapshot_uid)
            .filter(|f| f.process.is_some() || self.runtime == RuntimeKind::None)
            .ok_or_else(|| PodProcessError::NoImage(snapshot_uid.to_string()))?;
        let process = frozen.process.take();
        let mut started = frozen.started.clone();
        if let Some(p) = &process {
            p.thaw().map_err(PodProcessError::Runtime)?;
            started.pid = Some(p.pid() as u32);
        } else {
            started.pod_ip = self.allocate_ip();
        }
        inner.running.insert(
            pod_uid.to_string(),
            Running {
                started: started.clone(),
                process,
            },
        );
        Ok(started)
    }

    /// Whether a snapshot still has a memory image that can be restored.
    pub fn has_image(&self, snapshot_uid: &str) -> bool {
        self.lock()
            .images
            .get(snapshot_uid)
            .is_some_and(|f| f.process.is_some() || self.runtime == RuntimeKind::None)
    }

    /// The size of a snapshot's image.
    pub fn image(&self, snapshot_uid: &str) -> Option<Image> {
        self.lock().images.get(snapshot_uid).map(|f| f.image)
    }

    /// Drops a snapshot's image (the snapshot was deleted); a frozen process is killed.
    pub fn drop_image(&self, snapshot_uid: &str) {
        let removed = self.lock().images.remove(snapshot_uid);
        drop(removed);
    }

    /// Stops a pod's process, if it still has one (a frozen one belongs to its image).
    pub fn stop(&self, pod_uid: &str) {
        let removed = {
            let mut inner = self.lock();
            inner.starting.remove(pod_uid);
            inner.running.remove(pod_uid)
        };
        drop(removed);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Kills every pod process, running or frozen in a snapshot image, and refuses any
    /// start from now on (the simulator is stopping). Returns how many servers were killed.
    pub fn kill_all(&self) -> usize {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let (running, images) = {
            let mut inner = self.lock();
            inner.starting.clear();
            (
                std::mem::take(&mut inner.running),
                std::mem::take(&mut inner.images),
            )
        };
        let killed = running.values().filter(|r| r.process.is_some()).count()
            + images.values().filter(|f| f.process.is_some()).count();
        // Dropping a server's process handle kills its whole process group.
        drop(running);
        drop(images);
        killed
    }

    /// Fault `kernel-dies`: kills the server's kernels (its descendants), not the server.
    pub fn kill_kernels(&self, pod_uid: &str) -> usize {
        let inner = self.lock();
        let Some(Server::Jupyter(p)) = inner.running.get(pod_uid).and_then(|r| r.process.as_ref())
        else {
            return 0;
        };
        let kids = freeze::descendants(p.pid()).unwrap_or_default();
        for pid in &kids {
            // SAFETY: kill(2) has no memory-safety preconditions; the pid is a descendant
            // of a server this registry started.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        kids.len()
    }

    /// The pods (by uid) whose server exited on its own since the last call, with the exit
    /// status; they no longer count as running (a kubelet would restart the container).
    pub fn reap_exited(&self) -> Vec<(String, std::process::ExitStatus)> {
        let mut inner = self.lock();
        let exited: Vec<(String, std::process::ExitStatus)> = inner
            .running
            .iter_mut()
            .filter_map(|(uid, r)| Some((uid.clone(), r.process.as_mut()?.exited()?)))
            .collect();
        for (uid, _) in &exited {
            inner.running.remove(uid);
        }
        exited
    }

    /// The start info of a running pod.
    pub fn running(&self, pod_uid: &str) -> Option<Started> {
        self.lock().running.get(pod_uid).map(|r| r.started.clone())
    }
}
