//! `wsgate drill` on the embedded simulator: N workspaces resume at once on M GPUs; every
//! one ends Restored, waits are measured, nothing is left; bad N/M are usage errors.

use crate::common::{text, wsgate};

#[test]
fn a_small_drill_restores_every_workspace_and_reports_the_waits() {
    let dir = tempfile::tempdir().unwrap();
    let reports = format!("reports.dir={}", dir.path().display());
    let o = wsgate(&[
        "drill",
        "--workspaces",
        "4",
        "--gpus",
        "1",
        "--sample",
        "1",
        "--set",
        &reports,
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("all 4 workspaces restored"), "{out}");
    let report = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("drill.json"))
        .find(|p| p.exists())
        .expect("drill.json written");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(
        results.iter().filter(|x| x["sampled"] == true).count(),
        1,
        "{r}"
    );
    for x in results {
        assert_eq!(x["max_attempts"], 1, "{x}");
        assert!(
            x["verdict"].as_str().unwrap().starts_with("Restored"),
            "{x}"
        );
    }
    // One GPU for four: the last one waited for three others to be done.
    let waited: Vec<f64> = results
        .iter()
        .map(|x| x["waited"].as_f64().unwrap())
        .collect();
    let (min, max) = waited
        .iter()
        .fold((f64::MAX, 0f64), |(a, b), w| (a.min(*w), b.max(*w)));
    assert!(max > min, "{waited:?}");
    assert_eq!(r["waited"]["count"], 4);
}

#[test]
fn a_drill_needs_fewer_gpus_than_workspaces() {
    for args in [
        ["--workspaces", "2", "--gpus", "2"],
        ["--workspaces", "3", "--gpus", "0"],
    ] {
        let mut all = vec!["drill"];
        all.extend(args);
        let o = wsgate(&all);
        assert_eq!(
            o.status.code(),
            Some(wsgate::exit_code::USAGE),
            "{}",
            text(&o)
        );
        assert!(text(&o).contains("a drill needs 0 < M < N"), "{}", text(&o));
    }
}
