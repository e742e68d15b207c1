//! wsgate: a release gate and resilience harness for GPU notebook workspaces on Kubernetes.
//!
//! It drives Kubeflow Workspaces (and GKE Workspaces with pause/resume through GKE Pod
//! Snapshots) through a Gherkin suite and decides, with evidence, whether a resume brought
//! back the running process or only a fresh session over the same files.
//!
//! Module map (dependency direction points down; `docs/architecture.md` has the picture):
//! - [`cli`]: clap definitions, every command's arguments; [`commands`]: one function per
//!   subcommand (`probe` included), opening the target through `commands::shell` and
//!   mapping outcomes to exit codes; [`bdd`]: the cucumber World and the suite's
//!   step definitions (glue only). [`exit_code`]: the one table from outcome to exit code;
//!   [`output`]: standard output that may close (a pipe to `head`, a full disk), and
//!   `say!`, which every command that creates objects prints with.
//! - [`gate`]: the release gate (prepare before an upgrade, verify after it); [`drill`]: the
//!   capacity-contention drill. Both, like the suite's steps, are callers of [`trial`].
//! - [`trial`]: the pause/resume trial as typed steps (create -> Running -> mark -> pause ->
//!   snapshot Ready -> resume -> platform evidence -> kernel evidence -> verdict).
//! - [`config`]: layered configuration (embedded defaults -> profile -> env -> flags).
//! - [`platform`]: the cluster side (kube-rs): CRD types, workspace lifecycle, pods, events,
//!   snapshots, GPU capacity and squeeze, ownership and the cleanup ledger.
//! - [`session`]: the Jupyter side: REST client, kernel websocket channel, the marker
//!   protocol and its cells.
//! - [`verdict`]: pure: evidence in, restore verdict out. [`timeline`]: pure: timestamped
//!   marks and the phases between them. [`cost`]: pure: GPU-hour accounting and
//!   idle-threshold break-even from reports.
//! - [`report`]: the versioned report model and its writers (JUnit, JSON, Markdown, HTML).
//! - [`sim`]: the embedded simulator, beside the harness: only [`commands`] starts it; it
//!   shares with the harness only the platform's names (`platform::names`, the Workspace
//!   state names) and the RBAC model.

pub mod bdd;
pub mod cli;
pub mod commands;
pub mod config;
pub mod cost;
pub mod drill;
pub mod exit_code;
pub mod gate;
pub mod output;
pub mod platform;
pub mod report;
pub mod session;
pub mod sim;
pub mod timeline;
pub mod trial;
pub mod verdict;

/// Installs the process-wide rustls crypto provider (ring). Call first in `main` and in
/// test setup: kube and reqwest both build TLS connectors and need one.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Test helper: asserts that a list of files shipped in the binary, `(stem, text)`, is
/// exactly the `*.toml` files of the source directory `dir` (relative to the crate root).
#[cfg(test)]
pub(crate) fn assert_ships_every_toml(dir: &str, shipped: &[(&str, &str)]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    on_disk.sort();
    let listed: Vec<(String, String)> = shipped
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    assert_eq!(
        listed,
        on_disk,
        "every {}/*.toml must be in the shipped list",
        dir.display()
    );
}
