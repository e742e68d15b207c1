//! Shared test setup: the crypto provider and a simulator on a free loopback port.

use wsgate::sim::{SimHandle, SimOptions};

pub async fn start_sim() -> SimHandle {
    wsgate::install_crypto_provider();
    SimHandle::start(SimOptions::default())
        .await
        .expect("the simulator starts on a free port")
}

/// A reqwest client that trusts the simulator's CA, for raw HTTP checks.
pub fn raw_client(sim: &SimHandle) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(sim.ca_pem().as_bytes()).expect("CA PEM parses");
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client builds")
}

/// A simulator with the simulated platform on the `none` runtime (pods with no process);
/// `edit` adjusts the profile (faults, pools) before it starts.
pub async fn start_platform(edit: impl FnOnce(&mut wsgate::sim::profile::SimProfile)) -> SimHandle {
    wsgate::install_crypto_provider();
    let mut opts = SimOptions::with_platform();
    if let Some(p) = opts.platform.as_mut() {
        p.profile.runtime.kind = wsgate::sim::profile::RuntimeKind::None;
        edit(&mut p.profile);
    }
    SimHandle::start(opts)
        .await
        .expect("simulator with platform starts")
}

/// Runs the `wsgate` binary from the project directory with no kube or CI environment
/// leaking in (KUBECONFIG, in-cluster variables, GITHUB_STEP_SUMMARY).
pub fn wsgate(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_wsgate"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("the wsgate binary runs")
}

/// A finished command's stdout and stderr together.
pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
