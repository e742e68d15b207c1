//! The kernel channel's wire format: JSON text frames (jupyter_server's legacy websocket
//! protocol; no subprotocol is offered), messaging protocol 5.3, with jupyter-protocol's
//! typed message contents.

use jupyter_protocol::{
    ExecuteRequest, JupyterMessage, JupyterMessageContent, KernelInfoRequest, UnknownMessage,
};
use serde::Deserialize;
use serde_json::Value;

/// One message received on the channel, reduced to what matching needs.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// `shell`, `iopub`, `control`, `stdin` (the server adds it).
    pub channel: Option<String>,
    /// The `parent_header.msg_id`; `None` for messages with an empty parent.
    pub parent_msg_id: Option<String>,
    /// The typed content (`UnknownMessage` for types jupyter-protocol does not know, or
    /// contents it cannot parse).
    pub content: JupyterMessageContent,
}

impl Incoming {
    /// The message type.
    pub fn msg_type(&self) -> &str {
        self.content.message_type()
    }
}

#[derive(Deserialize)]
struct RawHeader {
    msg_type: String,
}

#[derive(Deserialize)]
struct RawMessage {
    header: RawHeader,
    #[serde(default)]
    parent_header: Value,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    content: Value,
}

/// Parses one text frame. `None` when the frame is not a Jupyter message at all.
pub fn parse_frame(text: &str) -> Option<Incoming> {
    let raw: RawMessage = serde_json::from_str(text).ok()?;
    let parent_msg_id = raw
        .parent_header
        .get("msg_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    let content =
        JupyterMessageContent::from_type_and_content(&raw.header.msg_type, raw.content.clone())
            .unwrap_or(JupyterMessageContent::UnknownMessage(UnknownMessage {
                msg_type: raw.header.msg_type,
                content: raw.content,
            }));
    Some(Incoming {
        channel: raw.channel,
        parent_msg_id,
        content,
    })
}

/// An `execute_request` frame for the shell channel. Returns `(msg_id, frame)`.
pub fn execute_request(
    session_id: &str,
    code: &str,
    silent: bool,
    store_history: bool,
) -> (String, String) {
    let request = ExecuteRequest {
        code: code.to_owned(),
        silent,
        store_history,
        user_expressions: None,
        allow_stdin: false,
        stop_on_error: true,
    };
    shell_frame(session_id, JupyterMessage::new(request, None))
}

/// A `kernel_info_request` frame for the shell channel: the kernel itself answers it (the
/// server does not). Returns `(msg_id, frame)`.
pub fn kernel_info_request(session_id: &str) -> (String, String) {
    shell_frame(session_id, JupyterMessage::new(KernelInfoRequest {}, None))
}

/// `message` as a text frame on the shell channel, from `session_id`.
fn shell_frame(session_id: &str, mut message: JupyterMessage) -> (String, String) {
    message.header.session = session_id.to_owned();
    message.header.username = "wsgate".to_owned();
    message.header.version = "5.3".to_owned();
    let msg_id = message.header.msg_id.clone();
    let mut value = serde_json::to_value(&message).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("channel".to_owned(), Value::String("shell".to_owned()));
        map.insert("buffers".to_owned(), Value::Array(Vec::new()));
        map.insert(
            "parent_header".to_owned(),
            Value::Object(Default::default()),
        );
    }
    (msg_id, value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_request_has_the_fields_jupyter_server_needs() {
        let (id, frame) = execute_request("sess", "x = 1", true, false);
        let v: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(v["header"]["msg_id"], id);
        assert_eq!(v["header"]["msg_type"], "execute_request");
        assert_eq!(v["header"]["version"], "5.3");
        assert_eq!(v["header"]["session"], "sess");
        assert_eq!(v["channel"], "shell");
        assert_eq!(v["parent_header"], serde_json::json!({}));
        assert_eq!(v["content"]["code"], "x = 1");
        assert_eq!(v["content"]["silent"], true);
        assert_eq!(v["content"]["store_history"], false);
        assert_eq!(v["content"]["allow_stdin"], false);
        assert_eq!(v["content"]["user_expressions"], serde_json::json!({}));
    }

    #[test]
    fn frames_parse_with_and_without_parents() {
        let f = r#"{"header":{"msg_id":"m","msg_type":"status"},"parent_header":{},
                   "channel":"iopub","content":{"execution_state":"restarting"}}"#;
        let m = parse_frame(f).unwrap();
        assert_eq!(m.parent_msg_id, None);
        assert_eq!(m.msg_type(), "status");
        let f = r#"{"header":{"msg_id":"m","msg_type":"iopub_welcome"},"parent_header":{"msg_id":"p"},
                   "channel":"iopub","content":{"subscription":""}}"#;
        let m = parse_frame(f).unwrap();
        assert_eq!(m.parent_msg_id.as_deref(), Some("p"));
        assert!(parse_frame("[1,2]").is_none());
    }

    #[test]
    fn a_kernel_info_request_goes_to_the_shell_channel() {
        let (id, frame) = kernel_info_request("sess");
        let v: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(v["header"]["msg_id"], id);
        assert_eq!(v["header"]["msg_type"], "kernel_info_request");
        assert_eq!(v["channel"], "shell");
        assert_eq!(v["content"], serde_json::json!({}));
    }
}
