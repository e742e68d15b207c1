//! The simulated cluster's shape and timings, read from a simulator profile
//! (`fixtures/sim/*.toml`): node pools with accelerators, timings, storage, runtime, faults,
//! and whether the API server enforces wsgate's deployed RBAC.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::delay::Delay;
use super::faults::Fault;
use super::runtime::jupyter::ServerAuth;

/// The profile the simulator uses when none is named.
pub const DEFAULT_PROFILE: &str = include_str!("../../fixtures/sim/default.toml");

/// The simulator profiles shipped in the binary (`fixtures/sim/<name>.toml` at build time),
/// by name: `sim.profile = "default"` (or the shipped path) never reads the working
/// directory.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "api-trouble",
        include_str!("../../fixtures/sim/api-trouble.toml"),
    ),
    ("default", DEFAULT_PROFILE),
    (
        "field-restore-lag",
        include_str!("../../fixtures/sim/field-restore-lag.toml"),
    ),
];

/// The shipped profile `path` names: a bare name (`default`) or the shipped path
/// (`fixtures/sim/default.toml`) when no such file exists where it points.
pub fn shipped(path: &Path) -> Option<(&'static str, &'static str)> {
    let text = path.to_str()?;
    let name = match text.strip_prefix("fixtures/sim/") {
        Some(rest) if !path.exists() => rest.strip_suffix(".toml")?,
        Some(_) => return None,
        None => text,
    };
    SHIPPED.iter().copied().find(|(n, _)| *n == name)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimProfile {
    pub node_pools: Vec<NodePool>,
    #[serde(default)]
    pub timing: Timing,
    #[serde(default)]
    pub storage: Storage,
    #[serde(default)]
    pub runtime: Runtime,
    #[serde(default)]
    pub faults: Faults,
    #[serde(default)]
    pub rbac: Rbac,
    #[serde(default)]
    pub addon: Addon,
    /// Where a calibrated profile's timings come from (`wsgate sim calibrate` writes it;
    /// the simulator does not read it).
    #[serde(default)]
    pub calibration: Option<toml::Table>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePool {
    pub name: String,
    pub count: u32,
    pub machine_type: String,
    pub machine_series: String,
    pub cpu: String,
    pub memory: String,
    /// `cloud.google.com/gke-accelerator`, e.g. `nvidia-tesla-t4`.
    #[serde(default)]
    pub accelerator: Option<String>,
    #[serde(default)]
    pub gpus_per_node: u32,
    #[serde(default)]
    pub driver_version: Option<String>,
    /// Whether the pool runs GKE Sandbox (gVisor), which Pod Snapshots need.
    #[serde(default)]
    pub gvisor: bool,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timing {
    /// Bound -> container started. Like every [`Delay`], a number of ms or a distribution.
    pub pod_start_ms: Delay,
    pub termination_ms: Delay,
    pub checkpoint_mib_per_s: f64,
    /// A checkpoint's fixed cost, before its per-byte part (`wsgate sim calibrate` fits both).
    pub checkpoint_fixed_ms: Delay,
    pub checkpoint_min_ms: u64,
    /// A restore's fixed part; with `restore_mib_per_s` above 0 the snapshot's resident
    /// bytes at that bandwidth are added (0, the default: no per-byte part).
    pub restore_ms: Delay,
    pub restore_mib_per_s: f64,
    /// How long after a restored pod turns Ready its `PodRestored` condition is written:
    /// GKE streams memory in lazily and writes the condition after Ready (a field report
    /// saw ~17 s).
    pub pod_restored_after_ready_ms: Delay,
    pub addon_settle_ms: u64,
    /// After a Workspace is deleted: how often the add-on looks at its terminating
    /// PodSnapshots (upstream `snapshotDrainInterval`, 10 s).
    pub addon_drain_interval_ms: u64,
    /// How long terminating PodSnapshots may pin the deleted Workspace's policy before the
    /// add-on retires it anyway (upstream `snapshotDrainTimeout`, 5 min).
    pub addon_drain_timeout_ms: u64,
    pub activity_scale: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            pod_start_ms: Delay::Fixed(100),
            termination_ms: Delay::Fixed(50),
            checkpoint_mib_per_s: 2048.0,
            checkpoint_fixed_ms: Delay::Fixed(0),
            checkpoint_min_ms: 200,
            restore_ms: Delay::Fixed(300),
            restore_mib_per_s: 0.0,
            pod_restored_after_ready_ms: Delay::Fixed(2000),
            addon_settle_ms: 100,
            addon_drain_interval_ms: 1000,
            addon_drain_timeout_ms: 300_000,
            activity_scale: 0.01,
        }
    }
}

/// `secs` as a duration of at most a day ([`super::delay::MAX_DELAY_MS`]).
fn bounded(secs: f64) -> Duration {
    Duration::from_secs_f64(secs.clamp(0.0, super::delay::MAX_DELAY_MS / 1000.0))
}

impl Timing {
    /// How long a checkpoint of `resident_bytes` takes: its fixed cost (`fixed`, drawn from
    /// `checkpoint_fixed_ms`) plus the bytes at `checkpoint_mib_per_s`, at least
    /// `checkpoint_min_ms`.
    pub fn checkpoint_duration(&self, resident_bytes: u64, fixed: Duration) -> Duration {
        let secs = resident_bytes as f64 / (self.checkpoint_mib_per_s.max(1.0) * 1024.0 * 1024.0);
        Duration::from_millis(self.checkpoint_min_ms).max(fixed.saturating_add(bounded(secs)))
    }

    /// How long a restore of `resident_bytes` takes: its fixed part (`fixed`, drawn from
    /// `restore_ms`) plus the bytes at `restore_mib_per_s` when that is above 0.
    pub fn restore_duration(&self, resident_bytes: u64, fixed: Duration) -> Duration {
        if self.restore_mib_per_s >= 1.0 && self.restore_mib_per_s.is_finite() {
            let secs = resident_bytes as f64 / (self.restore_mib_per_s * 1024.0 * 1024.0);
            fixed.saturating_add(bounded(secs))
        } else {
            fixed
        }
    }

    /// Scales a platform interval (probe interval, idle threshold) to simulator time.
    pub fn scaled(&self, seconds: f64) -> Duration {
        Duration::from_secs_f64((seconds * self.activity_scale).max(0.01))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Storage {
    pub bucket: String,
    pub path: String,
}

impl Default for Storage {
    fn default() -> Self {
        Self {
            bucket: "wsgate-sim-snapshots".into(),
            path: "kubeflow-notebooks".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    #[default]
    Jupyter,
    None,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    #[serde(default)]
    pub kind: RuntimeKind,
    /// `none` (Kubeflow's images: no token, no password) or `token` (a random token per
    /// server, from the pod's `JUPYTER_TOKEN` when it has one).
    #[serde(default)]
    pub jupyter_auth: ServerAuth,
    /// `reachable` (default: the harness can connect to the pods' addresses) or `isolated`
    /// (their addresses are not routed, as the pod network seen from a CI runner outside the
    /// cluster; only the API server's port-forward reaches them).
    #[serde(default)]
    pub pod_network: PodNetwork,
}

/// Whether the harness can reach the pod network (profile `runtime.pod_network`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PodNetwork {
    #[default]
    Reachable,
    Isolated,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    #[serde(default)]
    pub enabled: Vec<Fault>,
    #[serde(default)]
    pub api_error_rate: f64,
}

/// Which RBAC rules the API server enforces on resource requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RbacEnforce {
    /// Every authenticated request is allowed.
    #[default]
    Off,
    /// Only what `deploy/base/role.yaml` and `clusterrole.yaml` allow the ServiceAccount
    /// wsgate ([`crate::platform::rbac`]); everything else gets the real 403.
    Deploy,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rbac {
    #[serde(default)]
    pub enforce: RbacEnforce,
    /// With `enforce = "deploy"`, also the rules of `deploy/components/port-forward` (a
    /// harness whose `session.connect` may port-forward).
    #[serde(default)]
    pub port_forward: bool,
}

/// The GKE Workspaces snapshot add-on's settings (its flags in
/// gke-labs/workspaces `providers/gke/cmd/snapshot-addon/main.go`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Addon {
    /// `-tenants` / `TENANT_NAMESPACES`: the namespaces the add-on's reconciler manages;
    /// empty is every namespace. The webhooks serve every namespace either way.
    #[serde(default)]
    pub tenant_namespaces: Vec<String>,
}

impl Addon {
    /// Whether the reconciler manages `namespace` (upstream `managedNamespace`).
    pub fn manages(&self, namespace: &str) -> bool {
        let listed: Vec<&str> = self
            .tenant_namespaces
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .collect();
        if listed.is_empty() {
            return !namespace.is_empty();
        }
        listed.contains(&namespace)
    }

    /// The Deployment's `TENANT_NAMESPACES` value: the list, comma-joined.
    pub fn tenant_env(&self) -> String {
        self.tenant_namespaces.join(",")
    }
}

/// A profile that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "cannot read simulator profile {path}: give a TOML file or a shipped name ({})",
        SHIPPED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    )]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("simulator profile {path} is invalid: {message}")]
    Invalid { path: String, message: String },
}

impl SimProfile {
    /// Parses a profile's text; `path` names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<Self, ProfileError> {
        let invalid = |message: String| ProfileError::Invalid {
            path: path.to_string(),
            message,
        };
        let p: SimProfile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if p.node_pools.is_empty() {
            return Err(invalid("at least one node pool is required".into()));
        }
        let t = &p.timing;
        if !(t.checkpoint_mib_per_s.is_finite() && t.checkpoint_mib_per_s >= 1.0) {
            return Err(invalid(format!(
                "timing.checkpoint_mib_per_s must be a number of at least 1, not {}",
                t.checkpoint_mib_per_s
            )));
        }
        if !(t.restore_mib_per_s == 0.0
            || (t.restore_mib_per_s.is_finite() && t.restore_mib_per_s >= 1.0))
        {
            return Err(invalid(format!(
                "timing.restore_mib_per_s must be 0 (no per-byte part) or a number of at least 1, not {}",
                t.restore_mib_per_s
            )));
        }
        if !(0.0..=1.0).contains(&p.faults.api_error_rate) {
            return Err(invalid(
                "faults.api_error_rate must be between 0 and 1".into(),
            ));
        }
        Ok(p)
    }

    /// Reads a profile: a shipped one by name ([`shipped`]), else the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        if let Some((name, text)) = shipped(path) {
            return Self::parse(&format!("{name} (shipped)"), text);
        }
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// The embedded default profile.
    pub fn default_profile() -> Self {
        Self::parse("fixtures/sim/default.toml", DEFAULT_PROFILE)
            .expect("the embedded default profile is valid")
    }

    /// Total GPUs in the cluster.
    pub fn total_gpus(&self) -> u32 {
        self.node_pools
            .iter()
            .map(|p| p.count * p.gpus_per_node)
            .sum()
    }

    pub fn has_fault(&self, fault: Fault) -> bool {
        self.faults.enabled.contains(&fault)
    }

    /// The rules the API server enforces (`None`: enforcement off).
    pub fn enforced_rbac(&self) -> Option<&'static crate::platform::rbac::DeployRbac> {
        match self.rbac.enforce {
            RbacEnforce::Off => None,
            RbacEnforce::Deploy if self.rbac.port_forward => {
                Some(crate::platform::rbac::DeployRbac::embedded_with_port_forward())
            }
            RbacEnforce::Deploy => Some(crate::platform::rbac::DeployRbac::embedded()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Asserts that `p` is the shipped profile `name`, by its timings.
    pub(crate) fn assert_is_shipped(p: &SimProfile, name: &str) {
        let shipped = SimProfile::load(Path::new(name)).unwrap();
        assert_eq!(
            format!("{:?}", p.timing),
            format!("{:?}", shipped.timing),
            "not the shipped profile {name}"
        );
    }

    #[test]
    fn shipped_profiles_are_the_fixture_files_and_load_by_name() {
        crate::assert_ships_every_toml("fixtures/sim", SHIPPED);
        for (name, _) in SHIPPED {
            let p = SimProfile::load(Path::new(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            // The shipped profiles keep their fixed numbers: only a calibrated (or a user's)
            // profile draws its delays.
            let t = &p.timing;
            for (key, d) in [
                ("pod_start_ms", &t.pod_start_ms),
                ("termination_ms", &t.termination_ms),
                ("checkpoint_fixed_ms", &t.checkpoint_fixed_ms),
                ("restore_ms", &t.restore_ms),
                (
                    "pod_restored_after_ready_ms",
                    &t.pod_restored_after_ready_ms,
                ),
            ] {
                assert!(!d.is_drawn(), "{name}: {key} is drawn: {d:?}");
            }
        }
        assert!(
            SimProfile::load(Path::new("api-trouble"))
                .unwrap()
                .has_fault(Fault::ApiErrors)
        );
        let err = SimProfile::load(Path::new("no-such-profile")).unwrap_err();
        assert!(
            err.to_string()
                .contains("api-trouble, default, field-restore-lag"),
            "{err}"
        );
    }

    #[test]
    fn default_profile_has_two_t4_nodes_and_a_cpu_node() {
        let p = SimProfile::default_profile();
        assert_eq!(p.total_gpus(), 2);
        assert_eq!(p.node_pools.iter().map(|n| n.count).sum::<u32>(), 3);
        assert_eq!(
            p.node_pools[0].accelerator.as_deref(),
            Some("nvidia-tesla-t4")
        );
    }

    #[test]
    fn unknown_keys_and_bad_rates_are_errors() {
        let bad = DEFAULT_PROFILE.replace("[timing]", "[timing]\nbogus = 1");
        assert!(
            SimProfile::parse("x", &bad)
                .unwrap_err()
                .to_string()
                .contains("bogus")
        );
        let bad = DEFAULT_PROFILE.replace("api_error_rate = 0.0", "api_error_rate = 2.0");
        assert!(SimProfile::parse("x", &bad).is_err());
        for (bad, says) in [
            (
                "checkpoint_mib_per_s = 2048.0",
                "checkpoint_mib_per_s = 0.5",
            ),
            (
                "checkpoint_mib_per_s = 2048.0",
                "checkpoint_mib_per_s = nan",
            ),
            (
                "restore_ms = 300",
                "restore_ms = 300\nrestore_mib_per_s = 1e-300",
            ),
            (
                "restore_ms = 300",
                "restore_ms = 300\nrestore_mib_per_s = inf",
            ),
        ] {
            let err = SimProfile::parse("x", &DEFAULT_PROFILE.replace(bad, says)).unwrap_err();
            assert!(err.to_string().contains("at least 1"), "{says}: {err}");
        }
    }

    #[test]
    fn rbac_enforcement_is_off_by_default_and_deploy_turns_it_on() {
        assert_eq!(SimProfile::default_profile().rbac.enforce, RbacEnforce::Off);
        let on = DEFAULT_PROFILE.replace("enforce = \"off\"", "enforce = \"deploy\"");
        let p = SimProfile::parse("x", &on).unwrap();
        assert_eq!(
            p.enforced_rbac().unwrap().user(),
            "system:serviceaccount:wsgate-test:wsgate"
        );
        let bad = DEFAULT_PROFILE.replace("enforce = \"off\"", "enforce = \"all\"");
        assert!(SimProfile::parse("x", &bad).is_err());
    }

    #[test]
    fn jupyter_servers_are_tokenless_by_default_like_kubeflows_images() {
        let default = SimProfile::default_profile();
        assert_eq!(default.runtime.jupyter_auth, ServerAuth::None);
        let token = DEFAULT_PROFILE.replace("jupyter_auth = \"none\"", "jupyter_auth = \"token\"");
        let p = SimProfile::parse("x", &token).unwrap();
        assert_eq!(p.runtime.jupyter_auth, ServerAuth::Token);
        let bad = DEFAULT_PROFILE.replace("jupyter_auth = \"none\"", "jupyter_auth = \"oauth\"");
        assert!(SimProfile::parse("x", &bad).is_err());
    }

    #[test]
    fn the_addon_manages_every_namespace_unless_tenants_are_listed() {
        let default = SimProfile::default_profile();
        assert!(default.addon.tenant_namespaces.is_empty());
        assert!(default.addon.manages("anything"));
        assert_eq!(default.addon.tenant_env(), "");
        assert_eq!(default.timing.addon_drain_timeout_ms, 300_000);
        let listed = DEFAULT_PROFILE.replace(
            "tenant_namespaces = []",
            "tenant_namespaces = [\"team-a\", \"team-b\"]",
        );
        let p = SimProfile::parse("x", &listed).unwrap();
        assert!(p.addon.manages("team-b"));
        assert!(!p.addon.manages("wsgate-test"));
        assert_eq!(p.addon.tenant_env(), "team-a,team-b");
    }

    #[test]
    fn checkpoint_time_grows_with_memory() {
        let t = Timing::default();
        assert_eq!(
            t.checkpoint_duration(0, Duration::ZERO),
            Duration::from_millis(200)
        );
        assert!(t.checkpoint_duration(8 << 30, Duration::ZERO) > Duration::from_secs(3));
        let fixed = Duration::from_secs(2);
        let per_byte = t.checkpoint_duration(8 << 30, Duration::ZERO);
        assert_eq!(t.checkpoint_duration(8 << 30, fixed), per_byte + fixed);
        assert_eq!(
            t.restore_duration(8 << 30, fixed),
            fixed,
            "no per-byte restore by default"
        );
        let t = Timing {
            restore_mib_per_s: 1024.0,
            ..Timing::default()
        };
        assert_eq!(
            t.restore_duration(8 << 30, fixed),
            fixed + Duration::from_secs(8)
        );
    }
}
