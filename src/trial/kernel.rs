//! The trial's kernel steps: reach Jupyter in the workspace's pod the way `session.connect`
//! says, store the marker before the pause, collect the kernel's evidence after the resume.

use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::api::Api;

use super::{Trial, TrialError};
use crate::config::Config;
use crate::platform::forward::{self, ForwardError, Route};
use crate::platform::workspace::{self as ws, TOKEN_SECRET};
use crate::session::{
    Auth, Budget, Budgets, ClientOptions, Evidence, JupyterClient, MarkerPlan, Nonce, Secret,
    Stamps,
};

/// The marker stored in kernel memory before the pause, and what was recorded with it.
#[derive(Debug, Clone)]
pub struct Marked {
    pub kernel_id: String,
    pub nonce: Nonce,
    pub plan: MarkerPlan,
    /// The evidence from before the pause.
    pub before: Evidence,
    /// When the kernel answered, stamped then (unknown for a marker from a state file).
    pub reachable_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The session budgets (kernel reachable, cell, model load) from the config.
pub fn session_budgets(cfg: &Config) -> Budgets {
    let b = &cfg.budgets;
    Budgets {
        connect: Budget::new("kernel_reachable", b.kernel_reachable.duration()),
        cell: Budget::new("cell", b.cell.duration()),
        model: Budget::new("model_load", b.model_load.duration()),
    }
}

/// Prints the way Jupyter is reached the first time each way is taken in this process.
fn say_route_once(route: &Route) {
    use std::sync::Mutex;
    static SAID: Mutex<Vec<std::mem::Discriminant<Route>>> = Mutex::new(Vec::new());
    let kind = std::mem::discriminant(route);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.contains(&kind) {
        said.push(kind);
        crate::say!("session: {}", route.describe());
    }
}

/// A Jupyter client for Jupyter in `pod` (the current pod of workspace `namespace/name`),
/// reached the way `session.connect` says ([`crate::platform::forward`]).
async fn jupyter_in(
    client: &kube::Client,
    cfg: &Config,
    pod: &k8s_openapi::api::core::v1::Pod,
    (namespace, name): (&str, &str),
    token: &Secret,
) -> Result<JupyterClient, TrialError> {
    let api_path = format!("{}api", ws::path_prefix(namespace, name));
    let probe = forward::StatusProbe::jupyter(&api_path);
    let route = forward::route(client, cfg.session.connect, pod, ws::JUPYTER_PORT, probe)
        .await
        .map_err(|e| match e {
            ForwardError::NoAddress(_) => TrialError::Gone(format!(
                "the pod of workspace {namespace}/{name} has no IP yet"
            )),
            refused @ ForwardError::Refused { .. } => {
                TrialError::Config(format!("session.connect: {refused}"))
            }
            other => TrialError::Gone(format!("session.connect: {other}")),
        })?;
    say_route_once(&route);
    let url = ws::jupyter_url_at(route.addr(), namespace, name);
    let options = ClientOptions {
        insecure_skip_tls_verify: cfg.target.insecure_skip_tls_verify,
        // No single REST request outlives the budget for reaching the kernel.
        request_timeout: Some(cfg.budgets.kernel_reachable.duration()),
    };
    Ok(JupyterClient::new(
        &url,
        Auth::Token(token.clone()),
        options,
    )?)
}

/// The workspace's Jupyter token, from the namespace's Secret (never from a file).
pub async fn read_token(client: &kube::Client, ns: &str) -> Result<Secret, TrialError> {
    let api: Api<KubeSecret> = Api::namespaced(client.clone(), ns);
    let secret = api
        .get_opt(TOKEN_SECRET.0)
        .await
        .map_err(|source| TrialError::Api {
            what: format!("read Secret {ns}/{}", TOKEN_SECRET.0),
            source,
        })?;
    secret
        .and_then(|s| s.data?.remove(TOKEN_SECRET.1))
        .and_then(|b| String::from_utf8(b.0).ok())
        .map(Secret::new)
        .ok_or_else(|| {
            TrialError::Gone(format!(
                "Secret {ns}/{} with the workspace's Jupyter token is gone: the kernel cannot \
                 be reached",
                TOKEN_SECRET.0
            ))
        })
}

impl Trial {
    /// A Jupyter client for this workspace's current (not terminating) pod, reached the way
    /// `session.connect` says.
    pub async fn jupyter(&self, cfg: &Config, token: &Secret) -> Result<JupyterClient, TrialError> {
        let (ns, name) = (&self.workspace.namespace, &self.workspace.name);
        let pod = self.current_pod().await?.ok_or_else(|| {
            TrialError::Gone(format!(
                "workspace {ns}/{name} has no running pod to reach Jupyter on"
            ))
        })?;
        jupyter_in(self.client(), cfg, &pod, (ns, name), token).await
    }

    /// Starts a kernel (within `kernel_reachable`), loads the model, stores a new nonce in
    /// its memory only and writes the files; keeps them as [`Trial::marked`]. `label` names
    /// the files' run.
    pub async fn mark(
        &mut self,
        cfg: &Config,
        token: &Secret,
        label: String,
    ) -> Result<&Marked, TrialError> {
        let budgets = session_budgets(cfg);
        let jc = self.jupyter(cfg, token).await?;
        let kernel_id = crate::session::start_kernel(&jc, &budgets.connect).await?;
        let reachable = chrono::Utc::now();
        let nonce = Nonce::generate();
        let plan = MarkerPlan {
            ballast_mib: cfg.workspace.model_ballast_mib,
            ..MarkerPlan::new(cfg.workspace.model.into(), label)
        };
        let before = crate::session::mark(&jc, &kernel_id, &nonce, &plan, &budgets).await?;
        Ok(self.marked.insert(Marked {
            kernel_id,
            nonce,
            plan,
            before,
            reachable_at: Some(reachable),
        }))
    }

    /// After the resume: reconnects to the marked kernel and collects the same evidence,
    /// each step stamped as it happened.
    pub async fn kernel_evidence(
        &self,
        cfg: &Config,
        token: &Secret,
    ) -> Result<(Evidence, Stamps), TrialError> {
        let m = self.marked()?;
        let budgets = session_budgets(cfg);
        let jc = self.jupyter(cfg, token).await?;
        let stamped = crate::session::collect_evidence_stamped(
            &jc,
            &m.kernel_id,
            &m.nonce,
            &m.plan,
            &budgets,
            Some(&m.before),
        )
        .await?;
        Ok(stamped)
    }

    /// The restore verdict from the kernel's evidence after the resume and the platform's.
    pub fn decide(
        &self,
        after: &Evidence,
        platform: &crate::session::PlatformEvidence,
    ) -> Result<crate::verdict::Verdict, TrialError> {
        Ok(crate::verdict::decide(
            &self.marked()?.before,
            after,
            platform,
        ))
    }

    /// The marker, or why a step after the pause cannot run without it.
    pub fn marked(&self) -> Result<&Marked, TrialError> {
        self.marked.as_ref().ok_or_else(|| {
            TrialError::Config(
                "no marker was stored before the pause: add the step that loads the model and \
                 stores the marker"
                    .into(),
            )
        })
    }
}
