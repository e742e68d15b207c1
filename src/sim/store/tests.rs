use super::*;
use serde_json::json;

fn kind(plural: &str) -> &'static KindInfo {
    kinds::KINDS.iter().find(|k| k.plural == plural).unwrap()
}

fn store_with_ns() -> Arc<Store> {
    let s = Store::new(100);
    s.create(
        kind("namespaces"),
        None,
        json!({"metadata": {"name": "n"}}),
        false,
    )
    .unwrap();
    s
}

fn ws(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"paused": false, "kind": "k"}})
}

fn rv(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn create_sets_system_metadata_and_rejects_duplicates() {
    let s = store_with_ns();
    let w = s
        .create(kind("workspaces"), Some("n"), ws("a"), false)
        .unwrap();
    assert_eq!(w["metadata"]["generation"], 1);
    assert_eq!(w["metadata"]["namespace"], "n");
    assert_eq!(w["apiVersion"], "kubeflow.org/v1beta1");
    assert!(w["metadata"]["uid"].as_str().unwrap().len() == 36);
    assert!(w["metadata"]["creationTimestamp"].is_string());
    let e = s
        .create(kind("workspaces"), Some("n"), ws("a"), false)
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
    let e = s
        .create(kind("workspaces"), Some("missing"), ws("b"), false)
        .unwrap_err();
    assert_eq!(e.code, 404);
    assert_eq!(e.message, "namespaces \"missing\" not found");
}

#[test]
fn generate_name_and_status_dropped_on_create() {
    let s = store_with_ns();
    let w = s
        .create(
            kind("workspaces"),
            Some("n"),
            json!({"metadata": {"generateName": "ws-x-"}, "spec": {}, "status": {"state": "Running"}}),
            false,
        )
        .unwrap();
    let name = w["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("ws-x-") && name.len() == 10);
    assert!(w.get("status").is_none());
}

#[test]
fn resource_versions_increase_and_generation_counts_spec_changes() {
    let s = store_with_ns();
    let k = kind("workspaces");
    let a = s.create(k, Some("n"), ws("a"), false).unwrap();
    let b = s
        .modify(k, Some("n"), "a", true, false, |cur| {
            let mut c = cur.clone();
            c["status"] = json!({"state": "Running"});
            Ok(c)
        })
        .unwrap();
    assert!(rv(&b) > rv(&a));
    assert_eq!(
        b["metadata"]["generation"], 1,
        "status writes keep the generation"
    );
    let c = s
        .modify(k, Some("n"), "a", false, false, |cur| {
            let mut c = cur.clone();
            c["spec"]["paused"] = json!(true);
            Ok(c)
        })
        .unwrap();
    assert_eq!(c["metadata"]["generation"], 2);
    assert_eq!(c["status"]["state"], "Running");
    let d = s
        .modify(k, Some("n"), "a", false, false, |cur| {
            let mut c = cur.clone();
            c["metadata"]["labels"] = json!({"x": "y"});
            Ok(c)
        })
        .unwrap();
    assert_eq!(
        d["metadata"]["generation"], 2,
        "metadata changes keep the generation"
    );
}

#[test]
fn stale_resource_version_conflicts() {
    let s = store_with_ns();
    let k = kind("workspaces");
    let a = s.create(k, Some("n"), ws("a"), false).unwrap();
    s.modify(k, Some("n"), "a", false, false, |cur| {
        let mut c = cur.clone();
        c["spec"]["paused"] = json!(true);
        Ok(c)
    })
    .unwrap();
    let e = s
        .modify(k, Some("n"), "a", false, false, |_| Ok((*a).clone()))
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let s = store_with_ns();
    let k = kind("workspaces");
    let mut o = ws("a");
    o["metadata"]["finalizers"] = json!(["x/y"]);
    s.create(k, Some("n"), o, false).unwrap();
    let out = s
        .delete(k, Some("n"), "a", &DeleteOptions::default())
        .unwrap();
    let DeleteOutcome::Marked(m) = out else {
        panic!("expected a mark")
    };
    assert!(m["metadata"]["deletionTimestamp"].is_string());
    let e = s
        .modify(k, Some("n"), "a", false, false, |cur| {
            let mut c = cur.clone();
            c["metadata"]["finalizers"] = json!(["x/y", "new/one"]);
            Ok(c)
        })
        .unwrap_err();
    assert_eq!(e.code, 422);
    s.modify(k, Some("n"), "a", false, false, |cur| {
        let mut c = cur.clone();
        c["metadata"]["finalizers"] = json!([]);
        Ok(c)
    })
    .unwrap();
    assert_eq!(s.get(k, Some("n"), "a").unwrap_err().code, 404);
}

#[test]
fn owner_cascade_and_orphan() {
    let s = store_with_ns();
    let w = s
        .create(kind("workspaces"), Some("n"), ws("a"), false)
        .unwrap();
    let owner = json!([{"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "name": "a", "uid": w["metadata"]["uid"], "controller": true}]);
    for name in ["svc-1", "svc-2"] {
        s.create(
            kind("services"),
            Some("n"),
            json!({"metadata": {"name": name, "ownerReferences": owner}, "spec": {}}),
            false,
        )
        .unwrap();
    }
    s.delete(
        kind("workspaces"),
        Some("n"),
        "a",
        &DeleteOptions::default(),
    )
    .unwrap();
    assert_eq!(
        s.get(kind("services"), Some("n"), "svc-1")
            .unwrap_err()
            .code,
        404
    );
    assert_eq!(
        s.get(kind("services"), Some("n"), "svc-2")
            .unwrap_err()
            .code,
        404
    );

    let w = s
        .create(kind("workspaces"), Some("n"), ws("b"), false)
        .unwrap();
    let owner = json!([{"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "name": "b", "uid": w["metadata"]["uid"]}]);
    s.create(
        kind("services"),
        Some("n"),
        json!({"metadata": {"name": "kept", "ownerReferences": owner}, "spec": {}}),
        false,
    )
    .unwrap();
    let opts = DeleteOptions {
        propagation: Propagation::Orphan,
        ..Default::default()
    };
    s.delete(kind("workspaces"), Some("n"), "b", &opts).unwrap();
    let kept = s.get(kind("services"), Some("n"), "kept").unwrap();
    assert!(
        kept["metadata"].get("ownerReferences").is_none(),
        "emptied and dropped"
    );
}

#[test]
fn a_dependent_created_after_its_owner_is_gone_is_collected() {
    let s = store_with_ns();
    let w = s
        .create(kind("workspaces"), Some("n"), ws("a"), false)
        .unwrap();
    let uid = w["metadata"]["uid"].clone();
    let owned = |name: &str, uid: &Value| {
        json!({"metadata": {"name": name, "ownerReferences": [{"apiVersion": "kubeflow.org/v1beta1",
            "kind": "Workspace", "name": "a", "uid": uid, "controller": true}]}, "spec": {}})
    };
    // The owner exists: kept.
    s.create(kind("services"), Some("n"), owned("live", &uid), false)
        .unwrap();
    s.delete(
        kind("workspaces"),
        Some("n"),
        "a",
        &DeleteOptions::default(),
    )
    .unwrap();
    // Created after the cascade (a controller that read the owner just before): collected.
    let late = s
        .create(kind("services"), Some("n"), owned("late", &uid), false)
        .unwrap();
    assert_eq!(
        late["metadata"]["name"], "late",
        "the create itself succeeds"
    );
    assert_eq!(
        s.get(kind("services"), Some("n"), "late").unwrap_err().code,
        404
    );
    // An owner of the same name but another uid is not the owner either.
    s.create(kind("workspaces"), Some("n"), ws("a"), false)
        .unwrap();
    s.create(kind("services"), Some("n"), owned("stale", &uid), false)
        .unwrap();
    assert_eq!(
        s.get(kind("services"), Some("n"), "stale")
            .unwrap_err()
            .code,
        404
    );
    // A reference to a kind the store does not serve is left alone.
    s.create(
        kind("services"),
        Some("n"),
        json!({"metadata": {"name": "foreign", "ownerReferences": [{"apiVersion": "example.com/v1",
            "kind": "Thing", "name": "t", "uid": "u"}]}, "spec": {}}),
        false,
    )
    .unwrap();
    assert!(s.get(kind("services"), Some("n"), "foreign").is_ok());
}

#[test]
fn delete_preconditions_are_checked() {
    let s = store_with_ns();
    let k = kind("workspaces");
    s.create(k, Some("n"), ws("a"), false).unwrap();
    let opts = DeleteOptions {
        precondition_uid: Some("not-the-uid".into()),
        ..Default::default()
    };
    assert_eq!(s.delete(k, Some("n"), "a", &opts).unwrap_err().code, 409);
    assert!(s.get(k, Some("n"), "a").is_ok());
}

#[test]
fn deleting_a_namespace_deletes_its_contents() {
    let s = store_with_ns();
    s.create(kind("workspaces"), Some("n"), ws("a"), false)
        .unwrap();
    s.delete(kind("namespaces"), None, "n", &DeleteOptions::default())
        .unwrap();
    assert_eq!(
        s.get(kind("workspaces"), Some("n"), "a").unwrap_err().code,
        404
    );
}

#[test]
fn dry_run_persists_nothing() {
    let s = store_with_ns();
    let before = s.resource_version();
    s.create(kind("workspaces"), Some("n"), ws("a"), true)
        .unwrap();
    assert_eq!(s.resource_version(), before);
    assert_eq!(
        s.get(kind("workspaces"), Some("n"), "a").unwrap_err().code,
        404
    );
}

#[test]
fn subscribe_replays_after_rv_and_expires_after_compaction() {
    let s = store_with_ns();
    let k = kind("workspaces");
    let a = s.create(k, Some("n"), ws("a"), false).unwrap();
    s.create(k, Some("n"), ws("b"), false).unwrap();
    let none = (LabelSelector::default(), FieldSelector::default());
    let sub = s
        .subscribe(k, Some("n"), &none.0, &none.1, WatchStart::After(rv(&a)))
        .unwrap();
    assert_eq!(sub.replay.len(), 1);
    assert_eq!(sub.replay[0].object["metadata"]["name"], "b");
    let cur = s
        .subscribe(k, Some("n"), &none.0, &none.1, WatchStart::Current)
        .unwrap();
    assert_eq!(cur.initial.len(), 2);
    s.compact();
    let e = s
        .subscribe(k, Some("n"), &none.0, &none.1, WatchStart::After(rv(&a)))
        .err()
        .unwrap();
    assert_eq!((e.code, e.reason), (410, "Expired"));
    // The resourceVersion a list just returned is always accepted.
    let (_, list_rv) = s.list(k, Some("n"), &none.0, &none.1);
    assert!(
        s.subscribe(k, Some("n"), &none.0, &none.1, WatchStart::After(list_rv))
            .is_ok()
    );
}

#[test]
fn mutations_rewrite_creates_and_main_resource_writes_but_not_status() {
    let s = store_with_ns();
    s.add_mutation(Box::new(|kind, old, obj, _list| {
        if kind.kind == "Workspace" {
            // Like the snapshot add-on: a pause is held back while a checkpoint runs.
            let pausing =
                old.is_some_and(|o| o["spec"]["paused"] == false) && obj["spec"]["paused"] == true;
            if pausing {
                obj["spec"]["paused"] = json!(false);
                obj["metadata"]["annotations"]["held"] = json!("yes");
            }
            if old.is_none() {
                obj["metadata"]["labels"]["mutated"] = json!("on-create");
            }
        }
        Ok(())
    }));
    let k = kind("workspaces");
    let w = s.create(k, Some("n"), ws("a"), false).unwrap();
    assert_eq!(w["metadata"]["labels"]["mutated"], "on-create");
    let w = s
        .modify(k, Some("n"), "a", false, false, |cur| {
            let mut c = cur.clone();
            c["spec"]["paused"] = json!(true);
            Ok(c)
        })
        .unwrap();
    assert_eq!(
        w["spec"]["paused"], false,
        "the pause was rewritten inside the same write"
    );
    assert_eq!(w["metadata"]["annotations"]["held"], "yes");
    let w = s
        .modify(k, Some("n"), "a", true, false, |cur| {
            let mut c = cur.clone();
            c["status"] = json!({"state": "Running"});
            Ok(c)
        })
        .unwrap();
    assert_eq!(w["status"]["state"], "Running");
}

#[test]
fn indexes_follow_every_write_and_leave_nothing_behind() {
    let s = store_with_ns();
    let empty = s.lock().index.sizes();
    let pods = kind("pods");
    let owner = s
        .create(kind("workspaces"), Some("n"), ws("owner"), false)
        .unwrap();
    let owner_uid = owner["metadata"]["uid"].as_str().unwrap().to_string();
    let pod = |name: &str, node: Option<&str>, app: &str| {
        let mut p = json!({"metadata": {"name": name, "labels": {"app": app},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
                "name": "owner", "uid": owner_uid}]},
            "spec": {"containers": [{"name": "c"}]}});
        if let Some(node) = node {
            p["spec"]["nodeName"] = json!(node);
        }
        p
    };
    for (name, node, app) in [
        ("b", Some("n1"), "x"),
        ("a", None, "x"),
        ("c", Some("n1"), "y"),
    ] {
        s.create(pods, Some("n"), pod(name, node, app), false)
            .unwrap();
    }
    let names = |objs: Vec<Arc<Value>>| -> Vec<String> {
        objs.iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(s.owned_by(pods, Some("n"), &owner_uid)),
        ["a", "b", "c"]
    );
    assert!(s.owned_by(pods, Some("other"), &owner_uid).is_empty());
    assert!(s.owned_by(kind("services"), None, &owner_uid).is_empty());
    assert_eq!(names(s.labelled(pods, Some("n"), "app", "x")), ["a", "b"]);
    assert_eq!(
        names(s.by_field(pods, None, "/spec/nodeName", "n1")),
        ["b", "c"]
    );
    assert_eq!(names(s.by_field(pods, None, "/spec/nodeName", "")), ["a"]);
    let a = s.find(pods, Some("n"), "a").unwrap();
    let a_uid = a["metadata"]["uid"].as_str().unwrap();
    assert_eq!(s.by_uid(a_uid).unwrap()["metadata"]["name"], "a");

    // A write moves the object between index entries.
    s.modify(pods, Some("n"), "a", false, false, |cur| {
        let mut next = cur.clone();
        next["metadata"]["labels"]["app"] = json!("y");
        next["spec"]["nodeName"] = json!("n1");
        Ok(next)
    })
    .unwrap();
    assert_eq!(names(s.labelled(pods, Some("n"), "app", "x")), ["b"]);
    assert_eq!(names(s.labelled(pods, Some("n"), "app", "y")), ["a", "c"]);
    assert!(s.by_field(pods, None, "/spec/nodeName", "").is_empty());

    // Deleting the owner collects its dependents, found through the owner index.
    s.delete(
        kind("workspaces"),
        Some("n"),
        "owner",
        &DeleteOptions::default(),
    )
    .unwrap();
    assert!(s.all(pods, None).is_empty());
    assert!(s.by_uid(&owner_uid).is_none());
    assert_eq!(
        s.lock().index.sizes(),
        empty,
        "no entry outlives its object"
    );
}

#[test]
fn selecting_finds_every_policy_that_may_select_the_labels_and_no_other() {
    let s = store_with_ns();
    let policies = kind("podsnapshotpolicies");
    let empty = s.lock().index.sizes();
    for (name, selector) in [
        ("by-ws", json!({"matchLabels": {"ws": "a"}})),
        (
            "by-ws-and-team",
            json!({"matchLabels": {"ws": "a", "team": "x"}}),
        ),
        ("other-ws", json!({"matchLabels": {"ws": "b"}})),
        (
            "by-expression",
            json!({"matchExpressions": [{"key": "ws", "operator": "Exists"}]}),
        ),
    ] {
        s.create(
            policies,
            Some("n"),
            json!({"metadata": {"name": name}, "spec": {"selector": selector}}),
            false,
        )
        .unwrap();
    }
    let names = |labels: Value| -> Vec<String> {
        s.selecting(policies, Some("n"), Some(&labels))
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    // A superset of the policies that select the labels, each once, sorted by name.
    assert_eq!(
        names(json!({"ws": "a", "team": "x"})),
        ["by-expression", "by-ws", "by-ws-and-team"]
    );
    assert_eq!(names(json!({"ws": "b"})), ["by-expression", "other-ws"]);
    assert_eq!(names(json!({})), ["by-expression"]);
    s.delete(
        policies,
        Some("n"),
        "by-ws-and-team",
        &DeleteOptions::default(),
    )
    .unwrap();
    assert_eq!(names(json!({"team": "x"})), ["by-expression"]);
    for name in ["by-ws", "other-ws", "by-expression"] {
        s.delete(policies, Some("n"), name, &DeleteOptions::default())
            .unwrap();
    }
    assert_eq!(s.lock().index.sizes(), empty);
}

#[test]
fn orphaning_and_namespace_deletion_keep_the_indexes_true() {
    let s = store_with_ns();
    let empty = s.lock().index.sizes();
    let owner = s
        .create(kind("workspaces"), Some("n"), ws("owner"), false)
        .unwrap();
    let owner_uid = owner["metadata"]["uid"].as_str().unwrap().to_string();
    s.create(
        kind("configmaps"),
        Some("n"),
        json!({"metadata": {"name": "dep", "labels": {"app": "x"}, "ownerReferences": [
            {"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "name": "owner",
             "uid": owner_uid}]}}),
        false,
    )
    .unwrap();
    let orphan = DeleteOptions {
        propagation: Propagation::Orphan,
        ..Default::default()
    };
    s.delete(kind("workspaces"), Some("n"), "owner", &orphan)
        .unwrap();
    assert!(
        s.owned_by(kind("configmaps"), Some("n"), &owner_uid)
            .is_empty()
    );
    assert_eq!(
        s.labelled(kind("configmaps"), Some("n"), "app", "x").len(),
        1
    );
    s.delete(kind("namespaces"), None, "n", &DeleteOptions::default())
        .unwrap();
    assert!(s.labelled(kind("configmaps"), None, "app", "x").is_empty());
    let after = s.lock().index.sizes();
    // Only the namespace itself was indexed before; now nothing is.
    assert_eq!(after, [0, 0, 0, 0, 0], "before: {empty:?}");
}

#[test]
fn hooks_read_one_object_by_name_and_pods_by_label_through_the_indexes() {
    let s = store_with_ns();
    s.create(
        kind("namespaces"),
        None,
        json!({"metadata": {"name": "m"}}),
        false,
    )
    .unwrap();
    let pods = kind("pods");
    for (ns, name, ws) in [("n", "a-0", "a"), ("n", "b-0", "b"), ("m", "a-0", "a")] {
        s.create(
            pods,
            Some(ns),
            json!({"metadata": {"name": name, "labels": {"workspace": ws}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}),
            false,
        )
        .unwrap();
    }
    s.create(kind("workspaces"), Some("n"), ws("a"), false)
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    s.add_mutation(Box::new(move |k, _old, obj, read| {
        if k.kind == "ConfigMap" {
            let names = |objs: Vec<Arc<Value>>| -> Vec<String> {
                objs.iter()
                    .map(|o| format!("{}/{}", o["metadata"]["namespace"], o["metadata"]["name"]))
                    .collect()
            };
            let mut r = record.lock().unwrap();
            r.push(names(read.labelled(pods, Some("n"), "workspace", "a")));
            r.push(names(read.labelled(pods, None, "workspace", "a")));
            r.push(names(read.labelled(pods, Some("n"), "workspace", "c")));
            let ws = kind("workspaces");
            r.push(names(read.get(ws, Some("n"), "a").into_iter().collect()));
            r.push(names(read.get(ws, Some("m"), "a").into_iter().collect()));
            r.push(names(read.list(pods, Some("n"))));
            obj["metadata"]["labels"]["read"] = json!("yes");
        }
        Ok(())
    }));
    let cm = s
        .create(
            kind("configmaps"),
            Some("n"),
            json!({"metadata": {"name": "x"}}),
            false,
        )
        .unwrap();
    assert_eq!(cm["metadata"]["labels"]["read"], "yes");
    let q = |s: &str| {
        format!(
            "\"{}\"/\"{}\"",
            s.split('/').next().unwrap(),
            s.split('/').nth(1).unwrap()
        )
    };
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            vec![q("n/a-0")],
            vec![q("m/a-0"), q("n/a-0")],
            vec![],
            vec![q("n/a")],
            vec![],
            vec![q("n/a-0"), q("n/b-0")],
        ]
    );
}

#[test]
fn a_list_function_reads_one_object_as_the_store_does() {
    let obj = |ns: Option<&str>, name: &str| {
        let mut o = json!({"metadata": {"name": name}});
        if let Some(ns) = ns {
            o["metadata"]["namespace"] = json!(ns);
        }
        Arc::new(o)
    };
    // A list function that ignores the namespace asked for, as a careless test's might.
    let all = vec![obj(Some("m"), "a"), obj(Some("n"), "a"), obj(None, "m")];
    let read = move |_: &KindInfo, _: Option<&str>| all.clone();
    let in_ns = |o: Option<Arc<Value>>| o.map(|o| o["metadata"]["namespace"].clone());
    let ws = kind("workspaces");
    assert_eq!(
        in_ns(Reader::get(&read, ws, Some("n"), "a")),
        Some(json!("n"))
    );
    assert_eq!(
        in_ns(Reader::get(&read, ws, Some("m"), "a")),
        Some(json!("m"))
    );
    assert_eq!(
        Reader::get(&read, ws, None, "a"),
        None,
        "no namespace named"
    );
    assert!(Reader::get(&read, kind("namespaces"), None, "m").is_some());
}
