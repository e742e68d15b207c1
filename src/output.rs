//! Standard output that may close under us: `wsgate … | head -1`, or a full disk.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with `BrokenPipe`, and `println!`
//! panics on any write error. These pieces keep that from becoming a panic (exit 101):
//! - [`Stdout`], a writer for long output (the suite's progress): after the reader has gone
//!   it drops the rest quietly, so the run goes on, cleans up and exits with its own code;
//! - [`say!`](crate::say), for every command that creates, changes or deletes objects (`run`,
//!   `drill`, `gate`, `probe`, `janitor`, `sim`) and the suite's steps: a line is written in
//!   one piece and, like [`Stdout`], dropped once the reader has gone, so a closed pipe or a
//!   full disk never stops such a command half-way, before it has cleaned up (a full disk is
//!   said once on standard error and makes `main` exit `OUTPUT` at the end, [`stdout_failed`]);
//! - [`say_err!`](crate::say_err), the same for every line on standard error;
//! - [`install_panic_hook`], for the read-only commands' plain `println!` (`report`, `cost`,
//!   `status`, `doctor`, `run --dry-run`): a failed print to stdout ends the process with
//!   [`crate::exit_code::PIPE_CLOSED`] (a closed pipe, quietly) or
//!   [`crate::exit_code::OUTPUT`] (anything else, such as `/dev/full`, with one line saying
//!   so). Every other panic keeps the default hook.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);
static FAILED_SAID: AtomicBool = AtomicBool::new(false);

/// Prints a line (like `println!`) that never panics (see [`say_line`]), for a command that
/// must go on to clean up whatever happens to its output.
#[macro_export]
macro_rules! say {
    () => {
        $crate::output::say_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::say_line(format_args!($($arg)*))
    };
}

/// Prints a line to standard error (like `eprintln!`) that never panics: a closed or full
/// standard error (`wsgate … 2>&1 | head`) drops the line and the command goes on.
#[macro_export]
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::output::say_err_line(format_args!($($arg)*))
    };
}

/// Writes one line to standard error for [`say_err!`](crate::say_err), in one piece, and
/// drops it when standard error cannot be written.
pub fn say_err_line(args: std::fmt::Arguments<'_>) {
    let line = format!("{args}\n");
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

/// Writes `text` as one line (a newline is added when it has none), as [`say!`](crate::say)
/// writes a line.
pub fn say_text(text: &str) {
    say_line(format_args!("{}", text.strip_suffix('\n').unwrap_or(text)));
}

/// Writes one line to standard output for [`say!`](crate::say): after the reader has gone
/// the line is dropped; any other write error is said once on standard error and the
/// command goes on.
pub fn say_line(args: std::fmt::Arguments<'_>) {
    // One write of the whole line, so that lines of concurrent scenarios never interleave.
    if stdout_closed() {
        return;
    }
    let line = format!("{args}\n");
    let mut out = io::stdout().lock();
    let written = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    drop(out);
    if let Err(e) = &written
        && e.kind() == io::ErrorKind::BrokenPipe
    {
        CLOSED.store(true, Ordering::Relaxed);
    } else if let Err(e) = written
        && !FAILED_SAID.swap(true, Ordering::Relaxed)
    {
        crate::say_err!(
            "warning: cannot write to standard output ({e}); going on to finish and clean up"
        );
    }
}

/// Whether a [`say!`](crate::say) line could not be written for another reason than a
/// closed pipe (a full disk): the command then ends with `OUTPUT` (74) if nothing else
/// failed.
pub fn stdout_failed() -> bool {
    FAILED_SAID.load(Ordering::Relaxed)
}

/// Whether standard output's reader has gone (a write met `BrokenPipe`).
pub fn stdout_closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Standard output that turns a closed pipe into silence instead of an error.
#[derive(Debug, Default)]
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if stdout_closed() {
            return Ok(buf.len());
        }
        match io::stdout().write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                CLOSED.store(true, Ordering::Relaxed);
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if stdout_closed() {
            return Ok(());
        }
        match io::stdout().flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                CLOSED.store(true, Ordering::Relaxed);
                Ok(())
            }
            other => other,
        }
    }
}

/// What a panic's message says about standard output, if it is std's "failed printing to
/// stdout".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintFailure {
    /// The reader closed the pipe.
    PipeClosed,
    /// Any other write error (disk full, device error).
    Other,
}

/// Classifies a panic message: `None` unless it is a failed print to stdout.
pub fn classify(message: &str) -> Option<PrintFailure> {
    if !message.starts_with("failed printing to stdout") {
        return None;
    }
    if message.contains("Broken pipe") || message.contains("os error 32") {
        Some(PrintFailure::PipeClosed)
    } else {
        Some(PrintFailure::Other)
    }
}

/// Installs the hook described in the module docs. Call once, first thing in `main`.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        match classify(message) {
            Some(PrintFailure::PipeClosed) => std::process::exit(crate::exit_code::PIPE_CLOSED),
            Some(PrintFailure::Other) => {
                let why = message.trim_start_matches("failed printing to stdout: ");
                // Not eprintln!: a standard error that cannot be written either must not
                // panic inside this hook.
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "error: cannot write to standard output: {why}"
                );
                std::process::exit(crate::exit_code::OUTPUT)
            }
            None => default(info),
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_print_failures_are_told_apart_from_other_panics() {
        assert_eq!(
            classify("failed printing to stdout: Broken pipe (os error 32)"),
            Some(PrintFailure::PipeClosed)
        );
        assert_eq!(
            classify("failed printing to stdout: No space left on device (os error 28)"),
            Some(PrintFailure::Other)
        );
        assert_eq!(classify("index out of bounds"), None);
        assert_eq!(classify("Broken pipe"), None);
    }
}

/// An error in one line: its text and each cause under it ([`causes`]), joined by `: `.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    std::iter::once(e.to_string())
        .chain(causes(e))
        .collect::<Vec<_>>()
        .join(": ")
}

/// The causes under an error, each said once and in words: kube repeats the API's message
/// in its own text and then prints the whole `Status` struct, so an API refusal is said as
/// its message with the HTTP code and reason, and a cause whose words are already said by
/// the error above it is left out.
pub fn causes(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut said = e.to_string();
    let mut out: Vec<String> = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        let (text, next) = match s.downcast_ref::<kube::Error>() {
            // The Status under it says the same again ("message: reason"): skip it.
            Some(kube::Error::Api(st)) => (
                format!("{} (HTTP {} {})", st.message, st.code, st.reason),
                s.source().and_then(|status| status.source()),
            ),
            _ => (s.to_string(), s.source()),
        };
        if !said.contains(&text) {
            said.push('\n');
            said.push_str(&text);
            out.push(text);
        }
        cur = next;
    }
    out
}

#[cfg(test)]
mod causes_tests {
    use super::causes;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot create the squeeze quota")]
    struct Outer(#[source] kube::Error);

    #[test]
    fn an_api_refusal_is_said_once_in_words() {
        let status = kube::core::Status {
            message: "ResourceQuota q already exists and is not this run's".into(),
            reason: "AlreadyExists".into(),
            code: 409,
            ..Default::default()
        };
        let e = Outer(kube::Error::Api(Box::new(status)));
        assert_eq!(
            causes(&e),
            ["ResourceQuota q already exists and is not this run's (HTTP 409 AlreadyExists)"]
        );
    }
}
