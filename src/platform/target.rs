//! Connecting to a cluster target: kubeconfig and context selection (never the user's
//! current context by accident), reachability, credentials, and the namespace opt-in label.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::config::TargetConfig;

pub use super::names::OPT_IN_LABEL;

/// Why a target could not be used. Every variant maps to exit code 3 (`TARGET`).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cannot read kubeconfig {path}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no cluster context named: pass --context NAME (or --kubeconfig PATH, or set KUBECONFIG); \
         wsgate never falls back to your current kube context on its own"
    )]
    NoContext,
    #[error(
        "the API server at {url} presented a certificate this kubeconfig does not trust (its \
         certificate-authority-data is not the server's CA): refresh the kubeconfig; do not \
         turn verification off to get past this"
    )]
    UntrustedCertificate { url: String },
    #[error("the kubeconfig {path} cannot be used: {problem}")]
    Context { path: String, problem: String },
    #[error("cannot load the cluster configuration (context {context:?})")]
    Config {
        context: Option<String>,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot use the in-cluster configuration")]
    InCluster(#[source] kube::config::InClusterError),
    #[error("cannot build a client for {url}")]
    Client {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the API server at {url} is unreachable; check the URL, the network and that the cluster is up"
    )]
    Unreachable {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the API server at {url} refused the credentials ({code}): the token may be wrong or expired; refresh the kubeconfig"
    )]
    Unauthorized { url: String, code: u16 },
    #[error(
        "the API server at {url} took the connection but did not answer within {after:?} \
         (api.response_timeout): check that the URL is the API server's and that it is healthy"
    )]
    NoAnswer {
        url: String,
        after: std::time::Duration,
    },
    #[error("namespace {namespace:?} does not exist; create it with the label {OPT_IN_LABEL}=true")]
    NamespaceMissing { namespace: String },
    #[error(
        "namespace {namespace:?} is not opted in to wsgate's destructive steps; \
         label it with `kubectl label namespace {namespace} {OPT_IN_LABEL}=true` if it is a test namespace"
    )]
    NamespaceNotOptedIn { namespace: String },
    #[error("cannot read namespace {namespace:?}")]
    Namespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the kubeconfig turns TLS verification of the API server off \
         (insecure-skip-tls-verify: true): wsgate verifies TLS unless told so itself; fix the \
         kubeconfig (certificate-authority-data), or accept the risk with \
         --set target.insecure_skip_tls_verify=true, which is logged and kept in the reports"
    )]
    InsecureKubeconfig,
    #[error("cannot list the nodes (for wsgate's squeeze taints)")]
    Nodes {
        #[source]
        source: kube::Error,
    },
}

/// Builds the kube configuration for a cluster target.
pub async fn cluster_config(target: &TargetConfig) -> Result<kube::Config, TargetError> {
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..Default::default()
    };
    let mut config = if let Some(path) = &target.kubeconfig {
        let kc = Kubeconfig::read_from(path).map_err(|source| TargetError::Kubeconfig {
            path: path.clone(),
            source,
        })?;
        if let Some(problem) = context_problem(&kc, target.context.as_deref()) {
            return Err(TargetError::Context {
                path: path.display().to_string(),
                problem,
            });
        }
        kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(|source| TargetError::Config {
                context: target.context.clone(),
                source,
            })?
    } else if target.context.is_some() || std::env::var_os("KUBECONFIG").is_some() {
        if let Ok(kc) = Kubeconfig::read()
            && let Some(problem) = context_problem(&kc, target.context.as_deref())
        {
            return Err(TargetError::Context {
                path: "KUBECONFIG (or ~/.kube/config)".into(),
                problem,
            });
        }
        kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|source| TargetError::Config {
                context: target.context.clone(),
                source,
            })?
    } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        kube::Config::incluster().map_err(TargetError::InCluster)?
    } else {
        return Err(TargetError::NoContext);
    };
    if config.accept_invalid_certs && !target.insecure_skip_tls_verify {
        // A kubeconfig flag nobody sees would turn verification off silently.
        return Err(TargetError::InsecureKubeconfig);
    }
    if target.insecure_skip_tls_verify {
        tracing::warn!(
            "TLS verification of the API server is OFF (target.insecure_skip_tls_verify): \
             anyone on the network path can impersonate the cluster"
        );
        crate::say_err!("WARNING: TLS verification of the API server is turned off");
        config.accept_invalid_certs = true;
    }
    Ok(config)
}

/// Builds a client whose every request is retried under `retry` (see [`super::retry`]) and
/// checks that the server answers and accepts the credentials. The harness makes its
/// clients here only, for a cluster and for the embedded simulator alike.
pub async fn connect(
    config: kube::Config,
    retry: super::retry::RetryPolicy,
) -> Result<kube::Client, TargetError> {
    Ok(connect_versioned(config, retry).await?.0)
}

/// [`connect`], also returning the server's `gitVersion` from `/version` (what reports
/// record, so a simulator that runs on its own is not taken for a cluster).
pub async fn connect_versioned(
    config: kube::Config,
    retry: super::retry::RetryPolicy,
) -> Result<(kube::Client, String), TargetError> {
    let url = config.cluster_url.to_string();
    let mut config = config;
    // No attempt waits longer than api.response_timeout for a connection either.
    let answer_within = retry.response_timeout;
    config.connect_timeout = Some(
        config
            .connect_timeout
            .map_or(answer_within, |t| t.min(answer_within)),
    );
    let client = super::retry::client(config, retry).map_err(|source| TargetError::Client {
        url: url.clone(),
        source,
    })?;
    let no_answer = || TargetError::NoAnswer {
        url: url.clone(),
        after: answer_within,
    };
    // /version is public on real servers, so check credentials with a namespace list. A
    // server that takes connections and never answers is named here, within the budget,
    // rather than retried.
    let version = tokio::time::timeout(answer_within, client.apiserver_version())
        .await
        .map_err(|_| no_answer())?
        .map_err(|source| {
            if names_untrusted_certificate(&source) {
                TargetError::UntrustedCertificate { url: url.clone() }
            } else {
                TargetError::Unreachable {
                    url: url.clone(),
                    source,
                }
            }
        })?
        .git_version;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = tokio::time::timeout(
        answer_within,
        namespaces.list_metadata(&kube::api::ListParams::default().limit(1)),
    )
    .await
    .map_err(|_| no_answer())?;
    match listed {
        Ok(_) => Ok((client, version)),
        Err(kube::Error::Api(s)) if s.code == 401 => {
            Err(TargetError::Unauthorized { url, code: s.code })
        }
        // 403 on listing namespaces is normal for a least-privilege identity.
        Err(kube::Error::Api(_)) => Ok((client, version)),
        Err(source) => Err(TargetError::Unreachable { url, source }),
    }
}

/// Whether a connection failed because the server's certificate is not trusted (rustls's
/// words anywhere in the error's chain).
fn names_untrusted_certificate(e: &kube::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if text.contains("invalid peer certificate") || text.contains("UnknownIssuer") {
            return true;
        }
        cur = err.source();
    }
    false
}

/// What makes `kc` unusable with `--context wanted` (or its current context), in words that
/// list the contexts it has; `None` when the context is there.
pub fn context_problem(kc: &Kubeconfig, wanted: Option<&str>) -> Option<String> {
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    let have = if names.is_empty() {
        "it defines no context at all (is it empty?)".to_string()
    } else {
        format!("its contexts: {}", names.join(", "))
    };
    match wanted.or(kc.current_context.as_deref()) {
        Some(name) if names.contains(&name) => None,
        Some(name) => Some(format!("it has no context named {name:?}; {have}")),
        None if names.is_empty() => Some(have),
        None => Some(format!(
            "it names no current context; pass --context NAME ({have})"
        )),
    }
}

/// Refuses a namespace that lacks the opt-in label.
pub async fn check_opt_in(client: &kube::Client, namespace: &str) -> Result<(), TargetError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = api
        .get_opt(namespace)
        .await
        .map_err(|source| TargetError::Namespace {
            namespace: namespace.to_string(),
            source,
        })?
        .ok_or_else(|| TargetError::NamespaceMissing {
            namespace: namespace.to_string(),
        })?;
    let opted_in = ns
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OPT_IN_LABEL))
        .is_some_and(|v| v == "true");
    if opted_in {
        Ok(())
    } else {
        Err(TargetError::NamespaceNotOptedIn {
            namespace: namespace.to_string(),
        })
    }
}
