//! The session module's error type and its exit codes. No variant ever carries a token:
//! URLs are stored without their query string and credentials never enter a message.

use std::time::Duration;

use tokio_tungstenite::tungstenite;

use super::cells::CellTemplateError;
use crate::exit_code;

/// Everything that can go wrong talking to a Jupyter server or a kernel.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The URL is not an http(s) URL.
    #[error("invalid Jupyter URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// The credential contains bytes an HTTP header cannot carry.
    #[error("the credential cannot be sent as an HTTP header (it contains control characters)")]
    InvalidCredential,
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot build the HTTP client: {source}")]
    HttpClient {
        #[source]
        source: reqwest::Error,
    },
    /// Connecting or sending failed (refused, DNS, TLS, reset).
    #[error("cannot reach the Jupyter server at {url}: {cause}")]
    Unreachable {
        url: String,
        /// The reason in words, with the whole source chain.
        cause: String,
        #[source]
        source: reqwest::Error,
    },
    /// HTTP 401 or 403.
    #[error(
        "the Jupyter server at {url} refused the credentials (HTTP {status}); check --token or \
         WSGATE_JUPYTER_TOKEN"
    )]
    Unauthorized { url: String, status: u16 },
    /// HTTP 403 from jupyter_server's XSRF check, again after a fresh `_xsrf` cookie.
    #[error(
        "the Jupyter server at {url} refused {what} in its XSRF check (HTTP 403) even with a \
         fresh `_xsrf` cookie from {pages}; a proxy in front of it may drop cookies"
    )]
    XsrfRefused {
        url: String,
        what: String,
        pages: String,
    },
    /// The server has no kernel with that id.
    #[error("the Jupyter server at {url} has no kernel {kernel_id}")]
    KernelNotFound { url: String, kernel_id: String },
    /// Any other unexpected HTTP status.
    #[error("{what}: the Jupyter server answered HTTP {status}: {body}")]
    UnexpectedStatus {
        what: String,
        status: u16,
        body: String,
    },
    /// The URL answers HTTP, but not as a Jupyter server.
    #[error(
        "{url} is not a Jupyter server: it has no `api/status` (a Jupyter server answers it with \
         its start time and kernel count); check the URL, including the base path such as \
         /workspace/connect/<ns>/<ws>/jupyterlab/"
    )]
    NotJupyter { url: String },
    /// An answer that does not parse.
    #[error("{what}: cannot decode the answer: {detail}")]
    Decode { what: String, detail: String },
    /// The websocket handshake or a send failed.
    #[error("kernel channel {url}: {source}")]
    WebSocket {
        url: String,
        #[source]
        source: Box<tungstenite::Error>,
    },
    /// The websocket closed while waiting.
    #[error("the channel to kernel {kernel_id} closed{}: {reason}", during(cell))]
    ChannelClosed {
        kernel_id: String,
        cell: Option<String>,
        reason: String,
    },
    /// The kernel died, restarted or was shut down while waiting.
    #[error("kernel {kernel_id} {event}{}", during(cell))]
    KernelDied {
        kernel_id: String,
        cell: Option<String>,
        event: String,
    },
    /// A named budget ran out.
    #[error(
        "budget `{budget}` ({}) ran out{}; last kernel state seen: {last_state}",
        human(*limit),
        during(cell)
    )]
    Budget {
        budget: String,
        limit: Duration,
        cell: Option<String>,
        last_state: String,
    },
    /// A cell raised an exception.
    #[error("cell `{cell}` raised {ename}: {evalue}")]
    CellRaised {
        cell: String,
        ename: String,
        evalue: String,
        traceback: Vec<String>,
    },
    /// A wsgate cell did not print the result line it should have.
    #[error(
        "cell `{cell}`: {detail} (is the kernel an IPython kernel that returns its output? wsgate's cells need one)"
    )]
    CellOutput { cell: String, detail: String },
    /// A cell template could not be filled.
    #[error(transparent)]
    Template(#[from] CellTemplateError),
}

impl SessionError {
    /// The process exit code (see `crate::exit_code`):
    /// usage errors 2; unreachable server, refused credentials, missing kernel, a missing
    /// Python module 3; a budget 13; a dead kernel, a closed channel, a cell that raised 1;
    /// a wsgate cell or template fault 70.
    pub fn exit_code(&self) -> i32 {
        match self {
            SessionError::InvalidUrl { .. } | SessionError::InvalidCredential => exit_code::USAGE,
            SessionError::Unreachable { .. }
            | SessionError::Unauthorized { .. }
            | SessionError::XsrfRefused { .. }
            | SessionError::KernelNotFound { .. }
            | SessionError::UnexpectedStatus { .. }
            | SessionError::NotJupyter { .. }
            | SessionError::Decode { .. }
            | SessionError::WebSocket { .. }
            // The kernel did not print what wsgate's cell prints: not an IPython kernel, or
            // one that drops output.
            | SessionError::CellOutput { .. } => exit_code::TARGET,
            SessionError::CellRaised { ename, .. }
                if ename == "ModuleNotFoundError" || ename == "ImportError" =>
            {
                exit_code::TARGET
            }
            SessionError::ChannelClosed { .. }
            | SessionError::KernelDied { .. }
            | SessionError::CellRaised { .. } => exit_code::FAILED,
            SessionError::Budget { .. } => exit_code::BUDGET,
            SessionError::HttpClient { .. } | SessionError::Template(_) => exit_code::INTERNAL,
        }
    }

    /// Whether retrying the same request later may succeed (the server was unreachable or
    /// the socket failed), as opposed to a definite answer (401, 404, a raised cell).
    pub fn is_transient(&self) -> bool {
        match self {
            SessionError::Unreachable { .. } | SessionError::ChannelClosed { .. } => true,
            SessionError::UnexpectedStatus { status, .. } => *status >= 500,
            SessionError::WebSocket { source, .. } => !matches!(
                source.as_ref(),
                tungstenite::Error::Http(r) if r.status().is_client_error()
            ),
            _ => false,
        }
    }
}

fn during(cell: &Option<String>) -> String {
    cell.as_ref()
        .map(|c| format!(" during cell `{c}`"))
        .unwrap_or_default()
}

/// Formats a duration for messages: `250 ms`, `30 s`, `2 min 5 s`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        let s = d.as_secs_f64();
        if (s - s.round()).abs() < 0.05 {
            format!("{} s", s.round())
        } else {
            format!("{s:.1} s")
        }
    } else {
        let secs = d.as_secs();
        if secs.is_multiple_of(60) {
            format!("{} min", secs / 60)
        } else {
            format!("{} min {} s", secs / 60, secs % 60)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_message_names_budget_cell_and_state() {
        let e = SessionError::Budget {
            budget: "cell".to_owned(),
            limit: Duration::from_secs(5),
            cell: Some("load_model".to_owned()),
            last_state: "busy".to_owned(),
        };
        assert_eq!(
            e.to_string(),
            "budget `cell` (5 s) ran out during cell `load_model`; last kernel state seen: busy"
        );
        assert_eq!(e.exit_code(), exit_code::BUDGET);
    }

    #[test]
    fn missing_module_is_a_missing_prerequisite() {
        let raised = |ename: &str| SessionError::CellRaised {
            cell: "load_model".to_owned(),
            ename: ename.to_owned(),
            evalue: "x".to_owned(),
            traceback: vec![],
        };
        assert_eq!(raised("ModuleNotFoundError").exit_code(), exit_code::TARGET);
        assert_eq!(raised("ZeroDivisionError").exit_code(), exit_code::FAILED);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(Duration::from_millis(250)), "250 ms");
        assert_eq!(human(Duration::from_secs(30)), "30 s");
        assert_eq!(human(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(human(Duration::from_secs(125)), "2 min 5 s");
        assert_eq!(human(Duration::from_secs(120)), "2 min");
    }
}
