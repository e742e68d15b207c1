//! The key table: every configuration key and what it accepts, and the hints for unknown
//! sections and keys. The typed [`super::Config`] tree mirrors this table; a unit test keeps
//! the two equal.

pub(crate) use super::kind::Kind;
use super::near::closest;

/// The sections, in the order they are documented and rendered.
pub(crate) const SECTIONS: &[&str] = &[
    "target",
    "api",
    "sim",
    "workspace",
    "budgets",
    "squeeze",
    "session",
    "run",
    "reports",
];

/// One key of the schema.
#[derive(Debug)]
pub(crate) struct KeySpec {
    pub section: &'static str,
    pub key: &'static str,
    pub kind: Kind,
    /// Optional keys have no default and may stay unset.
    pub optional: bool,
}

impl KeySpec {
    /// `section.key`.
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.section, self.key)
    }

    /// `WSGATE_SECTION__KEY`.
    pub fn env_var(&self) -> String {
        format!(
            "WSGATE_{}__{}",
            self.section.to_ascii_uppercase(),
            self.key.to_ascii_uppercase()
        )
    }
}

pub(crate) const TARGET_KINDS: &[&str] = &["sim", "cluster"];
pub(crate) const SIM_RUNTIMES: &[&str] = &["jupyter", "none"];
pub(crate) const MODELS: &[&str] = &["sim-tiny", "qwen2.5-3b-t4"];
pub(crate) const SQUEEZE_METHODS: &[&str] = &["quota", "placeholder-pods", "taint"];
pub(crate) const SESSION_CONNECT: &[&str] = &["auto", "pod-ip", "port-forward"];
pub(crate) const KEEP: &[&str] = &["never", "failed", "always"];
pub(crate) const REPORT_FORMATS: &[&str] = &["junit", "json", "markdown", "html"];

const fn req(section: &'static str, key: &'static str, kind: Kind) -> KeySpec {
    KeySpec {
        section,
        key,
        kind,
        optional: false,
    }
}

const fn opt(section: &'static str, key: &'static str, kind: Kind) -> KeySpec {
    KeySpec {
        section,
        key,
        kind,
        optional: true,
    }
}

/// Every key, grouped by section in [`SECTIONS`] order.
pub(crate) static KEYS: &[KeySpec] = &[
    req("target", "kind", Kind::OneOf(TARGET_KINDS)),
    opt("target", "kubeconfig", Kind::Path),
    opt("target", "context", Kind::Text),
    req("target", "namespace", Kind::Dns1123Label),
    req("target", "insecure_skip_tls_verify", Kind::Bool),
    req("api", "retry_attempts", Kind::Count { min: 1, max: 20 }),
    req("api", "retry_backoff", Kind::Seconds),
    req("api", "retry_max_backoff", Kind::Seconds),
    req("api", "response_timeout", Kind::Seconds),
    req("sim", "profile", Kind::Path),
    req("sim", "runtime", Kind::OneOf(SIM_RUNTIMES)),
    req("sim", "enforce_rbac", Kind::Bool),
    req(
        "sim",
        "seed",
        Kind::Count {
            min: 0,
            max: i64::MAX,
        },
    ),
    req("workspace", "kind", Kind::Text),
    req("workspace", "image_config", Kind::OptionId),
    req("workspace", "pod_config", Kind::OptionId),
    req("workspace", "idle_pod_config", Kind::Text),
    req("workspace", "model", Kind::OneOf(MODELS)),
    req(
        "workspace",
        "model_ballast_mib",
        Kind::Count {
            min: 0,
            max: 65_536,
        },
    ),
    req("workspace", "home_pvc_size", Kind::Quantity),
    req("workspace", "accelerator", Kind::Text),
    req("budgets", "workspace_running", Kind::Seconds),
    req("budgets", "kernel_reachable", Kind::Seconds),
    req("budgets", "model_load", Kind::Seconds),
    req("budgets", "cell", Kind::Seconds),
    req("budgets", "pause_to_paused", Kind::Seconds),
    req("budgets", "gpu_release", Kind::Seconds),
    req("budgets", "resume_to_running", Kind::Seconds),
    req("budgets", "pod_restored", Kind::Seconds),
    req("budgets", "next_cell", Kind::Seconds),
    req("budgets", "snapshot_cleanup", Kind::Seconds),
    req("budgets", "delete", Kind::Seconds),
    req("budgets", "waiting_state", Kind::Seconds),
    req("budgets", "squeeze", Kind::Seconds),
    req("budgets", "snapshot_stuck", Kind::Seconds),
    req("budgets", "idle_pause", Kind::Seconds),
    req("budgets", "drill_resume", Kind::Seconds),
    req("squeeze", "method", Kind::OneOf(SQUEEZE_METHODS)),
    req("session", "connect", Kind::OneOf(SESSION_CONNECT)),
    req("run", "keep", Kind::OneOf(KEEP)),
    req("run", "concurrency", Kind::Count { min: 1, max: 256 }),
    req("run", "fail_fast", Kind::Bool),
    opt("run", "tags", Kind::TagExpr),
    opt("run", "name", Kind::Regex),
    req("run", "expiry_hours", Kind::Count { min: 1, max: 720 }),
    req("reports", "dir", Kind::Path),
    req("reports", "formats", Kind::ListOf(REPORT_FORMATS)),
];

/// The spec of `section.key`, if the schema has it (case-sensitive, as TOML keys are).
pub(crate) fn lookup(section: &str, key: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|s| s.section == section && s.key == key)
}

/// The hint for an unknown section: the valid ones and the closest match.
pub(crate) fn section_hint(section: &str) -> String {
    let mut hint = format!("valid sections: {}", bracketed(SECTIONS.iter().copied()));
    if let Some(near) = closest(section, SECTIONS.iter().copied()) {
        hint = format!("did you mean [{near}]? {hint}");
    }
    hint
}

/// The hint for an unknown key in a known section: its valid keys and the closest match.
pub(crate) fn key_hint(section: &str, key: &str) -> String {
    let keys = || KEYS.iter().filter(|s| s.section == section).map(|s| s.key);
    let mut hint = format!(
        "valid keys in [{section}]: {} (see `wsgate run --dry-run` for the resolved configuration)",
        keys().collect::<Vec<_>>().join(", ")
    );
    if let Some(near) = closest(key, keys()) {
        hint = format!("did you mean `{section}.{near}`? {hint}");
    }
    hint
}

fn bracketed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("[{n}]"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_key() {
        assert_eq!(
            closest("resume_to_runing", KEYS.iter().map(|s| s.key)),
            Some("resume_to_running")
        );
        assert_eq!(closest("zzzzzz", SECTIONS.iter().copied()), None);
    }
}
