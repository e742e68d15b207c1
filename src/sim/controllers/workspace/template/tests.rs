use super::*;

fn kind() -> Value {
    json!({
        "metadata": {"name": "jupyterlab"},
        "spec": {"podTemplate": {
            "podMetadata": {"labels": {"team": "kind", "tier": "kind"}, "annotations": {"a": "kind"}},
            "volumeMounts": {"home": "/home/jovyan"},
            "extraEnv": [{"name": "NB_PREFIX", "value": "{{ httpPathPrefix \"jupyterlab\" }}"},
                         {"name": "OTHER", "value": "x{{httpPathPrefix \"nope\"}}y"}],
            "extraVolumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
            "extraVolumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                                  {"name": "missing", "mountPath": "/x"}],
            "options": {
                "imageConfig": {"values": [
                    {"id": "v1", "redirect": {"to": "v2"}, "spec": {"image": "img:v1", "ports": [{"id": "jupyterlab", "port": 8888}]}},
                    {"id": "v2", "redirect": {"to": "v3"}, "spec": {"image": "img:v2", "ports": [{"id": "jupyterlab", "port": 8888}]}},
                    {"id": "v3", "spec": {"image": "img:v3", "ports": [{"id": "jupyterlab", "port": 8888}]}},
                    {"id": "loop-a", "redirect": {"to": "loop-b"}, "spec": {}},
                    {"id": "loop-b", "redirect": {"to": "loop-a"}, "spec": {}},
                    {"id": "dangling", "redirect": {"to": "gone"}, "spec": {}},
                    {"id": "dup", "spec": {"image": "i", "ports": [{"id": "a", "port": 1}, {"id": "b", "port": 1}]}}
                ]},
                "podConfig": {"values": [
                    {"id": "gpu", "spec": {
                        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}}
                ]}
            }
        }}
    })
}

fn workspace() -> Value {
    json!({
        "metadata": {"name": "demo", "namespace": "team-a", "uid": "u-1"},
        "spec": {"paused": false, "kind": "jupyterlab", "podTemplate": {
            "podMetadata": {"labels": {"team": "ws"}},
            "volumes": {"home": "demo-home", "data": [{"pvcName": "d", "mountPath": "/home/jovyan"}, {"pvcName": "e", "mountPath": "/data", "readOnly": true}]},
            "options": {"imageConfig": "v1", "podConfig": "gpu"}}}
    })
}

#[test]
fn redirects_are_followed_and_reported() {
    let k = kind();
    let s = select_option(&k, "imageConfig", "v1").unwrap();
    assert_eq!(s.desired, "v3");
    assert!(s.pending_restart());
    assert_eq!(
        text_at(s.spec(), "/image"),
        "img:v1",
        "the current option stays in use"
    );
    assert_eq!(
        s.status(),
        json!({"desired": "v3", "redirectChain": [{"source": "v1", "target": "v2"}, {"source": "v2", "target": "v3"}]})
    );
    let s = select_option(&k, "imageConfig", "v3").unwrap();
    assert_eq!(s.status(), json!({"desired": "v3", "redirectChain": []}));
    assert!(!s.pending_restart());

    let err = |id: &str| {
        select_option(&k, "imageConfig", id)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(err("nope"), r#"imageConfig with id "nope" not found"#);
    assert_eq!(
        err("loop-a"),
        r#"imageConfig with id "loop-b" has a circular redirect"#
    );
    assert_eq!(
        err("dangling"),
        r#"imageConfig with id "gone" not found, was redirected from "dangling""#
    );
}

#[test]
fn names_follow_upstream_lengths() {
    assert_eq!(name_prefix("demo", 52), "ws-demo-");
    let long = "a".repeat(80);
    let p = name_prefix(&long, 52);
    assert_eq!(p.len(), 52 - 6);
    assert!(p.ends_with('-'));
    assert_eq!(service_account_name("demo"), "ws-demo");
    let long = "b".repeat(300);
    let sa = service_account_name(&long);
    assert_eq!(sa.len(), 253);
    assert_ne!(
        sa,
        service_account_name(&"b".repeat(301)),
        "hashed suffix differs"
    );
}

#[test]
fn render_supports_http_path_prefix_only() {
    let f = |id: &str| format!("/p/{id}/");
    assert_eq!(
        render("{{ httpPathPrefix \"lab\" }}", f).unwrap(),
        "/p/lab/"
    );
    assert_eq!(
        render("a{{- httpPathPrefix \"x\" -}}b", f).unwrap(),
        "a/p/x/b"
    );
    assert_eq!(render("plain", f).unwrap(), "plain");
    assert!(
        render("{{ env \"x\" }}", f)
            .unwrap_err()
            .contains("not defined")
    );
    assert!(render("{{ httpPathPrefix", f).is_err());
}

#[test]
fn statefulset_carries_the_pod_template() {
    let (k, ws) = (kind(), workspace());
    let image = select_option(&k, "imageConfig", "v1").unwrap();
    let pod_config = select_option(&k, "podConfig", "gpu").unwrap();
    let inputs = Inputs {
        workspace: &ws,
        kind: &k,
        image: &image,
        pod_config: &pod_config,
        service_account: "ws-demo",
    };
    let sts = stateful_set(&inputs).unwrap();
    assert_eq!(sts["metadata"]["generateName"], "ws-demo-");
    assert_eq!(sts["metadata"]["labels"][WORKSPACE_LABEL], "demo");
    assert_eq!(sts["metadata"]["ownerReferences"][0]["uid"], "u-1");
    assert_eq!(sts["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(sts["spec"]["replicas"], 1);
    let sel = json!({WORKSPACE_LABEL: "demo", SELECTOR_LABEL: "demo"});
    assert_eq!(sts["spec"]["selector"]["matchLabels"], sel);
    let tmpl = &sts["spec"]["template"];
    assert_eq!(
        tmpl["metadata"]["labels"]["team"], "ws",
        "the Workspace wins"
    );
    assert_eq!(tmpl["metadata"]["labels"]["tier"], "kind");
    assert_eq!(tmpl["metadata"]["labels"][SELECTOR_LABEL], "demo");
    assert_eq!(tmpl["metadata"]["annotations"]["a"], "kind");
    let pod = &tmpl["spec"];
    assert_eq!(pod["serviceAccountName"], "ws-demo");
    assert_eq!(
        pod["nodeSelector"]["cloud.google.com/gke-accelerator"],
        "nvidia-tesla-t4"
    );
    assert_eq!(pod["tolerations"][0]["key"], "nvidia.com/gpu");
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "main");
    assert_eq!(c["image"], "img:v1");
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        c["ports"],
        json!([{"name": "http-8888", "containerPort": 8888, "protocol": "TCP"}])
    );
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], 1);
    let env = c["env"].as_array().unwrap();
    assert_eq!(
        env[0],
        json!({"name": "NB_PREFIX", "value": "/workspace/connect/team-a/demo/jupyterlab/"})
    );
    assert_eq!(env[1]["value"], "xy", "an unknown port id renders empty");
    assert_eq!(env[2]["valueFrom"]["secretKeyRef"]["name"], "jupyter-token");
    // Home first; the data volume on the home path is skipped; the extra mount without
    // a volume is skipped.
    let vols: Vec<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vols, ["home-volume", "data-volume-1", "dshm"]);
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "demo-home"
    );
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert_eq!(mounts, ["/home/jovyan", "/data", "/dev/shm"]);
    assert_eq!(c["volumeMounts"][1]["readOnly"], true);

    let mut paused = ws.clone();
    paused["spec"]["paused"] = json!(true);
    let inputs = Inputs {
        workspace: &paused,
        ..inputs
    };
    let sts0 = stateful_set(&inputs).unwrap();
    assert_eq!(sts0["spec"]["replicas"], 0);
    let found = {
        let mut f = sts.clone();
        f["metadata"]["name"] = json!("ws-demo-abcde");
        f["status"] = json!({"replicas": 1});
        f
    };
    assert!(updated("StatefulSet", &sts, &found).is_none());
    let next = updated("StatefulSet", &sts0, &found).unwrap();
    assert_eq!(next["spec"]["replicas"], 0);
    assert_eq!(next["metadata"]["name"], "ws-demo-abcde");
    // Only managed fields count: a status or a name of its own is no difference; a label
    // or an annotation added, changed or dropped is.
    let mut labelled = found.clone();
    labelled["metadata"]["labels"]["extra"] = json!("x");
    assert_eq!(updated("StatefulSet", &sts, &labelled), Some(found.clone()));
    let mut annotated = found.clone();
    annotated["metadata"]["annotations"] = json!({"a": "b"});
    let fixed = updated("StatefulSet", &sts, &annotated).unwrap();
    assert_eq!(
        fixed["metadata"].get("annotations"),
        sts["metadata"].get("annotations")
    );
    // A managed field the desired object lacks is written as null, once.
    let (mut bare, mut without) = (sts.clone(), found.clone());
    bare["spec"].as_object_mut().unwrap().remove("selector");
    without["spec"].as_object_mut().unwrap().remove("selector");
    let nulled = updated("StatefulSet", &bare, &without).expect("the null is written");
    assert_eq!(nulled["spec"]["selector"], Value::Null);
    assert!(updated("StatefulSet", &bare, &nulled).is_none());
}

#[test]
fn service_and_duplicate_ports() {
    let (k, ws) = (kind(), workspace());
    let image = select_option(&k, "imageConfig", "v3").unwrap();
    let svc = service(&ws, &image).unwrap();
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["ports"][0]["name"], "http-8888");
    assert_eq!(svc["spec"]["ports"][0]["port"], 8888);
    assert_eq!(svc["spec"]["selector"][SELECTOR_LABEL], "demo");
    let dup = select_option(&k, "imageConfig", "dup").unwrap();
    assert_eq!(
        service(&ws, &dup).unwrap_err().to_string(),
        "duplicate port number 1 in imageConfig"
    );
}
