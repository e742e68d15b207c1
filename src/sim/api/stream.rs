//! `pods/exec` and `pods/portforward` over WebSockets, as the API server and kubelet serve
//! them to kubectl (1.30+) and kube-rs: a `GET` with `Upgrade: websocket` and the
//! subprotocol `v5.channel.k8s.io` or `v4.channel.k8s.io`; every binary frame starts with its
//! channel byte.
//!
//! - exec: channel 0 stdin, 1 stdout, 2 stderr, 3 the final `Status` (JSON, `Success`, or
//!   `Failure` with reason `NonZeroExitCode` and a cause `ExitCode`), and in v5 channel 255
//!   closes a stream (`[255, 0]`: end of stdin). The command runs in the pod's sandbox: its
//!   home volume as working directory and `$HOME`, the first container's environment
//!   (values and Secret references resolved) and `PATH`. Only a Running pod with a node can
//!   exec; the query's `container` must name its container.
//! - portforward: for the n-th port of `ports`, channel 2n carries data and 2n+1 errors;
//!   the first frame on each is the port, little-endian. Each port's data goes over TCP to
//!   the pod's IP and that port.
//!
//! kubectl port-forward tunnels SPDY inside the WebSocket (`SPDY/3.1+portforward.k8s.io`)
//! and falls back to plain SPDY upgrades: neither is served, and the 400 says so.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::State;
use crate::sim::controllers::kubelet;
use crate::sim::error::ApiError;
use crate::sim::json::Lookup as _;
use crate::sim::kinds::KINDS;

/// The subprotocols served, in the order of preference.
const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
/// v5: `[255, channel]` closes that channel's stream.
const CLOSE: u8 = 255;
/// Ports in one port-forward: two channels each, below v5's close channel.
const MAX_PORTS: usize = 127;

type Ws = WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

fn pod_kind() -> &'static crate::sim::kinds::KindInfo {
    KINDS
        .iter()
        .find(|k| k.kind == "Pod" && k.group.is_empty())
        .expect("pods are served")
}

/// The query's values of `key`, each comma-separated list split.
fn query_values(req: &Request, key: &str) -> Vec<String> {
    form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .collect()
}

fn query_flag(req: &Request, key: &str) -> bool {
    query_values(req, key)
        .last()
        .is_some_and(|v| v == "true" || v == "1")
}

/// The subprotocol to answer with, from the client's offer.
fn choose_protocol(headers: &HeaderMap) -> Option<&'static str> {
    let offered: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .collect();
    PROTOCOLS
        .into_iter()
        .find(|p| offered.iter().any(|o| o == p))
}

/// Checks the upgrade request and answers `101 Switching Protocols`; the socket comes from
/// the returned upgrade once the response is sent.
fn switch(
    req: &mut Request,
) -> Result<(Response, hyper::upgrade::OnUpgrade, &'static str), ApiError> {
    let headers = req.headers();
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if req.method() != Method::GET || !upgrade {
        return Err(upgrade_required(headers));
    }
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .ok_or_else(|| ApiError::bad_request("missing Sec-WebSocket-Key"))?
        .as_bytes()
        .to_vec();
    let protocol = choose_protocol(headers).ok_or_else(|| unserved_protocol(headers))?;
    let on_upgrade = hyper::upgrade::on(&mut *req);
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(&key);
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = response.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(
        header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).map_err(|e| ApiError::internal(e.to_string()))?,
    );
    h.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(protocol),
    );
    Ok((response, on_upgrade, protocol))
}

/// The 400 for a request that is no WebSocket upgrade (SPDY, or none).
fn upgrade_required(headers: &HeaderMap) -> ApiError {
    let asked = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    ApiError::bad_request(format!(
        "Upgrade request required: this simulator serves exec and portforward over \
         WebSockets ({}) only, not the upgrade asked for ({asked}); SPDY, which kubectl \
         port-forward uses, is not served",
        PROTOCOLS.join(", ")
    ))
}

/// The 400 for an offer with none of [`PROTOCOLS`], naming what was offered.
fn unserved_protocol(headers: &HeaderMap) -> ApiError {
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let offered = offered.join(", ");
    if offered.contains("SPDY/3.1+portforward.k8s.io") {
        return ApiError::bad_request(format!(
            "the simulator does not serve SPDY tunnelled in a WebSocket ({offered}), which \
             kubectl port-forward uses; forward with a client that speaks {} (kube-rs \
             `Api::<Pod>::portforward`, client-go's WebSocket executor)",
            PROTOCOLS.join(" or ")
        ));
    }
    ApiError::bad_request(format!(
        "none of the offered WebSocket subprotocols ({offered}) is served; offer one of {}",
        PROTOCOLS.join(", ")
    ))
}

async fn websocket(on_upgrade: hyper::upgrade::OnUpgrade) -> Option<Ws> {
    let upgraded = on_upgrade.await.ok()?;
    Some(
        WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await,
    )
}

/// The pod, Running on a node; the 400 a real API server gives otherwise.
fn running_pod(state: &State, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
    let pod = state.store.get(pod_kind(), Some(ns), name)?;
    let phase = pod
        .lookup("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    if phase != "Running" {
        return Err(ApiError::bad_request(format!(
            "pod {name} is not running (phase {phase}); exec and port-forward need a running pod"
        )));
    }
    Ok(pod)
}

/// Ends the stream with a normal closure (1000): kubectl's client reads any other close,
/// one without a code included, as an error.
async fn close<S>(sink: &mut S)
where
    S: futures::Sink<Message> + Unpin,
{
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    let normal = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(normal))).await;
    let _ = sink.close().await;
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::binary(v)
}

/// `GET .../pods/{name}/exec?command=...&stdin=...&stdout=...&stderr=...&container=...`.
pub async fn exec(
    AxState(state): AxState<State>,
    Path((ns, name)): Path<(String, String)>,
    mut req: Request,
) -> Response {
    let prepared = (|| {
        let pod = running_pod(&state, &ns, &name)?;
        let container = pod
            .lookup("/spec/containers/0/name")
            .and_then(Value::as_str)
            .unwrap_or("main")
            .to_string();
        if let Some(asked) = query_values(&req, "container").last()
            && *asked != container
        {
            return Err(ApiError::bad_request(format!(
                "container {asked} is not valid for pod {name}"
            )));
        }
        let command = query_values(&req, "command");
        if command.is_empty() {
            return Err(ApiError::bad_request("you must specify at least 1 command"));
        }
        let Some(pods) = &state.pods else {
            return Err(ApiError::bad_request(
                "this simulator runs no pods (API only): nothing to exec in",
            ));
        };
        let ns_of = pod
            .lookup("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(&ns);
        let home = pods.volume_dir(ns_of, kubelet::home_claim(&pod));
        let env = kubelet::container_env(&state.store, &pod);
        let (response, on_upgrade, protocol) = switch(&mut req)?;
        let plan = ExecPlan {
            command,
            home,
            env,
            stdin: query_flag(&req, "stdin"),
            stdout: query_flag(&req, "stdout"),
            stderr: query_flag(&req, "stderr"),
            v5: protocol == PROTOCOLS[0],
        };
        Ok((response, on_upgrade, plan))
    })();
    match prepared {
        Ok((response, on_upgrade, plan)) => {
            let mut shutdown = state.shutdown.clone();
            tokio::spawn(async move {
                let Some(ws) = websocket(on_upgrade).await else {
                    return;
                };
                tokio::select! {
                    () = run_exec(ws, plan) => {}
                    _ = shutdown.changed() => {}
                }
            });
            response
        }
        Err(e) => e.into_response(),
    }
}

/// Kills a whole process group when dropped (an exec's command and whatever it started).
struct ProcessGroup(u32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.0) {
            // SAFETY: killpg(2) has no memory-safety preconditions; the group is the one this
            // exec's child leads (spawned with process_group(0)).
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

struct ExecPlan {
    command: Vec<String>,
    home: PathBuf,
    env: Vec<(String, String)>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    v5: bool,
}

fn status_failure(message: &str, exit_code: Option<i32>) -> Value {
    let mut s = json!({"metadata": {}, "status": "Failure", "message": message});
    if let Some(code) = exit_code {
        s["reason"] = json!("NonZeroExitCode");
        s["details"] = json!({"causes": [{"reason": "ExitCode", "message": code.to_string()}]});
    }
    s
}

async fn run_exec(ws: Ws, plan: ExecPlan) {
    let (mut sink, mut incoming) = ws.split();
    let _ = std::fs::create_dir_all(&plan.home);
    let mut cmd = tokio::process::Command::new(&plan.command[0]);
    cmd.args(&plan.command[1..])
        .current_dir(&plan.home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &plan.home)
        .envs(plan.env.iter().map(|(k, v)| (k, v)))
        .stdin(if plan.stdin {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group, killed whole when the exec ends or its client leaves.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let message = if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "exec: \"{}\": executable file not found in $PATH",
                    plan.command[0]
                )
            } else {
                format!("exec: \"{}\": {e}", plan.command[0])
            };
            let status = status_failure(&message, None);
            let _ = sink.send(frame(ERROR, status.to_string().as_bytes())).await;
            close(&mut sink).await;
            return;
        }
    };
    let _group = child.id().map(ProcessGroup);
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Message>(16);
    let mut pumps = Vec::new();
    for (pipe, channel, wanted) in [
        (
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            STDOUT,
            plan.stdout,
        ),
        (
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            STDERR,
            plan.stderr,
        ),
    ] {
        let Some(mut pipe) = pipe else { continue };
        let tx = out_tx.clone();
        pumps.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) if wanted => {
                        if tx.send(frame(channel, &buf[..n])).await.is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                }
            }
        }));
    }
    drop(out_tx);
    // Stdin is written by a task of its own, so that a command that echoes its input
    // (cat, a REPL) never blocks the loop that drains its output.
    let mut stdin_tx = child.stdin.take().map(|mut w| {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(data) = rx.recv().await {
                if w.write_all(&data).await.is_err() {
                    break;
                }
            }
        });
        tx
    });
    let exited = loop {
        tokio::select! {
            out = out_rx.recv() => match out {
                Some(m) => {
                    if sink.send(m).await.is_err() {
                        return;
                    }
                }
                None => {
                    // Its output is closed: wait for it to end, and still notice a client
                    // that leaves.
                    drop(stdin_tx.take());
                    let status = loop {
                        tokio::select! {
                            status = child.wait() => break status,
                            msg = incoming.next() => match msg {
                                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                                Some(Ok(_)) => {}
                            },
                        }
                    };
                    break status;
                }
            },
            msg = incoming.next() => match msg {
                Some(Ok(Message::Binary(data))) if !data.is_empty() => match data[0] {
                    STDIN => {
                        if let Some(tx) = &stdin_tx
                            && tx.send(data[1..].to_vec()).is_err()
                        {
                            stdin_tx = None;
                        }
                    }
                    CLOSE if plan.v5 && data.get(1) == Some(&STDIN) => stdin_tx = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    };
    for p in pumps {
        let _ = p.await;
    }
    let status = match exited {
        Ok(s) if s.success() => json!({"metadata": {}, "status": "Success"}),
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            let code = s
                .code()
                .or_else(|| s.signal().map(|n| 128 + n))
                .unwrap_or(1);
            status_failure(
                &format!("command terminated with non-zero exit code: exit status {code}"),
                Some(code),
            )
        }
        Err(e) => status_failure(&format!("cannot wait for the command: {e}"), None),
    };
    let _ = sink.send(frame(ERROR, status.to_string().as_bytes())).await;
    close(&mut sink).await;
}

/// `GET .../pods/{name}/portforward?ports=8888[,...]`.
pub async fn portforward(
    AxState(state): AxState<State>,
    Path((ns, name)): Path<(String, String)>,
    mut req: Request,
) -> Response {
    let prepared = (|| {
        let pod = running_pod(&state, &ns, &name)?;
        let reported = pod
            .lookup("/status/podIP")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad_request(format!("pod {name} has no IP yet")))?;
        // The kubelet reaches the pod inside its network, isolated or not.
        let ip = match &state.pods {
            Some(pods) => pods.reachable_ip(reported),
            None => reported.to_string(),
        };
        let websocket = req
            .headers()
            .get(header::UPGRADE)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
        if !websocket {
            return Err(upgrade_required(req.headers()));
        }
        if choose_protocol(req.headers()).is_none() {
            return Err(unserved_protocol(req.headers()));
        }
        let mut ports = Vec::new();
        for v in query_values(&req, "ports")
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            let port: u16 = v
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| ApiError::bad_request(format!("invalid port: {v:?}")))?;
            ports.push(port);
        }
        if ports.is_empty() {
            return Err(ApiError::bad_request(
                "query parameter \"ports\" is required",
            ));
        }
        if ports.len() > MAX_PORTS {
            return Err(ApiError::bad_request(format!(
                "at most {MAX_PORTS} ports per port-forward (two channels each in one byte)"
            )));
        }
        let (response, on_upgrade, _) = switch(&mut req)?;
        Ok((response, on_upgrade, ip, ports))
    })();
    match prepared {
        Ok((response, on_upgrade, ip, ports)) => {
            let mut shutdown = state.shutdown.clone();
            tokio::spawn(async move {
                let Some(ws) = websocket(on_upgrade).await else {
                    return;
                };
                tokio::select! {
                    () = run_portforward(ws, ip, ports) => {}
                    _ = shutdown.changed() => {}
                }
            });
            response
        }
        Err(e) => e.into_response(),
    }
}

async fn run_portforward(ws: Ws, ip: String, ports: Vec<u16>) {
    let (mut sink, mut incoming) = ws.split();
    for (i, port) in ports.iter().enumerate() {
        let data = (2 * i) as u8;
        for channel in [data, data + 1] {
            if sink
                .send(frame(channel, &port.to_le_bytes()))
                .await
                .is_err()
            {
                return;
            }
        }
    }
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Message>(16);
    // Each port's writes to the pod go through a task of its own, so a slow pod never
    // blocks the loop that carries its answers back.
    let mut writers: Vec<Option<tokio::sync::mpsc::UnboundedSender<Vec<u8>>>> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let data = (2 * i) as u8;
        match tokio::net::TcpStream::connect((ip.as_str(), *port)).await {
            Ok(stream) => {
                let (mut read, mut write) = stream.into_split();
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
                tokio::spawn(async move {
                    while let Some(data) = rx.recv().await {
                        if write.write_all(&data).await.is_err() {
                            break;
                        }
                    }
                });
                writers.push(Some(tx));
                let tx = out_tx.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        match read.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if tx.send(frame(data, &buf[..n])).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                });
            }
            Err(e) => {
                writers.push(None);
                let message =
                    format!("error forwarding port {port} to pod {ip}: dial tcp4 {ip}:{port}: {e}");
                if sink
                    .send(frame(data + 1, message.as_bytes()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
    drop(out_tx);
    loop {
        tokio::select! {
            out = out_rx.recv() => match out {
                Some(m) => {
                    if sink.send(m).await.is_err() {
                        return;
                    }
                }
                // Every connection to the pod ended.
                None => break,
            },
            msg = incoming.next() => match msg {
                Some(Ok(Message::Binary(data))) if !data.is_empty() => {
                    let channel = data[0];
                    if channel % 2 == 0
                        && let Some(Some(w)) = writers.get(usize::from(channel / 2))
                        && w.send(data[1..].to_vec()).is_err()
                    {
                        writers[usize::from(channel / 2)] = None;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    close(&mut sink).await;
}
