//! The simulator's API through the real kube-rs client: CRUD, patches, status, conflicts,
//! finalizers, owner cascade, selectors, pagination and every watch behaviour kube relies on.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use wsgate::platform::crd::{Workspace, WorkspaceState};

use crate::common::start_sim;

const NS: &str = "wsgate-test";

fn workspace(name: &str) -> Workspace {
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Workspace",
        "metadata": {"name": name, "labels": {"app": "nb", "tier": "gold"}},
        "spec": {"paused": false, "kind": "jupyterlab-resumable", "podTemplate": {
            "volumes": {"home": format!("{name}-home")},
            "options": {"imageConfig": "jupyterlab-cpu", "podConfig": "gpu_t4_spot"}}}
    }))
    .unwrap()
}

fn pod(name: &str, node: &str, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
    }))
    .map(|mut p: Pod| {
        p.status = Some(serde_json::from_value(json!({"phase": phase})).unwrap());
        p
    })
    .unwrap()
}

#[tokio::test]
async fn workspace_crud_and_version() {
    let sim = start_sim().await;
    let client = sim.client().await.unwrap();
    let v = client.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "32"));
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let created = api
        .create(&PostParams::default(), &workspace("ws-a"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());
    let err = api
        .create(&PostParams::default(), &workspace("ws-a"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );
    let got = api.get("ws-a").await.unwrap();
    assert_eq!(got.spec.pod_template.options.pod_config, "gpu_t4_spot");
    assert!(api.get_opt("missing").await.unwrap().is_none());
    let mut replaced = got.clone();
    replaced.spec.paused = true;
    let replaced = api
        .replace("ws-a", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert!(replaced.spec.paused);
    assert_eq!(replaced.metadata.generation, Some(2));
    // A stale resourceVersion conflicts.
    let err = api
        .replace("ws-a", &PostParams::default(), &got)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    api.delete("ws-a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("ws-a").await.unwrap().is_none());
}

#[tokio::test]
async fn every_patch_kind_and_status_subresource() {
    let sim = start_sim().await;
    let api: Api<Workspace> = Api::namespaced(sim.client().await.unwrap(), NS);
    api.create(&PostParams::default(), &workspace("ws-p"))
        .await
        .unwrap();
    let pp = PatchParams::default();
    let w = api
        .patch(
            "ws-p",
            &pp,
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    assert!(w.spec.paused);
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/paused", "value": true},
        {"op": "replace", "path": "/spec/paused", "value": false}
    ]))
    .unwrap();
    let w = api
        .patch("ws-p", &pp, &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert!(!w.spec.paused);
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/paused", "value": true}]))
            .unwrap();
    let err = api
        .patch("ws-p", &pp, &Patch::<()>::Json(failing))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err:?}"
    );

    // Server-side apply updates, and creates what is absent (upsert).
    let apply = PatchParams::apply("wsgate-test").force();
    let mut desired = workspace("ws-applied");
    desired.metadata.labels = Some([("applied".to_string(), "yes".to_string())].into());
    let w = api
        .patch("ws-applied", &apply, &Patch::Apply(&desired))
        .await
        .unwrap();
    assert_eq!(w.labels().get("applied").map(String::as_str), Some("yes"));
    let w = api
        .patch("ws-applied", &apply, &Patch::Apply(json!({"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "spec": {"paused": true}})))
        .await
        .unwrap();
    assert!(w.spec.paused);

    // Status goes through /status only; a spec change there is ignored, and vice versa.
    let status = json!({"status": {"state": "Paused", "stateMessage": "Workspace is paused", "pauseTime": 1}, "spec": {"paused": false}});
    let w = api
        .patch_status("ws-p", &pp, &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(w.status.as_ref().unwrap().state, WorkspaceState::Paused);
    assert!(!w.spec.paused, "the spec is unchanged by a status write");
    let w = api
        .patch(
            "ws-p",
            &pp,
            &Patch::Merge(json!({"status": {"state": "Running"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        w.status.as_ref().unwrap().state,
        WorkspaceState::Paused,
        "main resource ignores status"
    );
    let s = api.get_status("ws-p").await.unwrap();
    assert_eq!(s.status.unwrap().state_message, "Workspace is paused");
    let w = api
        .patch_status("ws-p", &apply, &Patch::Apply(json!({"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "status": {"state": "Running"}})))
        .await
        .unwrap();
    assert_eq!(w.status.unwrap().state, WorkspaceState::Running);
}

/// A write that names a uid applies only to that object, as on a real API server: a patch
/// setting another uid fails the metadata validation (uid is immutable: 422), a PUT with
/// another uid fails its storage precondition (409); the object is unchanged. wsgate binds
/// its pause, resume and annotations to the Workspace it created so.
#[tokio::test]
async fn a_write_naming_another_uid_is_refused_and_changes_nothing() {
    let sim = start_sim().await;
    let client = sim.client().await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let created = api
        .create(&PostParams::default(), &workspace("ws-uid"))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();

    let patch =
        |uid: &str| Patch::Merge(json!({"metadata": {"uid": uid}, "spec": {"paused": true}}));
    let err = api
        .patch("ws-uid", &PatchParams::default(), &patch("someone-elses"))
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("an API error: {err}")
    };
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
    assert!(
        e.message
            .contains(r#"metadata.uid: Invalid value: "someone-elses": field is immutable"#),
        "{}",
        e.message
    );

    let mut other = api.get("ws-uid").await.unwrap();
    other.metadata.uid = Some("someone-elses".into());
    other.spec.paused = true;
    let err = api
        .replace("ws-uid", &PostParams::default(), &other)
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("an API error: {err}")
    };
    assert_eq!(e.code, 409, "{e:?}");
    assert!(
        e.message
            .contains("Precondition failed: UID in precondition: someone-elses"),
        "{}",
        e.message
    );
    let now = api.get("ws-uid").await.unwrap();
    assert!(!now.spec.paused, "refused writes changed nothing");
    assert_eq!(
        now.metadata.resource_version,
        created.metadata.resource_version
    );

    // The object's own uid passes.
    let ok = api
        .patch("ws-uid", &PatchParams::default(), &patch(&uid))
        .await
        .unwrap();
    assert!(ok.spec.paused);
}

#[tokio::test]
async fn finalizers_and_owner_cascade() {
    let sim = start_sim().await;
    let client = sim.client().await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let mut w = workspace("ws-f");
    w.metadata.finalizers = Some(vec!["wsgate.dev/test".into()]);
    let w = api.create(&PostParams::default(), &w).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut p = pod("ws-f-0", "node-a", "Running");
    p.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "name": "ws-f",
            "uid": w.uid().unwrap(), "controller": true
        }))
        .unwrap(),
    ]);
    pods.create(&PostParams::default(), &p).await.unwrap();

    let deleted = api.delete("ws-f", &DeleteParams::default()).await.unwrap();
    let marked = deleted
        .left()
        .expect("an object while finalizers are pending");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(
        pods.get_opt("ws-f-0").await.unwrap().is_some(),
        "dependents wait for the owner"
    );
    api.patch(
        "ws-f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("ws-f").await.unwrap().is_none());
    assert!(
        pods.get_opt("ws-f-0").await.unwrap().is_none(),
        "owned pod garbage-collected"
    );

    // UID preconditions protect a re-created object.
    api.create(&PostParams::default(), &workspace("ws-g"))
        .await
        .unwrap();
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = api.delete("ws-g", &dp).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
}

#[tokio::test]
async fn selectors_pagination_and_dynamic_objects() {
    let sim = start_sim().await;
    let client = sim.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for (i, (node, phase)) in [("n1", "Running"), ("n1", "Pending"), ("n2", "Running")]
        .iter()
        .enumerate()
    {
        let mut p = pod(&format!("p{i}"), node, phase);
        if i == 2 {
            p.metadata.labels = Some([("app".to_string(), "y".to_string())].into());
        }
        let created = pods.create(&PostParams::default(), &p).await.unwrap();
        // Status is not settable on create: set it through /status like a kubelet.
        pods.patch_status(
            &created.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .unwrap();
    }
    let names =
        |l: kube::core::ObjectList<Pod>| l.items.iter().map(|p| p.name_any()).collect::<Vec<_>>();
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=n1"))
                .await
                .unwrap()
        ),
        ["p0", "p1"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("status.phase=Running"))
                .await
                .unwrap()
        ),
        ["p0", "p2"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("app in (y,z)"))
                .await
                .unwrap()
        ),
        ["p2"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("app!=y"))
                .await
                .unwrap()
        ),
        ["p0", "p1"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("!app"))
                .await
                .unwrap()
        ),
        Vec::<String>::new()
    );
    let err = pods
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err:?}"
    );

    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(first.clone()), ["p0", "p1"]);
    let token = first.metadata.continue_.clone().expect("a continue token");
    let second = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(second.clone()), ["p2"]);
    assert!(second.metadata.continue_.is_none());
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );

    // Cluster-wide list across namespaces, and Api<DynamicObject> without discovery.
    let all: Api<Namespace> = Api::all(client.clone());
    assert!(all.list(&ListParams::default()).await.unwrap().items.len() >= 3);
    let gvk = GroupVersionKind::gvk("kubeflow.org", "v1beta1", "Workspace");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "workspaces");
    let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let obj: DynamicObject =
        serde_json::from_value(serde_json::to_value(workspace("ws-dyn")).unwrap()).unwrap();
    dynamic.create(&PostParams::default(), &obj).await.unwrap();
    let got = dynamic.get("ws-dyn").await.unwrap();
    assert_eq!(got.data["spec"]["kind"], "jupyterlab-resumable");
    let (ar2, caps) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(ar2.plural, "workspaces");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
}

async fn next_names(
    stream: &mut (impl futures::Stream<Item = Result<Workspace, watcher::Error>> + Unpin),
    n: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        let ws = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .expect("watch event within the 10 s test budget")
            .expect("no watch error")
            .expect("stream open");
        out.push(ws.name_any());
    }
    out
}

#[tokio::test]
async fn watcher_sees_changes_and_relists_after_410() {
    let sim = start_sim().await;
    let client = sim.client().await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &workspace("w1"))
        .await
        .unwrap();
    // timeout(1): the server ends each watch after a second, so the watcher re-watches
    // from its last resourceVersion; after a compaction that one is too old -> 410 -> relist.
    let cfg = watcher::Config::default().timeout(1);
    let mut events = watcher(api.clone(), cfg).default_backoff().boxed();
    let mut inits = 0;
    let mut seen_w2 = false;
    let mut seen_relist_after_compact = false;
    let mut compacted = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("event within budget");
        match ev {
            Some(Ok(watcher::Event::InitDone)) => {
                inits += 1;
                if inits == 1 {
                    api.create(&PostParams::default(), &workspace("w2"))
                        .await
                        .unwrap();
                } else if compacted {
                    seen_relist_after_compact = true;
                    break;
                }
            }
            Some(Ok(watcher::Event::Apply(w))) if w.name_any() == "w2" && !seen_w2 => {
                seen_w2 = true;
                // A change this watch does not see (another kind), then forget history: the
                // watcher's last resourceVersion is now too old, so its next re-watch gets an
                // in-stream 410 and it must relist.
                let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
                pods.create(&PostParams::default(), &pod("unseen", "n1", "Running"))
                    .await
                    .unwrap();
                sim.store().compact();
                compacted = true;
            }
            _ => {}
        }
    }
    assert!(seen_w2, "live ADDED event delivered");
    assert!(
        seen_relist_after_compact,
        "the watcher relisted after 410 Expired"
    );
}

#[tokio::test]
async fn streaming_lists_and_await_condition() {
    let sim = start_sim().await;
    let client = sim.client().await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &workspace("s1"))
        .await
        .unwrap();
    let cfg = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api.clone(), cfg)
        .default_backoff()
        .applied_objects()
        .boxed();
    assert_eq!(
        next_names(&mut stream, 1).await,
        ["s1"],
        "initial events end with the bookmark"
    );
    api.create(&PostParams::default(), &workspace("s2"))
        .await
        .unwrap();
    assert_eq!(next_names(&mut stream, 1).await, ["s2"]);

    let waiter = {
        let api = api.clone();
        tokio::spawn(async move {
            kube::runtime::wait::await_condition(api, "s1", |w: Option<&Workspace>| {
                w.and_then(|w| w.status.as_ref())
                    .is_some_and(|s| s.state == WorkspaceState::Paused)
            })
            .await
        })
    };
    api.patch_status(
        "s1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"state": "Paused"}})),
    )
    .await
    .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("condition met within the 10 s test budget")
        .unwrap()
        .unwrap();
    assert_eq!(got.unwrap().status.unwrap().state, WorkspaceState::Paused);
}

#[tokio::test]
async fn label_selector_watch_turns_leaving_into_deleted() {
    let sim = start_sim().await;
    let api: Api<Workspace> = Api::namespaced(sim.client().await.unwrap(), NS);
    api.create(&PostParams::default(), &workspace("l1"))
        .await
        .unwrap();
    let wp = kube::api::WatchParams::default().labels("tier=gold");
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    api.patch(
        "l1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "silver"}}})),
    )
    .await
    .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(ev, kube::api::WatchEvent::Deleted(ref w) if w.name_any() == "l1"),
        "{ev:?}"
    );
}

#[tokio::test]
async fn unauthenticated_and_wrong_token_get_401() {
    let sim = start_sim().await;
    let kc = sim.kubeconfig_yaml().replace(sim.token(), "wrong-token");
    let kc = kube::config::Kubeconfig::from_yaml(&kc).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(cfg).unwrap();
    let api: Api<Workspace> = Api::namespaced(client, NS);
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 401),
        "{err:?}"
    );
}

/// The server side of every API connection has TCP_NODELAY, as Go's net package gives
/// every TCP connection of the real API server (net/tcpsock.go, newTCPConn): a watch event
/// written in pieces is not held back until the client's delayed ACK. The simulator runs in
/// this process, so its accepted sockets are among this process's descriptors.
#[tokio::test]
async fn api_connections_have_tcp_nodelay_like_a_go_server() {
    let sim = start_sim().await;
    let port: u16 = sim.url().rsplit(':').next().unwrap().parse().unwrap();
    let client = crate::common::raw_client(&sim);
    // Keeps a connection open (reqwest pools it) while the descriptors are read.
    let r = client
        .get(format!("{}/version", sim.url()))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let int_opt = |fd: i32, level: i32, name: i32| {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `v`, a c_int.
        let rc = unsafe { libc::getsockopt(fd, level, name, (&raw mut v).cast(), &mut len) };
        (rc == 0).then_some(v)
    };
    let mut accepted = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: getsockname writes at most `len` bytes into a sockaddr_in.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = unsafe { libc::getsockname(fd, (&raw mut addr).cast(), &mut len) };
        if rc != 0 || i32::from(addr.sin_family) != libc::AF_INET {
            continue;
        }
        let listening = int_opt(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN) == Some(1);
        if u16::from_be(addr.sin_port) == port && !listening {
            accepted.push((fd, int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY)));
        }
    }
    assert!(!accepted.is_empty(), "no accepted connection found");
    for (fd, nodelay) in accepted {
        assert_eq!(nodelay, Some(1), "fd {fd}: TCP_NODELAY off");
    }
}
