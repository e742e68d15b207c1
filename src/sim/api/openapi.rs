//! The minimal OpenAPI v3 documents kubectl needs before it sends a write: a root listing
//! every served group/version, and per group/version one `patch` operation per kind with
//! `x-kubernetes-group-version-kind` and the `fieldValidation` parameter.
//!
//! Without them every `apply`/`create`/`replace` fails client-side with "failed to download
//! openapi" (`kubectl-and-clients.md` §4). No schemas are served: kubectl then relies on the
//! server's field validation, which the simulator may ignore.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::platform::names::SIM_VERSION_MARK;
use crate::sim::kinds::{KINDS, KindInfo, group_versions};

/// `GET /openapi/v3`: every served group/version with a content-addressed
/// `serverRelativeURL` (`/openapi/v3/<gv path>?hash=<sha256 of the document>`).
pub fn root() -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions() {
        let path = gv_path(group, version);
        let doc = document(group, version);
        let hash = hex::encode_upper(Sha256::digest(doc.to_string().as_bytes()));
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/<path>` for `path` like `api/v1` or `apis/kubeflow.org/v1beta1`
/// (leading `/` and the `?hash=` query already stripped). `None` for unserved paths.
pub fn group_version(path: &str) -> Option<Value> {
    let path = path.trim_matches('/');
    let (group, version) = if let Some(version) = path.strip_prefix("api/") {
        ("", version)
    } else {
        path.strip_prefix("apis/")?.split_once('/')?
    };
    if group.contains('/') || version.contains('/') || version.is_empty() {
        return None;
    }
    group_versions()
        .into_iter()
        .find(|gv| *gv == (group, version))
        .map(|(g, v)| document(g, v))
}

/// `api/v1` or `apis/<group>/<version>`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn document(group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    for k in KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version && k.verbs().contains(&"patch"))
    {
        paths.insert(item_path(k), json!({"patch": patch_operation(k)}));
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.32.4{SIM_VERSION_MARK}")},
        "paths": paths,
    })
}

/// `/api/v1/namespaces/{namespace}/pods/{name}` or `/apis/<g>/<v>/<plural>/{name}`.
fn item_path(k: &KindInfo) -> String {
    let scope = if k.namespaced {
        "namespaces/{namespace}/"
    } else {
        ""
    };
    format!(
        "/{}/{scope}{}/{{name}}",
        gv_path(k.group, k.version),
        k.plural
    )
}

fn patch_operation(k: &KindInfo) -> Value {
    json!({
        "operationId": format!("patch{}", k.kind),
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": k.group, "version": k.version, "kind": k.kind},
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
            {"name": "force", "in": "query", "schema": {"type": "boolean"}},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_lists_every_group_version_with_a_stable_hash() {
        let r = root();
        let paths = r["paths"].as_object().unwrap();
        assert_eq!(paths.len(), group_versions().len());
        let url = paths["apis/kubeflow.org/v1beta1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(
            url.starts_with("/openapi/v3/apis/kubeflow.org/v1beta1?hash="),
            "{url}"
        );
        assert!(paths.contains_key("api/v1"));
        assert_eq!(root(), r, "hash must not change between calls");
    }

    #[test]
    fn each_url_in_the_root_resolves_to_its_document() {
        for entry in root()["paths"].as_object().unwrap().values() {
            let url = entry["serverRelativeURL"].as_str().unwrap();
            let path = url
                .strip_prefix("/openapi/v3/")
                .unwrap()
                .split('?')
                .next()
                .unwrap();
            assert!(group_version(path).is_some(), "{url}");
        }
    }

    #[test]
    fn documents_carry_one_patch_per_kind_with_gvk_and_field_validation() {
        let doc = group_version("apis/kubeflow.org/v1beta1").unwrap();
        let ws = &doc["paths"]["/apis/kubeflow.org/v1beta1/namespaces/{namespace}/workspaces/{name}"]
            ["patch"];
        assert_eq!(
            ws["x-kubernetes-group-version-kind"],
            json!({"group": "kubeflow.org", "version": "v1beta1", "kind": "Workspace"})
        );
        assert!(
            ws["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(
            doc["paths"]
                .get("/apis/kubeflow.org/v1beta1/workspacekinds/{name}")
                .is_some()
        );

        let core = group_version("/api/v1").unwrap();
        let core_kinds = KINDS.iter().filter(|k| k.group.is_empty()).count();
        assert_eq!(core["paths"].as_object().unwrap().len(), core_kinds);
        assert!(core["paths"].get("/api/v1/nodes/{name}").is_some());
        assert!(
            core["paths"]
                .get("/api/v1/namespaces/{namespace}/pods/{name}")
                .is_some()
        );
    }

    #[test]
    fn unknown_paths_are_none() {
        for p in [
            "apis/kubeflow.org/v1",
            "apis/kubeflow.org",
            "api/v2",
            "apis/x/y/z",
            "",
            "version",
        ] {
            assert!(group_version(p).is_none(), "{p}");
        }
    }
}
