//! Starting and stopping one simulator: HTTPS on loopback with a generated CA and bearer
//! token, the seeded objects, and the kubeconfig that kubectl and kube-rs accept.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use rand::RngExt;
use serde_json::json;

use std::path::PathBuf;

use super::api;
use super::bucket::Bucket;
use super::controllers::{self, Ctx};
use super::kinds;
use super::pods::PodProcesses;
use super::profile::SimProfile;
use super::store::Store;
use super::tls;
use super::truth::Truth;

pub use crate::platform::names::OPT_IN_LABEL as TEST_NAMESPACE_LABEL;
/// The namespace the simulator seeds for tests (carrying the opt-in label).
pub const TEST_NAMESPACE: &str = "wsgate-test";
/// The context name in the kubeconfig the simulator writes.
pub const CONTEXT: &str = "wsgate-sim";

/// The simulated platform on top of the API server: nodes, controllers, runtime.
#[derive(Debug, Clone)]
pub struct PlatformOptions {
    pub profile: SimProfile,
    /// Where home volumes and snapshot buckets live; `None`: a temporary directory removed
    /// when the simulator stops.
    pub state_dir: Option<PathBuf>,
    /// Seeds the streams the profile's drawn delays come from (`sim.seed`).
    pub seed: u64,
}

impl Default for PlatformOptions {
    fn default() -> Self {
        Self {
            profile: SimProfile::default_profile(),
            state_dir: None,
            seed: 0,
        }
    }
}

/// How to start a simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Loopback port; 0 picks a free one.
    pub port: u16,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// How many change events watches can resume from.
    pub history: usize,
    /// The simulated GKE Workspaces platform; `None` serves the bare API (no controllers).
    pub platform: Option<PlatformOptions>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            port: 0,
            bookmark_interval: Duration::from_secs(5),
            history: 100_000,
            platform: None,
        }
    }
}

impl SimOptions {
    /// The API server with the default simulated platform running on it.
    pub fn with_platform() -> Self {
        Self {
            platform: Some(PlatformOptions::default()),
            ..Default::default()
        }
    }

    /// The API server with the simulated platform of `profile`, its drawn delays seeded by
    /// `seed`.
    pub fn of_platform(profile: SimProfile, seed: u64) -> Self {
        Self {
            platform: Some(PlatformOptions {
                profile,
                seed,
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// Why a simulator could not start or write its kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(
        "cannot bind the simulator to 127.0.0.1:{port}: choose another --port, or 0 for a free one"
    )]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot configure TLS for the simulator")]
    TlsConfig(#[source] std::io::Error),
    #[error("cannot write the kubeconfig to {path}: choose another --kubeconfig")]
    WriteKubeconfig {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build a kube client for the simulator")]
    Client(#[source] kube::Error),
    #[error("cannot read the simulator's kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    #[error("cannot create the simulator's state directory")]
    StateDir(#[source] std::io::Error),
}

/// A running simulator. Dropping it stops the server.
pub struct SimHandle {
    addr: SocketAddr,
    token: String,
    ca_pem: String,
    store: Arc<Store>,
    server: axum_server::Handle<SocketAddr>,
    shutdown: Arc<tokio::sync::watch::Sender<bool>>,
    failure: Arc<tokio::sync::watch::Sender<Option<String>>>,
    truth: Arc<Truth>,
    audit: Arc<api::authz::Audit>,
    counters: Arc<api::FaultCounters>,
    ctx: Option<Ctx>,
    _state_dir: Option<tempfile::TempDir>,
}

fn random_token() -> String {
    let bytes: [u8; 24] = rand::rng().random();
    hex::encode(bytes)
}

/// Seeds the namespaces every simulated cluster has.
fn seed(store: &Store) {
    let ns = kinds::find("", "v1", "namespaces").expect("namespaces are served");
    for (name, labels) in [
        ("default", json!({})),
        ("kube-system", json!({})),
        (TEST_NAMESPACE, json!({TEST_NAMESPACE_LABEL: "true"})),
    ] {
        let mut labels = labels;
        labels["kubernetes.io/metadata.name"] = json!(name);
        store
            .create(
                ns,
                None,
                json!({"metadata": {"name": name, "labels": labels}}),
                false,
            )
            .expect("seeding a fresh store cannot conflict");
    }
}

impl SimHandle {
    /// Starts a simulator on 127.0.0.1 and returns once it accepts connections.
    pub async fn start(opts: SimOptions) -> Result<SimHandle, SimError> {
        crate::install_crypto_provider();
        let identity = tls::generate()?;
        let config = axum_server::tls_rustls::RustlsConfig::from_pem(
            identity.cert_pem.into_bytes(),
            identity.key_pem.into_bytes(),
        )
        .await
        .map_err(SimError::TlsConfig)?;
        let listener =
            std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, opts.port)).map_err(|source| {
                SimError::Bind {
                    port: opts.port,
                    source,
                }
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| SimError::Bind {
                port: opts.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            port: opts.port,
            source,
        })?;
        let store = Store::new(opts.history);
        seed(&store);
        let token = random_token();
        let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
        let shutdown = Arc::new(shutdown);
        let failure = Arc::new(tokio::sync::watch::channel(None::<String>).0);
        let truth = Arc::new(Truth::default());
        let audit = Arc::new(api::authz::Audit::default());
        let mut temp_dir = None;
        let ctx = match &opts.platform {
            None => None,
            Some(platform) => {
                let state_dir = match &platform.state_dir {
                    Some(d) => {
                        std::fs::create_dir_all(d).map_err(SimError::StateDir)?;
                        d.clone()
                    }
                    None => {
                        let t = tempfile::Builder::new()
                            .prefix("wsgate-sim-")
                            .tempdir_in(state_parent())
                            .map_err(SimError::StateDir)?;
                        let p = t.path().to_path_buf();
                        temp_dir = Some(t);
                        p
                    }
                };
                super::seed::seed(&store, &platform.profile);
                store.add_admission(Box::new(controllers::quota::admit));
                store.add_mutation(Box::new(super::admission::mutate));
                store.add_mutation(Box::new(controllers::addon::webhook::mutate));
                let held = truth.clone();
                store.add_mutation(Box::new(move |kind, old, new, _| {
                    controllers::addon::webhook::note_held(&held, kind, old, new);
                    Ok(())
                }));
                store.enable_graceful_pod_deletion();
                let ctx = Ctx {
                    store: store.clone(),
                    profile: Arc::new(platform.profile.clone()),
                    delays: Arc::new(crate::sim::delay::Delays::new(
                        &platform.profile.timing,
                        platform.seed,
                    )),
                    truth: truth.clone(),
                    pods: Arc::new(
                        PodProcesses::new(state_dir.join("volumes"), platform.profile.runtime.kind)
                            .with_auth(platform.profile.runtime.jupyter_auth)
                            .with_pod_network(platform.profile.runtime.pod_network),
                    ),
                    bucket: Arc::new(Bucket::new(state_dir.join("bucket"))),
                    shutdown: shutdown_rx.clone(),
                    failure: failure.clone(),
                };
                controllers::start_all(&ctx);
                Some(ctx)
            }
        };
        let counters = Arc::new(api::FaultCounters::default());
        let state = api::State {
            store: store.clone(),
            token: token.clone().into(),
            shutdown: shutdown_rx,
            bookmark_interval: opts.bookmark_interval,
            truth: truth.clone(),
            bucket: ctx.as_ref().map(|c| c.bucket.clone()),
            faults: opts
                .platform
                .as_ref()
                .map(|p| api::ApiFaults::from_profile(&p.profile))
                .unwrap_or_default(),
            audit: audit.clone(),
            rbac: opts
                .platform
                .as_ref()
                .and_then(|p| p.profile.enforced_rbac()),
            counters: counters.clone(),
            pods: ctx.as_ref().map(|c| c.pods.clone()),
        };
        let app = api::router(state);
        let server = axum_server::Handle::new();
        // TCP_NODELAY on every accepted connection, as Go's net package sets it on every
        // TCP connection (net/tcpsock.go, newTCPConn) and so the real API server has it: a
        // watch event written in pieces then reaches the client at once, not after the
        // client's delayed ACK (about 40 ms).
        let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(config)
            .acceptor(axum_server::accept::NoDelayAcceptor::new());
        let srv = axum_server::from_tcp(listener)
            .map_err(|source| SimError::Bind {
                port: opts.port,
                source,
            })?
            .acceptor(acceptor)
            .handle(server.clone());
        tokio::spawn(async move {
            if let Err(e) = srv.serve(app.into_make_service()).await {
                tracing::error!(error = %e, "simulator API server stopped");
            }
        });
        server.listening().await;
        // A controller's panic stops the whole simulator (its pod processes are already
        // killed by then): API clients then see the server go away instead of a platform
        // that silently stopped reacting.
        {
            let mut failed = failure.subscribe();
            let (shutdown, server) = (shutdown.clone(), server.clone());
            tokio::spawn(async move {
                if failed.wait_for(Option::is_some).await.is_ok() {
                    let _ = shutdown.send(true);
                    server.shutdown();
                }
            });
        }
        Ok(SimHandle {
            addr,
            token,
            ca_pem: identity.ca_pem,
            store,
            server,
            shutdown,
            failure,
            truth,
            audit,
            counters,
            ctx,
            _state_dir: temp_dir,
        })
    }

    /// Why the simulator stopped on its own (a controller panicked), if it did.
    pub fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    /// Waits until the simulator stops on its own, and says why; pending forever otherwise.
    pub async fn failed(&self) -> String {
        let mut rx = self.failure.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(m) => m.clone().unwrap_or_default(),
            Err(_) => std::future::pending().await,
        }
    }

    /// What the API faults (`api-errors`, `watch-drops`) did so far, and how many list and
    /// watch requests reached the store.
    pub fn api_fault_counts(&self) -> api::FaultCounts {
        self.counters.snapshot()
    }

    /// How many times each simulator fault acted so far, by fault name (the API faults from
    /// their counters: answers 429 or 500 for `api-errors`, streams ended for
    /// `watch-drops`). Faults that never acted are left out.
    pub fn faults_injected(&self) -> std::collections::BTreeMap<String, u64> {
        let mut out: std::collections::BTreeMap<String, u64> = self
            .truth
            .faults()
            .into_iter()
            .map(|(f, n)| (f.name(), n))
            .collect();
        let api = self.counters.snapshot();
        for (fault, n) in [
            (
                crate::sim::faults::Fault::ApiErrors,
                api.throttled + api.failed,
            ),
            (crate::sim::faults::Fault::WatchDrops, api.watches_dropped),
        ] {
            if n > 0 {
                out.insert(fault.name(), n);
            }
        }
        out
    }

    /// The ground truth recorded so far.
    pub fn truth(&self) -> &Arc<Truth> {
        &self.truth
    }

    /// Every distinct client request so far in RBAC terms (verb, group, resource,
    /// namespaced, allowed), sorted; also served at `GET /sim/v1/audit`.
    pub fn audit(&self) -> Vec<api::authz::AuditEntry> {
        self.audit.entries()
    }

    /// The platform's shared controller context (`None` for an API-only simulator).
    pub fn platform(&self) -> Option<&Ctx> {
        self.ctx.as_ref()
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bearer token the server requires.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The object store, for the simulator's own controllers and tests' ground truth.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A kubeconfig for this simulator: context `wsgate-sim`, namespace `wsgate-test`.
    pub fn kubeconfig_yaml(&self) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {CONTEXT}\n  user:\n    token: {token}\ncontexts:\n- name: {CONTEXT}\n  context:\n    cluster: {CONTEXT}\n    user: {CONTEXT}\n    namespace: {TEST_NAMESPACE}\ncurrent-context: {CONTEXT}\n",
            url = self.url(),
            token = self.token,
        )
    }

    /// Writes the kubeconfig (mode 0600: it holds the token).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), SimError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let err = |source| SimError::WriteKubeconfig {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(err)?;
        f.write_all(self.kubeconfig_yaml().as_bytes()).map_err(err)
    }

    /// The kube configuration for this simulator, from its kubeconfig as any user's would be.
    /// The harness builds its (retrying) client from this with `platform::target::connect`.
    pub async fn config(&self) -> Result<kube::Config, SimError> {
        let kc = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml())
            .map_err(SimError::Kubeconfig)?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(SimError::Kubeconfig)
    }

    /// A plain kube client for this simulator (kube's defaults, no harness retry policy), for
    /// tests that look at the simulator itself.
    pub async fn client(&self) -> Result<kube::Client, SimError> {
        kube::Client::try_from(self.config().await?).map_err(SimError::Client)
    }

    /// Stops the server: open watches end, then connections close.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        self.server.graceful_shutdown(Some(Duration::from_secs(2)));
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.server.shutdown();
    }
}

/// Where a simulator without a given state directory keeps its volumes and its bucket:
/// `/var/tmp` where it is a writable directory, else the system temp directory. Simulated
/// pods run on this machine and their `/tmp` is this machine's, which the harness's nonce
/// scan walks in every pod; the simulator's state (every workspace's volume, every
/// snapshot's memory image, hundreds of MiB each) is a node's disk and a bucket, in no
/// pod's `/tmp`.
fn state_parent() -> std::path::PathBuf {
    let var_tmp = std::path::Path::new("/var/tmp");
    let writable = std::fs::metadata(var_tmp).is_ok_and(|m| m.is_dir())
        && tempfile::Builder::new()
            .prefix(".wsgate-probe-")
            .tempfile_in(var_tmp)
            .is_ok();
    if writable {
        var_tmp.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
