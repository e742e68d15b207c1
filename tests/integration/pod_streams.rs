//! `pods/exec` and `pods/portforward` over WebSockets against a workspace pod whose server is
//! a real `jupyter lab`: through kube-rs (`Api::<Pod>::exec` / `portforward`, feature `ws`)
//! and through the `kubectl` on PATH (exec; its port-forward tunnels SPDY, which the
//! simulator does not serve, and it says so).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, ListParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wsgate::platform::crd::{Workspace, WorkspaceState};
use wsgate::platform::ledger::{self, Ledger};
use wsgate::platform::wait::{self, WaitFor};
use wsgate::platform::workspace::{self as ws, NewWorkspace, WORKSPACE_LABEL};
use wsgate::sim::{SimHandle, SimOptions};

const NS: &str = wsgate::sim::server::TEST_NAMESPACE;
/// The budget of each wait and each command here.
const BUDGET: Duration = Duration::from_secs(90);

/// A simulator with the real Jupyter runtime and one Running workspace; its pod.
async fn running_pod(name: &str) -> (SimHandle, kube::Client, Pod) {
    running_pod_on(name, wsgate::sim::profile::PodNetwork::Reachable).await
}

async fn running_pod_on(
    name: &str,
    network: wsgate::sim::profile::PodNetwork,
) -> (SimHandle, kube::Client, Pod) {
    running_pod_of(
        name,
        ("jupyterlab-resumable", "jupyterlab-gpu", "gpu_t4_spot"),
        network,
    )
    .await
}

/// As [`running_pod_on`], for a workspace of `(kind, imageConfig, podConfig)`.
async fn running_pod_of(
    name: &str,
    (kind, image, pod_config): (&str, &str, &str),
    network: wsgate::sim::profile::PodNetwork,
) -> (SimHandle, kube::Client, Pod) {
    wsgate::install_crypto_provider();
    let mut opts = SimOptions::with_platform();
    if let Some(p) = opts.platform.as_mut() {
        p.profile.runtime.pod_network = network;
    }
    let sim = SimHandle::start(opts).await.expect("simulator starts");
    let client = kube::Client::try_from(sim.config().await.unwrap()).unwrap();
    let new = NewWorkspace {
        namespace: NS.into(),
        name: name.into(),
        kind: kind.into(),
        image_config: image.into(),
        pod_config: pod_config.into(),
        home_pvc: format!("{name}-home"),
        home_size: "1Gi".into(),
        labels: ledger::labels(
            "pod-streams",
            chrono::Utc::now() + chrono::Duration::hours(1),
        ),
        annotations: Default::default(),
    };
    let mut ledger = Ledger::default();
    ws::create_home(&client, &mut ledger, &new).await.unwrap();
    ws::create(&client, &mut ledger, &new).await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let w = WaitFor::new("test:Running", BUDGET, "be Running");
    wait::until(&api, name, &w, ws::describe, |o| {
        ws::is_state(o, WorkspaceState::Running)
    })
    .await
    .unwrap();
    let pod = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("{WORKSPACE_LABEL}={name}")))
        .await
        .unwrap()
        .items
        .remove(0);
    (sim, client, pod)
}

async fn read_all(r: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut s = String::new();
    if let Some(mut r) = r {
        tokio::time::timeout(BUDGET, r.read_to_string(&mut s))
            .await
            .expect("the stream ends within the budget")
            .unwrap();
    }
    s
}

#[tokio::test]
async fn exec_and_port_forward_reach_the_pod_through_kube_rs() {
    let (sim, client, pod) = running_pod("streams").await;
    let pods: Api<Pod> = Api::namespaced(client, NS);
    let name = pod.metadata.name.clone().unwrap();

    // The command runs in the pod's sandbox: home volume, environment, exit code.
    let mut run = pods
        .exec(
            &name,
            [
                "sh",
                "-c",
                "pwd; echo \"$HOME\"; echo \"$NB_PREFIX\"; echo oops >&2; \
                 printf kept > written-by-exec.txt; exit 3",
            ],
            &AttachParams::default().stdout(true).stderr(true),
        )
        .await
        .unwrap();
    let (out, err) = tokio::join!(read_all(run.stdout()), read_all(run.stderr()));
    let status = tokio::time::timeout(BUDGET, run.take_status().unwrap())
        .await
        .unwrap()
        .expect("a final status");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], lines[1], "cwd is $HOME: {out}");
    assert!(lines[0].ends_with("/wsgate-test/streams-home"), "{out}");
    assert!(
        lines[2].ends_with("/streams/jupyterlab/"),
        "NB_PREFIX: {out}"
    );
    assert_eq!(err, "oops\n");
    assert_eq!(status.status.as_deref(), Some("Failure"), "{status:?}");
    assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
    let causes = status.details.unwrap().causes.unwrap();
    assert_eq!(causes[0].reason.as_deref(), Some("ExitCode"));
    assert_eq!(causes[0].message.as_deref(), Some("3"));
    let written = std::path::Path::new(lines[0]).join("written-by-exec.txt");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "kept");

    // stdin, closed with v5's close signal.
    let mut cat = pods
        .exec(
            &name,
            ["cat"],
            &AttachParams::default()
                .stdin(true)
                .stdout(true)
                .stderr(false),
        )
        .await
        .unwrap();
    let mut stdin = cat.stdin().unwrap();
    stdin.write_all(b"through stdin").await.unwrap();
    stdin.shutdown().await.unwrap();
    drop(stdin);
    assert_eq!(read_all(cat.stdout()).await, "through stdin");
    let status = cat.take_status().unwrap().await.unwrap();
    assert_eq!(status.status.as_deref(), Some("Success"), "{status:?}");

    // A command that does not exist.
    let mut missing = pods
        .exec(&name, ["no-such-command-xyz"], &AttachParams::default())
        .await
        .unwrap();
    let status = missing.take_status().unwrap().await.unwrap();
    assert!(
        status
            .message
            .as_deref()
            .unwrap()
            .contains("executable file not found"),
        "{status:?}"
    );

    // Port-forward to the pod's Jupyter port: its status endpoint answers through it.
    let mut forward = pods.portforward(&name, &[8888]).await.unwrap();
    let mut stream = forward.take_stream(8888).unwrap();
    let prefix = format!("/workspace/connect/{NS}/streams/jupyterlab/");
    stream
        .write_all(
            format!("GET {prefix}api/status HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(BUDGET, stream.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"kernels\""), "{answer}");
    drop(stream);
    forward.abort();

    // A port nothing listens on: the error channel says so.
    let mut closed = pods.portforward(&name, &[1]).await.unwrap();
    let error = closed.take_error(1).unwrap();
    let message = tokio::time::timeout(BUDGET, error).await.unwrap();
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("error forwarding port 1")),
        "{message:?}"
    );
    closed.abort();
    sim.shutdown().await;
}

/// `session.connect`: the pod's address, `auto` (which takes it, the simulated pod network
/// being reachable) and a local port-forward through the API server; Jupyter answers on each.
#[tokio::test]
async fn each_session_connect_route_reaches_jupyter() {
    use wsgate::config::SessionConnect;
    use wsgate::platform::forward::{self, Route};
    let (sim, client, pod) = running_pod("routes").await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut seen = Vec::new();
    for connect in [
        SessionConnect::PodIp,
        SessionConnect::Auto,
        SessionConnect::PortForward,
    ] {
        let path = format!("{}api", ws::path_prefix(NS, "routes"));
        let probe = forward::StatusProbe::jupyter(&path);
        let route = forward::route(&client, connect, &pod, ws::JUPYTER_PORT, probe)
            .await
            .unwrap();
        let url = format!(
            "{}api/status",
            ws::jupyter_url_at(route.addr(), NS, "routes")
        );
        let answer = http.get(&url).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{connect:?}: {url}");
        seen.push(route);
    }
    let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
    assert!(matches!(&seen[0], Route::PodIp(a) if a.ip().to_string() == ip));
    assert_eq!(
        seen[1], seen[0],
        "auto takes the pod's address when it answers"
    );
    assert!(
        matches!(&seen[2], Route::PortForward { local, because: None } if local.ip().is_loopback()),
        "{:?}",
        seen[2]
    );
    sim.shutdown().await;
}

/// With the pod network out of reach (profile `runtime.pod_network = "isolated"`, as from a
/// CI runner outside the cluster), `auto` finds the pod's address dead and takes the
/// port-forward, saying why; `pod-ip` has nothing to reach.
#[tokio::test]
async fn auto_falls_back_to_the_port_forward_when_the_pod_network_is_out_of_reach() {
    use wsgate::config::SessionConnect;
    use wsgate::platform::forward::{self, Route};
    let (sim, client, pod) =
        running_pod_on("isolated", wsgate::sim::profile::PodNetwork::Isolated).await;
    let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
    assert!(ip.starts_with("198.18."), "{ip}");
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let path = format!("{}api", ws::path_prefix(NS, "isolated"));
    let probe = forward::StatusProbe::jupyter(&path);
    let route = forward::route(
        &client,
        SessionConnect::PodIp,
        &pod,
        ws::JUPYTER_PORT,
        probe,
    )
    .await
    .unwrap();
    // Nothing routes there; at most a gateway answers, never Jupyter.
    let direct = format!("http://{}{path}", route.addr());
    let answered = http.get(&direct).send().await;
    assert!(
        answered.as_ref().map_or(true, |a| a.status() != 200),
        "{direct}: {answered:?}"
    );
    let route = forward::route(&client, SessionConnect::Auto, &pod, ws::JUPYTER_PORT, probe)
        .await
        .unwrap();
    let Route::PortForward {
        local,
        because: Some(why),
    } = &route
    else {
        panic!("auto took {route:?}")
    };
    assert!(why.contains(&ip), "{why}");
    assert!(
        route.describe().contains("port-forward"),
        "{}",
        route.describe()
    );
    let url = format!("{}api/status", ws::jupyter_url_at(*local, NS, "isolated"));
    assert_eq!(http.get(&url).send().await.unwrap().status(), 200, "{url}");
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_exec_runs_in_the_pod_and_returns_its_exit_code() {
    if std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: kubectl not on PATH");
        return;
    }
    let (sim, _client, pod) = running_pod("kexec").await;
    let name = pod.metadata.name.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let kubectl = |args: &[&str]| {
        let mut c = tokio::process::Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .env("KUBECACHEDIR", dir.path().join("kube-cache"))
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        c
    };
    let out = tokio::time::timeout(
        BUDGET,
        kubectl(&[
            "exec",
            "-n",
            NS,
            &name,
            "--",
            "sh",
            "-c",
            "echo from-kubectl; ls; exit 4",
        ])
        .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("from-kubectl\n"),
        "{text}"
    );
    // kubectl's port-forward tunnels SPDY in the WebSocket: refused, and said so.
    let out = tokio::time::timeout(
        BUDGET,
        kubectl(&["port-forward", "-n", NS, &format!("pod/{name}"), "0:8888"]).output(),
    )
    .await
    .unwrap()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("SPDY, which kubectl port-forward uses, is not served"),
        "{text}"
    );
    sim.shutdown().await;
}

/// A VS Code workspace (upstream's `codeserver` kind): its pod runs code-server's stand-in
/// as Kubeflow's image starts it. Checked with curl (code-server's `/healthz`: asking it is
/// not activity, any other request is) and through exec (the downward-API environment, the
/// user data directory on the home volume, the heartbeat file).
#[tokio::test]
async fn a_vscode_pod_answers_like_code_server_and_keeps_its_data_on_the_home_volume() {
    let (sim, client, pod) = running_pod_of(
        "vscode",
        ("codeserver", "codeserver-python-cpu", "small_cpu"),
        wsgate::sim::profile::PodNetwork::Reachable,
    )
    .await;
    let spec = pod.spec.as_ref().unwrap();
    let container = &spec.containers[0];
    assert!(
        container
            .image
            .as_deref()
            .unwrap()
            .contains("/codeserver-python:"),
        "{:?}",
        container.image
    );
    assert!(container.readiness_probe.is_none() && container.startup_probe.is_none());
    let env = container.env.as_ref().unwrap();
    assert!(!env.iter().any(|e| e.name == "NB_PREFIX"), "{env:?}");
    assert!(
        env.iter().any(|e| e.name == "WORKSPACE_NAME"
            && e.value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .is_some()),
        "{env:?}"
    );
    let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
    let curl = |path: &str| {
        let url = format!("http://{ip}:8888{path}");
        async move {
            let out = tokio::time::timeout(
                BUDGET,
                tokio::process::Command::new("curl")
                    .args([
                        "-sS",
                        "--noproxy",
                        "*",
                        "--max-time",
                        "10",
                        "-w",
                        "\n%{http_code}",
                        &url,
                    ])
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .expect("curl ends within the budget")
            .expect("curl runs");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
            (code.to_string(), body.to_string())
        }
    };
    let (code, body) = curl("/healthz").await;
    assert_eq!(code, "200", "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "expired", "no activity yet: {health}");
    assert_eq!(health["lastHeartbeat"], 0, "{health}");
    let (code, page) = curl("/").await;
    assert_eq!(code, "200");
    assert!(page.contains("code-server"), "{page}");
    let (code, _) = curl("/no-such-page").await;
    assert_eq!(code, "404");
    let (_, body) = curl("/healthz").await;
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "alive", "after a page request: {health}");
    assert!(health["lastHeartbeat"].as_i64().unwrap() > 0, "{health}");

    let pods: Api<Pod> = Api::namespaced(client, NS);
    let mut run = pods
        .exec(
            pod.metadata.name.as_deref().unwrap(),
            [
                "sh",
                "-c",
                "echo \"$WORKSPACE_NAME\"; test -d .local/share/code-server/User && \
                 test -f .local/share/code-server/heartbeat && echo data-on-home",
            ],
            &AttachParams::default().stdout(true).stderr(true),
        )
        .await
        .unwrap();
    let (out, err) = tokio::join!(read_all(run.stdout()), read_all(run.stderr()));
    assert_eq!(out, "vscode\ndata-on-home\n", "{err}");
    sim.shutdown().await;
}
