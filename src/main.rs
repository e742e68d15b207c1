//! The `wsgate` binary: install the rustls provider, parse the CLI, run the command, and map
//! its outcome to an exit code (the table is `wsgate::exit_code`).

use std::process::ExitCode;

use clap::Parser;
use wsgate::cli::Cli;
use wsgate::exit_code;

fn main() -> ExitCode {
    wsgate::install_crypto_provider();
    wsgate::output::install_panic_hook();
    // Before clap reads WSGATE_LOG: its own message for a value that is not UTF-8 names no
    // variable ("invalid UTF-8 was detected in one or more arguments").
    if let Err(e) = wsgate::config::process_env() {
        wsgate::say_err!("error: {e}");
        return ExitCode::from(exit_code::USAGE as u8);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap: 0 for --help/--version, 2 for usage errors (our USAGE code).
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    let filter = match tracing_subscriber::EnvFilter::try_new(&cli.log) {
        Ok(f) => f,
        Err(e) => {
            wsgate::say_err!(
                "error: --log (or WSGATE_LOG) {:?} is not a tracing filter: {e}; e.g. `warn`, \
                 `info` or `wsgate=debug`",
                cli.log
            );
            return ExitCode::from(exit_code::USAGE as u8);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            wsgate::say_err!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit_code::INTERNAL as u8);
        }
    };
    let code = match runtime.block_on(wsgate::commands::dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            wsgate::say_err!("error: {e}");
            for cause in wsgate::output::causes(&e) {
                wsgate::say_err!("  caused by: {cause}");
            }
            e.exit_code()
        }
    };
    // Output that could not be written (a full disk) fails a command that otherwise passed;
    // it finished and cleaned up first.
    let code = if code == exit_code::SUCCESS && wsgate::output::stdout_failed() {
        exit_code::OUTPUT
    } else {
        code
    };
    ExitCode::from(code as u8)
}
