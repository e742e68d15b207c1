//! Discovery documents: `/version`, `/api`, `/apis` (aggregated v2 or legacy) and the
//! per-group/version `APIResourceList`s, all generated from [`crate::sim::kinds::KINDS`].
//!
//! Pure functions: the router picks the document and sends the returned Content-Type.
//! kubectl decides between aggregated and legacy discovery by the reply's Content-Type alone
//! (`kubectl-and-clients.md` §1), so the two always travel together here.

use serde_json::{Map, Value, json};

use crate::platform::names::SIM_VERSION_MARK;
use crate::sim::kinds::{KINDS, KindInfo, group_versions};

/// Content-Type of an aggregated discovery reply (`apidiscovery.k8s.io/v2`).
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Content-Type of every other discovery reply.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// The verbs a `/status` subresource supports.
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// The Kubernetes version the simulator reports.
///
/// Minor `32` is load-bearing: the `kubectl` on PATH is the Cloud SDK dispatcher, which
/// probes `/version` and runs its embedded v1.32 kubectl only for minors 26, 32 and 34;
/// for other minors it execs a sibling binary that may not exist.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "emulationMajor": "1",
        "emulationMinor": "32",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "31",
        "gitVersion": format!("v1.32.4{SIM_VERSION_MARK}"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// Whether the client accepts aggregated discovery v2 (`GET /api`, `GET /apis`).
///
/// True when any media range in `Accept` names `g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`
/// (parameter order, case and whitespace do not matter; `q=0` excludes the range).
pub fn wants_aggregated(accept: Option<&str>) -> bool {
    let wanted = super::accept::Wanted {
        group: "apidiscovery.k8s.io",
        versions: &["v2"],
        as_: "APIGroupDiscoveryList",
        any_version_when_absent: false,
    };
    super::accept::names(accept, &wanted)
}

/// `GET /api`: the core group only.
pub fn api_root(aggregated: bool) -> (&'static str, Value) {
    if aggregated {
        let items: Vec<Value> = group_versions()
            .into_iter()
            .filter(|(g, _)| g.is_empty())
            .map(|(g, _)| group_discovery(g))
            .collect();
        (AGGREGATED_CONTENT_TYPE, discovery_list(items))
    } else {
        let versions: Vec<&str> = group_versions()
            .into_iter()
            .filter(|(g, _)| g.is_empty())
            .map(|(_, v)| v)
            .collect();
        let doc = json!({
            "kind": "APIVersions",
            "versions": versions,
            "serverAddressByClientCIDRs": [],
        });
        (JSON_CONTENT_TYPE, doc)
    }
}

/// `GET /apis`: every named group (`apps`, `kubeflow.org`, `podsnapshot.gke.io`, ...).
pub fn apis_root(aggregated: bool) -> (&'static str, Value) {
    let groups = named_groups();
    if aggregated {
        let items: Vec<Value> = groups.iter().map(|g| group_discovery(g)).collect();
        (AGGREGATED_CONTENT_TYPE, discovery_list(items))
    } else {
        let groups: Vec<Value> = groups
            .iter()
            .map(|group| {
                let versions: Vec<Value> = versions_of(group)
                    .into_iter()
                    .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                    .collect();
                let preferred = versions[0].clone();
                json!({"name": group, "versions": versions, "preferredVersion": preferred})
            })
            .collect();
        let doc = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups});
        (JSON_CONTENT_TYPE, doc)
    }
}

/// `GET /api/v1` or `GET /apis/<group>/<version>`: the legacy `APIResourceList`, with a
/// `<plural>/status` entry for every kind that has the subresource. `None` when the
/// group/version is not served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let kinds: Vec<&KindInfo> = KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for k in kinds {
        let mut r = Map::new();
        r.insert("name".into(), json!(k.plural));
        r.insert("singularName".into(), json!(k.singular));
        r.insert("namespaced".into(), json!(k.namespaced));
        r.insert("kind".into(), json!(k.kind));
        r.insert("verbs".into(), json!(k.verbs()));
        if !k.short_names.is_empty() {
            r.insert("shortNames".into(), json!(k.short_names));
        }
        if !categories(k).is_empty() {
            r.insert("categories".into(), json!(categories(k)));
        }
        resources.push(Value::Object(r));
        if k.status {
            resources.push(json!({
                "name": format!("{}/status", k.plural),
                "singularName": "",
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": STATUS_VERBS,
            }));
        }
        if k.kind == "Pod" && k.group.is_empty() {
            // Served over WebSockets (api::stream), as a real API server lists them.
            for (sub, kind) in [
                ("exec", "PodExecOptions"),
                ("portforward", "PodPortForwardOptions"),
            ] {
                resources.push(json!({
                    "name": format!("pods/{sub}"),
                    "singularName": "",
                    "namespaced": true,
                    "kind": kind,
                    "verbs": ["create", "get"],
                }));
            }
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// The categories a kind belongs to, as on a real cluster: only workload-ish built-ins are
/// in `all` (the platform CRDs declare no categories).
fn categories(k: &KindInfo) -> &'static [&'static str] {
    match (k.group, k.kind) {
        ("", "Pod") | ("", "Service") | ("apps", "StatefulSet") => &["all"],
        _ => &[],
    }
}

/// Named groups in registry order.
fn named_groups() -> Vec<&'static str> {
    let mut out: Vec<&str> = Vec::new();
    for (g, _) in group_versions() {
        if !g.is_empty() && !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

/// Versions of one group, preferred first (registry order).
fn versions_of(group: &str) -> Vec<&'static str> {
    group_versions()
        .into_iter()
        .filter(|(g, _)| *g == group)
        .map(|(_, v)| v)
        .collect()
}

fn discovery_list(items: Vec<Value>) -> Value {
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// One `APIGroupDiscovery` item (the core group is named `""`).
fn group_discovery(group: &str) -> Value {
    let versions: Vec<Value> = versions_of(group)
        .into_iter()
        .map(|version| {
            let resources: Vec<Value> = KINDS
                .iter()
                .filter(|k| k.group == group && k.version == version)
                .map(resource_discovery)
                .collect();
            json!({"version": version, "freshness": "Current", "resources": resources})
        })
        .collect();
    json!({"metadata": {"name": group}, "versions": versions})
}

/// One `APIResourceDiscovery` entry.
fn resource_discovery(k: &KindInfo) -> Value {
    let response_kind = json!({"group": k.group, "version": k.version, "kind": k.kind});
    let mut r = Map::new();
    r.insert("resource".into(), json!(k.plural));
    r.insert("responseKind".into(), response_kind.clone());
    r.insert(
        "scope".into(),
        json!(if k.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }),
    );
    r.insert("singularResource".into(), json!(k.singular));
    r.insert("verbs".into(), json!(k.verbs()));
    if !k.short_names.is_empty() {
        r.insert("shortNames".into(), json!(k.short_names));
    }
    if !categories(k).is_empty() {
        r.insert("categories".into(), json!(categories(k)));
    }
    if k.status {
        r.insert(
            "subresources".into(),
            json!([{"subresource": "status", "responseKind": response_kind, "verbs": STATUS_VERBS}]),
        );
    }
    Value::Object(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

    #[test]
    fn kubectl_accept_selects_aggregated_and_plain_json_does_not() {
        assert!(wants_aggregated(Some(KUBECTL_ACCEPT)));
        assert!(wants_aggregated(Some(
            "application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io"
        )));
        assert!(!wants_aggregated(Some("application/json, */*")));
        assert!(!wants_aggregated(Some(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        )));
        assert!(!wants_aggregated(Some(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0"
        )));
        assert!(!wants_aggregated(None));
    }

    #[test]
    fn version_pins_the_dispatcher_to_its_embedded_kubectl() {
        let v = version();
        assert_eq!(v["major"], "1");
        assert_eq!(v["minor"], "32");
        assert!(v["gitVersion"].as_str().unwrap().starts_with("v1.32."));
        let info: k8s_openapi::apimachinery::pkg::version::Info =
            serde_json::from_value(v).expect("kube-rs must parse /version");
        assert_eq!(info.platform, "linux/amd64");
    }

    #[test]
    fn aggregated_core_group_is_one_unnamed_item_with_every_core_kind() {
        let (ct, doc) = api_root(true);
        assert_eq!(ct, AGGREGATED_CONTENT_TYPE);
        let items = doc["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["metadata"]["name"], "");
        let resources = items[0]["versions"][0]["resources"].as_array().unwrap();
        let core = KINDS.iter().filter(|k| k.group.is_empty()).count();
        assert_eq!(resources.len(), core);
        let pods = resources.iter().find(|r| r["resource"] == "pods").unwrap();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        assert_eq!(pods["subresources"][0]["subresource"], "status");
        let nodes = resources.iter().find(|r| r["resource"] == "nodes").unwrap();
        assert_eq!(nodes["scope"], "Cluster");
    }

    #[test]
    fn aggregated_named_groups_carry_the_platform_kinds() {
        let (_, doc) = apis_root(true);
        let names: Vec<&str> = doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        for group in ["apps", "kubeflow.org", "podsnapshot.gke.io"] {
            assert!(names.contains(&group), "{group} missing from {names:?}");
        }
        let kubeflow = doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == "kubeflow.org")
            .unwrap();
        let resources = kubeflow["versions"][0]["resources"].as_array().unwrap();
        let wsk = resources
            .iter()
            .find(|r| r["resource"] == "workspacekinds")
            .unwrap();
        assert_eq!(wsk["scope"], "Cluster");
        assert_eq!(wsk["shortNames"], json!(["wsk"]));
        assert_eq!(wsk["responseKind"]["kind"], "WorkspaceKind");
    }

    #[test]
    fn legacy_roots_list_every_group_version() {
        let (ct, api) = api_root(false);
        assert_eq!(ct, JSON_CONTENT_TYPE);
        assert_eq!(api["versions"], json!(["v1"]));
        let (_, apis) = apis_root(false);
        let gvs: Vec<&str> = apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["preferredVersion"]["groupVersion"].as_str().unwrap())
            .collect();
        let expected = group_versions().len() - 1;
        assert_eq!(gvs.len(), expected);
        assert!(gvs.contains(&"kubeflow.org/v1beta1"));
    }

    #[test]
    fn resource_list_parses_as_k8s_openapi_and_has_status_entries() {
        for (g, v) in group_versions() {
            let doc = resource_list(g, v).expect("served group/version");
            let list: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList =
                serde_json::from_value(doc).expect("kube-rs must parse the resource list");
            for k in KINDS.iter().filter(|k| k.group == g && k.version == v) {
                let main = list.resources.iter().find(|r| r.name == k.plural).unwrap();
                assert_eq!(main.namespaced, k.namespaced);
                let status = format!("{}/status", k.plural);
                assert_eq!(
                    list.resources.iter().any(|r| r.name == status),
                    k.status,
                    "{status}"
                );
            }
        }
        assert!(resource_list("kubeflow.org", "v1").is_none());
        assert!(resource_list("nope.io", "v1").is_none());
    }
}
