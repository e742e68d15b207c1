use super::*;
use serde_json::json;

fn kind(rules: Value, probe: Option<Value>) -> WorkspaceKindSpec {
    let mut pod_template = json!({
        "options": {"podConfig": {"values": [
            {"id": "gpu_t4", "spawner": {"labels": [{"key": "gpu", "value": "nvidia-tesla-t4"}]}},
            {"id": "gpu_t4_idle", "spawner": {"labels": [
                {"key": "gpu", "value": "nvidia-tesla-t4"}, {"key": "idle-pause", "value": "short"}]}},
            {"id": "tiny_cpu", "spawner": {}}
        ]}}
    });
    if let Some(p) = probe {
        pod_template["activityProbe"] = p;
    }
    serde_json::from_value(json!({
        "spawner": {},
        "podTemplate": pod_template,
        "activityRules": rules,
    }))
    .unwrap()
}

fn probe() -> Option<Value> {
    Some(
        json!({"jupyter": {"lastActivity": true, "portId": "jupyterlab"},
                "minProbeIntervalSeconds": 100, "probeIntervalSeconds": 300}),
    )
}

/// The simulator's rules: a short rule by podConfig label, then the catch-all.
fn seeded() -> Value {
    json!([
        {"match": {"matchPodConfig": {"selector": {"matchLabels": {"idle-pause": "short"}}}},
         "config": {"secondsSinceActive": 1600}, "effect": {"pauseWorkspace": true}},
        {"config": {"secondsSinceActive": 14400}, "effect": {"pauseWorkspace": true}}
    ])
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn rule(spec: &WorkspaceKindSpec, pod_config: &str) -> Result<PauseRule, IdleError> {
    pause_rule("k", spec, pod_config, "ns", &labels(&[("team", "ml")]))
}

#[test]
fn the_first_matching_rule_wins_and_the_catch_all_takes_the_rest() {
    let spec = kind(seeded(), probe());
    let short = rule(&spec, "gpu_t4_idle").unwrap();
    assert_eq!((short.index, short.seconds_since_active), (0, 1600));
    assert_eq!(short.probe_interval_seconds, 300);
    let other = rule(&spec, "gpu_t4").unwrap();
    assert_eq!((other.index, other.seconds_since_active), (1, 14400));
    let unlabelled = rule(&spec, "tiny_cpu").unwrap();
    assert_eq!(unlabelled.index, 1);
}

#[test]
fn namespace_and_pod_config_selectors_are_anded() {
    let rules = json!([
        {"match": {"matchNamespace": {"selector": {"matchLabels": {"team": "ml"}}},
                   "matchPodConfig": {"selector": {"matchExpressions": [
                       {"key": "idle-pause", "operator": "Exists"}]}}},
         "config": {"secondsSinceActive": 600}, "effect": {"pauseWorkspace": true}}
    ]);
    let spec = kind(rules, probe());
    assert_eq!(
        rule(&spec, "gpu_t4_idle").unwrap().seconds_since_active,
        600
    );
    assert!(matches!(
        rule(&spec, "gpu_t4"),
        Err(IdleError::NoRule { .. })
    ));
    let other_ns = pause_rule("k", &spec, "gpu_t4_idle", "ns", &labels(&[("team", "web")]));
    assert!(matches!(other_ns, Err(IdleError::NoRule { .. })));
}

#[test]
fn an_exempting_rule_that_matches_first_means_nothing_to_test() {
    let rules = json!([
        {"match": {"matchPodConfig": {"selector": {"matchLabels": {"gpu": "nvidia-tesla-t4"}}}},
         "config": {"secondsSinceActive": 600}, "effect": {"pauseWorkspace": false}},
        {"config": {"secondsSinceActive": 14400}, "effect": {"pauseWorkspace": true}}
    ]);
    let spec = kind(rules, probe());
    let err = rule(&spec, "gpu_t4_idle").unwrap_err();
    assert!(matches!(err, IdleError::Exempt { index: 0, .. }), "{err}");
    assert_eq!(rule(&spec, "tiny_cpu").unwrap().index, 1);
}

#[test]
fn a_kind_without_probe_or_rule_says_there_is_nothing_to_test() {
    let err = rule(&kind(seeded(), None), "gpu_t4_idle").unwrap_err();
    assert!(err.to_string().contains("has no activityProbe"), "{err}");
    let err = rule(&kind(json!([]), probe()), "gpu_t4_idle").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the kind k has no activity rule that pauses workspaces of podConfig \"gpu_t4_idle\" \
         in namespace ns: nothing to test"
    );
    let err = rule(&kind(seeded(), probe()), "gpu_a100").unwrap_err();
    assert!(
        err.to_string()
            .contains("offered: [\"gpu_t4\", \"gpu_t4_idle\", \"tiny_cpu\"]"),
        "{err}"
    );
}

#[test]
fn selectors_follow_label_selector_semantics() {
    let l = labels(&[("a", "1"), ("b", "2")]);
    let m = |s: Value| selector_matches(&s, &l);
    assert_eq!(
        m(json!({})),
        Ok(true),
        "an empty selector matches everything"
    );
    assert_eq!(m(json!({"matchLabels": {"a": "1"}})), Ok(true));
    assert_eq!(m(json!({"matchLabels": {"a": "2"}})), Ok(false));
    let expr = |op: &str, values: Value| {
        m(json!({"matchExpressions": [{"key": "a", "operator": op, "values": values}]}))
    };
    assert_eq!(expr("In", json!(["1", "3"])), Ok(true));
    assert_eq!(expr("NotIn", json!(["1"])), Ok(false));
    assert_eq!(expr("Exists", json!([])), Ok(true));
    assert_eq!(expr("DoesNotExist", json!([])), Ok(false));
    assert!(expr("In", json!([])).is_err(), "In needs values");
    // As the API server reads a LabelSelector: a null matchLabels is absent, a
    // matchExpressions that is not a list is not a selector.
    assert_eq!(m(json!({"matchLabels": null})), Ok(true));
    assert!(m(json!({"matchExpressions": {"key": "a"}})).is_err());
    assert!(expr("Near", json!(["1"])).is_err());
    let bad = pause_rule(
        "k",
        &kind(
            json!([{"match": {"matchPodConfig": {"selector": {"matchExpressions": [
                {"key": "gpu", "operator": "Like"}]}}}, "config": {}, "effect": {"pauseWorkspace": true}}]),
            probe(),
        ),
        "gpu_t4",
        "ns",
        &BTreeMap::new(),
    );
    assert!(matches!(bad, Err(IdleError::Selector { index: 0, .. })));
}

fn stated(last_activity: i64, eligible_after: i64, probe_end: i64) -> Statement {
    Statement {
        last_activity,
        eligible_after: Some(eligible_after),
        last_probe_end: Some(probe_end),
    }
}

fn short_rule() -> PauseRule {
    PauseRule {
        index: 0,
        seconds_since_active: 1600,
        min_running_seconds: 0,
        probe_interval_seconds: 300,
    }
}

#[test]
fn the_timescale_is_the_stated_threshold_over_the_rules() {
    let r = short_rule();
    // A simulator at activity scale 0.01 states 16 s for 1600 s.
    let scale = timescale(&r, &stated(1_000_000, 1_016_000, 1_000_500)).unwrap();
    assert!((scale - 0.01).abs() < 1e-9, "{scale}");
    assert_eq!(busy_cell_length(&r, scale), Duration::from_secs(22));
    assert_eq!(busy_print_every(&r, scale), Duration::from_millis(750));
    // A real cluster states the rule's own seconds.
    let real = timescale(&r, &stated(1_000_000, 2_600_000, 1_000_500)).unwrap();
    assert!((real - 1.0).abs() < 1e-9);
    assert_eq!(busy_print_every(&r, real), Duration::from_secs(60));
    assert_eq!(
        timescale(&r, &Statement::default()),
        None,
        "nothing stated yet"
    );
}

#[test]
fn eligibility_beyond_the_budget_fails_at_once_naming_threshold_and_budget() {
    let catch_all = PauseRule {
        index: 1,
        seconds_since_active: 14400,
        ..short_rule()
    };
    let now = 10_000_000;
    let s = stated(now, now + 14_400_000, now);
    let err = check_budget(
        "jupyterlab-resumable",
        &catch_all,
        &s,
        now,
        Duration::from_secs(900),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("activityRules[1] pauses after secondsSinceActive=14400 s"),
        "{msg}"
    );
    assert!(msg.contains("budget `idle_pause` (900s)"), "{msg}");
    // The short rule at the simulator's scale fits, with its probe interval.
    let s = stated(now, now + 16_000, now);
    check_budget("k", &short_rule(), &s, now, Duration::from_secs(20)).unwrap();
    assert!(check_budget("k", &short_rule(), &s, now, Duration::from_secs(18)).is_err());
}

#[test]
fn a_pause_is_accepted_only_on_a_probe_that_ended_after_eligibility() {
    assert_eq!(check_pause(&stated(1000, 17_000, 17_004)).unwrap(), 17_000);
    let early = check_pause(&stated(1000, 17_000, 16_000)).unwrap_err();
    assert!(
        matches!(early, IdleError::PausedEarly { early_ms: 1000, .. }),
        "{early}"
    );
    let unstated = check_pause(&Statement {
        last_activity: 1000,
        eligible_after: None,
        last_probe_end: Some(20_000),
    })
    .unwrap_err();
    assert!(matches!(
        unstated,
        IdleError::PausedWithoutEligibility { .. }
    ));
}

#[test]
fn a_busy_record_shows_whether_activity_kept_up_and_whether_a_pause_started() {
    let sample = |t: i64| BusySample {
        pause_started: false,
        last_activity: t,
    };
    let mut r = BusyRecord {
        activity_at_start: 1_000,
        samples: vec![sample(1_000), sample(4_000), sample(21_000)],
        threshold: Duration::from_secs(16),
    };
    assert!(!r.paused());
    assert_eq!(r.advance(), Duration::from_secs(20));
    assert!(r.advanced_past_threshold());
    // A silent cell: the probe keeps reporting the activity from before it.
    r.samples = vec![sample(1_000), sample(1_000)];
    assert!(!r.advanced_past_threshold());
    r.samples.push(BusySample {
        pause_started: true,
        last_activity: 1_000,
    });
    assert!(r.paused());
}
