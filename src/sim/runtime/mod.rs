//! The simulator runtime: real `jupyter lab` processes (and code-server stand-ins) for
//! workspace pods.
//!
//! - [`venv`]: the Python environment, in the user's cache directory keyed by the hash of
//!   the embedded requirements, built once, guarded by a stamp file and a lock.
//! - [`jupyter`]: one `jupyter lab` process (own process group, own runtime dir), its
//!   readiness wait, freeze/thaw (a checkpoint) and kill (a cold start or deletion).
//! - [`codeserver`]: one code-server stand-in (a VS Code workspace pod's server): the
//!   arguments of Kubeflow's codeserver image, `/healthz` and the user data directory.
//! - [`freeze`]: stopping and continuing a whole process tree through `/proc`, because each
//!   kernel runs in a session of its own and signalling the server's group misses it.

pub mod codeserver;
pub mod freeze;
pub mod jupyter;
pub mod venv;

/// Polls `GET url` (with `Authorization: token <token>` when given) every 100 ms until it
/// answers 2xx. `exited` is asked before each try: the server's error once its process has
/// exited, which ends the wait. No timeout inside: the caller wraps it in a named budget.
pub(crate) async fn poll_until_ready<E>(
    url: &str,
    token: Option<&str>,
    mut exited: impl FnMut() -> Option<E>,
    no_client: impl FnOnce(reqwest::Error) -> E,
) -> Result<(), E> {
    crate::install_crypto_provider();
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(no_client)?;
    loop {
        if let Some(e) = exited() {
            return Err(e);
        }
        let mut req = http.get(url).timeout(std::time::Duration::from_secs(2));
        if let Some(t) = token {
            req = req.header("Authorization", format!("token {t}"));
        }
        if matches!(req.send().await, Ok(r) if r.status().is_success()) {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
