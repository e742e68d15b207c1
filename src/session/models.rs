//! The Jupyter Server REST models wsgate reads (jupyter_server 2.x field names).

use serde::{Deserialize, Serialize};

/// `GET /api/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStatus {
    /// When the server started (ISO 8601).
    pub started: Option<String>,
    /// Last activity on the server.
    pub last_activity: Option<String>,
    /// Open websocket connections.
    pub connections: Option<u64>,
    /// Running kernels.
    pub kernels: Option<u64>,
}

/// A kernel, as `GET /api/kernels/{id}` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelModel {
    /// The kernel id.
    pub id: String,
    /// The kernelspec name.
    pub name: String,
    /// Last activity.
    pub last_activity: Option<String>,
    /// `starting`, `idle`, `busy`, `restarting`, `dead`, ...
    pub execution_state: Option<String>,
    /// Open websocket connections to it.
    pub connections: Option<u64>,
}

/// A session (a notebook or console bound to a kernel), `GET /api/sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionModel {
    /// The session id.
    pub id: String,
    /// The notebook or file path.
    pub path: Option<String>,
    /// The session name.
    pub name: Option<String>,
    /// `notebook`, `console`, `file`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The kernel it is bound to.
    pub kernel: Option<KernelModel>,
}

/// `GET /api/contents/{path}?type=file&format=base64&content=1`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FileContents {
    pub content: Option<String>,
    pub format: Option<String>,
}
