//! What a Workspace's owned objects should look like (kubeflow-workspaces.md §4.1-§4.3): the
//! selected imageConfig and podConfig with their redirects, the generated names, the
//! ServiceAccount, the StatefulSet with its pod template, and the Service. Pure: JSON in,
//! JSON out, so every rule here is unit-tested without a store.

use crate::sim::json::Lookup as _;
use crate::sim::json::text_at;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub use crate::platform::names::WORKSPACE_LABEL;
/// The second selector label of the StatefulSet and Service.
pub const SELECTOR_LABEL: &str = "statefulset";
/// The single container of a workspace pod.
pub const CONTAINER: &str = "main";
/// The home volume's name in the pod template.
pub const HOME_VOLUME: &str = "home-volume";

const GENERATE_NAME_SUFFIX: usize = 6;
const MAX_STATEFULSET_NAME: usize = 52;
const MAX_SERVICE_NAME: usize = 63;
const MAX_SERVICE_ACCOUNT_NAME: usize = 253;
const NAME_HASH_LEN: usize = 8;

/// Why the owned objects cannot be generated. The messages are upstream's; the controller
/// puts them into `status.stateMessage`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("{option} with id {id:?} not found")]
    OptionNotFound { option: &'static str, id: String },
    #[error("{option} with id {to:?} not found, was redirected from {from:?}")]
    RedirectNotFound {
        option: &'static str,
        to: String,
        from: String,
    },
    #[error("{option} with id {id:?} has a circular redirect")]
    CircularRedirect { option: &'static str, id: String },
    #[error("duplicate port number {port} in imageConfig")]
    DuplicatePort { port: i64 },
    #[error("failed to render extraEnv {name:?}: {reason}")]
    Render { name: String, reason: String },
}

/// A selected option (`imageConfig` or `podConfig`): the value in use and where its
/// redirects lead.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected<'a> {
    /// The option value the Workspace names (`{id, spawner, redirect?, spec}`).
    pub current: &'a Value,
    /// The id after following every redirect (the current id when there is none).
    pub desired: String,
    /// `(source, target)` for each redirect followed.
    pub redirect_chain: Vec<(String, String)>,
}

impl Selected<'_> {
    /// Whether a redirect makes the desired option differ from the current one.
    pub fn pending_restart(&self) -> bool {
        !self.redirect_chain.is_empty()
    }

    /// `status.podTemplateOptions.<option>`.
    pub fn status(&self) -> Value {
        let chain: Vec<Value> = self
            .redirect_chain
            .iter()
            .map(|(s, t)| json!({"source": s, "target": t}))
            .collect();
        json!({"desired": self.desired, "redirectChain": chain})
    }

    pub fn spec(&self) -> &Value {
        self.current.get("spec").unwrap_or(&Value::Null)
    }
}

/// Finds option `id` of `option` (`imageConfig` or `podConfig`) in the WorkspaceKind and
/// follows its redirects, as upstream `getImageConfig`/`getPodConfig` do.
pub fn select_option<'a>(
    kind: &'a Value,
    option: &'static str,
    id: &str,
) -> Result<Selected<'a>, TemplateError> {
    let values: Vec<&Value> = kind
        .lookup(&format!("/spec/podTemplate/options/{option}/values"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let by_id = |id: &str| values.iter().copied().find(|v| text_at(v, "/id") == id);
    let current = by_id(id).ok_or_else(|| TemplateError::OptionNotFound {
        option,
        id: id.to_string(),
    })?;
    let mut desired = current;
    let mut visited = vec![id.to_string()];
    let mut chain = Vec::new();
    while let Some(to) = desired.lookup("/redirect/to").and_then(Value::as_str) {
        let from = text_at(desired, "/id").to_string();
        if visited.iter().any(|v| v == to) {
            return Err(TemplateError::CircularRedirect { option, id: from });
        }
        let next = by_id(to).ok_or_else(|| TemplateError::RedirectNotFound {
            option,
            to: to.to_string(),
            from: from.clone(),
        })?;
        chain.push((from, to.to_string()));
        visited.push(to.to_string());
        desired = next;
    }
    Ok(Selected {
        current,
        desired: text_at(desired, "/id").to_string(),
        redirect_chain: chain,
    })
}

/// `/workspace/connect/<namespace>/<workspace>/<portId>/`.
pub fn connect_path(namespace: &str, workspace: &str, port_id: &str) -> String {
    format!("/workspace/connect/{namespace}/{workspace}/{port_id}/")
}

/// `ws-<name>-`, truncated so that the generated name (plus its suffix) fits `max_len`.
pub fn name_prefix(workspace: &str, max_len: usize) -> String {
    let mut prefix = format!("ws-{workspace}");
    let max = max_len - GENERATE_NAME_SUFFIX - 1;
    prefix.truncate(max.min(prefix.len()));
    if !prefix.ends_with('-') {
        prefix.push('-');
    }
    prefix
}

/// `ws-<name>`, or truncated with an 8-hex sha256 suffix when longer than 253 characters.
pub fn service_account_name(workspace: &str) -> String {
    let name = format!("ws-{workspace}");
    if name.len() <= MAX_SERVICE_ACCOUNT_NAME {
        return name;
    }
    let hash = hex::encode(Sha256::digest(workspace.as_bytes()));
    let suffix = &hash[..NAME_HASH_LEN];
    format!(
        "{}-{suffix}",
        &name[..MAX_SERVICE_ACCOUNT_NAME - NAME_HASH_LEN - 1]
    )
}

/// The controller ownerReference every owned object carries.
pub fn owner_reference(workspace: &Value) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Workspace",
        "name": text_at(workspace, "/metadata/name"),
        "uid": text_at(workspace, "/metadata/uid"),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Whether `obj` is controlled by the object with `uid`.
pub fn controlled_by(obj: &Value, uid: &str) -> bool {
    obj.lookup("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(uid)
                    && r.get("controller").and_then(Value::as_bool) == Some(true)
            })
        })
}

fn owned_metadata(
    workspace: &Value,
    name_field: (&str, String),
    labels: Map<String, Value>,
) -> Value {
    let mut labels = labels;
    labels.insert(
        WORKSPACE_LABEL.into(),
        json!(text_at(workspace, "/metadata/name")),
    );
    let mut meta = Map::new();
    meta.insert(name_field.0.into(), Value::String(name_field.1));
    meta.insert(
        "namespace".into(),
        json!(text_at(workspace, "/metadata/namespace")),
    );
    meta.insert("labels".into(), Value::Object(labels));
    meta.insert(
        "ownerReferences".into(),
        Value::Array(vec![owner_reference(workspace)]),
    );
    Value::Object(meta)
}

/// The Workspace's ServiceAccount.
pub fn service_account(workspace: &Value) -> Value {
    let name = service_account_name(text_at(workspace, "/metadata/name"));
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": owned_metadata(workspace, ("name", name), Map::new()),
    })
}

fn selector_labels(workspace: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(WORKSPACE_LABEL.into(), json!(workspace));
    m.insert(SELECTOR_LABEL.into(), json!(workspace));
    m
}

fn object_at(v: &Value, ptr: &str) -> Map<String, Value> {
    v.lookup(ptr)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Image ports `(id, port)`, refusing duplicate port numbers.
fn image_ports(image: &Selected<'_>) -> Result<Vec<(String, i64)>, TemplateError> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for p in image
        .spec()
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if out.iter().any(|(_, q)| *q == port) {
            return Err(TemplateError::DuplicatePort { port });
        }
        out.push((text_at(p, "/id").to_string(), port));
    }
    Ok(out)
}

/// Renders the Go templates the WorkspaceKind's `extraEnv` values may use. Only
/// `{{ httpPathPrefix "<portId>" }}` exists upstream; it renders the connect path of an image
/// port, or "" for an unknown port id.
pub fn render(template: &str, path_prefix: impl Fn(&str) -> String) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or("unclosed action")?;
        let action = after[..end]
            .trim()
            .trim_start_matches('-')
            .trim_end_matches('-')
            .trim();
        let mut words = action.splitn(2, char::is_whitespace);
        let function = words.next().unwrap_or("");
        let arg = words.next().unwrap_or("").trim();
        if function != "httpPathPrefix" {
            return Err(format!("function {function:?} not defined"));
        }
        let id = arg
            .strip_prefix('"')
            .and_then(|a| a.strip_suffix('"'))
            .ok_or_else(|| format!("httpPathPrefix wants one quoted port id, got {arg:?}"))?;
        out.push_str(&path_prefix(id));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// What the StatefulSet is generated from.
pub struct Inputs<'a> {
    pub workspace: &'a Value,
    pub kind: &'a Value,
    pub image: &'a Selected<'a>,
    pub pod_config: &'a Selected<'a>,
    pub service_account: &'a str,
}

/// Simulator convention (not upstream): the pod's `JUPYTER_TOKEN` comes from Secret
/// `jupyter-token` (key `token`, optional), which the simulator's Jupyter runtime reads;
/// the activity probe sends the same token.
pub const TOKEN_SECRET: &str = "jupyter-token";
pub const TOKEN_KEY: &str = "token";

fn container_env(
    inputs: &Inputs<'_>,
    ports: &[(String, i64)],
) -> Result<Vec<Value>, TemplateError> {
    let ns = text_at(inputs.workspace, "/metadata/namespace");
    let ws = text_at(inputs.workspace, "/metadata/name");
    let prefix = |id: &str| {
        if ports.iter().any(|(p, _)| p == id) {
            connect_path(ns, ws, id)
        } else {
            String::new()
        }
    };
    let mut env = Vec::new();
    for e in inputs
        .kind
        .lookup("/spec/podTemplate/extraEnv")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut e = e.clone();
        if let Some(v) = e
            .get("value")
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
        {
            let rendered = render(v, prefix).map_err(|reason| TemplateError::Render {
                name: text_at(&e, "/name").to_string(),
                reason,
            })?;
            e["value"] = json!(rendered);
        }
        env.push(e);
    }
    // Simulator convention, not upstream: the runtime reads the token from this variable.
    env.push(json!({
        "name": "JUPYTER_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": TOKEN_SECRET, "key": TOKEN_KEY, "optional": true}},
    }));
    Ok(env)
}

/// Volumes and mounts: home, data, secrets, then the kind's extras (duplicates skipped).
fn volumes(workspace: &Value, kind: &Value) -> (Vec<Value>, Vec<Value>) {
    let mut vols: Vec<Value> = Vec::new();
    let mut mounts: Vec<Value> = Vec::new();
    let add = |vols: &mut Vec<Value>, mounts: &mut Vec<Value>, vol: Value, mount: Value| {
        let name = vol.get("name").cloned();
        let path = mount.get("mountPath").cloned();
        if vols.iter().any(|v| v.get("name") == name.as_ref())
            || mounts.iter().any(|m| m.get("mountPath") == path.as_ref())
        {
            return;
        }
        vols.push(vol);
        mounts.push(mount);
    };
    let volumes = workspace
        .lookup("/spec/podTemplate/volumes")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(home) = volumes.get("home").and_then(Value::as_str) {
        add(
            &mut vols,
            &mut mounts,
            json!({"name": HOME_VOLUME, "persistentVolumeClaim": {"claimName": home}}),
            json!({"name": HOME_VOLUME, "mountPath": text_at(kind, "/spec/podTemplate/volumeMounts/home")}),
        );
    }
    for (i, d) in volumes
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = format!("data-volume-{i}");
        let read_only = d.get("readOnly").and_then(Value::as_bool).unwrap_or(false);
        let mut claim = json!({"claimName": text_at(d, "/pvcName")});
        let mut mount = json!({"name": name, "mountPath": text_at(d, "/mountPath")});
        if read_only {
            claim["readOnly"] = json!(true);
            mount["readOnly"] = json!(true);
        }
        add(
            &mut vols,
            &mut mounts,
            json!({"name": name, "persistentVolumeClaim": claim}),
            mount,
        );
    }
    for (i, s) in volumes
        .get("secrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = format!("secret-volume-{i}");
        let mode = s.get("defaultMode").and_then(Value::as_i64).unwrap_or(420);
        add(
            &mut vols,
            &mut mounts,
            json!({"name": name, "secret": {"secretName": text_at(s, "/secretName"), "defaultMode": mode}}),
            json!({"name": name, "mountPath": text_at(s, "/mountPath")}),
        );
    }
    let pt = kind.lookup("/spec/podTemplate").unwrap_or(&Value::Null);
    for v in pt
        .get("extraVolumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !vols.iter().any(|x| x.get("name") == v.get("name")) {
            vols.push(v.clone());
        }
    }
    for m in pt
        .get("extraVolumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let path_taken = mounts
            .iter()
            .any(|x| x.get("mountPath") == m.get("mountPath"));
        let volume_exists = vols.iter().any(|x| x.get("name") == m.get("name"));
        if !path_taken && volume_exists {
            mounts.push(m.clone());
        }
    }
    (vols, mounts)
}

fn insert_if(map: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        map.insert(key.into(), v.clone());
    }
}

/// The StatefulSet (`generateName: ws-<name>-`, replicas 1, or 0 when paused).
pub fn stateful_set(inputs: &Inputs<'_>) -> Result<Value, TemplateError> {
    let ws = inputs.workspace;
    let ws_name = text_at(ws, "/metadata/name");
    // Borrowed, not cloned: the kind's pod template carries every option's values.
    let pt = inputs
        .kind
        .lookup("/spec/podTemplate")
        .unwrap_or(&Value::Null);
    let ports = image_ports(inputs.image)?;
    let env = container_env(inputs, &ports)?;
    let (vols, mounts) = volumes(ws, inputs.kind);

    // Pod metadata: the kind's, then the Workspace's (it wins), then the selector labels.
    let mut pod_labels = object_at(pt, "/podMetadata/labels");
    pod_labels.extend(object_at(ws, "/spec/podTemplate/podMetadata/labels"));
    pod_labels.extend(selector_labels(ws_name));
    let mut pod_annotations = object_at(pt, "/podMetadata/annotations");
    pod_annotations.extend(object_at(ws, "/spec/podTemplate/podMetadata/annotations"));
    // Built by moving values in: `json!` would copy every embedded value by serializing it.
    let mut pod_meta = Map::new();
    pod_meta.insert("labels".into(), Value::Object(pod_labels));
    if !pod_annotations.is_empty() {
        pod_meta.insert("annotations".into(), Value::Object(pod_annotations));
    }

    let image_spec = inputs.image.spec();
    let pod_spec_opt = inputs.pod_config.spec();
    let container_ports: Vec<Value> = ports
        .iter()
        .map(|(_, p)| json!({"name": format!("http-{p}"), "containerPort": p, "protocol": "TCP"}))
        .collect();
    let mut container = Map::new();
    container.insert("name".into(), json!(CONTAINER));
    container.insert("image".into(), json!(text_at(image_spec, "/image")));
    container.insert(
        "imagePullPolicy".into(),
        json!(
            image_spec
                .get("imagePullPolicy")
                .and_then(Value::as_str)
                .unwrap_or("IfNotPresent")
        ),
    );
    container.insert("ports".into(), Value::Array(container_ports));
    container.insert("env".into(), Value::Array(env));
    container.insert(
        "resources".into(),
        pod_spec_opt.get("resources").cloned().unwrap_or(json!({})),
    );
    container.insert("volumeMounts".into(), Value::Array(mounts));
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        insert_if(
            &mut container,
            probe,
            pt.lookup(&format!("/probes/{probe}")),
        );
    }
    insert_if(
        &mut container,
        "securityContext",
        pt.get("containerSecurityContext"),
    );

    let mut pod_spec = Map::new();
    pod_spec.insert(
        "containers".into(),
        Value::Array(vec![Value::Object(container)]),
    );
    pod_spec.insert("serviceAccountName".into(), json!(inputs.service_account));
    pod_spec.insert("volumes".into(), Value::Array(vols));
    insert_if(&mut pod_spec, "affinity", pod_spec_opt.get("affinity"));
    insert_if(
        &mut pod_spec,
        "nodeSelector",
        pod_spec_opt.get("nodeSelector"),
    );
    insert_if(
        &mut pod_spec,
        "tolerations",
        pod_spec_opt.get("tolerations"),
    );
    insert_if(&mut pod_spec, "securityContext", pt.get("securityContext"));
    let scheduler = pod_spec_opt
        .get("schedulerName")
        .or_else(|| pt.get("schedulerName"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    if let Some(s) = scheduler {
        pod_spec.insert("schedulerName".into(), json!(s));
    }

    let paused = ws
        .lookup("/spec/paused")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut metadata = owned_metadata(
        ws,
        ("generateName", name_prefix(ws_name, MAX_STATEFULSET_NAME)),
        object_at(pt, "/statefulSetMetadata/labels"),
    );
    let sts_annotations = object_at(pt, "/statefulSetMetadata/annotations");
    if !sts_annotations.is_empty() {
        metadata["annotations"] = Value::Object(sts_annotations);
    }
    let mut sts = json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "spec": {
            "replicas": if paused { 0 } else { 1 },
            "selector": {},
            "template": {},
        },
    });
    sts["metadata"] = metadata;
    sts["spec"]["selector"]["matchLabels"] = Value::Object(selector_labels(ws_name));
    sts["spec"]["template"]["metadata"] = Value::Object(pod_meta);
    sts["spec"]["template"]["spec"] = Value::Object(pod_spec);
    Ok(sts)
}

/// The ClusterIP Service (`generateName: ws-<name>-`), one port per image port.
pub fn service(workspace: &Value, image: &Selected<'_>) -> Result<Value, TemplateError> {
    let ws_name = text_at(workspace, "/metadata/name");
    let ports: Vec<Value> = image_ports(image)?
        .iter()
        .map(|(_, p)| {
            json!({"name": format!("http-{p}"), "port": p, "targetPort": p, "protocol": "TCP"})
        })
        .collect();
    let mut svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "spec": {"type": "ClusterIP"},
    });
    svc["metadata"] = owned_metadata(
        workspace,
        ("generateName", name_prefix(ws_name, MAX_SERVICE_NAME)),
        Map::new(),
    );
    svc["spec"]["ports"] = Value::Array(ports);
    svc["spec"]["selector"] = Value::Object(selector_labels(ws_name));
    Ok(svc)
}

/// The fields of a found object that the controller keeps equal to the desired ones
/// (upstream `Copy<Kind>Fields`): metadata labels and annotations, plus these spec fields.
pub fn managed_spec_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "StatefulSet" => &["replicas", "selector", "template"],
        "Service" => &["ports", "selector", "type"],
        _ => &[],
    }
}

/// `found` with the managed fields of `desired` copied in, or `None` if they already agree.
/// Most reconciles find them agreeing: that is checked field by field first, without
/// copying `found` (a StatefulSet with its status), which is then copied only to change it.
pub fn updated(kind: &str, desired: &Value, found: &Value) -> Option<Value> {
    let meta_agrees = ["labels", "annotations"].iter().all(|field| {
        let path = format!("/metadata/{field}");
        desired.lookup(&path) == found.lookup(&path)
    });
    // A managed field absent from `desired` is written as null, so it agrees only when
    // `found` holds a null there, not when it lacks the field.
    let spec_agrees = managed_spec_fields(kind).iter().all(|field| {
        let path = format!("/spec/{field}");
        found.lookup(&path) == Some(desired.lookup(&path).unwrap_or(&Value::Null))
    });
    if meta_agrees && spec_agrees {
        return None;
    }
    let mut next = found.clone();
    for field in ["labels", "annotations"] {
        match desired.lookup(&format!("/metadata/{field}")) {
            Some(v) => next["metadata"][field] = v.clone(),
            None => {
                if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove(field);
                }
            }
        }
    }
    for field in managed_spec_fields(kind) {
        next["spec"][*field] = desired
            .lookup(&format!("/spec/{field}"))
            .cloned()
            .unwrap_or(Value::Null);
    }
    (next != *found).then_some(next)
}

#[cfg(test)]
mod tests;
