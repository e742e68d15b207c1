//! Bad input to the simulated API server: every case is a `metav1.Status` with the code a
//! real API server gives, never a panic or a dropped connection.

use serde_json::{Value, json};

use crate::common::{raw_client, start_sim};

const WS: &str = "/apis/kubeflow.org/v1beta1/namespaces/wsgate-test/workspaces";

async fn status_of(resp: reqwest::Response) -> (u16, Value) {
    let code = resp.status().as_u16();
    let body: Value = resp.json().await.expect("a JSON Status body");
    (code, body)
}

#[tokio::test]
async fn bad_requests_get_statuses_with_real_codes() {
    let sim = start_sim().await;
    let http = raw_client(&sim);
    let url = |p: &str| format!("{}{p}", sim.url());
    let auth = format!("Bearer {}", sim.token());
    let send = |m: reqwest::Method, p: &str, ct: &str, body: &str| {
        http.request(m, url(p))
            .header("Authorization", &auth)
            .header("Content-Type", ct)
            .body(body.to_string())
            .send()
    };
    let valid = json!({"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "metadata": {"name": "ok"}, "spec": {"kind": "k", "podTemplate": {"options": {"imageConfig": "i", "podConfig": "p"}}}}).to_string();
    let cases: Vec<(reqwest::Method, String, &str, String, u16, &str)> = vec![
        (
            reqwest::Method::POST,
            WS.into(),
            "application/json",
            "{not json".into(),
            400,
            "BadRequest",
        ),
        (
            reqwest::Method::POST,
            WS.into(),
            "application/json",
            "[1,2]".into(),
            400,
            "BadRequest",
        ),
        (
            reqwest::Method::POST,
            WS.into(),
            "text/plain",
            valid.clone(),
            415,
            "UnsupportedMediaType",
        ),
        (
            reqwest::Method::POST,
            WS.into(),
            "application/json",
            valid.replace("\"ok\"", "\"Not_Valid\""),
            422,
            "Invalid",
        ),
        (
            reqwest::Method::POST,
            "/apis/kubeflow.org/v1beta1/workspaces".into(),
            "application/json",
            valid.clone(),
            405,
            "MethodNotAllowed",
        ),
        (
            reqwest::Method::POST,
            "/apis/unknown.example.com/v1/namespaces/wsgate-test/things".into(),
            "application/json",
            valid.clone(),
            404,
            "NotFound",
        ),
        (
            reqwest::Method::POST,
            "/apis/kubeflow.org/v1beta1/namespaces/nope/workspaces".into(),
            "application/json",
            valid.clone(),
            404,
            "NotFound",
        ),
        (
            reqwest::Method::PATCH,
            format!("{WS}/missing"),
            "application/merge-patch+json",
            "{}".into(),
            404,
            "NotFound",
        ),
        (
            reqwest::Method::PUT,
            WS.into(),
            "application/json",
            valid.clone(),
            405,
            "MethodNotAllowed",
        ),
    ];
    for (m, p, ct, body, code, reason) in cases {
        let (got, status) = status_of(
            send(m.clone(), &p, ct, &body)
                .await
                .expect("server answers"),
        )
        .await;
        assert_eq!(
            (got, status["reason"].as_str()),
            (code, Some(reason)),
            "{m} {p} {ct}: {status}"
        );
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], code);
    }

    // A real object for the patch cases.
    let (code, _) = status_of(
        send(reqwest::Method::POST, WS, "application/json", &valid)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let item = format!("{WS}/ok");
    for (ct, body, code) in [
        ("application/strategic-merge-patch+json", "{}", 415),
        ("application/merge-patch+json", "[{\"op\":\"add\"}]", 400),
        ("application/json-patch+json", "{\"op\":\"add\"}", 400),
        ("application/apply-patch+yaml", ":\n  - : bad: [", 400),
        ("application/xml", "<a/>", 415),
    ] {
        let (got, status) =
            status_of(send(reqwest::Method::PATCH, &item, ct, body).await.unwrap()).await;
        assert_eq!(got, code, "{ct}: {status}");
    }
    let (got, status) = status_of(
        send(
            reqwest::Method::PUT,
            &item,
            "application/json",
            &valid.replace("\"ok\"", "\"other\""),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got, 400, "name mismatch: {status}");
    let (got, status) = status_of(
        send(
            reqwest::Method::GET,
            &format!("{WS}?watch=true&timeoutSeconds=x"),
            "application/json",
            "",
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got, 400, "{status}");
    let (got, _) = status_of(
        send(
            reqwest::Method::DELETE,
            &item,
            "application/json",
            "{\"propagationPolicy\":\"Sideways\"}",
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got, 400);

    // No token at all: 401, but /version stays public like a real server's.
    let (got, status) = status_of(http.get(url(WS)).send().await.unwrap()).await;
    assert_eq!(
        (got, status["reason"].as_str()),
        (401, Some("Unauthorized"))
    );
    assert_eq!(
        http.get(url("/version"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
}

#[tokio::test]
async fn too_old_resource_version_is_an_in_stream_410() {
    let sim = start_sim().await;
    let http = raw_client(&sim);
    sim.store().compact();
    let resp = http
        .get(format!(
            "{}{WS}?watch=true&resourceVersion=1&timeoutSeconds=2",
            sim.url()
        ))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        200,
        "410 must arrive inside the stream"
    );
    let text = resp.text().await.unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ERROR");
    assert_eq!(first["object"]["code"], 410);
    assert_eq!(first["object"]["reason"], "Expired");
}

#[tokio::test]
async fn watch_lines_are_newline_delimited_with_bookmarks() {
    wsgate::install_crypto_provider();
    let sim = wsgate::sim::SimHandle::start(wsgate::sim::SimOptions {
        bookmark_interval: std::time::Duration::from_millis(200),
        ..Default::default()
    })
    .await
    .unwrap();
    let http = raw_client(&sim);
    let resp = http
        .get(format!(
            "{}{WS}?watch=true&allowWatchBookmarks=true&timeoutSeconds=1",
            sim.url()
        ))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    assert!(text.ends_with('\n'));
    let kinds: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        kinds.iter().filter(|k| *k == "BOOKMARK").count() >= 2,
        "{kinds:?}"
    );
    // Without allowWatchBookmarks there are none (kubectl get -w would print them as rows).
    let text = http
        .get(format!("{}{WS}?watch=true&timeoutSeconds=1", sim.url()))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("BOOKMARK"));
}
