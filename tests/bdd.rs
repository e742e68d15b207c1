//! The verification suite against the embedded simulator, exactly as a user runs it:
//! `wsgate run` (no flags) from the project directory. `harness = false`: this is the
//! test's main, and it ends with cucumber's summary and a `N passed, N failed` line.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let root = env!("CARGO_MANIFEST_DIR");
    let status = Command::new(env!("CARGO_BIN_EXE_wsgate"))
        .arg("run")
        .current_dir(root)
        .env_remove("KUBECONFIG")
        .status();
    match status {
        Ok(s) if s.success() => {
            println!("bdd: 1 passed, 0 failed");
            ExitCode::SUCCESS
        }
        Ok(s) => {
            println!("bdd: 0 passed, 1 failed (wsgate run exited with {s})");
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("bdd: 0 passed, 1 failed (cannot start wsgate: {e})");
            ExitCode::FAILURE
        }
    }
}
