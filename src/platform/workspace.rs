//! Workspace lifecycle as the harness drives it: the home PVC and Jupyter token Secret,
//! create, pause, resume, the workspace's current pod, and the Jupyter URL under the real
//! path prefix `/workspace/connect/<ns>/<ws>/<port-id>/`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::crd::{Workspace, WorkspaceState};
use super::idempotent;
use super::ledger::Ledger;

pub use super::names::WORKSPACE_LABEL;
/// The Secret (and key) the simulated runtime reads the Jupyter token from.
pub const TOKEN_SECRET: (&str, &str) = ("jupyter-token", "token");
/// The Jupyter port id of the WorkspaceKinds wsgate uses.
pub const PORT_ID: &str = "jupyterlab";
/// The container port Jupyter listens on.
pub const JUPYTER_PORT: u16 = 8888;

/// Errors of workspace operations (exit code 1: the scenario fails).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("cannot {action} {object}")]
    Api {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    /// An object wsgate would overwrite is not its own ([`super::ownership`]).
    #[error(transparent)]
    NotOurs(#[from] super::ownership::NotOurs),
    /// Every attempt met a newer version of the object (409 Conflict).
    #[error(
        "cannot {action} {object}: it changed under each of {attempts} attempts (409 Conflict \
         every time), so something else keeps writing it; `kubectl get` it with \
         `--show-managed-fields -o yaml` to see who"
    )]
    KeptChanging {
        action: &'static str,
        object: String,
        attempts: u32,
    },
}

fn api_err(
    action: &'static str,
    object: impl Into<String>,
) -> impl FnOnce(kube::Error) -> WorkspaceError {
    let object = object.into();
    move |source| WorkspaceError::Api {
        action,
        object,
        source,
    }
}

/// What to create.
#[derive(Debug, Clone)]
pub struct NewWorkspace {
    pub namespace: String,
    pub name: String,
    pub kind: String,
    pub image_config: String,
    pub pod_config: String,
    pub home_pvc: String,
    pub home_size: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// Creates the home PVC (recorded in the ledger first).
pub async fn create_home(
    client: &kube::Client,
    ledger: &mut Ledger,
    ws: &NewWorkspace,
) -> Result<(), WorkspaceError> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ws.namespace);
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": ws.home_pvc, "labels": ws.labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": ws.home_size}}}
    }))
    .expect("a valid PVC");
    let i = ledger.record::<PersistentVolumeClaim>(Some(&ws.namespace), &ws.home_pvc);
    let created = idempotent::create(&api, &pvc).await.map_err(api_err(
        "create",
        format!("PersistentVolumeClaim {}", ws.home_pvc),
    ))?;
    ledger.created(i, created.metadata.uid);
    Ok(())
}

/// Creates the Jupyter token Secret of the namespace (recorded in the ledger), or updates
/// its token when the Secret is this run's own (`labels` name the run). Someone else's
/// Secret of that name is never overwritten: the error names it and whose it is.
pub async fn put_token(
    client: &kube::Client,
    ledger: &mut Ledger,
    namespace: &str,
    token: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), WorkspaceError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": TOKEN_SECRET.0, "labels": labels},
        "type": "Opaque",
        "stringData": {TOKEN_SECRET.1: token},
    }))
    .expect("a valid Secret");
    // A 409 on the write is a change between the read and the write: often this run's own
    // write, retried after its answer was lost (the first attempt did commit). Read again,
    // check again, and stop as soon as the Secret holds the token.
    let mut conflicts = 0;
    while let Some(existing) = api
        .get_opt(TOKEN_SECRET.0)
        .await
        .map_err(api_err("read", "Secret jupyter-token"))?
    {
        let run = labels.get(super::ledger::RUN_ID_LABEL).cloned();
        super::ownership::check_meta(
            &format!("Secret {namespace}/{}", TOKEN_SECRET.0),
            &existing.metadata,
            &super::ownership::Claim::Run(run.unwrap_or_default()),
            None,
        )?;
        let holds = existing
            .data
            .as_ref()
            .and_then(|d| d.get(TOKEN_SECRET.1))
            .is_some_and(|v| v.0 == token.as_bytes());
        if holds {
            return Ok(());
        }
        let written = api
            .patch(
                TOKEN_SECRET.0,
                &PatchParams::default(),
                // The uid and resourceVersion read with the check: the API server refuses
                // the write if the Secret was replaced or changed by someone else in between.
                &Patch::Merge(json!({
                    "metadata": {
                        "uid": existing.metadata.uid,
                        "resourceVersion": existing.metadata.resource_version,
                    },
                    "stringData": {TOKEN_SECRET.1: token},
                })),
            )
            .await;
        match written {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && conflicts < 2 => conflicts += 1,
            Err(e) => return Err(api_err("update", "Secret jupyter-token")(e)),
        }
    }
    let i = ledger.record::<Secret>(Some(namespace), TOKEN_SECRET.0);
    let created = idempotent::create(&api, &secret)
        .await
        .map_err(api_err("create", "Secret jupyter-token"))?;
    ledger.created(i, created.metadata.uid);
    Ok(())
}

/// Creates the Workspace (recorded in the ledger first).
pub async fn create(
    client: &kube::Client,
    ledger: &mut Ledger,
    ws: &NewWorkspace,
) -> Result<Workspace, WorkspaceError> {
    let api: Api<Workspace> = Api::namespaced(client.clone(), &ws.namespace);
    let obj: Workspace = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
        "metadata": {"name": ws.name, "labels": ws.labels, "annotations": ws.annotations},
        "spec": {"paused": false, "kind": ws.kind, "podTemplate": {
            "volumes": {"home": ws.home_pvc},
            "options": {"imageConfig": ws.image_config, "podConfig": ws.pod_config}}}
    }))
    .expect("a valid Workspace");
    let i = ledger.record::<Workspace>(Some(&ws.namespace), &ws.name);
    let created = idempotent::create(&api, &obj)
        .await
        .map_err(api_err("create", format!("Workspace {}", ws.name)))?;
    ledger.created(i, created.metadata.uid.clone());
    Ok(created)
}

/// How many times [`set_paused`] reads the Workspace and patches it when the patch meets a
/// newer version (a controller wrote in between, or an earlier attempt of ours went through);
/// [`set_paused_from`]'s attempt with the seen version comes on top.
const SET_PAUSED_ATTEMPTS: u32 = 6;

/// Requests pause (`true`) or resume (`false`) with a merge patch of `spec.paused`, bound
/// to the Workspace wsgate created (its `uid`, see [`patch_own`]), sent at most once.
///
/// A pause is not idempotent on GKE Workspaces: the add-on's webhook holds it by writing
/// `paused` back to `false` (`Checkpointing`) and stamps every pause anew, with no check
/// (gke-labs/workspaces `providers/gke/internal/snapshot/webhook.go`), and its reconciler
/// then deletes the trigger of the earlier stamp, whose checkpoint may be running
/// (`reconcile.go`, `reconcileCheckpointing`). So a PATCH that was applied but answered 500,
/// or whose answer was lost, must not be sent again: each attempt carries the
/// `resourceVersion` just read (the API server's optimistic lock), a retry of an applied
/// one gets 409 Conflict, and the Workspace is read again. A pause already requested
/// (`spec.paused`, or the add-on's `Checkpointing`) or a resume already in place is not
/// sent at all.
pub async fn set_paused(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
    paused: bool,
) -> Result<(), WorkspaceError> {
    set_paused_from(client, namespace, name, uid, paused, None).await
}

/// [`set_paused`], whose first attempt starts from `seen`, the Workspace as a watch last saw
/// it, instead of reading it: one request fewer when it is still current, one more (a 409)
/// when it is not. It is trusted only to send the patch, which its `resourceVersion` binds
/// to that very version (a stale one gets 409 Conflict, and the Workspace is read); a
/// `seen` that is not ours, has no `resourceVersion` or says nothing need be sent is
/// dropped, and a read decides.
pub async fn set_paused_from(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
    paused: bool,
    seen: Option<Workspace>,
) -> Result<(), WorkspaceError> {
    let action = if paused { "pause" } else { "resume" };
    let api: Api<Workspace> = Api::namespaced(client.clone(), namespace);
    let requested = |w: &Workspace| {
        if paused {
            super::idle::pause_started(w)
        } else {
            !w.spec.paused
        }
    };
    let mut seen = seen.filter(|w| {
        w.metadata.uid.as_deref() == Some(uid)
            && w.metadata
                .resource_version
                .as_deref()
                .is_some_and(|v| !v.is_empty())
            && !requested(w)
    });
    // The seen version's attempt is not one of the rounds that read.
    let attempts = SET_PAUSED_ATTEMPTS + u32::from(seen.is_some());
    for _ in 0..attempts {
        let current = match seen.take() {
            Some(w) => w,
            None => api
                .get(name)
                .await
                .map_err(api_err(action, format!("Workspace {name}")))?,
        };
        let found = current.metadata.uid.as_deref().unwrap_or("");
        if found != uid {
            return Err(super::ownership::NotOurs {
                object: format!("Workspace {namespace}/{name}"),
                why: format!(
                    "it is not the one wsgate created (uid {uid}, this one has uid {found}): \
                     wsgate will not {action} it"
                ),
            }
            .into());
        }
        if requested(&current) {
            return Ok(());
        }
        let version = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let body = json!({"spec": {"paused": paused}, "metadata": {"resourceVersion": version}});
        match patch_own(client, namespace, name, uid, action, body).await {
            Err(WorkspaceError::Api {
                source: kube::Error::Api(e),
                ..
            }) if e.code == 409 => continue,
            other => return other,
        }
    }
    Err(WorkspaceError::KeptChanging {
        action,
        object: format!("Workspace {namespace}/{name}"),
        attempts,
    })
}

/// A merge patch of the Workspace `namespace/name` that applies only to the object whose
/// uid is `uid`: the patch carries `metadata.uid`, which the API server validates as
/// immutable (apiserver `rest.BeforeUpdate` -> `ValidateObjectMetaUpdate`), so a namesake
/// someone else made answers 422 (or 409 from a server that checks it as a precondition)
/// and is left unchanged. Both are reported as [`WorkspaceError::NotOurs`].
async fn patch_own(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
    action: &'static str,
    mut body: serde_json::Value,
) -> Result<(), WorkspaceError> {
    let api: Api<Workspace> = Api::namespaced(client.clone(), namespace);
    body["metadata"]["uid"] = json!(uid);
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e))
            if (e.code == 422 && e.message.contains("metadata.uid"))
                || (e.code == 409 && e.message.contains("UID in precondition")) =>
        {
            Err(super::ownership::NotOurs {
                object: format!("Workspace {namespace}/{name}"),
                why: format!(
                    "it is not the one wsgate created (uid {uid}): the API server refused to \
                     {action} it ({})",
                    e.message
                ),
            }
            .into())
        }
        Err(e) => Err(api_err(action, format!("Workspace {name}"))(e)),
    }
}

/// The state in words for progress and timeout messages: `Running (Workspace is running)`.
pub fn describe(ws: Option<&Workspace>) -> String {
    match ws.and_then(|w| w.status.as_ref()) {
        None if ws.is_none() => "absent".to_string(),
        None => "no status yet".to_string(),
        Some(s) if s.state_message.is_empty() => s.state.to_string(),
        Some(s) => format!("{} ({})", s.state, s.state_message),
    }
}

/// Whether the workspace is in `state`.
pub fn is_state(ws: Option<&Workspace>, state: WorkspaceState) -> bool {
    ws.and_then(|w| w.status.as_ref())
        .is_some_and(|s| s.state == state)
}

/// Whether the workspace visibly waits for resources: not Running, with a message that
/// names the cause (quota, insufficient GPUs, unschedulable).
pub fn waits_for_resources(o: Option<&Workspace>) -> bool {
    o.and_then(|w| w.status.as_ref()).is_some_and(|s| {
        let m = s.state_message.to_lowercase();
        s.state != WorkspaceState::Running
            && [
                "quota",
                "insufficient",
                "unschedulable",
                "nodes are available",
            ]
            .iter()
            .any(|k| m.contains(k))
    })
}

/// The workspace's pods (normally zero or one).
pub async fn pods(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<Pod>, WorkspaceError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(&format!("{WORKSPACE_LABEL}={name}")))
        .await
        .map_err(api_err("list pods of", format!("Workspace {name}")))?;
    Ok(list.items)
}

/// The path prefix the workspace's IDE is served under.
pub fn path_prefix(namespace: &str, name: &str) -> String {
    format!("/workspace/connect/{namespace}/{name}/{PORT_ID}/")
}

/// The Jupyter URL of a running pod (pod IP, container port, path prefix).
pub fn jupyter_url(pod: &Pod, namespace: &str, name: &str) -> Option<String> {
    let ip = pod.status.as_ref()?.pod_ip.as_ref()?;
    Some(format!(
        "http://{ip}:{JUPYTER_PORT}{}",
        path_prefix(namespace, name)
    ))
}

/// The Jupyter URL of workspace `namespace/name` reached at `addr` (the pod's address, or
/// a local port-forward to it).
pub fn jupyter_url_at(addr: std::net::SocketAddr, namespace: &str, name: &str) -> String {
    format!("http://{addr}{}", path_prefix(namespace, name))
}

/// Sets one annotation on the Workspace wsgate created (`uid`) with a merge patch.
pub async fn annotate(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
    key: &str,
    value: &str,
) -> Result<(), WorkspaceError> {
    patch_own(
        client,
        namespace,
        name,
        uid,
        "annotate",
        json!({"metadata": {"annotations": {key: value}}}),
    )
    .await
}

/// The Warning events about the Workspace, oldest first, as `reason: message`.
pub async fn warnings(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<String>, WorkspaceError> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map_err(api_err("list events of", format!("Workspace {name}")))?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.involved_object.kind.as_deref() == Some("Workspace")
        })
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect())
}
