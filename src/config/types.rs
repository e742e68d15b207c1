//! The typed configuration tree, one struct per section of `defaults.toml`.
//!
//! Every struct denies unknown fields and every closed set is an enum; the loader has
//! already checked each value against [`super::schema`], so deserialising cannot fail on
//! user input.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::budget::Budget;

/// The resolved wsgate configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What to run against.
    pub target: TargetConfig,
    /// How requests to the API server are retried.
    pub api: ApiConfig,
    /// The embedded simulator (used when `target.kind = "sim"`).
    pub sim: SimConfig,
    /// The Workspace each scenario creates.
    pub workspace: WorkspaceConfig,
    /// Per-phase time budgets.
    pub budgets: Budgets,
    /// How GPU scarcity is produced in the capacity scenarios.
    pub squeeze: SqueezeConfig,
    /// How the harness reaches Jupyter in a workspace pod.
    pub session: SessionConfig,
    /// How the suite runs.
    pub run: RunConfig,
    /// Where and in which formats reports are written.
    pub reports: ReportsConfig,
}

/// `[target]`: the cluster or the embedded simulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// Simulator or real cluster.
    pub kind: TargetKind,
    /// Kubeconfig file for a cluster target; unset means kube's normal inference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for a cluster target; never the current context by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The namespace scenarios run in (must carry `wsgate.dev/test-namespace=true`).
    pub namespace: String,
    /// Skip TLS verification of the API server. Warned loudly when true.
    pub insecure_skip_tls_verify: bool,
}

/// `[api]`: how requests to the API server are retried (429, 5xx, dropped connections).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Attempts per request, the first included; 1 turns retries off.
    pub retry_attempts: u32,
    /// The wait before the first retry; each further retry doubles it (with jitter).
    pub retry_backoff: Budget,
    /// The longest single wait; a longer `Retry-After` from the server ends the retries.
    pub retry_max_backoff: Budget,
    /// How long one request waits for the server's answer (connection and response head).
    pub response_timeout: Budget,
}

/// `[sim]`: the embedded simulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// The simulator profile (node pools, timings, faults).
    pub profile: PathBuf,
    /// What runs inside a simulated workspace pod.
    pub runtime: SimRuntime,
    /// Whether the simulator refuses what deploy/base's RBAC does not allow.
    pub enforce_rbac: bool,
    /// Seeds the streams the profile's drawn delays come from: the same seed, the same
    /// delays in the same order.
    pub seed: u64,
}

/// `[workspace]`: the Workspace under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// The WorkspaceKind name.
    pub kind: String,
    /// The `imageConfig` option id of that kind.
    pub image_config: String,
    /// The `podConfig` option id of that kind (a GPU one for pause/resume with a model).
    pub pod_config: String,
    /// The `podConfig` option the idle scenarios (idle.feature) use: one whose
    /// `activityRules` entry pauses within `budgets.idle_pause`.
    pub idle_pod_config: String,
    /// The model the notebook cells load.
    pub model: Model,
    /// Memory (MiB) the model cell also holds in the kernel, written so that it is resident:
    /// checkpoint and restore times grow with it.
    pub model_ballast_mib: u64,
    /// Size of the home PVC, as a Kubernetes quantity.
    pub home_pvc_size: String,
    /// The accelerator label value (`cloud.google.com/gke-accelerator`).
    pub accelerator: String,
}

/// `[budgets]`: how long each named phase may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Workspace created -> state Running.
    pub workspace_running: Budget,
    /// Workspace Running -> kernel answers on its websocket.
    pub kernel_reachable: Budget,
    /// The cell that loads the model.
    pub model_load: Budget,
    /// Any other cell.
    pub cell: Budget,
    /// Pause requested -> state Paused (includes the checkpoint).
    pub pause_to_paused: Budget,
    /// Pause requested -> the GPU is allocatable again.
    pub gpu_release: Budget,
    /// Resume requested -> state Running.
    pub resume_to_running: Budget,
    /// Resume requested (or the pod bound, if later) -> the pod's `PodRestored` condition,
    /// which GKE writes after the pod is Ready; none by then is evidence of a cold start.
    pub pod_restored: Budget,
    /// Running after resume -> the next cell has completed.
    pub next_cell: Budget,
    /// Resume (or delete) -> its PodSnapshots are gone.
    pub snapshot_cleanup: Budget,
    /// Delete requested -> the Workspace and its objects are gone.
    pub delete: Budget,
    /// Under squeeze: resume requested -> a clear waiting state.
    pub waiting_state: Budget,
    /// Squeeze requested -> it holds (placeholder pods Running on the free GPUs).
    pub squeeze: Budget,
    /// A snapshot in Deleting is watched this long before it is reported stuck.
    pub snapshot_stuck: Budget,
    /// Kernel idle -> paused by the platform's activityRules.
    pub idle_pause: Budget,
    /// Drill: all resumed at once -> the last of them Running.
    pub drill_resume: Budget,
}

impl Budgets {
    /// The budget named `name` (its key in `[budgets]`), if there is one.
    pub fn get(&self, name: &str) -> Option<std::time::Duration> {
        self.named()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.duration())
    }

    /// Every budget with its phase name (the key in `[budgets]`), in documented order.
    pub fn named(&self) -> [(&'static str, Budget); 16] {
        [
            ("workspace_running", self.workspace_running),
            ("kernel_reachable", self.kernel_reachable),
            ("model_load", self.model_load),
            ("cell", self.cell),
            ("pause_to_paused", self.pause_to_paused),
            ("gpu_release", self.gpu_release),
            ("resume_to_running", self.resume_to_running),
            ("pod_restored", self.pod_restored),
            ("next_cell", self.next_cell),
            ("snapshot_cleanup", self.snapshot_cleanup),
            ("delete", self.delete),
            ("waiting_state", self.waiting_state),
            ("squeeze", self.squeeze),
            ("snapshot_stuck", self.snapshot_stuck),
            ("idle_pause", self.idle_pause),
            ("drill_resume", self.drill_resume),
        ]
    }
}

/// `[squeeze]`: GPU scarcity for the capacity scenarios.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqueezeConfig {
    /// How the GPUs are made scarce.
    pub method: SqueezeMethod,
}

/// `[session]`: how the harness reaches Jupyter in a workspace pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// The path to the pod's Jupyter port.
    pub connect: SessionConnect,
}

/// `[run]`: how the suite runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Which Workspaces survive the run.
    pub keep: Keep,
    /// Scenarios run at the same time.
    pub concurrency: u32,
    /// Stop at the first failed scenario.
    pub fail_fast: bool,
    /// Cucumber tag expression selecting scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<String>,
    /// Regular expression over scenario names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Hours after which the janitor may delete what a run left (the expiry label).
    pub expiry_hours: u32,
}

/// `[reports]`: report output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportsConfig {
    /// Directory reports are written under.
    pub dir: PathBuf,
    /// Formats written, each once.
    pub formats: Vec<ReportFormat>,
}

/// Generates a closed-set enum with its TOML spelling.
macro_rules! closed_set {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in documented order.
            pub const ALL: &[$name] = &[$($name::$variant),+];

            /// The spelling used in TOML, env and flags.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

closed_set! {
    /// `target.kind`.
    TargetKind {
        /// The embedded simulator, in-process on a loopback port.
        Sim = "sim",
        /// A real cluster, named explicitly.
        Cluster = "cluster",
    }
}

closed_set! {
    /// `sim.runtime`.
    SimRuntime {
        /// A real `jupyter server` with ipykernel per running pod.
        Jupyter = "jupyter",
        /// No process: pods become Ready and kernel steps are reported as not applicable.
        None = "none",
    }
}

closed_set! {
    /// `workspace.model`: which notebook cells (fixtures/cells/<model>) the scenarios run.
    Model {
        /// A few MiB of numpy arrays standing in for weights; runs anywhere.
        SimTiny = "sim-tiny",
        /// Qwen/Qwen2.5-3B-Instruct fp16 on one NVIDIA T4.
        Qwen3bT4 = "qwen2.5-3b-t4",
    }
}

closed_set! {
    /// `squeeze.method`.
    SqueezeMethod {
        /// A ResourceQuota on `requests.nvidia.com/gpu` in the test namespace.
        Quota = "quota",
        /// Pods that hold the free GPUs.
        PlaceholderPods = "placeholder-pods",
        /// A NoSchedule taint on the GPU nodes.
        Taint = "taint",
    }
}

closed_set! {
    /// `session.connect`.
    SessionConnect {
        /// The pod's address when it answers, else the API server's port-forward.
        Auto = "auto",
        /// `http://<pod IP>:<port>` only (the harness runs inside the cluster network).
        PodIp = "pod-ip",
        /// Through the API server's `pods/portforward` only (`create` on it needed).
        PortForward = "port-forward",
    }
}

closed_set! {
    /// `run.keep`.
    Keep {
        /// Delete everything the run created.
        Never = "never",
        /// Keep the Workspaces of failed scenarios for inspection.
        Failed = "failed",
        /// Keep every Workspace.
        Always = "always",
    }
}

impl Keep {
    /// Whether cleanup keeps what it would remove, given whether anything failed.
    pub fn keeps(self, failed: bool) -> bool {
        match self {
            Keep::Always => true,
            Keep::Failed => failed,
            Keep::Never => false,
        }
    }
}

closed_set! {
    /// One entry of `reports.formats`.
    ReportFormat {
        /// JUnit XML for CI.
        Junit = "junit",
        /// The versioned JSON report.
        Json = "json",
        /// A Markdown summary.
        Markdown = "markdown",
        /// HTML with an SVG timeline.
        Html = "html",
    }
}
