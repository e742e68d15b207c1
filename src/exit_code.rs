//! The one table from outcome to process exit code. README.md repeats it; keep them equal.
//!
//! | code | constant              | meaning                                                             |
//! |------|-----------------------|---------------------------------------------------------------------|
//! | 0    | `SUCCESS`             | everything passed (for `probe check`: verdict Restored)             |
//! | 1    | `FAILED`              | one or more scenarios (or the gate) failed                          |
//! | 2    | `USAGE`               | bad flags, bad config, malformed feature file, unknown step, tags or name selecting no scenario |
//! | 3    | `TARGET`              | target unreachable, refused credentials, or a prerequisite missing  |
//! | 4    | `CLEANUP_LEAK`        | the run passed but left objects behind in the cluster               |
//! | 5    | `NOT_BUILT`           | reserved for a subcommand not built yet (every one is built now)    |
//! | 10   | `FRESH_SESSION`       | verdict FreshSession: files there, process state gone              |
//! | 11   | `FILES_LOST`          | verdict FilesLost                                                   |
//! | 12   | `INCONCLUSIVE`        | verdict Inconclusive (evidence missing or contradictory)            |
//! | 13   | `BUDGET`              | a named budget ran out (the message names the phase)                |
//! | 14   | `FALSE_RESTORE`       | the platform claimed a restore but the process state was lost       |
//! | 70   | `INTERNAL`            | a bug in wsgate: please report it                                   |
//! | 74   | `OUTPUT`              | standard output, a temporary directory or the reports directory could not be written |
//! | 130  | `INTERRUPTED`         | interrupted by SIGINT or SIGTERM (cleanup still ran)                |
//! | 141  | `PIPE_CLOSED`         | standard output's reader went away (`… | head`); what a shell shows for SIGPIPE |

/// Everything passed.
pub const SUCCESS: i32 = 0;
/// One or more scenarios, or the gate, failed.
pub const FAILED: i32 = 1;
/// Bad flags, bad config, malformed feature file, unknown step, tags or name selecting no scenario.
pub const USAGE: i32 = 2;
/// Target unreachable, credentials refused, or a prerequisite missing.
pub const TARGET: i32 = 3;
/// The run passed but left objects behind.
pub const CLEANUP_LEAK: i32 = 4;
/// Reserved for a subcommand not built yet (every one is built now).
pub const NOT_BUILT: i32 = 5;
/// Verdict FreshSession.
pub const FRESH_SESSION: i32 = 10;
/// Verdict FilesLost.
pub const FILES_LOST: i32 = 11;
/// Verdict Inconclusive.
pub const INCONCLUSIVE: i32 = 12;
/// A named budget ran out.
pub const BUDGET: i32 = 13;
/// The platform claimed a restore (`PodRestored=True`) but the process state was lost.
pub const FALSE_RESTORE: i32 = 14;
/// A bug in wsgate.
pub const INTERNAL: i32 = 70;
/// Standard output or a temporary directory could not be written (disk full, device error,
/// a directory not writable).
pub const OUTPUT: i32 = 74;
/// Interrupted by SIGINT or SIGTERM.
pub const INTERRUPTED: i32 = 130;
/// Standard output's reader went away (a closed pipe); 128 + SIGPIPE, as a shell shows it.
pub const PIPE_CLOSED: i32 = 141;

/// Every code with its meaning, in the order of the table above (used by `--help` text and tests).
pub const TABLE: &[(i32, &str)] = &[
    (SUCCESS, "everything passed (probe check: verdict Restored)"),
    (FAILED, "one or more scenarios, or the gate, failed"),
    (
        USAGE,
        "bad flags, bad config, malformed feature file, unknown step, tags or name selecting no scenario",
    ),
    (
        TARGET,
        "target unreachable, credentials refused, or a prerequisite missing",
    ),
    (CLEANUP_LEAK, "the run passed but left objects behind"),
    (
        NOT_BUILT,
        "reserved for a subcommand not built yet (every one is built now)",
    ),
    (
        FRESH_SESSION,
        "verdict FreshSession: files there, process state gone",
    ),
    (FILES_LOST, "verdict FilesLost"),
    (INCONCLUSIVE, "verdict Inconclusive"),
    (BUDGET, "a named budget ran out"),
    (
        FALSE_RESTORE,
        "the platform claimed a restore but the process state was lost",
    ),
    (INTERNAL, "a bug in wsgate"),
    (
        OUTPUT,
        "standard output or a temporary directory could not be written (disk full, device error)",
    ),
    (INTERRUPTED, "interrupted by SIGINT or SIGTERM"),
    (
        PIPE_CLOSED,
        "standard output's reader went away (a closed pipe) before a read-only command was done",
    ),
];
