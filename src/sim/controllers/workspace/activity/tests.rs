use super::*;

const S: i64 = 1000;

fn secs(s: i64) -> Duration {
    Duration::from_secs(s.max(0) as u64)
}

fn rule(since: u64, min_running: u64) -> PauseRule {
    PauseRule {
        pause: true,
        since_active: Duration::from_secs(since),
        min_running: Duration::from_secs(min_running),
    }
}

#[test]
fn eligibility_needs_known_activity_idle_time_and_min_running() {
    let idle = Duration::from_secs(100);
    // Unknown activity never pauses.
    assert!(!eligible_for_pause(0, 1, 1_000 * S, idle, Duration::ZERO));
    assert_eq!(eligible_after(0, idle), 0);
    // Exactly at the threshold is eligible; a millisecond before is not.
    assert!(eligible_for_pause(10 * S, 1, 110 * S, idle, Duration::ZERO));
    assert!(!eligible_for_pause(
        10 * S,
        1,
        110 * S - 1,
        idle,
        Duration::ZERO
    ));
    // minRunningSeconds guards a freshly started Workspace, and needs lastRunningTime.
    let min = Duration::from_secs(300);
    assert!(!eligible_for_pause(10 * S, 0, 500 * S, idle, min));
    assert!(!eligible_for_pause(10 * S, 300 * S, 500 * S, idle, min));
    assert!(eligible_for_pause(10 * S, 200 * S, 500 * S, idle, min));
}

#[test]
fn pause_needs_a_fresh_successful_probe_and_an_opted_in_rule() {
    let r = rule(100, 0);
    let d = decide(Some(&r), 10 * S, 1, 200 * S, true);
    assert_eq!(
        d,
        PauseDecision {
            pause: true,
            eligible_after: Some(110 * S)
        }
    );
    // Same data without a fresh successful probe: eligibleAfter refreshed, no pause.
    let d = decide(Some(&r), 10 * S, 1, 200 * S, false);
    assert!(!d.pause);
    assert_eq!(d.eligible_after, Some(110 * S));
    // Not idle long enough.
    assert!(!decide(Some(&r), 150 * S, 1, 200 * S, true).pause);
    // An exempting rule or no rule clears eligibleAfter.
    let exempt = PauseRule { pause: false, ..r };
    assert_eq!(
        decide(Some(&exempt), 10 * S, 1, 200 * S, true).eligible_after,
        None
    );
    assert_eq!(decide(None, 10 * S, 1, 200 * S, true).eligible_after, None);
}

#[test]
fn rules_match_first_wins_and_catch_all_last() {
    let rules = vec![
        json!({"config": {"secondsSinceActive": 7200, "minRunningSeconds": 300},
               "match": {"matchNamespace": {"selector": {"matchLabels": {"tier": "development"}}}},
               "effect": {"pauseWorkspace": true}}),
        json!({"config": {"secondsSinceActive": 60},
               "match": {"matchPodConfig": {"selector": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}},
               "effect": {"pauseWorkspace": false}}),
        json!({"config": {"secondsSinceActive": 86400}, "effect": {"pauseWorkspace": true}}),
    ];
    let dev = json!({"tier": "development"});
    let gpu = json!({"gpu": "nvidia-tesla-t4"});
    let none = json!({});
    let r = pause_rule(&rules, &dev, &gpu, secs).unwrap().unwrap();
    assert_eq!(r, rule(7200, 300));
    let r = pause_rule(&rules, &none, &gpu, secs).unwrap().unwrap();
    assert!(!r.pause, "GPU pod configs are exempt");
    let r = pause_rule(&rules, &none, &none, secs).unwrap().unwrap();
    assert_eq!(r, rule(86400, 0));
    // Scaling applies to both durations.
    let r = pause_rule(&rules, &dev, &none, |s| {
        Duration::from_millis(s as u64 * 10)
    })
    .unwrap()
    .unwrap();
    assert_eq!(r.since_active, Duration::from_millis(72_000));
    assert_eq!(pause_rule(&[], &none, &none, secs).unwrap(), None);
    let bad = vec![json!({"config": {"secondsSinceActive": 60},
        "match": {"matchNamespace": {"selector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}},
        "effect": {"pauseWorkspace": true}})];
    assert!(pause_rule(&bad, &none, &none, secs).is_err());
}

#[test]
fn probes_are_due_by_the_last_result() {
    let cfg = ProbeConfig {
        jupyter_port: Some("jupyterlab".into()),
        has_exec: false,
        min_interval: Duration::from_secs(100),
        interval: Duration::from_secs(300),
    };
    assert_eq!(probe_due(None, 5, &cfg), Ok(()));
    let ok = json!({"startTime": 1000 * S, "result": "Success"});
    assert_eq!(
        probe_due(Some(&ok), 1100 * S, &cfg),
        Err(Duration::from_secs(200))
    );
    assert_eq!(probe_due(Some(&ok), 1300 * S, &cfg), Ok(()));
    let failed = json!({"startTime": 1000 * S, "result": "Failure"});
    assert_eq!(probe_due(Some(&failed), 1100 * S, &cfg), Ok(()));
    assert_eq!(
        probe_due(Some(&failed), 1050 * S, &cfg),
        Err(Duration::from_secs(50))
    );

    let kind = json!({"spec": {"podTemplate": {"activityProbe": {"jupyter": {"lastActivity": true, "portId": "jupyterlab"}}}}});
    let c = probe_config(&kind, secs).unwrap();
    assert_eq!(
        (c.min_interval, c.interval),
        (secs(300), secs(3600)),
        "upstream defaults"
    );
    assert!(probe_config(&json!({"spec": {"podTemplate": {}}}), secs).is_none());
}

#[test]
fn results_update_activity_as_upstream() {
    let mut activity = json!({"lastActivity": 5, "lastUpdate": 6});
    ProbeResult::failed_now(10, MSG_POD_NOT_READY).apply(&mut activity);
    assert_eq!(activity["lastActivity"], 5, "a failure keeps the activity");
    assert_eq!(activity["lastProbe"]["result"], "Failure");
    let ok = ProbeResult {
        start_ms: 20,
        end_ms: 30,
        outcome: ProbeOutcome::Success,
        message: MSG_JUPYTER_SUCCEEDED.into(),
        last_activity_ms: Some(15),
    };
    ok.apply(&mut activity);
    assert_eq!(
        (
            activity["lastActivity"].as_i64(),
            activity["lastUpdate"].as_i64()
        ),
        (Some(15), Some(30))
    );
    apply_decision(
        &mut activity,
        &PauseDecision {
            pause: false,
            eligible_after: Some(99),
        },
    );
    assert_eq!(activity["rules"]["pauseWorkspace"]["eligibleAfter"], 99);
    apply_decision(
        &mut activity,
        &PauseDecision {
            pause: false,
            eligible_after: None,
        },
    );
    assert_eq!(activity["rules"], json!({}));
}

/// A stand-in for Jupyter's `/api/status` on a loopback port, answering `body` with `code`
/// when the token matches.
async fn status_server(code: u16, body: &'static str) -> std::net::SocketAddr {
    use axum::http::{HeaderMap, StatusCode};
    let app = axum::Router::new().route(
        "/workspace/connect/ns/ws/jupyterlab/api/status",
        axum::routing::get(move |headers: HeaderMap| async move {
            let authorised = headers
                .get("authorization")
                .is_some_and(|v| v == "token sekrit");
            if authorised {
                (StatusCode::from_u16(code).unwrap(), body)
            } else {
                (StatusCode::FORBIDDEN, "")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn client() -> reqwest::Client {
    crate::install_crypto_provider();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

const BASE: &str = "/workspace/connect/ns/ws/jupyterlab/";

#[tokio::test]
async fn jupyter_probe_reads_last_activity() {
    let addr = status_server(
        200,
        r#"{"last_activity": "2026-03-01T10:00:00.123456Z", "started": "x"}"#,
    )
    .await;
    let http = client();
    let t = Duration::from_secs(5);
    let r = probe_jupyter(
        &http,
        "127.0.0.1",
        addr.port().into(),
        BASE,
        Some("sekrit"),
        t,
    )
    .await;
    assert_eq!(r.outcome, ProbeOutcome::Success, "{}", r.message);
    assert_eq!(r.message, MSG_JUPYTER_SUCCEEDED);
    let want = chrono::DateTime::parse_from_rfc3339("2026-03-01T10:00:00.123Z").unwrap();
    assert_eq!(r.last_activity_ms, Some(want.timestamp_millis()));
    assert!(r.start_ms <= r.end_ms);

    let r = probe_jupyter(&http, "127.0.0.1", addr.port().into(), BASE, None, t).await;
    assert_eq!(
        (r.outcome, r.message.as_str()),
        (ProbeOutcome::Failure, "Jupyter probe failed: HTTP 403")
    );
    assert_eq!(r.last_activity_ms, None);
}

#[tokio::test]
async fn jupyter_probe_failures_never_panic() {
    let http = client();
    let t = Duration::from_secs(5);
    let addr = status_server(200, "not json").await;
    let r = probe_jupyter(
        &http,
        "127.0.0.1",
        addr.port().into(),
        BASE,
        Some("sekrit"),
        t,
    )
    .await;
    assert_eq!(r.message, "Jupyter probe failed: invalid response body");
    let addr = status_server(200, r#"{"last_activity": "yesterday"}"#).await;
    let r = probe_jupyter(
        &http,
        "127.0.0.1",
        addr.port().into(),
        BASE,
        Some("sekrit"),
        t,
    )
    .await;
    assert!(
        r.message
            .starts_with("Jupyter probe failed: invalid last_activity"),
        "{}",
        r.message
    );
    // Nothing listening: a connection error is a Failure.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = probe_jupyter(&http, "127.0.0.1", free.into(), BASE, None, t).await;
    assert_eq!(r.outcome, ProbeOutcome::Failure);
    assert!(r.message.starts_with(MSG_JUPYTER_FAILED));
    // A server that accepts but never answers: Timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let short = Duration::from_millis(200);
    let r = probe_jupyter(&http, "127.0.0.1", port.into(), BASE, None, short).await;
    assert_eq!(
        (r.outcome, r.message.as_str()),
        (
            ProbeOutcome::Timeout,
            "Jupyter probe failed: timeout after 200ms"
        )
    );
    drop(silent);
}
