//! jupyter_server's XSRF check against real `jupyter lab` processes started the way
//! Kubeflow's images start them (no token, no password): a POST without the `_xsrf` cookie
//! is refused, and the harness's client (which fetches and echoes the cookie) starts a
//! kernel, runs a cell, reads a file and deletes the kernel, tokenless and with a token. A
//! stand-in server shows the one refresh of a stale cookie.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wsgate::session::{
    Auth, ClientOptions, ExecuteOptions, FileState, JupyterClient, KernelChannel, Secret,
    SessionError,
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
        ensure_venv().expect("the simulator venv builds")
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

/// A stand-in server whose `_xsrf` changes with every `GET /lab` (only the latest is
/// accepted), or, with `never`, refuses every POST in its XSRF check. Counts POSTs.
async fn rotating_server(never: bool) -> (String, Arc<AtomicU32>, Arc<AtomicU32>) {
    use axum::http::{HeaderMap, StatusCode, header};
    let issued = Arc::new(AtomicU32::new(0));
    let posts = Arc::new(AtomicU32::new(0));
    let (i1, i2, p) = (issued.clone(), issued.clone(), posts.clone());
    let app = axum::Router::new()
        .route(
            "/lab",
            axum::routing::get(move || async move {
                let n = i1.fetch_add(1, Ordering::SeqCst) + 1;
                (
                    [(header::SET_COOKIE, format!("_xsrf=2|v{n}; Path=/"))],
                    "<html>",
                )
            }),
        )
        .route(
            "/api/kernels/k/interrupt",
            axum::routing::post(move |headers: HeaderMap| async move {
                p.fetch_add(1, Ordering::SeqCst);
                let want = format!("2|v{}", i2.load(Ordering::SeqCst));
                let header_ok = headers.get("x-xsrftoken").is_some_and(|v| v == &want);
                let cookie_ok = headers
                    .get(header::COOKIE)
                    .and_then(|c| c.to_str().ok())
                    .is_some_and(|c| c.contains(&format!("_xsrf={want}")));
                if never || !header_ok || !cookie_ok {
                    let body = "{\"message\": \"'_xsrf' argument missing from POST\"}";
                    return (StatusCode::FORBIDDEN, body);
                }
                (StatusCode::NO_CONTENT, "")
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, issued, posts)
}

#[tokio::test]
async fn a_stale_cookie_is_refreshed_once_and_a_refusal_after_that_is_named() {
    wsgate::install_crypto_provider();
    let (url, issued, posts) = rotating_server(false).await;
    let client = JupyterClient::new(&url, Auth::None, ClientOptions::default()).unwrap();
    client
        .interrupt_kernel("k")
        .await
        .expect("the first cookie works");
    client.interrupt_kernel("k").await.expect("kept and reused");
    assert_eq!(
        (issued.load(Ordering::SeqCst), posts.load(Ordering::SeqCst)),
        (1, 2)
    );
    // Someone else's GET rotates the server's cookie: ours is stale now.
    reqwest::get(format!("{url}lab")).await.unwrap();
    client.interrupt_kernel("k").await.expect("refreshed once");
    assert_eq!(
        (issued.load(Ordering::SeqCst), posts.load(Ordering::SeqCst)),
        (3, 4)
    );

    let (url, _, posts) = rotating_server(true).await;
    let client = JupyterClient::new(&url, Auth::None, ClientOptions::default()).unwrap();
    let err = client.interrupt_kernel("k").await.unwrap_err();
    assert!(matches!(err, SessionError::XsrfRefused { .. }), "{err}");
    assert_eq!(posts.load(Ordering::SeqCst), 2, "one retry, no more");
    assert!(
        !err.to_string().contains("2|v"),
        "the value is never shown: {err}"
    );
}
