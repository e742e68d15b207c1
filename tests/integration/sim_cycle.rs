//! The full cycle on the default profile with the real Jupyter runtime: create -> Running ->
//! pause -> Paused -> resume -> Running. A variable set in the kernel before the pause is
//! still there after it; with fault `silent-cold-start` it is gone while the home files remain;
//! with fault `kernel-dies` the pod is restored but its kernel process is killed; a panic in
//! a controller stops the simulator and leaves no process behind, running or frozen. A pod's
//! server is `jupyter lab` started like Kubeflow's images (no token, XSRF enforced); with
//! `jupyter_auth = "token"` it wants the token. Kernels run on the `ipc` transport, from the
//! snapshot add-on's `jupyter-ipc-config` mounted at `/etc/jupyter/jupyter_server_config.py`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use wsgate::platform::crd::{Workspace, WorkspaceState};
use wsgate::platform::wait::{self, WaitFor};
use wsgate::platform::workspace::{self as ws, WORKSPACE_LABEL};
use wsgate::session::{
    Auth, ClientOptions, ExecuteOptions, JupyterClient, KernelChannel, Secret as Token,
};
use wsgate::sim::runtime::jupyter::ServerAuth;
use wsgate::sim::truth::Imposed;
use wsgate::sim::{SimHandle, SimOptions};

const NS: &str = "wsgate-test";
/// The budget of each wait here (the real jupyter server starts in about 2 s).
const BUDGET: Duration = Duration::from_secs(90);
const TOKEN: &str = "cycle-test-token-3f9a";

async fn start() -> SimHandle {
    start_with(ServerAuth::None).await
}

async fn start_with(auth: ServerAuth) -> SimHandle {
    wsgate::install_crypto_provider();
    let mut opts = SimOptions::with_platform();
    if let Some(p) = opts.platform.as_mut() {
        p.profile.runtime.jupyter_auth = auth;
    }
    SimHandle::start(opts).await.expect("simulator starts")
}

async fn create_workspace(client: &kube::Client, name: &str, fault: Option<&str>) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    if secrets.get_opt("jupyter-token").await.unwrap().is_none() {
        let s: Secret = serde_json::from_value(
            json!({"metadata": {"name": "jupyter-token"}, "stringData": {"token": TOKEN}}),
        )
        .unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-home")},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    let mut annotations = serde_json::Map::new();
    if let Some(f) = fault {
        annotations.insert("sim.wsgate.dev/fault".into(), json!(f));
    }
    let w: Workspace = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"paused": false, "kind": "jupyterlab-resumable", "podTemplate": {
            "volumes": {"home": format!("{name}-home")},
            "options": {"imageConfig": "jupyterlab-gpu", "podConfig": "gpu_t4_spot"}}}
    }))
    .unwrap();
    Api::<Workspace>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &w)
        .await
        .unwrap();
}

async fn wait_state(client: &kube::Client, name: &str, state: WorkspaceState) {
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let w = WaitFor::new(format!("test:{state}"), BUDGET, format!("be {state}"));
    wait::until(&api, name, &w, ws::describe, |o| ws::is_state(o, state))
        .await
        .unwrap();
}

async fn jupyter(client: &kube::Client, name: &str) -> JupyterClient {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = pods
        .list(&ListParams::default().labels(&format!("{WORKSPACE_LABEL}={name}")))
        .await
        .unwrap()
        .items
        .remove(0);
    let url = ws::jupyter_url(&pod, NS, name).expect("a running pod has an IP");
    JupyterClient::new(
        &url,
        Auth::Token(Token::new(TOKEN)),
        ClientOptions::default(),
    )
    .unwrap()
}

async fn exec(jc: &JupyterClient, kernel: &str, code: &str) -> String {
    let mut ch = KernelChannel::connect(jc, kernel).await.unwrap();
    let out = ch
        .execute(code, &ExecuteOptions::new(Duration::from_secs(30)))
        .await
        .unwrap();
    format!("{}{}", out.stdout, out.results.join(""))
}

async fn cycle(name: &str, fault: Option<&str>) -> (String, String) {
    let sim = start().await;
    let client = sim.client().await.unwrap();
    create_workspace(&client, name, fault).await;
    wait_state(&client, name, WorkspaceState::Running).await;
    let jc = jupyter(&client, name).await;
    let kernel = jc.start_kernel(None).await.unwrap().id;
    exec(
        &jc,
        &kernel,
        "import os\nSECRET_VALUE = 'kept-in-memory'\nopen('notes.txt', 'w').write('on disk')",
    )
    .await;
    // The snapshot add-on's ConfigMap, mounted at /etc/jupyter/jupyter_server_config.py,
    // puts the kernel on the ipc transport (Unix sockets beside its connection file).
    let transport = exec(
        &jc,
        &kernel,
        "from ipykernel.kernelapp import IPKernelApp\n\
         app = IPKernelApp.instance()\n\
         import os\n\
         print(app.transport, os.path.exists(app.ip + '-' + str(app.shell_port)))",
    )
    .await;
    assert_eq!(transport.trim(), "ipc True", "the kernel's transport");
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": true}})),
    )
    .await
    .unwrap();
    wait_state(&client, name, WorkspaceState::Paused).await;
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": false}})),
    )
    .await
    .unwrap();
    wait_state(&client, name, WorkspaceState::Running).await;
    let jc = jupyter(&client, name).await;
    // After a cold start the old kernel id is gone: use a new kernel then.
    let kernel = match jc.kernel(&kernel).await {
        Ok(k) => k.id,
        Err(_) => jc.start_kernel(None).await.unwrap().id,
    };
    let memory = exec(&jc, &kernel, "print(globals().get('SECRET_VALUE', 'GONE'))").await;
    let disk = exec(&jc, &kernel, "print(open('notes.txt').read())").await;
    (memory.trim().to_string(), disk.trim().to_string())
}

#[tokio::test]
async fn pause_and_resume_keep_kernel_memory() {
    let (memory, disk) = cycle("cycle-a", None).await;
    assert_eq!(memory, "kept-in-memory");
    assert_eq!(disk, "on disk");
}

#[tokio::test]
async fn silent_cold_start_loses_memory_but_keeps_files() {
    let (memory, disk) = cycle("cycle-b", Some("silent-cold-start")).await;
    assert_eq!(memory, "GONE");
    assert_eq!(disk, "on disk");
}

/// Runs `code` in `kernel`, retrying while the kernel is dead or restarting (the server
/// restarts a kernel that died), until `BUDGET` runs out.
async fn exec_when_alive(jc: &JupyterClient, kernel: &str, code: &str) -> String {
    let deadline = tokio::time::Instant::now() + BUDGET;
    loop {
        let attempt = async {
            let mut ch = KernelChannel::connect(jc, kernel).await?;
            ch.execute(code, &ExecuteOptions::new(Duration::from_secs(10)))
                .await
        };
        match attempt.await {
            Ok(out) => return format!("{}{}", out.stdout, out.results.join("")),
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("kernel not usable yet: {e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("kernel {kernel} not usable within {BUDGET:?}: {e}"),
        }
    }
}

#[tokio::test]
async fn kernel_dies_after_a_real_restore() {
    let name = "cycle-c";
    let sim = start().await;
    let client = sim.client().await.unwrap();
    create_workspace(&client, name, Some("kernel-dies")).await;
    wait_state(&client, name, WorkspaceState::Running).await;
    let jc = jupyter(&client, name).await;
    let kernel = jc.start_kernel(None).await.unwrap().id;
    let pid_before = exec(
        &jc,
        &kernel,
        "import os\nSECRET_VALUE = 'kept'\nprint(os.getpid())",
    )
    .await;
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    for paused in [true, false] {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": paused}})),
        )
        .await
        .unwrap();
        let state = if paused {
            WorkspaceState::Paused
        } else {
            WorkspaceState::Running
        };
        wait_state(&client, name, state).await;
    }
    // The pod came back from its snapshot (not a cold start) ...
    let truth = sim.truth().events();
    assert!(
        truth
            .iter()
            .any(|e| e.transition == wsgate::sim::truth::Transition::Restored
                && e.name.starts_with(&format!("ws-{name}-"))),
        "the resume was a restore"
    );
    // The simulator's record of the delays it imposed: one start and one restored start,
    // one add-on settle and checkpoint for the one pause, a termination for the paused pod.
    let imposed = sim.truth().imposed();
    let count = |d: Imposed| imposed.iter().find(|s| s.delay == d).map_or(0, |s| s.count);
    assert_eq!(count(Imposed::PodStart), 2, "{imposed:?}");
    assert_eq!(count(Imposed::Restore), 1, "{imposed:?}");
    assert_eq!(count(Imposed::AddonSettle), 1, "{imposed:?}");
    assert_eq!(count(Imposed::Checkpoint), 1, "{imposed:?}");
    assert!(count(Imposed::Termination) >= 1, "{imposed:?}");
    // ... the server restored with it still lists the kernel, but its process was killed:
    // the server restarts it, empty.
    let jc = jupyter(&client, name).await;
    assert_eq!(jc.kernel(&kernel).await.unwrap().id, kernel);
    let after = exec_when_alive(
        &jc,
        &kernel,
        "import os\nprint(globals().get('SECRET_VALUE', 'GONE'), os.getpid())",
    )
    .await;
    let (memory, pid_after) = after.trim().split_once(' ').unwrap();
    assert_eq!(memory, "GONE");
    assert_ne!(pid_after, pid_before.trim(), "a new kernel process");
}

/// Whether `pid` is a live process (a zombie waiting to be reaped counts as dead).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

async fn server_pid(sim: &SimHandle, client: &kube::Client, name: &str) -> u32 {
    let pod = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("{WORKSPACE_LABEL}={name}")))
        .await
        .unwrap()
        .items
        .remove(0);
    let uid = pod.metadata.uid.unwrap();
    sim.platform()
        .unwrap()
        .pods
        .running(&uid)
        .and_then(|s| s.pid)
        .expect("a running jupyter pod has a server process")
}

#[tokio::test]
async fn a_controller_panic_stops_the_simulator_and_kills_every_pod_process() {
    let sim = start().await;
    let client = sim.client().await.unwrap();
    let mut pids = Vec::new();
    // One workspace keeps running, one is paused (its processes frozen in the snapshot).
    for name in ["panic-run", "panic-paused"] {
        create_workspace(&client, name, None).await;
        wait_state(&client, name, WorkspaceState::Running).await;
        pids.push(server_pid(&sim, &client, name).await);
        let jc = jupyter(&client, name).await;
        let kernel = jc.start_kernel(None).await.unwrap().id;
        let pid = exec(&jc, &kernel, "import os\nprint(os.getpid())").await;
        pids.push(pid.trim().parse().unwrap());
    }
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    api.patch(
        "panic-paused",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": true}})),
    )
    .await
    .unwrap();
    wait_state(&client, "panic-paused", WorkspaceState::Paused).await;
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?} all alive before");
    assert_eq!(sim.failure(), None);

    api.patch(
        "panic-run",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"sim.wsgate.dev/fault": "controller-panics"}}}),
        ),
    )
    .await
    .unwrap();
    let why = tokio::time::timeout(BUDGET, sim.failed())
        .await
        .expect("the simulator stops after the panic");
    assert!(
        why.contains(
            "controller workspace panicked while reconciling Workspace wsgate-test/panic-run"
        ) && why.contains("fault controller-panics"),
        "{why}"
    );
    // Every server and kernel is gone, the frozen ones too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "processes left after the panic: {left:?}");
    // And the API server is gone: a client sees the simulator stop, not a silent platform.
    let listed = tokio::time::timeout(BUDGET, api.list(&ListParams::default()))
        .await
        .expect("the request ends");
    assert!(
        listed.is_err(),
        "the API server still answers after the panic"
    );
}

/// A Running workspace's server, reached with no credentials at all.
async fn anonymous(client: &kube::Client, name: &str) -> (String, reqwest::Client) {
    let url = jupyter(client, name).await.base_url().to_string();
    (url, reqwest::Client::builder().no_proxy().build().unwrap())
}

#[tokio::test]
async fn a_pods_server_is_a_tokenless_jupyter_lab_like_kubeflows_images() {
    let sim = start().await;
    let client = sim.client().await.unwrap();
    create_workspace(&client, "lab", None).await;
    wait_state(&client, "lab", WorkspaceState::Running).await;
    let (url, http) = anonymous(&client, "lab").await;
    assert!(
        url.ends_with("/workspace/connect/wsgate-test/lab/jupyterlab/"),
        "{url}"
    );
    let status = http.get(format!("{url}api/status")).send().await.unwrap();
    assert_eq!(status.status(), 200, "no token needed");
    let lab = http.get(format!("{url}lab")).send().await.unwrap();
    assert_eq!(
        lab.status(),
        200,
        "JupyterLab serves its page under the prefix"
    );
    assert!(lab.text().await.unwrap().contains("JupyterLab"));
    let post = http
        .post(format!("{url}api/kernels"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 403, "XSRF is enforced without a token");
    let jc = JupyterClient::new(&url, Auth::None, ClientOptions::default()).unwrap();
    let kernel = jc.start_kernel(None).await.unwrap().id;
    assert_eq!(exec(&jc, &kernel, "print(1 + 1)").await.trim(), "2");
    // As the upstream run script starts it: the kernel's working directory is the home
    // volume (`--notebook-dir` and cwd), and the runtime directory (connection files) is
    // outside it, so a snapshot's files do not carry another process's sockets.
    let places = exec(
        &jc,
        &kernel,
        "import os\nprint(os.path.realpath(os.getcwd()))\nprint(os.path.realpath(os.environ['HOME']))\n\
         print(os.path.realpath(os.environ['JUPYTER_RUNTIME_DIR']))",
    )
    .await;
    let lines: Vec<&str> = places.lines().collect();
    assert_eq!(lines.len(), 3, "{places}");
    assert_eq!(
        lines[0], lines[1],
        "the kernel starts in the home volume: {places}"
    );
    assert!(
        lines[2] != lines[1] && !lines[2].starts_with(&format!("{}/", lines[1])),
        "the runtime directory is outside the home volume: {places}"
    );
    jc.delete_kernel(&kernel).await.unwrap();
    sim.shutdown().await;
}

#[tokio::test]
async fn with_jupyter_auth_token_a_pods_server_wants_the_token() {
    let sim = start_with(ServerAuth::Token).await;
    let client = sim.client().await.unwrap();
    create_workspace(&client, "tok", None).await;
    wait_state(&client, "tok", WorkspaceState::Running).await;
    let (url, http) = anonymous(&client, "tok").await;
    let kernels = http.get(format!("{url}api/kernels")).send().await.unwrap();
    assert_eq!(kernels.status(), 403, "no token, no kernels");
    let jc = jupyter(&client, "tok").await;
    let kernel = jc.start_kernel(None).await.unwrap().id;
    assert_eq!(exec(&jc, &kernel, "print(3)").await.trim(), "3");
    sim.shutdown().await;
}

/// A pod's server that dies on its own is shown and restarted as a kubelet does with a
/// StatefulSet's pod: the container `terminated` (exit code 137 for SIGKILL, reason
/// `Error`), then running again as a fresh process on the same pod IP, `restartCount` 1,
/// the exit kept in `lastState.terminated`; the Workspace is Running again and its kernel
/// memory is gone (a fresh session, not a restore).
#[tokio::test]
async fn a_server_that_dies_is_restarted_in_its_pod_as_a_fresh_process() {
    let sim = start().await;
    let client = kube::Client::try_from(sim.config().await.unwrap()).unwrap();
    create_workspace(&client, "crashy", None).await;
    wait_state(&client, "crashy", WorkspaceState::Running).await;
    let jc = jupyter(&client, "crashy").await;
    let kernel = jc.start_kernel(None).await.unwrap().id;
    assert_eq!(
        exec(&jc, &kernel, "x = 41\nprint(x + 1)").await.trim(),
        "42"
    );
    let kernel_pid: u32 = exec(&jc, &kernel, "import os; print(os.getpid())")
        .await
        .trim()
        .parse()
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let selector = ListParams::default().labels(&format!("{WORKSPACE_LABEL}=crashy"));
    let before = pods.list(&selector).await.unwrap().items.remove(0);
    let ip = before.status.as_ref().unwrap().pod_ip.clone().unwrap();
    let pid = server_pid(&sim, &client, "crashy").await;

    // SAFETY: kill(2) on the server process this simulator started.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let deadline = tokio::time::Instant::now() + BUDGET;
    let after = loop {
        let pod = pods.list(&selector).await.unwrap().items.remove(0);
        let cs = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone());
        if cs
            .as_ref()
            .is_some_and(|cs| cs[0].restart_count == 1 && cs[0].ready)
        {
            break pod;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not restarted within {BUDGET:?}: {:?}",
            pod.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let status = after.status.as_ref().unwrap();
    assert_eq!(
        status.pod_ip.as_deref(),
        Some(ip.as_str()),
        "same pod, same IP"
    );
    let cs = &status.container_statuses.as_ref().unwrap()[0];
    assert!(cs.state.as_ref().unwrap().running.is_some(), "{cs:?}");
    let last = cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 137, "{last:?}");
    assert_eq!(last.reason.as_deref(), Some("Error"));
    assert_ne!(
        server_pid(&sim, &client, "crashy").await,
        pid,
        "a new server process"
    );
    // The dead server's kernel (a session of its own, no longer its descendant) is gone too.
    assert!(
        !alive(kernel_pid),
        "the old kernel {kernel_pid} outlived its server"
    );
    wait_state(&client, "crashy", WorkspaceState::Running).await;
    // The kernel and its memory died with the server; a new kernel starts from nothing.
    let jc = jupyter(&client, "crashy").await;
    assert!(jc.kernels().await.unwrap().is_empty());
    let kernel = jc.start_kernel(None).await.unwrap().id;
    let out = exec(&jc, &kernel, "print('x' in globals())").await;
    assert_eq!(out.trim(), "False");
    sim.shutdown().await;
}
