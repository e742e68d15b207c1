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

/// The most any command a test starts may run: past it, coreutils' `timeout` stops it (exit
/// 124, or 137 when it also ignores SIGTERM for 10 s), so a hang fails its test instead of
/// stalling the suite.
pub const COMMAND_LIMIT_S: u64 = 300;

/// A command for `program` that runs under `timeout` (`secs`, then SIGKILL 10 s later).
pub fn within(secs: u64, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new("timeout");
    c.args(["--kill-after=10", &secs.to_string()]).arg(program);
    c
}

/// The `wsgate` binary under [`COMMAND_LIMIT_S`], from the project directory.
pub fn wsgate_command() -> std::process::Command {
    let mut c = within(COMMAND_LIMIT_S, env!("CARGO_BIN_EXE_wsgate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// Waits for a spawned `child` at most `secs` (reading its piped output meanwhile, as
/// `wait_with_output` does); past that it is killed and the test fails, naming `what`.
pub fn wait_within(mut child: std::process::Child, secs: u64, what: &str) -> std::process::Output {
    use std::io::Read;
    fn drain<R: Read + Send + 'static>(r: Option<R>) -> Option<std::thread::JoinHandle<Vec<u8>>> {
        r.map(|mut r| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = r.read_to_end(&mut bytes);
                bytes
            })
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child can be waited for") {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} ran past its {secs} s limit and was killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let take = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
        h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
    };
    std::process::Output {
        status,
        stdout: take(stdout),
        stderr: take(stderr),
    }
}

/// Runs the `wsgate` binary from the project directory with no kube or CI environment
/// leaking in (KUBECONFIG, in-cluster variables, GITHUB_STEP_SUMMARY).
pub fn wsgate(args: &[&str]) -> std::process::Output {
    wsgate_command()
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

/// A server that takes TCP connections and never answers: each connection is held open.
pub fn silent_server() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    port
}

/// A web server that is not Jupyter: every request gets an HTML 404.
pub fn not_jupyter_server() -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let body = "<html><body>Not Found</body></html>";
            let _ = write!(
                c,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}
