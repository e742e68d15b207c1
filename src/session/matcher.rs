//! Matching replies to one `execute_request`: pure, fed one message at a time.
//!
//! A request is complete when both its shell `execute_reply` and its iopub `idle` status
//! have arrived, in either order (both orders occur). Output (`stream`, `execute_result`,
//! `display_data`, `error`) counts when its parent is the request. Messages of other requests
//! are ignored, except the server's reports that the kernel itself is going away: a
//! `restarting`, `autorestarting` or `dead` status, or a `shutdown_reply` on iopub (a restart
//! or shutdown through the REST API), which end the wait at once.

use std::time::Duration;

use jupyter_protocol::{ExecutionState, JupyterMessageContent, MediaType, ReplyStatus, Stdio};
use serde::{Deserialize, Serialize};

use super::error::SessionError;
use super::wire::Incoming;

/// How an execute request ended, as the kernel reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecuteStatus {
    /// `execute_reply` status `ok`.
    Ok,
    /// The cell raised.
    Error,
    /// The kernel aborted the request (an earlier request failed with stop_on_error).
    Aborted,
}

/// An exception a cell raised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellException {
    /// The exception class.
    pub ename: String,
    /// Its message.
    pub evalue: String,
    /// The traceback lines (with ANSI colour codes, as the kernel sends them).
    pub traceback: Vec<String>,
}

/// Everything one execute request produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecuteOutcome {
    /// The request's msg_id.
    pub msg_id: String,
    /// How it ended.
    pub status: ExecuteStatus,
    /// The execution count from `execute_reply`.
    pub execution_count: Option<u64>,
    /// stdout, in arrival order.
    pub stdout: String,
    /// stderr, in arrival order.
    pub stderr: String,
    /// The `text/plain` of each `execute_result` and `display_data`.
    pub results: Vec<String>,
    /// The exception, when the cell raised.
    pub error: Option<CellException>,
    /// Whether `execute_reply` arrived before the `idle` status.
    pub reply_before_idle: bool,
    /// From sending the request to the last of reply and idle.
    pub elapsed: Duration,
}

impl ExecuteOutcome {
    /// `Ok(self)` when the cell ran without raising; `SessionError::CellRaised` otherwise.
    pub fn into_ok(self, cell: &str) -> Result<Self, SessionError> {
        match self.status {
            ExecuteStatus::Ok => Ok(self),
            ExecuteStatus::Error => {
                let e = self.error.unwrap_or(CellException {
                    ename: "Error".to_owned(),
                    evalue: "the kernel reported an error without details".to_owned(),
                    traceback: Vec::new(),
                });
                Err(SessionError::CellRaised {
                    cell: cell.to_owned(),
                    ename: e.ename,
                    evalue: e.evalue,
                    traceback: e.traceback,
                })
            }
            ExecuteStatus::Aborted => Err(SessionError::CellRaised {
                cell: cell.to_owned(),
                ename: "Aborted".to_owned(),
                evalue: "the kernel aborted the request (an earlier request failed)".to_owned(),
                traceback: Vec::new(),
            }),
        }
    }
}

/// What the collector concluded after a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Keep reading.
    Pending,
    /// Both `execute_reply` and `idle` have arrived.
    Done,
    /// The kernel is going away; the text says how (e.g. "restarted (the server reports
    /// `restarting`)").
    KernelLost(String),
}

/// Collects the replies to one request (see the module docs).
#[derive(Debug, Clone)]
pub struct ReplyCollector {
    msg_id: String,
    reply: Option<(ExecuteStatus, Option<u64>)>,
    idle: bool,
    reply_before_idle: bool,
    stdout: String,
    stderr: String,
    results: Vec<String>,
    error: Option<CellException>,
    last_state: String,
}

/// What a message says about the kernel being gone, whatever request it answers: a
/// `restarting`/`dead` status, or a `shutdown_reply` that did not come on the shell channel.
pub fn kernel_lost(msg: &Incoming) -> Option<String> {
    if let JupyterMessageContent::Status(status) = &msg.content {
        match status.execution_state {
            ExecutionState::Restarting | ExecutionState::AutoRestarting => {
                return Some(format!(
                    "restarted (the server reports `{}`)",
                    status.execution_state.as_str()
                ));
            }
            ExecutionState::Dead => return Some("died (the server reports `dead`)".to_owned()),
            _ => {}
        }
    }
    if let JupyterMessageContent::ShutdownReply(reply) = &msg.content
        && msg.channel.as_deref() != Some("shell")
    {
        return Some(if reply.restart {
            "was restarted through the REST API (shutdown_reply restart=true)".to_owned()
        } else {
            "was shut down (shutdown_reply)".to_owned()
        });
    }
    None
}

impl ReplyCollector {
    /// A collector for the request `msg_id`.
    pub fn new(msg_id: impl Into<String>) -> Self {
        ReplyCollector {
            msg_id: msg_id.into(),
            reply: None,
            idle: false,
            reply_before_idle: false,
            stdout: String::new(),
            stderr: String::new(),
            results: Vec::new(),
            error: None,
            last_state: "unknown (no status seen yet)".to_owned(),
        }
    }

    /// The last kernel execution state seen (any parent), for budget messages.
    pub fn last_state(&self) -> &str {
        &self.last_state
    }

    /// Feeds one message.
    pub fn feed(&mut self, msg: &Incoming) -> Step {
        if let JupyterMessageContent::Status(status) = &msg.content {
            self.last_state = status.execution_state.as_str().to_owned();
        }
        if let Some(event) = kernel_lost(msg) {
            return Step::KernelLost(event);
        }
        if msg.parent_msg_id.as_deref() != Some(self.msg_id.as_str()) {
            return Step::Pending;
        }
        match &msg.content {
            JupyterMessageContent::Status(s) if s.execution_state == ExecutionState::Idle => {
                self.idle = true;
            }
            JupyterMessageContent::StreamContent(s) => match s.name {
                Stdio::Stdout => self.stdout.push_str(&s.text),
                Stdio::Stderr => self.stderr.push_str(&s.text),
            },
            JupyterMessageContent::ExecuteResult(r) => self.results.extend(plain(&r.data.content)),
            JupyterMessageContent::DisplayData(d) => self.results.extend(plain(&d.data.content)),
            JupyterMessageContent::ErrorOutput(e) => {
                self.error = Some(CellException {
                    ename: e.ename.clone(),
                    evalue: e.evalue.clone(),
                    traceback: e.traceback.clone(),
                });
            }
            JupyterMessageContent::ExecuteReply(r) => {
                let status = match r.status {
                    ReplyStatus::Ok => ExecuteStatus::Ok,
                    ReplyStatus::Error => ExecuteStatus::Error,
                    ReplyStatus::Aborted => ExecuteStatus::Aborted,
                };
                if self.error.is_none()
                    && let Some(e) = &r.error
                {
                    self.error = Some(CellException {
                        ename: e.ename.clone(),
                        evalue: e.evalue.clone(),
                        traceback: e.traceback.clone(),
                    });
                }
                self.reply = Some((status, Some(r.execution_count.value() as u64)));
                self.reply_before_idle = !self.idle;
            }
            _ => {}
        }
        if self.reply.is_some() && self.idle {
            Step::Done
        } else {
            Step::Pending
        }
    }

    /// The outcome; call after `Step::Done`.
    pub fn finish(self, elapsed: Duration) -> ExecuteOutcome {
        let (status, execution_count) = self.reply.unwrap_or((ExecuteStatus::Error, None));
        ExecuteOutcome {
            msg_id: self.msg_id,
            status,
            execution_count,
            stdout: self.stdout,
            stderr: self.stderr,
            results: self.results,
            error: self.error,
            reply_before_idle: self.reply_before_idle,
            elapsed,
        }
    }
}

fn plain(content: &[MediaType]) -> Vec<String> {
    content
        .iter()
        .filter_map(|m| match m {
            MediaType::Plain(text) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::wire::parse_frame;
    use rand::seq::SliceRandom;
    use serde_json::json;

    fn msg(channel: &str, msg_type: &str, parent: &str, content: serde_json::Value) -> Incoming {
        let frame = json!({
            "header": {"msg_id": format!("{msg_type}-{parent}"), "msg_type": msg_type},
            "parent_header": if parent.is_empty() { json!({}) } else { json!({"msg_id": parent}) },
            "channel": channel,
            "content": content,
        });
        parse_frame(&frame.to_string()).unwrap()
    }

    fn status(parent: &str, state: &str) -> Incoming {
        msg("iopub", "status", parent, json!({"execution_state": state}))
    }

    /// The iopub messages of one request, in their (ordered) iopub sequence.
    fn iopub(parent: &str) -> Vec<Incoming> {
        vec![
            status(parent, "busy"),
            msg(
                "iopub",
                "execute_input",
                parent,
                json!({"code": "x", "execution_count": 3}),
            ),
            msg(
                "iopub",
                "stream",
                parent,
                json!({"name": "stdout", "text": "hello\n"}),
            ),
            msg(
                "iopub",
                "stream",
                parent,
                json!({"name": "stderr", "text": "warn\n"}),
            ),
            msg(
                "iopub",
                "execute_result",
                parent,
                json!({"execution_count": 3, "data": {"text/plain": "42"}, "metadata": {}}),
            ),
            status(parent, "idle"),
        ]
    }

    fn reply(parent: &str) -> Incoming {
        msg(
            "shell",
            "execute_reply",
            parent,
            json!({"status": "ok", "execution_count": 3, "user_expressions": {}, "payload": []}),
        )
    }

    /// Feeds until Done; returns the outcome and how many messages were consumed.
    fn run(messages: &[Incoming]) -> (Option<ExecuteOutcome>, usize) {
        let mut c = ReplyCollector::new("req");
        for (i, m) in messages.iter().enumerate() {
            match c.feed(m) {
                Step::Done => return (Some(c.finish(Duration::ZERO)), i + 1),
                Step::KernelLost(how) => panic!("unexpected loss: {how}"),
                Step::Pending => {}
            }
        }
        (None, messages.len())
    }

    #[test]
    fn reply_anywhere_among_iopub_and_foreign_messages_gives_the_same_outcome() {
        // Every position of the shell reply in the iopub sequence, with another request's
        // messages woven in at every other position.
        let mine = iopub("req");
        let foreign = [iopub("other"), vec![reply("other")]].concat();
        let mut outcomes = Vec::new();
        for reply_at in 0..=mine.len() {
            for foreign_at in 0..=mine.len() {
                let mut seq = mine.clone();
                seq.insert(reply_at, reply("req"));
                for (k, f) in foreign.iter().enumerate() {
                    seq.insert((foreign_at + k).min(seq.len()), f.clone());
                }
                let last_needed = seq
                    .iter()
                    .rposition(|m| {
                        m.parent_msg_id.as_deref() == Some("req")
                            && matches!(m.msg_type(), "execute_reply")
                            || (m.parent_msg_id.as_deref() == Some("req")
                                && matches!(&m.content, JupyterMessageContent::Status(s) if s.execution_state == ExecutionState::Idle))
                    })
                    .unwrap();
                let (outcome, consumed) = run(&seq);
                let outcome = outcome.expect("never completed");
                assert_eq!(consumed, last_needed + 1, "completed early or late");
                assert_eq!(outcome.reply_before_idle, reply_at < mine.len());
                outcomes.push(ExecuteOutcome {
                    reply_before_idle: false,
                    ..outcome
                });
            }
        }
        let first = &outcomes[0];
        assert_eq!(first.status, ExecuteStatus::Ok);
        assert_eq!(first.stdout, "hello\n");
        assert_eq!(first.stderr, "warn\n");
        assert_eq!(first.results, vec!["42".to_owned()]);
        assert_eq!(first.execution_count, Some(3));
        assert!(outcomes.iter().all(|o| o == first));
    }

    #[test]
    fn fully_shuffled_messages_complete_exactly_when_reply_and_idle_are_both_in() {
        let mut rng = rand::rng();
        for _ in 0..500 {
            let mut seq = [iopub("req"), vec![reply("req")], iopub("other")].concat();
            seq.shuffle(&mut rng);
            let is_reply = |m: &Incoming| {
                m.parent_msg_id.as_deref() == Some("req") && m.msg_type() == "execute_reply"
            };
            let is_idle = |m: &Incoming| {
                m.parent_msg_id.as_deref() == Some("req")
                    && matches!(&m.content, JupyterMessageContent::Status(s) if s.execution_state == ExecutionState::Idle)
            };
            let r = seq.iter().position(is_reply).unwrap();
            let i = seq.iter().position(is_idle).unwrap();
            let (outcome, consumed) = run(&seq);
            assert!(outcome.is_some());
            assert_eq!(consumed, r.max(i) + 1);
        }
    }

    #[test]
    fn an_error_is_collected_from_iopub_or_the_reply() {
        let mut c = ReplyCollector::new("req");
        c.feed(&status("req", "busy"));
        c.feed(&msg(
            "shell",
            "execute_reply",
            "req",
            json!({"status": "error", "execution_count": 4, "ename": "ZeroDivisionError",
                   "evalue": "division by zero", "traceback": ["tb"]}),
        ));
        assert_eq!(c.feed(&status("req", "idle")), Step::Done);
        let err = c.finish(Duration::ZERO).into_ok("boom").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cell `boom` raised ZeroDivisionError: division by zero"
        );
    }

    #[test]
    fn the_kernel_going_away_ends_the_wait_whoever_the_parent() {
        for (m, needle) in [
            (status("", "restarting"), "restarting"),
            (status("", "dead"), "dead"),
            (status("someone-else", "autorestarting"), "autorestarting"),
            (
                msg(
                    "iopub",
                    "shutdown_reply",
                    "srv",
                    json!({"status": "ok", "restart": true}),
                ),
                "REST API",
            ),
            (
                msg(
                    "iopub",
                    "shutdown_reply",
                    "srv",
                    json!({"status": "ok", "restart": false}),
                ),
                "shut down",
            ),
        ] {
            let mut c = ReplyCollector::new("req");
            c.feed(&status("req", "busy"));
            match c.feed(&m) {
                Step::KernelLost(how) => assert!(how.contains(needle), "{how}"),
                other => panic!("expected a loss, got {other:?}"),
            }
        }
    }

    #[test]
    fn last_state_tracks_any_status() {
        let mut c = ReplyCollector::new("req");
        assert!(c.last_state().starts_with("unknown"));
        c.feed(&status("other", "busy"));
        assert_eq!(c.last_state(), "busy");
    }
}
