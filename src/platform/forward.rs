//! Reaching a pod's Jupyter port (`session.connect`): at the pod's own address, or through
//! the API server's `pods/portforward`, as `kubectl port-forward` does, for a harness
//! outside the cluster network or behind a NetworkPolicy that admits only the access proxy.
//!
//! A port-forward is a listener on `127.0.0.1:<ephemeral>`; each connection accepted there
//! opens a WebSocket port-forward to the pod (kube-rs `Api::<Pod>::portforward`) and copies
//! bytes both ways, so the Jupyter client (REST and kernel WebSockets) is unchanged. One
//! listener per pod (by uid) serves the whole run.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::config::SessionConnect;

/// How long `auto` waits for the pod's address to accept a TCP connection.
pub const POD_ADDRESS_PROBE: Duration = Duration::from_secs(2);

/// The path the harness takes to a pod's port, with the base address to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `http://<pod IP>:<port>`.
    PodIp(SocketAddr),
    /// A local listener forwarding through the API server.
    PortForward {
        local: SocketAddr,
        /// Why `auto` chose it (`None` when configured).
        because: Option<String>,
    },
}

impl Route {
    /// The address the Jupyter client connects to.
    pub fn addr(&self) -> SocketAddr {
        match self {
            Route::PodIp(a) => *a,
            Route::PortForward { local, .. } => *local,
        }
    }

    /// One line for the run's output, for Jupyter.
    pub fn describe(&self) -> String {
        self.describe_for("Jupyter")
    }

    /// One line for the run's output: how `service` is reached.
    pub fn describe_for(&self, service: &str) -> String {
        match self {
            Route::PodIp(a) => format!("reaching {service} at the pod's address {a}"),
            Route::PortForward {
                local,
                because: None,
            } => {
                format!("reaching {service} through the API server's port-forward (local {local})")
            }
            Route::PortForward {
                local,
                because: Some(why),
            } => format!(
                "reaching {service} through the API server's port-forward (local {local}): {why}"
            ),
        }
    }
}

/// Why a route could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("the pod {0} has no IP yet")]
    NoAddress(String),
    #[error("cannot listen on the loopback interface for a port-forward")]
    Listen(#[source] std::io::Error),
    /// The API server refused the port-forward (RBAC, or it does not serve it).
    #[error(
        "the API server refused a port-forward to pod {pod} ({message}); grant `get` and \
         `create` on pods/portforward (deploy/components/port-forward), or set \
         session.connect = \"pod-ip\" where the harness can reach the pod network"
    )]
    Refused { pod: String, message: String },
    /// The port-forward failed for another reason (the server, the network).
    #[error("a port-forward to pod {pod} failed: {message}")]
    Failed { pod: String, message: String },
}

/// Listeners already forwarding, by pod uid and port.
fn listeners() -> &'static Mutex<HashMap<(String, u16), SocketAddr>> {
    static L: OnceLock<Mutex<HashMap<(String, u16), SocketAddr>>> = OnceLock::new();
    L.get_or_init(Default::default)
}

/// How `auto` recognises the pod's server: a path that answers a JSON document with a
/// known key and needs no credentials, so no token is ever sent to whatever answers at an
/// address the harness does not control. Jupyter: its `api` endpoint (with the prefix),
/// `{"version": …}`; code-server: `/healthz`, `{"status": …, "lastHeartbeat": …}`.
#[derive(Debug, Clone, Copy)]
pub struct StatusProbe<'a> {
    pub path: &'a str,
    /// The key the answer must carry.
    pub key: &'a str,
    /// What answers there, for messages.
    pub service: &'a str,
}

impl<'a> StatusProbe<'a> {
    /// Jupyter's `GET <prefix>api`.
    pub fn jupyter(path: &'a str) -> Self {
        Self {
            path,
            key: "version",
            service: "Jupyter",
        }
    }

    /// code-server's `GET /healthz`.
    pub fn code_server() -> StatusProbe<'static> {
        StatusProbe {
            path: "/healthz",
            key: "status",
            service: "code-server",
        }
    }
}

/// The route to `port` of `pod` under the configured `connect`. `auto` takes the pod's
/// address only when Jupyter itself answers there: a TCP connection alone proves nothing
/// where a proxy or gateway accepts every connection.
pub async fn route(
    client: &kube::Client,
    connect: SessionConnect,
    pod: &Pod,
    port: u16,
    probe: StatusProbe<'_>,
) -> Result<Route, ForwardError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
    let direct = ip
        .as_deref()
        .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, port));
    match connect {
        SessionConnect::PodIp => direct
            .map(Route::PodIp)
            .ok_or(ForwardError::NoAddress(name)),
        SessionConnect::PortForward => Ok(Route::PortForward {
            local: forward(client, pod, port).await?,
            because: None,
        }),
        SessionConnect::Auto => {
            let Some(addr) = direct else {
                return Err(ForwardError::NoAddress(name));
            };
            match server_answers(addr, probe).await {
                Ok(()) => Ok(Route::PodIp(addr)),
                Err(why) => Ok(Route::PortForward {
                    local: forward(client, pod, port).await?,
                    because: Some(why),
                }),
            }
        }
    }
}

/// Whether the server answers `GET <path>` at `addr` within [`POD_ADDRESS_PROBE`] with its
/// status document; the reason when not.
async fn server_answers(addr: SocketAddr, probe: StatusProbe<'_>) -> Result<(), String> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(POD_ADDRESS_PROBE)
        .build()
        .map_err(|e| format!("cannot build an HTTP client ({e})"))?;
    let req = http.get(format!("http://{addr}{}", probe.path));
    let limit = POD_ADDRESS_PROBE.as_secs();
    let answer = req.send().await.map_err(|e| {
        if e.is_timeout() {
            format!("the pod's address {addr} did not answer within {limit}s")
        } else {
            format!("the pod's address {addr} could not be reached ({e})")
        }
    })?;
    let status = answer.status();
    let body: Option<serde_json::Value> = answer.json().await.ok();
    let known = body.as_ref().is_some_and(|b| b.get(probe.key).is_some());
    if status.is_success() && known {
        Ok(())
    } else {
        Err(format!(
            "something at the pod's address {addr} answered HTTP {}, not {}",
            status.as_u16(),
            probe.service
        ))
    }
}

/// The local address forwarding to `port` of `pod`, started on first use.
async fn forward(client: &kube::Client, pod: &Pod, port: u16) -> Result<SocketAddr, ForwardError> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if let Some(addr) = listeners()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(uid.clone(), port))
    {
        return Ok(*addr);
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(ForwardError::Listen)?;
    let local = listener.local_addr().map_err(ForwardError::Listen)?;
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    // One forward now, so that a refusal is an error here rather than a connection reset
    // the Jupyter client would retry until its budget ran out.
    match pods.portforward(&name, &[port]).await {
        Ok(f) => f.abort(),
        Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 404) => {
            return Err(ForwardError::Refused {
                pod: name,
                message: s.message,
            });
        }
        Err(e) => {
            return Err(ForwardError::Failed {
                pod: name,
                message: e.to_string(),
            });
        }
    }
    tokio::spawn(accept_loop(listener, Arc::new(pods), name, port));
    listeners()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((uid, port), local);
    Ok(local)
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    pods: Arc<Api<Pod>>,
    name: String,
    port: u16,
) {
    while let Ok((mut conn, _)) = listener.accept().await {
        let pods = pods.clone();
        let name = name.clone();
        tokio::spawn(async move {
            let mut forwarder = match pods.portforward(&name, &[port]).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(pod = %name, port, error = %e, "port-forward refused");
                    return;
                }
            };
            let Some(mut upstream) = forwarder.take_stream(port) else {
                return;
            };
            if let Err(e) = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await {
                tracing::debug!(pod = %name, port, error = %e, "port-forward connection ended");
            }
            drop(upstream);
            forwarder.abort();
        });
    }
}
