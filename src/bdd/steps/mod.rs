//! Step definitions: thin glue from Gherkin phrases to `platform`, `session` and `verdict`.

pub mod capacity;
pub mod drill;
pub mod failure;
pub mod gate;
pub mod idle;
pub mod kernel;
pub mod snapshots;
pub mod stateless;
pub mod workspace;

/// The progress lines of a command that a step runs (the gate, the drill): each is printed
/// indented under the step and kept for the scenario's log.
pub(crate) struct Progress {
    prefix: &'static str,
    lines: std::sync::Mutex<Vec<String>>,
}

impl Progress {
    pub(crate) fn new(prefix: &'static str) -> Self {
        Progress {
            prefix,
            lines: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Prints and keeps one line.
    pub(crate) fn say(&self, line: &str) {
        crate::say!("    {}: {line}", self.prefix);
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{}: {line}", self.prefix));
    }

    /// The lines kept, in order.
    pub(crate) fn into_lines(self) -> Vec<String> {
        self.lines.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}
