//! `deploy/`: every manifest is a valid object of its kind (no field k8s-openapi does not
//! know), kustomize renders the base and every overlay, the workloads run wsgate as the
//! ServiceAccount non-root on a read-only root filesystem, the ConfigMap holds a profile wsgate
//! loads, and `kubectl apply --dry-run=server` of the base and overlays against the simulator
//! succeeds and persists nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, PodSpec, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::de::DeserializeOwned;
use serde_json::Value;
use wsgate::platform::rbac::{DeployRbac, SERVICE_ACCOUNT};
use wsgate::platform::target::OPT_IN_LABEL;

const OVERLAYS: &[&str] = &["nightly", "gate", "drill"];
/// How long one kubectl command may take.
const COMMAND_BUDGET: Duration = Duration::from_secs(60);

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("deploy/ is readable")
        .flatten()
    {
        let p = entry.path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
}

/// YAML documents as untyped JSON, YAML 1.2 scalars (`true` only; `010` stays a string).
fn documents(text: &str) -> Vec<Value> {
    let mut o = serde_saphyr::Options::default();
    o.strict_booleans = true;
    o.leading_zero_numbers_as_strings = true;
    serde_saphyr::from_multiple_with_options::<Value>(text, o)
        .expect("valid YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// Parses `doc` as `K` and requires that it serialises back to the same JSON: a field
/// k8s-openapi does not know (a typo, a field at the wrong level) is an error, not ignored.
fn typed<K: DeserializeOwned + serde::Serialize>(doc: &Value, what: &str) -> K {
    let obj: K = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what} does not parse as its kind: {e}"));
    let back = serde_json::to_value(&obj).expect("serialisable");
    assert_eq!(
        &back, doc,
        "{what}: fields k8s-openapi does not know were dropped"
    );
    obj
}

/// The kind of every document, after checking it as its k8s-openapi type.
fn check_document(doc: &Value, what: &str) -> String {
    let kind = doc["kind"].as_str().unwrap_or_default().to_string();
    match (
        doc["apiVersion"].as_str().unwrap_or_default(),
        kind.as_str(),
    ) {
        ("kustomize.config.k8s.io/v1beta1", "Kustomization")
        | ("kustomize.config.k8s.io/v1alpha1", "Component") => {
            assert!(
                doc["resources"].is_array(),
                "{what}: a kustomization lists resources"
            );
        }
        ("v1", "Namespace") => drop(typed::<Namespace>(doc, what)),
        ("v1", "ServiceAccount") => drop(typed::<ServiceAccount>(doc, what)),
        ("v1", "ConfigMap") => drop(typed::<ConfigMap>(doc, what)),
        ("v1", "PersistentVolumeClaim") => drop(typed::<PersistentVolumeClaim>(doc, what)),
        ("rbac.authorization.k8s.io/v1", "Role") => drop(typed::<Role>(doc, what)),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => drop(typed::<ClusterRole>(doc, what)),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => drop(typed::<RoleBinding>(doc, what)),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            drop(typed::<ClusterRoleBinding>(doc, what))
        }
        ("batch/v1", "CronJob") => drop(typed::<CronJob>(doc, what)),
        ("batch/v1", "Job") => drop(typed::<Job>(doc, what)),
        (api_version, kind) => panic!("{what}: unexpected {api_version} {kind}"),
    }
    kind
}

#[test]
fn every_manifest_parses_as_its_kubernetes_type() {
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    files.sort();
    let mut kinds = std::collections::BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        let docs = documents(&text);
        assert!(!docs.is_empty(), "{} has no document", f.display());
        for (i, doc) in docs.iter().enumerate() {
            kinds.insert(check_document(doc, &format!("{} #{}", f.display(), i + 1)));
        }
    }
    for kind in [
        "Kustomization",
        "Namespace",
        "ServiceAccount",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "ConfigMap",
        "CronJob",
        "Job",
    ] {
        assert!(kinds.contains(kind), "no {kind} under deploy/: {kinds:?}");
    }
}

fn base_object<K: DeserializeOwned + serde::Serialize>(file: &str) -> K {
    let path = deploy_dir().join("base").join(file);
    let docs = documents(&std::fs::read_to_string(&path).expect("readable"));
    assert_eq!(docs.len(), 1, "{file}: one document");
    typed(&docs[0], file)
}

#[test]
fn bindings_namespace_and_profile_fit_the_rules_wsgate_embeds() {
    let rbac = DeployRbac::embedded();
    let ns: Namespace = base_object("namespace.yaml");
    assert_eq!(ns.metadata.name.as_deref(), Some(rbac.namespace()));
    assert_eq!(rbac.namespace(), wsgate::sim::server::TEST_NAMESPACE);
    assert_eq!(
        ns.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(OPT_IN_LABEL))
            .map(String::as_str),
        Some("true")
    );
    let sa: ServiceAccount = base_object("serviceaccount.yaml");
    assert_eq!(sa.metadata.name.as_deref(), Some(SERVICE_ACCOUNT));
    assert_eq!(sa.metadata.namespace.as_deref(), Some(rbac.namespace()));

    // Each binding is named after its role (SelfSubjectAccessReview reasons rely on it) and
    // binds exactly the ServiceAccount.
    let rb: RoleBinding = base_object("rolebinding.yaml");
    let crb: ClusterRoleBinding = base_object("clusterrolebinding.yaml");
    for (name, role_ref, subjects, role_name) in [
        (
            rb.metadata.name.clone(),
            &rb.role_ref,
            rb.subjects.clone(),
            rbac.role_name(),
        ),
        (
            crb.metadata.name.clone(),
            &crb.role_ref,
            crb.subjects.clone(),
            rbac.cluster_role_name(),
        ),
    ] {
        assert_eq!(name.as_deref(), Some(role_name));
        assert_eq!(role_ref.name, role_name);
        let subjects = subjects.unwrap_or_default();
        assert_eq!(subjects.len(), 1, "{name:?}");
        assert_eq!(
            (
                subjects[0].kind.as_str(),
                subjects[0].name.as_str(),
                subjects[0].namespace.as_deref()
            ),
            ("ServiceAccount", SERVICE_ACCOUNT, Some(rbac.namespace()))
        );
    }
    assert_eq!(rb.role_ref.kind, "Role");
    assert_eq!(rb.metadata.namespace.as_deref(), Some(rbac.namespace()));
    assert_eq!(crb.role_ref.kind, "ClusterRole");

    // The ConfigMap's profile loads as a wsgate profile and targets the opted-in namespace.
    let cm: ConfigMap = base_object("configmap.yaml");
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("profile.toml"))
        .expect("profile.toml in the ConfigMap");
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("profile.toml");
    std::fs::write(&path, text).expect("written");
    let resolved = wsgate::config::load(&wsgate::config::LoadRequest {
        profile: Some(path),
        env: Vec::new(),
        overrides: Vec::new(),
    })
    .unwrap_or_else(|e| panic!("the ConfigMap's profile does not load: {e}"));
    assert_eq!(
        resolved.config.target.kind,
        wsgate::config::TargetKind::Cluster
    );
    assert_eq!(resolved.config.target.namespace, rbac.namespace());
}

fn kubectl_on_path() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("kubectl").is_file()))
}

/// Runs kubectl with its own cache dir (the dispatcher caches its `/version` probe per
/// cache dir) and, if given, a kubeconfig; returns (success, stdout, stderr).
async fn kubectl(cache: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> (bool, String, String) {
    let mut cmd = tokio::process::Command::new("kubectl");
    if let Some(k) = kubeconfig {
        cmd.arg("--kubeconfig").arg(k);
    }
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("KUBECACHEDIR", cache)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(COMMAND_BUDGET, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("`kubectl {}` ran past {COMMAND_BUDGET:?}", args.join(" ")))
        .expect("kubectl starts");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn pod_spec_of(doc: &Value) -> PodSpec {
    let spec = match doc["kind"].as_str() {
        Some("CronJob") => &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &doc["spec"]["template"]["spec"],
    };
    serde_json::from_value(spec.clone()).expect("a pod spec")
}

#[tokio::test]
async fn kustomize_renders_every_overlay_with_safe_workloads() {
    if !kubectl_on_path() {
        eprintln!("SKIPPED: kubectl not on PATH");
        return;
    }
    let cache = tempfile::tempdir().expect("a temp dir");
    let (ok, base, err) = kubectl(cache.path(), None, &["kustomize", "deploy/base"]).await;
    assert!(ok, "kubectl kustomize deploy/base: {err}");
    let base_docs = documents(&base);
    assert_eq!(base_docs.len(), 7, "{base}");
    for overlay in OVERLAYS {
        let dir = format!("deploy/overlays/{overlay}");
        let (ok, out, err) = kubectl(cache.path(), None, &["kustomize", &dir]).await;
        assert!(ok, "kubectl kustomize {dir}: {err}");
        let docs = documents(&out);
        for b in &base_docs {
            assert!(
                docs.iter()
                    .any(|d| d["kind"] == b["kind"]
                        && d["metadata"]["name"] == b["metadata"]["name"]),
                "{dir} lacks the base's {} {}",
                b["kind"],
                b["metadata"]["name"]
            );
        }
        let workloads: Vec<&Value> = docs
            .iter()
            .filter(|d| matches!(d["kind"].as_str(), Some("CronJob" | "Job")))
            .collect();
        assert!(!workloads.is_empty(), "{dir} runs nothing");
        for w in &workloads {
            let what = format!("{dir}: {} {}", w["kind"], w["metadata"]["name"]);
            check_document(w, &what);
            assert_eq!(w["metadata"]["namespace"], "wsgate-test", "{what}");
            let spec = pod_spec_of(w);
            assert_eq!(
                spec.service_account_name.as_deref(),
                Some(SERVICE_ACCOUNT),
                "{what}"
            );
            assert_eq!(spec.restart_policy.as_deref(), Some("Never"), "{what}");
            let psc = spec.security_context.clone().unwrap_or_default();
            assert_eq!(psc.run_as_non_root, Some(true), "{what}");
            let c = &spec.containers[0];
            assert_eq!(c.image.as_deref(), Some("wsgate:latest"), "{what}");
            let sc = c.security_context.clone().unwrap_or_default();
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
            let args = c.args.clone().unwrap_or_default().join(" ");
            assert!(
                args.contains("--target cluster --namespace wsgate-test"),
                "{what}: {args}"
            );
            assert!(
                args.contains("--profile /etc/wsgate/profile.toml"),
                "{what}"
            );
        }
        let args = |name: &str| {
            let w = workloads
                .iter()
                .find(|w| w["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{dir} has no {name}"));
            pod_spec_of(w).containers[0]
                .args
                .clone()
                .unwrap_or_default()
                .join(" ")
        };
        match *overlay {
            "nightly" => assert!(args("wsgate-nightly").starts_with("run ")),
            "gate" => {
                assert!(args("wsgate-gate-prepare").starts_with("gate prepare "));
                let verify = args("wsgate-gate-verify");
                assert!(verify.starts_with("gate verify ") && verify.contains("--state "));
                let job = workloads
                    .iter()
                    .find(|w| w["metadata"]["name"] == "wsgate-gate-verify")
                    .expect("verify job");
                assert_eq!(job["spec"]["suspend"], true, "verify waits for the upgrade");
            }
            "drill" => {
                let a = args("wsgate-drill");
                assert!(
                    a.starts_with("drill --workspaces ") && a.contains(" --gpus "),
                    "{a}"
                );
            }
            other => panic!("untested overlay {other}"),
        }
    }
}

#[tokio::test]
async fn server_dry_run_of_base_and_overlays_succeeds_and_persists_nothing() {
    if !kubectl_on_path() {
        eprintln!("SKIPPED: kubectl not on PATH");
        return;
    }
    let sim = crate::common::start_sim().await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let cache = dir.path().join("kube-cache");
    let rv_before = sim.store().resource_version();
    // base/ with components/port-forward, as an overlay for session.connect adds it.
    let with_pf = dir.path().join("with-port-forward");
    std::fs::create_dir_all(&with_pf).unwrap();
    // kustomize takes no absolute paths: links to base/ and the component.
    std::os::unix::fs::symlink(deploy_dir().join("base"), with_pf.join("base")).unwrap();
    std::os::unix::fs::symlink(
        deploy_dir().join("components/port-forward"),
        with_pf.join("port-forward"),
    )
    .unwrap();
    std::fs::write(
        with_pf.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources:\n  - base\ncomponents:\n  - port-forward\n",
    )
    .unwrap();
    let with_pf = with_pf.display().to_string();
    for target in [
        "deploy/base",
        "deploy/overlays/nightly",
        "deploy/overlays/gate",
        "deploy/overlays/drill",
        with_pf.as_str(),
    ] {
        let (ok, out, err) = kubectl(
            &cache,
            Some(&kubeconfig),
            &["apply", "--dry-run=server", "-k", target],
        )
        .await;
        assert!(
            ok,
            "kubectl apply --dry-run=server -k {target}:\n{out}\n{err}"
        );
        assert!(
            !err.contains("couldn't get resource list"),
            "discovery failure: {err}"
        );
        for line in [
            "role.rbac.authorization.k8s.io/wsgate created (server dry run)",
            "clusterrole.rbac.authorization.k8s.io/wsgate-read created (server dry run)",
            "rolebinding.rbac.authorization.k8s.io/wsgate created (server dry run)",
            "clusterrolebinding.rbac.authorization.k8s.io/wsgate-read created (server dry run)",
            "serviceaccount/wsgate created (server dry run)",
            "configmap/wsgate-profile created (server dry run)",
            "namespace/wsgate-test configured (server dry run)",
        ] {
            assert!(out.contains(line), "{target}: no `{line}` in:\n{out}");
        }
        match target {
            "deploy/overlays/nightly" => assert!(
                out.contains("cronjob.batch/wsgate-nightly created (server dry run)"),
                "{out}"
            ),
            "deploy/overlays/gate" => assert!(
                out.contains("job.batch/wsgate-gate-verify created (server dry run)"),
                "{out}"
            ),
            "deploy/overlays/drill" => assert!(
                out.contains("job.batch/wsgate-drill created (server dry run)"),
                "{out}"
            ),
            t if t == with_pf => {
                for line in [
                    "role.rbac.authorization.k8s.io/wsgate-port-forward created (server dry run)",
                    "rolebinding.rbac.authorization.k8s.io/wsgate-port-forward created (server dry run)",
                ] {
                    assert!(out.contains(line), "no `{line}` in:\n{out}");
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        sim.store().resource_version(),
        rv_before,
        "a server dry run changed the store"
    );
    // And the kinds are really served: a real apply stores them.
    let (ok, out, err) = kubectl(
        &cache,
        Some(&kubeconfig),
        &["apply", "-k", "deploy/overlays/nightly"],
    )
    .await;
    assert!(
        ok,
        "kubectl apply -k deploy/overlays/nightly:\n{out}\n{err}"
    );
    let (ok, out, err) = kubectl(
        &cache,
        Some(&kubeconfig),
        &[
            "get",
            "cronjobs,roles,rolebindings",
            "-n",
            "wsgate-test",
            "-o",
            "name",
        ],
    )
    .await;
    assert!(ok, "{err}");
    for name in [
        "cronjob.batch/wsgate-nightly",
        "role.rbac.authorization.k8s.io/wsgate",
        "rolebinding.rbac.authorization.k8s.io/wsgate",
    ] {
        assert!(out.contains(name), "{name} not stored:\n{out}");
    }
    sim.shutdown().await;
}

/// Every container in deploy/ that runs wsgate passes arguments its CLI accepts.
#[test]
fn every_workload_runs_wsgate_with_arguments_its_cli_accepts() {
    use clap::Parser;
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    let mut checked = 0;
    for f in files {
        for doc in documents(&std::fs::read_to_string(&f).unwrap()) {
            let spec = match doc["kind"].as_str() {
                Some("Job" | "CronJob") => pod_spec_of(&doc),
                _ => continue,
            };
            for c in spec.containers {
                let mut argv = vec!["wsgate".to_string()];
                argv.extend(c.args.unwrap_or_default());
                if let Err(e) = wsgate::cli::Cli::try_parse_from(&argv) {
                    panic!("{}: container {} runs {argv:?}: {e}", f.display(), c.name);
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 4,
        "only {checked} wsgate containers found under deploy/"
    );
}
