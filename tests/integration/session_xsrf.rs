//! jupyter_server's XSRF check against real `jupyter lab` processes started the way
//! Kubeflow's images start them (no token, no password): a POST without the `_xsrf` cookie
//! is refused, and the harness's client (which fetches and echoes the cookie) starts a
//! kernel, runs a cell, reads a file and deletes the kernel, tokenless and with a token.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use wsgate::session::{
    Auth, ClientOptions, ExecuteOptions, FileState, JupyterClient, KernelChannel, Secret,
};
use wsgate::sim::runtime::jupyter::{JupyterOptions, JupyterProcess, ServerAuth};
use wsgate::sim::runtime::venv::{VenvPaths, ensure_venv};

const BASE_URL: &str = "/workspace/connect/wsgate-test/nb-x/jupyterlab/";
/// Bounds each test, so a hang fails the test instead of the CI run.
const TEST_BUDGET: Duration = Duration::from_secs(240);

fn venv() -> &'static VenvPaths {
    static VENV: OnceLock<VenvPaths> = OnceLock::new();
    VENV.get_or_init(|| {
        wsgate::install_crypto_provider();
        ensure_venv(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("the simulator venv builds")
    })
}

async fn start(auth: ServerAuth, home: &Path) -> JupyterProcess {
    let mut options = JupyterOptions::new(home);
    options.home = Some(home.to_owned());
    options.base_url = BASE_URL.to_owned();
    options.auth = auth;
    tokio::time::timeout(
        Duration::from_secs(90),
        JupyterProcess::start(venv(), options),
    )
    .await
    .expect("jupyter lab answered within 90 s")
    .expect("jupyter lab starts")
}

/// Every session operation the harness uses, through `client`.
async fn every_operation_works(client: &JupyterClient, home: &Path) {
    std::fs::write(home.join("input.txt"), b"abc").unwrap();
    let kernel = client.start_kernel(None).await.expect("POST /api/kernels");
    let mut channel = KernelChannel::connect(client, &kernel.id)
        .await
        .expect("the kernel websocket opens");
    let out = channel
        .execute(
            "print(6 * 7)",
            &ExecuteOptions::new(Duration::from_secs(60)),
        )
        .await
        .expect("a cell runs");
    assert_eq!(out.stdout.trim(), "42");
    match client.file_state("input.txt").await.unwrap() {
        FileState::Present { size, .. } => assert_eq!(size, 3),
        other => panic!("input.txt: {other:?}"),
    }
    client
        .interrupt_kernel(&kernel.id)
        .await
        .expect("POST interrupt");
    client
        .restart_kernel(&kernel.id)
        .await
        .expect("POST restart");
    client
        .delete_kernel(&kernel.id)
        .await
        .expect("DELETE /api/kernels/{id}");
    assert!(client.kernels().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tokenless_lab_refuses_posts_without_the_cookie_and_the_client_sends_it() {
    tokio::time::timeout(TEST_BUDGET, async {
        let dir = tempfile::tempdir().unwrap();
        let server = start(ServerAuth::None, dir.path()).await;
        let http = reqwest::Client::new();

        let status = http
            .get(format!("{}api/status", server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(status.status(), 200, "tokenless: GET needs no credentials");
        let lab = http
            .get(format!("{}lab", server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(lab.status(), 200);
        assert!(
            lab.headers()
                .get_all("set-cookie")
                .iter()
                .any(|c| c.to_str().unwrap().starts_with("_xsrf="))
        );
        assert!(
            lab.text().await.unwrap().contains("<html"),
            "JupyterLab's page"
        );

        let refused = http
            .post(format!("{}api/kernels", server.url()))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 403);
        assert!(refused.text().await.unwrap().contains("_xsrf"));

        let client =
            JupyterClient::new(server.url(), Auth::None, ClientOptions::default()).unwrap();
        every_operation_works(&client, dir.path()).await;
        // A token sent to a tokenless server is ignored.
        let client = JupyterClient::new(
            server.url(),
            Auth::Token(Secret::new("anything")),
            ClientOptions::default(),
        )
        .unwrap();
        every_operation_works(&client, dir.path()).await;
    })
    .await
    .expect("the test finishes within its budget");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_lab_works_with_the_token_and_the_cookie() {
    tokio::time::timeout(TEST_BUDGET, async {
        let dir = tempfile::tempdir().unwrap();
        let server = start(ServerAuth::Token, dir.path()).await;
        assert_eq!(server.auth(), ServerAuth::Token);
        let anonymous = reqwest::Client::new()
            .get(format!("{}api/kernels", server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(anonymous.status(), 403, "a token server wants its token");
        let client = JupyterClient::new(
            server.url(),
            Auth::Token(Secret::new(server.token())),
            ClientOptions::default(),
        )
        .unwrap();
        every_operation_works(&client, dir.path()).await;
    })
    .await
    .expect("the test finishes within its budget");
}
