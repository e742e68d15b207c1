//! Which imageConfig and podConfig of the WorkspaceKind a Workspace is created with.
//!
//! The options are checked against the kind before anything is created: an id the kind
//! does not offer, or a pair its `filterRules` deny, stops the command with the kind's own
//! message. Kubeflow's controller only stores and validates `filterRules`; the workspaces
//! backend (the dashboard's API) enforces them (kubeflow/notebooks, branch notebooks-v2,
//! `workspaces/backend/internal/filterrules/engine.go`, `Evaluate`: rules of the target's
//! scope in order, every condition of a rule must hold, the first matching rule decides; a
//! condition without the labels it needs never matches). A Workspace written straight to the
//! API server passes, but a pair the kind forbids is not one a user can make, so wsgate does
//! not certify it.
//!
//! An empty `workspace.pod_config` picks the kind's GPU option (the spawner default when it
//! asks for a GPU, else the first that does); an empty `workspace.image_config` picks the
//! first image the filterRules allow with that pod option (the spawner default first). The
//! command says which it picked.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::Api;
use kube::core::{Selector, SelectorExt};
use serde_json::Value;

use super::crd::{WorkspaceKind, WorkspaceKindSpec};

pub use super::names::GPU_RESOURCE;

/// Options the kind refuses, or a kind that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("cannot read WorkspaceKind {kind}: {source}")]
    Read {
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "WorkspaceKind {kind} does not exist on the target: install it, or set workspace.kind \
         to a kind the cluster has"
    )]
    NoKind { kind: String },
    #[error(
        "{option} {id:?} is not an option of WorkspaceKind {kind} (offered: {offered:?}): set \
         workspace.{key} to one of them, or to \"\" to let wsgate pick"
    )]
    Unknown {
        kind: String,
        option: &'static str,
        key: &'static str,
        id: String,
        offered: Vec<String>,
    },
    #[error(
        "WorkspaceKind {kind} offers no podConfig that asks for `{GPU_RESOURCE}` (offered: \
         {offered:?}): name a GPU option in workspace.pod_config"
    )]
    NoGpuOption { kind: String, offered: Vec<String> },
    #[error(
        "WorkspaceKind {kind}'s filterRules allow no imageConfig with podConfig {pod:?} \
         (refused: {refused}): name a compatible pair in workspace.image_config and \
         workspace.pod_config"
    )]
    NoImage {
        kind: String,
        pod: String,
        refused: String,
    },
    #[error(
        "WorkspaceKind {kind}'s filterRules refuse imageConfig {image:?} with podConfig {pod:?}: \
         {}; Kubeflow's workspaces backend refuses this pair, so wsgate does not create it{}",
        reasons.join("; "),
        suggestion.as_deref().map(|s| format!(": try {s}")).unwrap_or_default()
    )]
    Denied {
        kind: String,
        image: String,
        pod: String,
        reasons: Vec<String>,
        suggestion: Option<String>,
    },
}

impl OptionsError {
    /// Exit code: a kind that is missing or unreadable is the target's; options the kind
    /// refuses are the configuration's.
    pub fn exit_code(&self) -> i32 {
        match self {
            OptionsError::Read { .. } | OptionsError::NoKind { .. } => crate::exit_code::TARGET,
            _ => crate::exit_code::USAGE,
        }
    }
}

/// The options to create Workspaces with, and what was picked for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub image_config: String,
    pub pod_config: String,
    /// One line naming what wsgate picked, when the configuration left an option empty.
    pub picked: Option<String>,
}

/// Which option list a rule or condition concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Image,
    Pod,
}

impl Scope {
    fn field(self) -> &'static str {
        match self {
            Scope::Image => "imageConfig",
            Scope::Pod => "podConfig",
        }
    }
    fn words(self) -> &'static str {
        match self {
            Scope::Image => "image config option",
            Scope::Pod => "pod config option",
        }
    }
    fn rule_scope(self) -> &'static str {
        match self {
            Scope::Image => "IMAGE_CONFIG",
            Scope::Pod => "POD_CONFIG",
        }
    }
}

fn values(spec: &WorkspaceKindSpec, scope: Scope) -> &[Value] {
    spec.pod_template
        .pointer(&format!("/options/{}/values", scope.field()))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn id(v: &Value) -> &str {
    v.get("id").and_then(Value::as_str).unwrap_or("")
}

fn ids(spec: &WorkspaceKindSpec, scope: Scope) -> Vec<String> {
    values(spec, scope)
        .iter()
        .map(|v| id(v).to_string())
        .collect()
}

fn find<'a>(spec: &'a WorkspaceKindSpec, scope: Scope, want: &str) -> Option<&'a Value> {
    values(spec, scope).iter().find(|v| id(v) == want)
}

fn default_of(spec: &WorkspaceKindSpec, scope: Scope) -> Option<&str> {
    spec.pod_template
        .pointer(&format!("/options/{}/spawner/default", scope.field()))
        .and_then(Value::as_str)
}

/// The kind's podConfig option `id`, if it offers one.
pub(super) fn pod_option<'a>(spec: &'a WorkspaceKindSpec, id: &str) -> Option<&'a Value> {
    find(spec, Scope::Pod, id)
}

/// The ids of the kind's podConfig options, in the kind's order.
pub(super) fn pod_ids(spec: &WorkspaceKindSpec) -> Vec<String> {
    ids(spec, Scope::Pod)
}

/// An option's `spawner.labels` (a list of key/value pairs) as a map.
pub(super) fn labels(option: &Value) -> BTreeMap<String, String> {
    option
        .pointer("/spawner/labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| {
            Some((
                l.get("key")?.as_str()?.to_string(),
                l.get("value")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Whether a podConfig option asks for a GPU in its limits.
pub fn asks_for_gpu(option: &Value) -> bool {
    option
        .pointer("/spec/resources/limits")
        .and_then(Value::as_object)
        .is_some_and(|l| l.contains_key(GPU_RESOURCE))
}

/// The first rule of `scope` whose every condition holds decides; `Some(message)` when it
/// denies (or hides from the API) the `target` option, given the other option's labels.
/// Conditions on namespaces need the namespace's labels (`ns_labels`); without them, they
/// do not match.
fn decide(
    rules: &[Value],
    scope: Scope,
    target: &Value,
    image: &BTreeMap<String, String>,
    pod: &BTreeMap<String, String>,
    ns_labels: Option<&BTreeMap<String, String>>,
) -> Option<String> {
    for rule in rules {
        if rule.get("scope").and_then(Value::as_str) != Some(scope.rule_scope()) {
            continue;
        }
        let conditions: Vec<(Selector, Option<&BTreeMap<String, String>>)> = rule
            .get("match")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| {
                let (on, selector) = if let Some(s) = m.pointer("/matchImageConfig/selector") {
                    (Some(image), s)
                } else if let Some(s) = m.pointer("/matchPodConfig/selector") {
                    (Some(pod), s)
                } else {
                    (ns_labels, m.pointer("/matchNamespace/selector")?)
                };
                // A selector that does not compile is dropped, as upstream's engine does.
                let ls: LabelSelector = serde_json::from_value(selector.clone()).ok()?;
                Some((Selector::try_from(ls).ok()?, on))
            })
            .collect();
        if conditions.is_empty() {
            continue;
        }
        let holds = conditions
            .iter()
            .all(|(sel, on)| on.is_some_and(|labels| sel.matches(labels)));
        if !holds {
            continue;
        }
        let api = rule.pointer("/effect/api");
        let flag = |k: &str| {
            api.and_then(|a| a.get(k))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let what = format!("{} {:?}", scope.words(), id(target));
        return if flag("hide") {
            Some(format!("not allowed: {what} is hidden"))
        } else if flag("deny") {
            let text = api
                .and_then(|a| a.pointer("/denyMessage/text"))
                .and_then(Value::as_str)
                .map(|t| format!(": {t}"))
                .unwrap_or_default();
            Some(format!("not allowed: {what} is restricted{text}"))
        } else {
            None
        };
    }
    None
}

/// What the kind's filterRules say against the pair, in the backend's words (empty: allowed).
pub fn refusals(
    spec: &WorkspaceKindSpec,
    image_id: &str,
    pod_id: &str,
    ns_labels: Option<&BTreeMap<String, String>>,
) -> Vec<String> {
    let (Some(image), Some(pod)) = (
        find(spec, Scope::Image, image_id),
        find(spec, Scope::Pod, pod_id),
    ) else {
        return Vec::new();
    };
    let (il, pl) = (labels(image), labels(pod));
    [(Scope::Image, image), (Scope::Pod, pod)]
        .into_iter()
        .filter_map(|(scope, target)| {
            decide(&spec.filter_rules, scope, target, &il, &pl, ns_labels)
        })
        .collect()
}

/// The first imageConfig option the filterRules allow with podConfig `pod`, the kind's
/// default image first.
fn allowed_image<'a>(
    spec: &'a WorkspaceKindSpec,
    pod: &str,
    ns_labels: Option<&BTreeMap<String, String>>,
) -> Option<&'a Value> {
    let default = default_of(spec, Scope::Image);
    let mut order: Vec<&Value> = values(spec, Scope::Image).iter().collect();
    order.sort_by_key(|v| Some(id(v)) != default);
    order
        .into_iter()
        .find(|v| refusals(spec, id(v), pod, ns_labels).is_empty())
}

/// Checks (or picks, where empty) the options against the kind.
pub fn choose(
    kind: &str,
    spec: &WorkspaceKindSpec,
    image_config: &str,
    pod_config: &str,
    ns_labels: Option<&BTreeMap<String, String>>,
) -> Result<Choice, OptionsError> {
    let unknown = |scope: Scope, key: &'static str, id: &str| OptionsError::Unknown {
        kind: kind.into(),
        option: scope.field(),
        key,
        id: id.into(),
        offered: ids(spec, scope),
    };
    let mut picked = Vec::new();
    let pod = if pod_config.is_empty() {
        let gpu: Vec<&Value> = values(spec, Scope::Pod)
            .iter()
            .filter(|v| asks_for_gpu(v))
            .collect();
        let default = default_of(spec, Scope::Pod);
        let chosen = gpu
            .iter()
            .find(|v| Some(id(v)) == default)
            .or_else(|| gpu.first())
            .ok_or_else(|| OptionsError::NoGpuOption {
                kind: kind.into(),
                offered: ids(spec, Scope::Pod),
            })?;
        picked.push(format!(
            "podConfig {:?} (its {} GPU option)",
            id(chosen),
            if Some(id(chosen)) == default {
                "default and"
            } else {
                "first"
            }
        ));
        id(chosen).to_string()
    } else {
        find(spec, Scope::Pod, pod_config)
            .ok_or_else(|| unknown(Scope::Pod, "pod_config", pod_config))?;
        pod_config.to_string()
    };
    let image = if image_config.is_empty() {
        let allowed =
            allowed_image(spec, &pod, ns_labels).ok_or_else(|| OptionsError::NoImage {
                kind: kind.into(),
                pod: pod.clone(),
                refused: ids(spec, Scope::Image).join(", "),
            })?;
        picked.push(format!(
            "imageConfig {:?} (the first image its filterRules allow with {pod:?})",
            id(allowed)
        ));
        id(allowed).to_string()
    } else {
        find(spec, Scope::Image, image_config)
            .ok_or_else(|| unknown(Scope::Image, "image_config", image_config))?;
        image_config.to_string()
    };
    let reasons = refusals(spec, &image, &pod, ns_labels);
    if !reasons.is_empty() {
        let suggestion = allowed_image(spec, &pod, ns_labels)
            .map(|v| format!("imageConfig {:?} with podConfig {pod:?}", id(v)));
        return Err(OptionsError::Denied {
            kind: kind.into(),
            image,
            pod,
            reasons,
            suggestion,
        });
    }
    Ok(Choice {
        image_config: image,
        pod_config: pod,
        picked: (!picked.is_empty()).then(|| {
            format!(
                "workspace options picked from WorkspaceKind {kind}: {}",
                picked.join(", ")
            )
        }),
    })
}

/// The namespace's labels, for filterRules that match namespaces (`None` when unreadable:
/// such rules then do not match, as upstream's engine without context).
pub async fn namespace_labels(
    client: &kube::Client,
    namespace: &str,
) -> Option<BTreeMap<String, String>> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    api.get_opt(namespace).await.ok().flatten()?.metadata.labels
}

/// Reads the kind (and the namespace's labels, for namespace rules) and settles the options
/// of `cfg.workspace`: checked, and picked where empty. Also checks `idle_pod_config`.
pub async fn settle(
    client: &kube::Client,
    cfg: &mut crate::config::Config,
) -> Result<Option<String>, OptionsError> {
    let kind = cfg.workspace.kind.clone();
    let api: Api<WorkspaceKind> = Api::all(client.clone());
    let wsk = api
        .get_opt(&kind)
        .await
        .map_err(|source| OptionsError::Read {
            kind: kind.clone(),
            source,
        })?
        .ok_or_else(|| OptionsError::NoKind { kind: kind.clone() })?;
    let ns_labels = namespace_labels(client, &cfg.target.namespace).await;
    let choice = choose(
        &kind,
        &wsk.spec,
        &cfg.workspace.image_config,
        &cfg.workspace.pod_config,
        ns_labels.as_ref(),
    )?;
    cfg.workspace.image_config = choice.image_config;
    cfg.workspace.pod_config = choice.pod_config;
    Ok(choice.picked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(on: &str, key: &str, op: &str, value: &str) -> Value {
        if op == "=" {
            json!({on: {"selector": {"matchLabels": {key: value}}}})
        } else {
            json!({on: {"selector": {"matchExpressions": [{"key": key, "operator": op, "values": [value]}]}}})
        }
    }

    fn rule(scope: &str, a: Value, b: Value, text: &str) -> Value {
        json!({"scope": scope, "match": [a, b],
               "effect": {"ui": {"hide": true}, "api": {"deny": true, "denyMessage": {"text": text}}}})
    }

    /// The shape of gke-labs/workspaces' resumable kind: cpu/gpu labels on both option
    /// lists and the four rules that keep them apart.
    fn resumable() -> WorkspaceKindSpec {
        let opt = |id: &str, acc: &str, gpu: bool| {
            let mut v = json!({"id": id, "spawner": {"labels": [{"key": "accelerator", "value": acc}]},
                               "spec": {"resources": {"requests": {"cpu": "1"}}}});
            if gpu {
                v["spec"]["resources"]["limits"] = json!({GPU_RESOURCE: "1"});
            }
            v
        };
        WorkspaceKindSpec {
            spawner: json!({}),
            pod_template: json!({"options": {
                "imageConfig": {"spawner": {"default": "lab-cpu"},
                    "values": [opt("lab-cpu", "cpu", false), opt("lab-gpu", "gpu", false), opt("scipy", "cpu", false)]},
                "podConfig": {"spawner": {"default": "small_cpu"},
                    "values": [opt("tiny_cpu", "cpu", false), opt("small_cpu", "cpu", false), opt("t4", "gpu", true), opt("t4_idle", "gpu", true)]},
            }}),
            activity_rules: vec![],
            filter_rules: vec![
                rule(
                    "IMAGE_CONFIG",
                    cond("matchPodConfig", "accelerator", "=", "cpu"),
                    cond("matchImageConfig", "accelerator", "NotIn", "cpu"),
                    "needs a GPU pod",
                ),
                rule(
                    "IMAGE_CONFIG",
                    cond("matchPodConfig", "accelerator", "=", "gpu"),
                    cond("matchImageConfig", "accelerator", "NotIn", "gpu"),
                    "not a CUDA image",
                ),
                rule(
                    "POD_CONFIG",
                    cond("matchImageConfig", "accelerator", "=", "cpu"),
                    cond("matchPodConfig", "accelerator", "NotIn", "cpu"),
                    "a CPU image on a GPU pod",
                ),
                rule(
                    "POD_CONFIG",
                    cond("matchImageConfig", "accelerator", "=", "gpu"),
                    cond("matchPodConfig", "accelerator", "NotIn", "gpu"),
                    "a GPU image requires a GPU pod",
                ),
            ],
        }
    }

    #[test]
    fn empty_options_pick_the_gpu_pod_and_the_image_allowed_with_it() {
        let c = choose("k", &resumable(), "", "", None).unwrap();
        assert_eq!(
            (c.image_config.as_str(), c.pod_config.as_str()),
            ("lab-gpu", "t4")
        );
        let said = c.picked.unwrap();
        assert!(
            said.contains("podConfig \"t4\" (its first GPU option)"),
            "{said}"
        );
        assert!(said.contains("imageConfig \"lab-gpu\""), "{said}");
        // Named options are kept as they are, and nothing is said.
        let c = choose("k", &resumable(), "lab-gpu", "t4_idle", None).unwrap();
        assert_eq!(c.pod_config, "t4_idle");
        assert_eq!(c.picked, None);
        // A CPU pod named, the image picked: the CPU image default is allowed with it.
        let c = choose("k", &resumable(), "", "small_cpu", None).unwrap();
        assert_eq!(c.image_config, "lab-cpu");
    }

    #[test]
    fn a_gpu_image_on_a_cpu_pod_and_the_reverse_are_refused_with_the_kinds_words() {
        let err = choose("k", &resumable(), "lab-gpu", "small_cpu", None).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(
                "not allowed: image config option \"lab-gpu\" is restricted: needs a GPU pod"
            ),
            "{text}"
        );
        assert!(
            text.contains("not allowed: pod config option \"small_cpu\" is restricted: a GPU image requires a GPU pod"),
            "{text}"
        );
        assert!(
            text.contains("try imageConfig \"lab-cpu\" with podConfig \"small_cpu\""),
            "{text}"
        );
        assert_eq!(err.exit_code(), crate::exit_code::USAGE);
        let err = choose("k", &resumable(), "scipy", "t4", None).unwrap_err();
        assert!(err.to_string().contains("not a CUDA image"), "{err}");
        assert!(
            err.to_string().contains("a CPU image on a GPU pod"),
            "{err}"
        );
    }

    #[test]
    fn unknown_ids_list_what_the_kind_offers() {
        let err = choose("k", &resumable(), "", "gpu_t4", None).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("podConfig \"gpu_t4\" is not an option of WorkspaceKind k"),
            "{text}"
        );
        assert!(
            text.contains("\"tiny_cpu\", \"small_cpu\", \"t4\", \"t4_idle\""),
            "{text}"
        );
        assert!(text.contains("workspace.pod_config"), "{text}");
        let err = choose(
            "k",
            &resumable(),
            "jupyter-pytorch-cuda-full:v1.10.0",
            "t4",
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("workspace.image_config"), "{err}");
    }

    #[test]
    fn a_kind_without_gpu_options_cannot_be_picked_from() {
        let mut spec = resumable();
        spec.pod_template["options"]["podConfig"]["values"] =
            json!([{"id": "tiny_cpu", "spec": {}}]);
        let err = choose("k", &spec, "", "", None).unwrap_err();
        assert!(matches!(err, OptionsError::NoGpuOption { .. }), "{err}");
    }

    #[test]
    fn the_first_matching_rule_decides_and_missing_context_never_matches() {
        let mut spec = resumable();
        // An allow rule (no deny) in front of the deny: the first match wins, so the pair passes.
        spec.filter_rules.insert(
            0,
            json!({"scope": "IMAGE_CONFIG", "match": [cond("matchPodConfig", "accelerator", "=", "cpu")],
                   "effect": {"ui": {"hide": false}}}),
        );
        assert_eq!(
            refusals(&spec, "lab-gpu", "small_cpu", None).len(),
            1,
            "only the pod rule"
        );
        // A namespace rule needs the namespace's labels: without them it never matches.
        let mut spec = resumable();
        spec.filter_rules = vec![json!({"scope": "POD_CONFIG",
            "match": [cond("matchNamespace", "team", "=", "ml")],
            "effect": {"api": {"deny": true, "denyMessage": {"text": "not for ml"}}}})];
        assert!(refusals(&spec, "lab-gpu", "t4", None).is_empty());
        let ml: BTreeMap<String, String> = [("team".to_string(), "ml".to_string())].into();
        assert_eq!(
            refusals(&spec, "lab-gpu", "t4", Some(&ml)),
            ["not allowed: pod config option \"t4\" is restricted: not for ml"]
        );
        // A selector that does not compile is dropped with its rule.
        spec.filter_rules[0]["match"][0]["matchNamespace"]["selector"] =
            json!({"matchExpressions": [{"key": "team", "operator": "Bogus", "values": ["ml"]}]});
        assert!(refusals(&spec, "lab-gpu", "t4", Some(&ml)).is_empty());
    }
}
