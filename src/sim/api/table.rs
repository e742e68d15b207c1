//! Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for, with the
//! columns a real cluster prints for each served kind (STATE for Workspaces, READY and
//! STATUS for Pods, ...).
//!
//! Pure: objects in, Table out. kubectl prints the cells as given under upper-cased column
//! names, so Age is formatted here the way kubectl formats durations; `row.object` carries
//! the full metadata so `-A` (NAMESPACE) and `--show-labels` work
//! (`kubectl-and-clients.md` §2).

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

use crate::sim::json::{at_keys as at, int_at_keys as int_at, str_at_keys as str_at};
use crate::sim::kinds::KindInfo;

/// Whether the client asked for a Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`).
///
/// True when any media range names `as=Table` in group `meta.k8s.io` (v1 or v1beta1) and is
/// not excluded by `q=0`. `-o json|yaml` sends plain `application/json` and gets objects.
pub fn wants_table(accept: Option<&str>) -> bool {
    let wanted = super::accept::Wanted {
        group: "meta.k8s.io",
        versions: &["v1", "v1beta1"],
        as_: "Table",
        any_version_when_absent: true,
    };
    super::accept::names(accept, &wanted)
}

/// Builds the Table for `objects` of one `kind`.
///
/// `include_column_definitions` is false for watch events after the first (they then carry
/// `columnDefinitions: null`, as a real server sends them).
pub fn table(
    kind: &KindInfo,
    objects: &[&Value],
    resource_version: &str,
    now: DateTime<Utc>,
    include_column_definitions: bool,
) -> Value {
    let printer = Printer::for_kind(kind);
    let columns = if include_column_definitions {
        Value::Array(printer.columns().iter().map(Column::to_json).collect())
    } else {
        Value::Null
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            json!({
                "cells": printer.cells(obj, now),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// Formats a duration the way kubectl does (`5s`, `3m12s`, `45m`, `5h7m`, `2d3h`, `3y12d`).
pub fn human_duration(d: TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of an RFC 3339 timestamp at `now`; `<unknown>` when absent or unparsable.
fn since(ts: Option<&Value>, now: DateTime<Utc>) -> String {
    ts.and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| human_duration(now - t.with_timezone(&Utc)))
        .unwrap_or_else(|| "<unknown>".into())
}

/// One column definition.
struct Column {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    priority: u8,
}

impl Column {
    const fn new(name: &'static str, kind: &'static str) -> Self {
        Column {
            name,
            kind,
            format: "",
            priority: 0,
        }
    }
    const fn wide(name: &'static str) -> Self {
        Column {
            name,
            kind: "string",
            format: "",
            priority: 1,
        }
    }
    const NAME: Column = Column {
        name: "Name",
        kind: "string",
        format: "name",
        priority: 0,
    };
    const AGE: Column = Column::new("Age", "string");
    /// Custom resources print Age as a `date` column, like the apiserver's CRD printer.
    const CR_AGE: Column = Column::new("Age", "date");

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": "",
            "priority": self.priority,
        })
    }
}

/// The per-kind printers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Printer {
    Workspace,
    WorkspaceKind,
    Pod,
    Namespace,
    Node,
    PodSnapshot,
    PodSnapshotStorageConfig,
    PodSnapshotManualTrigger,
    StatefulSet,
    Service,
    PersistentVolumeClaim,
    ResourceQuota,
    Event,
    ConfigMap,
    ServiceAccount,
    /// NAME, AGE (built-in kinds without a dedicated printer).
    Plain,
    /// NAME, AGE for custom resources without printer columns.
    PlainCustom,
}

impl Printer {
    fn for_kind(kind: &KindInfo) -> Printer {
        match (kind.group, kind.kind) {
            ("kubeflow.org", "Workspace") => Printer::Workspace,
            ("kubeflow.org", "WorkspaceKind") => Printer::WorkspaceKind,
            ("", "Pod") => Printer::Pod,
            ("", "Namespace") => Printer::Namespace,
            ("", "Node") => Printer::Node,
            ("", "Service") => Printer::Service,
            ("", "PersistentVolumeClaim") => Printer::PersistentVolumeClaim,
            ("", "ResourceQuota") => Printer::ResourceQuota,
            ("", "Event") => Printer::Event,
            ("", "ConfigMap") => Printer::ConfigMap,
            ("", "ServiceAccount") => Printer::ServiceAccount,
            ("apps", "StatefulSet") => Printer::StatefulSet,
            ("podsnapshot.gke.io", "PodSnapshot") => Printer::PodSnapshot,
            ("podsnapshot.gke.io", "PodSnapshotStorageConfig") => Printer::PodSnapshotStorageConfig,
            ("podsnapshot.gke.io", "PodSnapshotManualTrigger") => Printer::PodSnapshotManualTrigger,
            _ if kind.custom => Printer::PlainCustom,
            _ => Printer::Plain,
        }
    }

    fn columns(self) -> Vec<Column> {
        use Column as C;
        match self {
            Printer::Workspace => vec![C::NAME, C::new("State", "string"), C::CR_AGE],
            Printer::WorkspaceKind => vec![
                C::NAME,
                C::new("Workspaces", "integer"),
                C::new("Deprecated", "boolean"),
                C::new("Hidden", "boolean"),
                C::CR_AGE,
            ],
            Printer::Pod => vec![
                C::NAME,
                C::new("Ready", "string"),
                C::new("Status", "string"),
                C::new("Restarts", "string"),
                C::AGE,
                C::wide("IP"),
                C::wide("Node"),
                C::wide("Nominated Node"),
                C::wide("Readiness Gates"),
            ],
            Printer::Namespace => vec![C::NAME, C::new("Status", "string"), C::AGE],
            Printer::Node => vec![
                C::NAME,
                C::new("Status", "string"),
                C::new("Roles", "string"),
                C::AGE,
                C::new("Version", "string"),
                C::wide("Internal-IP"),
                C::wide("External-IP"),
                C::wide("OS-Image"),
                C::wide("Kernel-Version"),
                C::wide("Container-Runtime"),
            ],
            Printer::PodSnapshot => vec![
                C::NAME,
                C::new("Status", "string"),
                C::new("Policy", "string"),
                C::CR_AGE,
            ],
            Printer::PodSnapshotStorageConfig => {
                vec![C::NAME, C::new("Ready", "string"), C::CR_AGE]
            }
            Printer::PodSnapshotManualTrigger => {
                vec![C::NAME, C::new("Triggered", "string"), C::CR_AGE]
            }
            Printer::StatefulSet => vec![
                C::NAME,
                C::new("Ready", "string"),
                C::AGE,
                C::wide("Containers"),
                C::wide("Images"),
            ],
            Printer::Service => vec![
                C::NAME,
                C::new("Type", "string"),
                C::new("Cluster-IP", "string"),
                C::new("External-IP", "string"),
                C::new("Port(s)", "string"),
                C::AGE,
                C::wide("Selector"),
            ],
            Printer::PersistentVolumeClaim => vec![
                C::NAME,
                C::new("Status", "string"),
                C::new("Volume", "string"),
                C::new("Capacity", "string"),
                C::new("Access Modes", "string"),
                C::new("StorageClass", "string"),
                C::AGE,
                C::wide("VolumeMode"),
            ],
            Printer::ResourceQuota => vec![
                C::NAME,
                C::AGE,
                C::new("Request", "string"),
                C::new("Limit", "string"),
            ],
            Printer::Event => vec![
                C::new("Last Seen", "string"),
                C::new("Type", "string"),
                C::new("Reason", "string"),
                C::new("Object", "string"),
                C::wide("Subobject"),
                C::wide("Source"),
                C::new("Message", "string"),
                C::wide("First Seen"),
                C::wide("Count"),
                Column {
                    priority: 1,
                    ..C::NAME
                },
            ],
            Printer::ConfigMap => vec![C::NAME, C::new("Data", "integer"), C::AGE],
            Printer::ServiceAccount => vec![C::NAME, C::new("Secrets", "integer"), C::AGE],
            Printer::Plain => vec![C::NAME, C::AGE],
            Printer::PlainCustom => vec![C::NAME, C::CR_AGE],
        }
    }

    fn cells(self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let name = json!(str_at(obj, &["metadata", "name"]).unwrap_or_default());
        let age = json!(since(at(obj, &["metadata", "creationTimestamp"]), now));
        match self {
            Printer::Workspace => vec![name, opt(at(obj, &["status", "state"])), age],
            Printer::WorkspaceKind => vec![
                name,
                opt(at(obj, &["status", "workspaces"])),
                opt(at(obj, &["spec", "spawner", "deprecated"])),
                opt(at(obj, &["spec", "spawner", "hidden"])),
                age,
            ],
            Printer::Pod => pod_cells(obj, name, age, now),
            Printer::Namespace => vec![name, opt(at(obj, &["status", "phase"])), age],
            Printer::Node => node_cells(obj, name, age),
            Printer::PodSnapshot => vec![
                name,
                json!(pod_snapshot_status(obj)),
                opt(at(obj, &["spec", "policyName"])),
                age,
            ],
            Printer::PodSnapshotStorageConfig => {
                vec![
                    name,
                    opt(condition(obj, "Ready").and_then(|c| c.get("status"))),
                    age,
                ]
            }
            Printer::PodSnapshotManualTrigger => vec![
                name,
                opt(condition(obj, "Triggered").and_then(|c| c.get("status"))),
                age,
            ],
            Printer::StatefulSet => {
                let ready = int_at(obj, &["status", "readyReplicas"]);
                let desired = at(obj, &["spec", "replicas"])
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                let containers = template_containers(obj);
                vec![
                    name,
                    json!(format!("{ready}/{desired}")),
                    age,
                    json!(join_field(&containers, "name")),
                    json!(join_field(&containers, "image")),
                ]
            }
            Printer::Service => service_cells(obj, name, age),
            Printer::PersistentVolumeClaim => pvc_cells(obj, name, age),
            Printer::ResourceQuota => {
                let (request, limit) = quota_usage(obj);
                vec![name, age, json!(request), json!(limit)]
            }
            Printer::Event => event_cells(obj, name, now),
            Printer::ConfigMap => {
                let data = map_len(at(obj, &["data"])) + map_len(at(obj, &["binaryData"]));
                vec![name, json!(data), age]
            }
            Printer::ServiceAccount => {
                let secrets = at(obj, &["secrets"])
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                vec![name, json!(secrets), age]
            }
            Printer::Plain | Printer::PlainCustom => vec![name, age],
        }
    }
}

fn map_len(v: Option<&Value>) -> usize {
    v.and_then(Value::as_object).map_or(0, |m| m.len())
}

/// A cell from an optional field: absent prints blank (`null`), like a CRD printer column.
fn opt(v: Option<&Value>) -> Value {
    v.cloned().unwrap_or(Value::Null)
}

/// A non-empty string, or `<none>`.
fn or_none(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}

/// `status.conditions[type=<type>]`.
fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    at(obj, &["status", "conditions"])?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn is_deleting(obj: &Value) -> bool {
    at(obj, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null())
}

/// READY, STATUS, RESTARTS as kubectl's pod printer derives them.
fn pod_cells(obj: &Value, name: Value, age: Value, now: DateTime<Utc>) -> Vec<Value> {
    let total = at(obj, &["spec", "containers"])
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let phase = str_at(obj, &["status", "phase"]).unwrap_or_default();
    let status_reason = str_at(obj, &["status", "reason"]).unwrap_or_default();
    let mut reason = if status_reason.is_empty() {
        phase.to_string()
    } else {
        status_reason.to_string()
    };
    let gated = condition(obj, "PodScheduled")
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        == Some("SchedulingGated");
    if gated {
        reason = "SchedulingGated".into();
    }

    let mut initializing = false;
    let init_statuses = statuses(obj, "initContainerStatuses");
    let init_total = at(obj, &["spec", "initContainers"])
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    for (i, c) in init_statuses.iter().enumerate() {
        let terminated = at(c, &["state", "terminated"]);
        let waiting = at(c, &["state", "waiting"]);
        if terminated
            .and_then(|t| t.get("exitCode"))
            .and_then(Value::as_i64)
            == Some(0)
        {
            continue;
        }
        initializing = true;
        let term_reason = terminated
            .and_then(|t| t.get("reason"))
            .and_then(Value::as_str);
        let wait_reason = waiting
            .and_then(|w| w.get("reason"))
            .and_then(Value::as_str);
        reason = match (terminated, term_reason, wait_reason) {
            (Some(_), Some(r), _) if !r.is_empty() => format!("Init:{r}"),
            (Some(t), _, _) => match t.get("signal").and_then(Value::as_i64) {
                Some(sig) if sig != 0 => format!("Init:Signal:{sig}"),
                _ => format!(
                    "Init:ExitCode:{}",
                    t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                ),
            },
            (None, _, Some(r)) if !r.is_empty() && r != "PodInitializing" => format!("Init:{r}"),
            _ => format!("Init:{i}/{init_total}"),
        };
        break;
    }

    let mut restarts = 0;
    let mut ready = 0;
    let mut last_restart: Option<DateTime<Utc>> = None;
    if !initializing {
        let mut has_running = false;
        for c in statuses(obj, "containerStatuses").iter().rev() {
            restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            let finished = str_at(c, &["lastState", "terminated", "finishedAt"])
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .map(|t| t.with_timezone(&Utc));
            if let Some(t) = finished
                && last_restart.is_none_or(|l| l < t)
            {
                last_restart = Some(t);
            }
            let waiting = str_at(c, &["state", "waiting", "reason"]).unwrap_or_default();
            let terminated = at(c, &["state", "terminated"]);
            let term_reason = terminated
                .and_then(|t| t.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if !term_reason.is_empty() {
                reason = term_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match t.get("signal").and_then(Value::as_i64) {
                    Some(sig) if sig != 0 => format!("Signal:{sig}"),
                    _ => format!(
                        "ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    ),
                };
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && at(c, &["state", "running"]).is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = condition(obj, "Ready")
                .and_then(|c| c.get("status"))
                .and_then(Value::as_str)
                == Some("True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    if is_deleting(obj) {
        if status_reason == "NodeLost" {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }
    let restarts = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - t)),
        _ => restarts.to_string(),
    };
    let ip = at(obj, &["status", "podIPs"])
        .and_then(Value::as_array)
        .and_then(|ips| ips.first())
        .and_then(|ip| ip.get("ip"))
        .and_then(Value::as_str)
        .or_else(|| str_at(obj, &["status", "podIP"]));
    let gates = at(obj, &["spec", "readinessGates"])
        .and_then(Value::as_array)
        .filter(|g| !g.is_empty())
        .map(|gates| {
            let true_count = gates
                .iter()
                .filter_map(|g| g.get("conditionType").and_then(Value::as_str))
                .filter(|t| {
                    condition(obj, t)
                        .and_then(|c| c.get("status"))
                        .and_then(Value::as_str)
                        == Some("True")
                })
                .count();
            format!("{true_count}/{}", gates.len())
        });
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        age,
        json!(or_none(ip)),
        json!(or_none(str_at(obj, &["spec", "nodeName"]))),
        json!(or_none(str_at(obj, &["status", "nominatedNodeName"]))),
        json!(gates.unwrap_or_else(|| "<none>".into())),
    ]
}

fn statuses<'a>(obj: &'a Value, field: &str) -> &'a [Value] {
    at(obj, &["status", field])
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// STATUS (`Ready`/`NotReady`/`Unknown`, `,SchedulingDisabled`), ROLES and VERSION.
fn node_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let mut status = match condition(obj, "Ready")
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
    {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if at(obj, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = at(obj, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!role.is_empty()).then(|| role.to_string())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().filter(|r| !r.is_empty()).map(str::to_string)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let address = |kind: &str| {
        at(obj, &["status", "addresses"])
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|x| x.get("type").and_then(Value::as_str) == Some(kind))
            })
            .and_then(|x| x.get("address"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let info = |field: &str| {
        json!(
            str_at(obj, &["status", "nodeInfo", field])
                .filter(|s| !s.is_empty())
                .unwrap_or("<unknown>")
        )
    };
    vec![
        name,
        json!(status),
        json!(roles),
        age,
        json!(str_at(obj, &["status", "nodeInfo", "kubeletVersion"]).unwrap_or_default()),
        json!(or_none(address("InternalIP").as_deref())),
        json!(or_none(address("ExternalIP").as_deref())),
        info("osImage"),
        info("kernelVersion"),
        info("containerRuntimeVersion"),
    ]
}

/// STATUS of a PodSnapshot: `Deleting`, `AllSnapshotsAvailable`, else the reason of the
/// Ready (or Checkpoint) condition, e.g. `AwaitingCheckpoint`.
fn pod_snapshot_status(obj: &Value) -> String {
    if is_deleting(obj) {
        return "Deleting".into();
    }
    let ready = condition(obj, "Ready");
    if ready.and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True") {
        return "AllSnapshotsAvailable".into();
    }
    [ready, condition(obj, "Checkpoint")]
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("reason").and_then(Value::as_str))
        .find(|r| !r.is_empty())
        .unwrap_or_default()
        .to_string()
}

fn template_containers(obj: &Value) -> Vec<Value> {
    at(obj, &["spec", "template", "spec", "containers"])
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn join_field(items: &[Value], field: &str) -> String {
    items
        .iter()
        .filter_map(|c| c.get(field).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(",")
}

/// TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S), SELECTOR.
fn service_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let kind = str_at(obj, &["spec", "type"]).unwrap_or("ClusterIP");
    let cluster_ip = or_none(str_at(obj, &["spec", "clusterIP"]));
    let external_ips: Vec<&str> = at(obj, &["spec", "externalIPs"])
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let external = match kind {
        "ExternalName" => or_none(str_at(obj, &["spec", "externalName"])),
        "LoadBalancer" => {
            let ingress: Vec<&str> = at(obj, &["status", "loadBalancer", "ingress"])
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|i| {
                            i.get("ip")
                                .or_else(|| i.get("hostname"))
                                .and_then(Value::as_str)
                        })
                        .collect()
                })
                .unwrap_or_default();
            let all: Vec<&str> = ingress.into_iter().chain(external_ips).collect();
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        _ if external_ips.is_empty() => "<none>".into(),
        _ => external_ips.join(","),
    };
    let ports: Vec<String> = at(obj, &["spec", "ports"])
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p.get("nodePort").and_then(Value::as_i64) {
                        Some(np) if np != 0 => format!("{port}:{np}/{proto}"),
                        _ => format!("{port}/{proto}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    let mut selector: Vec<String> = at(obj, &["spec", "selector"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    selector.sort();
    let selector = if selector.is_empty() {
        "<none>".to_string()
    } else {
        selector.join(",")
    };
    vec![
        name,
        json!(kind),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        age,
        json!(selector),
    ]
}

/// STATUS, VOLUME, CAPACITY, ACCESS MODES, STORAGECLASS, VOLUMEMODE.
fn pvc_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let phase = if is_deleting(obj) {
        "Terminating"
    } else {
        str_at(obj, &["status", "phase"]).unwrap_or_default()
    };
    let volume = str_at(obj, &["spec", "volumeName"]).unwrap_or_default();
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let capacity = str_at(obj, &["status", "capacity", "storage"])
            .unwrap_or_default()
            .to_string();
        let modes: Vec<&str> = at(obj, &["status", "accessModes"])
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|m| match m {
                        "ReadWriteOnce" => "RWO",
                        "ReadOnlyMany" => "ROX",
                        "ReadWriteMany" => "RWX",
                        "ReadWriteOncePod" => "RWOP",
                        other => other,
                    })
                    .collect()
            })
            .unwrap_or_default();
        (capacity, modes.join(","))
    };
    vec![
        name,
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(str_at(obj, &["spec", "storageClassName"]).unwrap_or_default()),
        age,
        json!(str_at(obj, &["spec", "volumeMode"]).unwrap_or("Filesystem")),
    ]
}

/// REQUEST and LIMIT: `resource: used/hard` pairs over `status.hard`, sorted by resource.
fn quota_usage(obj: &Value) -> (String, String) {
    let Some(hard) = at(obj, &["status", "hard"]).and_then(Value::as_object) else {
        return (String::new(), String::new());
    };
    let mut keys: Vec<&String> = hard.keys().collect();
    keys.sort();
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for key in keys {
        let used = at(obj, &["status", "used", key.as_str()])
            .map(quantity)
            .unwrap_or_else(|| "0".into());
        let pair = format!("{key}: {used}/{}", quantity(&hard[key.as_str()]));
        if key.starts_with("limits.") {
            limit.push(pair);
        } else {
            request.push(pair);
        }
    }
    (request.join(", "), limit.join(", "))
}

fn quantity(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// LAST SEEN, TYPE, REASON, OBJECT, (SUBOBJECT, SOURCE), MESSAGE, (FIRST SEEN, COUNT, NAME).
fn event_cells(obj: &Value, name: Value, now: DateTime<Utc>) -> Vec<Value> {
    let first = at(obj, &["firstTimestamp"])
        .filter(|v| !v.is_null())
        .or_else(|| at(obj, &["eventTime"]).filter(|v| !v.is_null()));
    let last = at(obj, &["series", "lastObservedTime"])
        .filter(|v| !v.is_null())
        .or_else(|| at(obj, &["lastTimestamp"]).filter(|v| !v.is_null()))
        .or(first);
    let first_seen = since(first, now);
    let count = at(obj, &["series", "count"])
        .or_else(|| at(obj, &["count"]))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let mut last_seen = since(last, now);
    if count > 1 {
        last_seen = format!("{last_seen} (x{count} over {first_seen})");
    }
    let object = format!(
        "{}/{}",
        str_at(obj, &["involvedObject", "kind"])
            .unwrap_or_default()
            .to_lowercase(),
        str_at(obj, &["involvedObject", "name"]).unwrap_or_default()
    );
    let source = str_at(obj, &["source", "component"])
        .or_else(|| str_at(obj, &["reportingComponent"]))
        .unwrap_or_default();
    vec![
        json!(last_seen),
        json!(str_at(obj, &["type"]).unwrap_or_default()),
        json!(str_at(obj, &["reason"]).unwrap_or_default()),
        json!(object),
        json!(str_at(obj, &["involvedObject", "fieldPath"]).unwrap_or_default()),
        json!(source),
        json!(
            str_at(obj, &["message"])
                .unwrap_or_default()
                .trim()
                .to_string()
        ),
        json!(first_seen),
        json!(count),
        name,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::kinds::find;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-09-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn created(ago: TimeDelta) -> String {
        (now() - ago).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    #[test]
    fn ages_are_formatted_like_kubectl() {
        let cases = [
            (TimeDelta::seconds(-5), "<invalid>"),
            (TimeDelta::milliseconds(-900), "0s"),
            (TimeDelta::seconds(5), "5s"),
            (TimeDelta::seconds(119), "119s"),
            (TimeDelta::seconds(120), "2m"),
            (TimeDelta::seconds(3 * 60 + 12), "3m12s"),
            (TimeDelta::minutes(45), "45m"),
            (TimeDelta::minutes(179), "179m"),
            (TimeDelta::minutes(5 * 60 + 7), "5h7m"),
            (TimeDelta::hours(6), "6h"),
            (TimeDelta::hours(30), "30h"),
            (TimeDelta::hours(51), "2d3h"),
            (TimeDelta::days(4), "4d"),
            (TimeDelta::days(100), "100d"),
            (TimeDelta::days(365 * 3 + 12), "3y12d"),
            (TimeDelta::days(365 * 9), "9y"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn kubectl_table_accept_is_recognised() {
        assert!(wants_table(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        )));
        assert!(!wants_table(Some("application/json")));
        assert!(!wants_table(Some("application/json, */*")));
        assert!(!wants_table(None));
    }

    #[test]
    fn workspace_rows_show_state_and_carry_full_metadata() {
        let kind = find("kubeflow.org", "v1beta1", "workspaces").unwrap();
        let ws = json!({
            "metadata": {"name": "ws-a", "namespace": "team", "labels": {"app": "x"},
                         "creationTimestamp": created(TimeDelta::seconds(192))},
            "status": {"state": "Paused"}
        });
        let fresh = json!({"metadata": {"name": "ws-b", "creationTimestamp": created(TimeDelta::seconds(5))}});
        let t = table(kind, &[&ws, &fresh], "42", now(), true);
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["metadata"]["resourceVersion"], "42");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "State", "Age"]);
        assert_eq!(t["rows"][0]["cells"], json!(["ws-a", "Paused", "3m12s"]));
        assert_eq!(t["rows"][1]["cells"], json!(["ws-b", null, "5s"]));
        let meta = &t["rows"][0]["object"];
        assert_eq!(meta["kind"], "PartialObjectMetadata");
        assert_eq!(meta["metadata"]["namespace"], "team");
        assert_eq!(meta["metadata"]["labels"]["app"], "x");

        let event = table(kind, &[&ws], "43", now(), false);
        assert!(event["columnDefinitions"].is_null());
    }

    #[test]
    fn pod_rows_count_ready_containers_and_restarts() {
        let kind = find("", "v1", "pods").unwrap();
        let pod = json!({
            "metadata": {"name": "ws-a-0", "creationTimestamp": created(TimeDelta::hours(51))},
            "spec": {"nodeName": "gpu-1", "containers": [{"name": "main"}, {"name": "side"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
                {"name": "main", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1,
                               "finishedAt": created(TimeDelta::minutes(5))}}},
                {"name": "side", "ready": false, "restartCount": 0, "state": {"running": {}}}
            ]}
        });
        let t = table(kind, &[&pod], "1", now(), true);
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "ws-a-0",
                "1/2",
                "Running",
                "2 (5m ago)",
                "2d3h",
                "10.0.0.7",
                "gpu-1",
                "<none>",
                "<none>"
            ])
        );
        let wide: Vec<i64> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["priority"].as_i64().unwrap())
            .collect();
        assert_eq!(wide, [0, 0, 0, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn pod_status_prefers_waiting_reason_then_terminating() {
        let kind = find("", "v1", "pods").unwrap();
        let pulling = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main"}]},
            "status": {"phase": "Pending", "containerStatuses": [
                {"name": "main", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        });
        let pending = json!({
            "metadata": {"name": "q"},
            "spec": {"containers": [{"name": "main"}]},
            "status": {"phase": "Pending"}
        });
        let mut deleting = pulling.clone();
        deleting["metadata"]["deletionTimestamp"] = json!(created(TimeDelta::seconds(1)));
        let t = table(kind, &[&pulling, &pending, &deleting], "1", now(), true);
        assert_eq!(t["rows"][0]["cells"][2], "ContainerCreating");
        assert_eq!(t["rows"][0]["cells"][4], "<unknown>");
        assert_eq!(t["rows"][1]["cells"][1], "0/1");
        assert_eq!(t["rows"][1]["cells"][2], "Pending");
        assert_eq!(t["rows"][2]["cells"][2], "Terminating");
    }

    #[test]
    fn pod_snapshot_status_follows_conditions_and_deletion() {
        let kind = find("podsnapshot.gke.io", "v1", "podsnapshots").unwrap();
        let awaiting = json!({
            "metadata": {"name": "s1"}, "spec": {"policyName": "pol"},
            "status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": "AwaitingCheckpoint"}]}
        });
        let ready = json!({
            "metadata": {"name": "s2"}, "spec": {"policyName": "pol"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
        });
        let mut deleting = ready.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-09-01T11:59:00Z");
        let t = table(kind, &[&awaiting, &ready, &deleting], "1", now(), true);
        let status: Vec<&Value> = (0..3).map(|i| &t["rows"][i]["cells"][1]).collect();
        assert_eq!(
            status,
            [
                &json!("AwaitingCheckpoint"),
                &json!("AllSnapshotsAvailable"),
                &json!("Deleting")
            ]
        );
        assert_eq!(t["rows"][0]["cells"][2], "pol");
    }

    #[test]
    fn node_quota_statefulset_and_event_rows() {
        let node = json!({
            "metadata": {"name": "gpu-1", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.4"}}
        });
        let t = table(find("", "v1", "nodes").unwrap(), &[&node], "1", now(), true);
        assert_eq!(t["rows"][0]["cells"][1], "NotReady,SchedulingDisabled");
        assert_eq!(t["rows"][0]["cells"][2], "worker");
        assert_eq!(t["rows"][0]["cells"][4], "v1.32.4");

        let quota = json!({
            "metadata": {"name": "gpu"},
            "status": {"hard": {"requests.nvidia.com/gpu": "2", "limits.cpu": "8"},
                       "used": {"requests.nvidia.com/gpu": "1"}}
        });
        let t = table(
            find("", "v1", "resourcequotas").unwrap(),
            &[&quota],
            "1",
            now(),
            true,
        );
        assert_eq!(t["rows"][0]["cells"][2], "requests.nvidia.com/gpu: 1/2");
        assert_eq!(t["rows"][0]["cells"][3], "limits.cpu: 0/8");

        let sts = json!({"metadata": {"name": "ws-a"}, "spec": {"replicas": 1},
                         "status": {"replicas": 1}});
        let t = table(
            find("apps", "v1", "statefulsets").unwrap(),
            &[&sts],
            "1",
            now(),
            true,
        );
        assert_eq!(t["rows"][0]["cells"][1], "0/1");

        let ev = json!({
            "metadata": {"name": "ws-a-0.1"}, "type": "Normal", "reason": "GKEPodSnapshotting",
            "involvedObject": {"kind": "Pod", "name": "ws-a-0"}, "message": "restored",
            "count": 3, "firstTimestamp": created(TimeDelta::minutes(10)),
            "lastTimestamp": created(TimeDelta::seconds(30))
        });
        let t = table(find("", "v1", "events").unwrap(), &[&ev], "1", now(), true);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "30s (x3 over 10m)");
        assert_eq!(cells[3], "pod/ws-a-0");
        assert_eq!(cells[6], "restored");
        assert_eq!(
            t["columnDefinitions"].as_array().unwrap().len(),
            cells.as_array().unwrap().len()
        );
    }

    #[test]
    fn every_kind_has_as_many_cells_as_columns() {
        let empty = json!({"metadata": {"name": "x"}});
        for kind in crate::sim::kinds::KINDS {
            let t = table(kind, &[&empty], "1", now(), true);
            assert_eq!(
                t["columnDefinitions"].as_array().unwrap().len(),
                t["rows"][0]["cells"].as_array().unwrap().len(),
                "{}",
                kind.kind
            );
            assert_eq!(
                t["columnDefinitions"][0]["format"],
                if kind.kind == "Event" { "" } else { "name" }
            );
        }
    }
}
