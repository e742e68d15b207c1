//! `KernelChannel`: the kernel's websocket (`<base>/api/kernels/<id>/channels`) over
//! tokio-tungstenite, with the auth headers on the upgrade request.
//!
//! [`KernelChannel::execute`] sends one `execute_request` and waits, within the caller's
//! budget, for both its `execute_reply` and its `idle` status (see `matcher`). While it waits
//! it also watches for the kernel going away: the server's `restarting`/`dead` statuses and
//! `shutdown_reply`, a closed socket, and (every `liveness_interval`) `GET /api/kernels/<id>`
//! answering 404 or `dead`. Each ends the wait at once with an error that says so.
//!
//! Old connections do not survive a restore: after a resume, [`KernelChannel::reconnect`]
//! or [`KernelChannel::connect_within`] open a fresh one.
//!
//! Latency: jupyter_server (tornado) does not set `TCP_NODELAY` on kernel websockets, so
//! after the first `busy` frame its next small frames wait for our ACK, which Linux delays
//! by ~40 ms. The channel disables Nagle on its side and re-arms `TCP_QUICKACK` before every
//! read; that takes a trivial execute from ~45 ms to within a few ms of talking ZeroMQ to the
//! kernel directly (`benches/session_roundtrip.rs`).

use std::pin::Pin;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::budget::Budget;
use super::client::JupyterClient;
use super::error::SessionError;
use super::matcher::{ExecuteOutcome, ReplyCollector, Step};
use super::models::KernelModel;
use super::tls::ws_connector;
use super::wire;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Poll = Pin<Box<dyn Future<Output = Result<KernelModel, SessionError>> + Send>>;

/// How one execute request runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecuteOptions {
    /// No broadcast of the code, no execution count increment.
    pub silent: bool,
    /// Record the cell in IPython's history (and increment the execution count).
    pub store_history: bool,
    /// The per-cell budget.
    pub budget: Duration,
    /// The budget's name in messages.
    pub budget_name: String,
    /// The cell's name in messages.
    pub cell: Option<String>,
}

impl ExecuteOptions {
    /// A visible cell that goes into history, within `budget`.
    pub fn new(budget: Duration) -> Self {
        ExecuteOptions {
            silent: false,
            store_history: true,
            budget,
            budget_name: "cell".to_owned(),
            cell: None,
        }
    }

    /// Silent, and kept out of history.
    pub fn silent(mut self) -> Self {
        self.silent = true;
        self.store_history = false;
        self
    }

    /// Visible but kept out of history.
    pub fn no_history(mut self) -> Self {
        self.store_history = false;
        self
    }

    /// Names the cell and its budget in messages.
    pub fn named(mut self, cell: impl Into<String>, budget_name: impl Into<String>) -> Self {
        self.cell = Some(cell.into());
        self.budget_name = budget_name.into();
        self
    }
}

/// A websocket to one kernel (see the module docs).
pub struct KernelChannel {
    client: JupyterClient,
    kernel_id: String,
    session_id: String,
    socket: Socket,
    liveness_interval: Option<Duration>,
}

impl std::fmt::Debug for KernelChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelChannel")
            .field("kernel_id", &self.kernel_id)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl KernelChannel {
    /// Opens the channel (one attempt). 401/403 is `Unauthorized`, 404 `KernelNotFound`.
    pub async fn connect(client: &JupyterClient, kernel_id: &str) -> Result<Self, SessionError> {
        let session_id = uuid::Uuid::new_v4().to_string();
        let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
        let socket =
            tracing::Instrument::instrument(open(client, kernel_id, &session_id), span).await?;
        Ok(KernelChannel {
            client: client.clone(),
            kernel_id: kernel_id.to_owned(),
            session_id,
            socket,
            liveness_interval: Some(Duration::from_secs(1)),
        })
    }

    /// Opens the channel, retrying transient failures (server not answering yet, refused
    /// connections, 5xx) every 250 ms until `budget` runs out. Definite answers (401, 404)
    /// fail at once.
    pub async fn connect_within(
        client: &JupyterClient,
        kernel_id: &str,
        budget: &Budget,
    ) -> Result<Self, SessionError> {
        let deadline = Instant::now() + budget.limit;
        loop {
            let attempt = tokio::time::timeout_at(deadline, Self::connect(client, kernel_id)).await;
            match attempt {
                Ok(Ok(channel)) => return Ok(channel),
                Ok(Err(e)) if !e.is_transient() => return Err(e),
                Ok(Err(e)) if Instant::now() + Duration::from_millis(250) >= deadline => {
                    return Err(budget_error(
                        budget,
                        None,
                        format!("not connected; the last attempt failed: {e}"),
                    ));
                }
                Ok(Err(_)) => {
                    let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
                    tracing::Instrument::instrument(
                        tokio::time::sleep(Duration::from_millis(250)),
                        span,
                    )
                    .await
                }
                Err(_) => {
                    return Err(budget_error(
                        budget,
                        None,
                        "not connected; the server did not answer".to_owned(),
                    ));
                }
            }
        }
    }

    /// Replaces the socket with a fresh one (same session id), as after a resume.
    pub async fn reconnect(&mut self) -> Result<(), SessionError> {
        let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
        let socket = tracing::Instrument::instrument(
            open(&self.client, &self.kernel_id, &self.session_id),
            span,
        )
        .await?;
        let old = std::mem::replace(&mut self.socket, socket);
        drop(old);
        Ok(())
    }

    /// The kernel id.
    pub fn kernel_id(&self) -> &str {
        &self.kernel_id
    }

    /// How often `execute` asks the REST API whether the kernel still exists (`None`: never).
    pub fn set_liveness_interval(&mut self, interval: Option<Duration>) {
        self.liveness_interval = interval;
    }

    /// Runs `code` and waits, within `options.budget`, for its reply and idle status.
    /// A cell that raised is `Ok` with `ExecuteStatus::Error`; use
    /// [`ExecuteOutcome::into_ok`] to turn that into an error.
    pub async fn execute(
        &mut self,
        code: &str,
        options: &ExecuteOptions,
    ) -> Result<ExecuteOutcome, SessionError> {
        let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
        tracing::Instrument::instrument(self.execute_unspanned(code, options), span).await
    }

    async fn execute_unspanned(
        &mut self,
        code: &str,
        options: &ExecuteOptions,
    ) -> Result<ExecuteOutcome, SessionError> {
        let started = Instant::now();
        let deadline = started + options.budget;
        let (msg_id, frame) = wire::execute_request(
            &self.session_id,
            code,
            options.silent,
            options.store_history,
        );
        // The send is bounded by the cell's budget too: a server that stops reading cannot
        // hold it.
        match tokio::time::timeout_at(deadline, self.socket.send(Message::Text(frame.into()))).await
        {
            Ok(sent) => {
                sent.map_err(|e| self.closed(options, format!("sending the request failed: {e}")))?
            }
            Err(_) => {
                return Err(budget_error(
                    &Budget::new(options.budget_name.clone(), options.budget),
                    options.cell.clone(),
                    "the request could not be sent".to_owned(),
                ));
            }
        }

        let mut collector = ReplyCollector::new(msg_id);
        let mut poll: Option<Poll> = None;
        let interval = self.liveness_interval.unwrap_or(Duration::from_secs(3600));
        let mut next_poll = started + interval;
        loop {
            quick_ack(&self.socket);
            tokio::select! {
                frame = self.socket.next() => {
                    let text = match frame {
                        None => return Err(self.closed(options, "the server closed the connection".to_owned())),
                        Some(Err(e)) => return Err(self.closed(options, e.to_string())),
                        Some(Ok(Message::Close(close))) => {
                            let reason = close
                                .map(|c| format!("close frame {} {}", u16::from(c.code), c.reason))
                                .unwrap_or_else(|| "close frame".to_owned());
                            return Err(self.closed(options, reason));
                        }
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(_)) => continue,
                    };
                    let Some(incoming) = wire::parse_frame(&text) else { continue };
                    match collector.feed(&incoming) {
                        Step::Pending => {}
                        Step::Done => return Ok(collector.finish(started.elapsed())),
                        Step::KernelLost(event) => return Err(self.died(options, event)),
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(budget_error(
                        &Budget::new(options.budget_name.clone(), options.budget),
                        options.cell.clone(),
                        collector.last_state().to_owned(),
                    ));
                }
                _ = tokio::time::sleep_until(next_poll), if poll.is_none() && self.liveness_interval.is_some() => {
                    let client = self.client.clone();
                    let id = self.kernel_id.clone();
                    poll = Some(Box::pin(async move { client.kernel(&id).await }));
                }
                answer = async { poll.as_mut().expect("guarded by is_some").await }, if poll.is_some() => {
                    poll = None;
                    next_poll = Instant::now() + interval;
                    match answer {
                        Err(SessionError::KernelNotFound { .. }) => {
                            return Err(self.died(options, "was shut down (the server no longer lists it)".to_owned()));
                        }
                        Ok(model) if model.execution_state.as_deref() == Some("dead") => {
                            return Err(self.died(options, "died (the server reports `dead`)".to_owned()));
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    /// Asks the kernel itself for its info and waits until `deadline` for its
    /// `kernel_info_reply`: the moment the kernel (not only the server's websocket) answers.
    /// `budget` names the wait in messages. A kernel that restarts or dies meanwhile is
    /// `KernelDied`, as during a cell.
    pub async fn kernel_info(
        &mut self,
        budget: &Budget,
        deadline: Instant,
    ) -> Result<(), SessionError> {
        let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
        tracing::Instrument::instrument(self.kernel_info_unspanned(budget, deadline), span).await
    }

    async fn kernel_info_unspanned(
        &mut self,
        budget: &Budget,
        deadline: Instant,
    ) -> Result<(), SessionError> {
        let options =
            ExecuteOptions::new(budget.limit).named("kernel_info", budget.name.to_string());
        let (msg_id, frame) = wire::kernel_info_request(&self.session_id);
        match tokio::time::timeout_at(deadline, self.socket.send(Message::Text(frame.into()))).await
        {
            Ok(sent) => sent.map_err(|e| {
                self.closed(&options, format!("sending kernel_info_request failed: {e}"))
            })?,
            Err(_) => {
                return Err(budget_error(
                    budget,
                    options.cell.clone(),
                    "kernel_info_request could not be sent".to_owned(),
                ));
            }
        }
        let mut last_state = "no reply yet".to_owned();
        loop {
            quick_ack(&self.socket);
            let text = match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Err(_) => {
                    return Err(budget_error(
                        budget,
                        Some("kernel_info".to_owned()),
                        last_state,
                    ));
                }
                Ok(None) => {
                    return Err(
                        self.closed(&options, "the server closed the connection".to_owned())
                    );
                }
                Ok(Some(Err(e))) => return Err(self.closed(&options, e.to_string())),
                Ok(Some(Ok(Message::Close(close)))) => {
                    let reason = close
                        .map(|c| format!("close frame {} {}", u16::from(c.code), c.reason))
                        .unwrap_or_else(|| "close frame".to_owned());
                    return Err(self.closed(&options, reason));
                }
                Ok(Some(Ok(Message::Text(text)))) => text,
                Ok(Some(Ok(_))) => continue,
            };
            let Some(incoming) = wire::parse_frame(&text) else {
                continue;
            };
            if let Some(event) = super::matcher::kernel_lost(&incoming) {
                return Err(self.died(&options, event));
            }
            if incoming.msg_type() == "kernel_info_reply"
                && incoming.parent_msg_id.as_deref() == Some(msg_id.as_str())
            {
                return Ok(());
            }
            last_state = format!("last message: {}", incoming.msg_type());
        }
    }

    /// Closes the websocket politely.
    /// Closes the socket, waiting at most a second for the close handshake (the socket
    /// is dropped either way).
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(1), self.socket.close(None)).await;
    }

    fn closed(&self, options: &ExecuteOptions, reason: String) -> SessionError {
        SessionError::ChannelClosed {
            kernel_id: self.kernel_id.clone(),
            cell: options.cell.clone(),
            reason,
        }
    }

    fn died(&self, options: &ExecuteOptions, event: String) -> SessionError {
        SessionError::KernelDied {
            kernel_id: self.kernel_id.clone(),
            cell: options.cell.clone(),
            event,
        }
    }
}

/// Asks the kernel to ACK the next segments at once instead of delaying the ACK (Linux
/// clears this mode by itself, hence once per read). See the module docs.
fn quick_ack(socket: &Socket) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = match socket.get_ref() {
            MaybeTlsStream::Plain(tcp) => tcp.as_raw_fd(),
            MaybeTlsStream::Rustls(tls) => tls.get_ref().0.as_raw_fd(),
            _ => return,
        };
        let one: libc::c_int = 1;
        // SAFETY: setsockopt on a socket we own, with a pointer to a live c_int and its size.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}

fn budget_error(budget: &Budget, cell: Option<String>, last_state: String) -> SessionError {
    SessionError::Budget {
        budget: budget.name.to_string(),
        limit: budget.limit,
        cell,
        last_state,
    }
}

async fn open(
    client: &JupyterClient,
    kernel_id: &str,
    session_id: &str,
) -> Result<Socket, SessionError> {
    let path = format!("api/kernels/{kernel_id}/channels");
    let display_url = client.ws_url(&path);
    let url = format!("{display_url}?session_id={session_id}");
    let ws_err = |source: tungstenite::Error| SessionError::WebSocket {
        url: display_url.clone(),
        source: Box::new(source),
    };
    let mut request = url.as_str().into_client_request().map_err(ws_err)?;
    for (name, value) in client.ws_headers().await? {
        if let Some(name) = name {
            request.headers_mut().insert(name, value);
        }
    }
    // disable_nagle: small request frames must not wait for the server's delayed ACK
    // (that costs ~40 ms per execute).
    match tokio_tungstenite::connect_async_tls_with_config(
        request,
        None,
        true,
        ws_connector(client.insecure()),
    )
    .await
    {
        Ok((socket, _response)) => Ok(socket),
        Err(tungstenite::Error::Http(response)) => match response.status().as_u16() {
            401 | 403 => Err(SessionError::Unauthorized {
                url: client.base_url().to_string(),
                status: response.status().as_u16(),
            }),
            404 => Err(SessionError::KernelNotFound {
                url: client.base_url().to_string(),
                kernel_id: kernel_id.to_owned(),
            }),
            _ => Err(ws_err(tungstenite::Error::Http(response))),
        },
        Err(e) => Err(ws_err(e)),
    }
}
