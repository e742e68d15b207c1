//! The simulator's Python environment, built with `python3` (or `$WSGATE_PYTHON`) from the
//! requirements embedded in the binary (`fixtures/sim/requirements.txt` at build time), in
//! the user's cache directory: `$XDG_CACHE_HOME/wsgate/sim-venv-<hash>` (or
//! `~/.cache/wsgate/...`), keyed by the requirements' sha256 so a binary with other pins
//! builds its own. Nothing is looked up in the working directory, so an installed `wsgate`
//! works wherever it is started.
//!
//! Idempotent: a stamp file inside the venv holds the sha256 of the requirements and the
//! interpreter's version; when both match, [`ensure_venv`] returns at once. Concurrent
//! callers (several test binaries at once) serialise on an exclusive `flock` held on a lock
//! file inside the venv directory, so one builds and the others wait and then reuse it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use sha2::{Digest, Sha256};

/// The requirements the venv is built from, embedded at build time.
pub const REQUIREMENTS_TXT: &str = include_str!("../../../fixtures/sim/requirements.txt");
/// Environment variable that overrides the interpreter used to create the venv.
pub const PYTHON_ENV: &str = "WSGATE_PYTHON";

const STAMP_FILE: &str = ".wsgate-stamp";
const LOCK_FILE: &str = ".wsgate-lock";

/// Paths inside a ready venv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VenvPaths {
    /// The venv directory.
    pub root: PathBuf,
    /// Its `bin/` directory.
    pub bin: PathBuf,
    /// Its Python interpreter.
    pub python: PathBuf,
    /// Its `jupyter` launcher.
    pub jupyter: PathBuf,
}

impl VenvPaths {
    fn new(root: PathBuf) -> Self {
        let bin = root.join("bin");
        VenvPaths {
            python: bin.join("python"),
            jupyter: bin.join("jupyter"),
            bin,
            root,
        }
    }
}

/// Why the venv could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum VenvError {
    /// Neither `XDG_CACHE_HOME` (absolute) nor `HOME` says where the cache is.
    #[error(
        "no cache directory for the simulator's Python environment: set HOME, or \
         XDG_CACHE_HOME to an absolute path"
    )]
    NoCacheDir,
    /// The interpreter could not be run at all.
    #[error(
        "cannot run the Python interpreter `{interpreter}` ({source}); install Python 3.11+ as \
         `python3` on PATH or point ${PYTHON_ENV} at one"
    )]
    PythonMissing {
        interpreter: String,
        #[source]
        source: io::Error,
    },
    /// `python -m venv` failed.
    #[error("`{interpreter} -m venv {venv}` failed ({status}): {output_tail}")]
    CreateFailed {
        interpreter: String,
        venv: PathBuf,
        status: String,
        output_tail: String,
    },
    /// `pip install` could not reach the package registry.
    #[error(
        "pip could not reach the package registry while installing {requirements} into {venv}: \
         {output_tail}"
    )]
    RegistryUnavailable {
        requirements: PathBuf,
        venv: PathBuf,
        output_tail: String,
    },
    /// `pip install` failed for another reason.
    #[error("`pip install -r {requirements}` into {venv} failed ({status}): {output_tail}")]
    InstallFailed {
        requirements: PathBuf,
        venv: PathBuf,
        status: String,
        output_tail: String,
    },
    /// The installed venv does not import what the simulator needs.
    #[error(
        "the venv {venv} was built but does not import jupyter_server/ipykernel/numpy: {output_tail}"
    )]
    Broken { venv: PathBuf, output_tail: String },
    /// A filesystem operation on the venv failed.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Where the venv for these requirements and this Python (`python_version`, as
/// `python --version` prints it) lives: `<cache>/wsgate/sim-venv-<16 hex>`, the cache being
/// `$XDG_CACHE_HOME` when it is absolute (as the XDG spec asks), else `$HOME/.cache`. Two
/// checkouts with different interpreters get different venvs, never rebuilding one another's.
pub fn venv_dir(python_version: &str) -> Result<PathBuf, VenvError> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(home) => PathBuf::from(home).join(".cache"),
            None => return Err(VenvError::NoCacheDir),
        },
    };
    let hash = hex::encode(Sha256::digest(
        format!("{REQUIREMENTS_TXT}\n{python_version}").as_bytes(),
    ));
    Ok(cache
        .join("wsgate")
        .join(format!("sim-venv-{}", &hash[..16])))
}

/// Makes the venv ready ([`venv_dir`]) and returns its paths. Builds it (about 30 s, with
/// progress on stderr) when it is missing or its stamp does not match the requirements.
pub fn ensure_venv() -> Result<VenvPaths, VenvError> {
    let interpreter = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_owned());
    let py_version = python_version(&interpreter)?;
    let wanted_stamp = format!(
        "requirements-sha256 {}\npython {}\n",
        hex::encode(Sha256::digest(REQUIREMENTS_TXT.as_bytes())),
        py_version
    );
    let paths = VenvPaths::new(venv_dir(&py_version)?);
    if is_ready(&paths, &wanted_stamp) {
        return Ok(paths);
    }

    fs::create_dir_all(&paths.root).map_err(io_err("create", &paths.root))?;
    let _lock = lock_exclusive(&paths.root.join(LOCK_FILE))?;
    // Another process may have finished the build while this one waited for the lock.
    if is_ready(&paths, &wanted_stamp) {
        return Ok(paths);
    }
    build(&paths, &interpreter)?;
    let stamp = paths.root.join(STAMP_FILE);
    fs::write(&stamp, &wanted_stamp).map_err(io_err("write", &stamp))?;
    Ok(paths)
}

fn is_ready(paths: &VenvPaths, wanted_stamp: &str) -> bool {
    let stamp = fs::read_to_string(paths.root.join(STAMP_FILE)).unwrap_or_default();
    stamp == wanted_stamp && paths.python.exists() && paths.jupyter.exists()
}

fn build(paths: &VenvPaths, interpreter: &str) -> Result<(), VenvError> {
    let started = Instant::now();
    crate::say_err!(
        "wsgate: building the simulator's Python environment in {} (once; about 30 s)",
        paths.root.display()
    );
    clear_except_lock(&paths.root)?;
    let out = run(Command::new(interpreter)
        .arg("-m")
        .arg("venv")
        .arg(&paths.root))
    .map_err(|source| VenvError::PythonMissing {
        interpreter: interpreter.to_owned(),
        source,
    })?;
    if !out.status.success() {
        return Err(VenvError::CreateFailed {
            interpreter: interpreter.to_owned(),
            venv: paths.root.clone(),
            status: out.status.to_string(),
            output_tail: tail(&out),
        });
    }
    // pip reads the pins from a file: the embedded requirements, written into the venv.
    let requirements = paths.root.join("requirements.txt");
    fs::write(&requirements, REQUIREMENTS_TXT).map_err(io_err("write", &requirements))?;
    let requirements = requirements.as_path();
    crate::say_err!(
        "wsgate: venv created; pip install -r {}",
        requirements.display()
    );
    let out = run(Command::new(&paths.python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "-r",
        ])
        .arg(requirements))
    .map_err(io_err("run pip in", &paths.root))?;
    if !out.status.success() {
        let output_tail = tail(&out);
        return Err(if looks_like_registry_failure(&output_tail) {
            VenvError::RegistryUnavailable {
                requirements: requirements.to_owned(),
                venv: paths.root.clone(),
                output_tail,
            }
        } else {
            VenvError::InstallFailed {
                requirements: requirements.to_owned(),
                venv: paths.root.clone(),
                status: out.status.to_string(),
                output_tail,
            }
        });
    }
    let out = run(Command::new(&paths.python).args([
        "-c",
        "import jupyter_server, ipykernel, jupyter_client, numpy",
    ]))
    .map_err(io_err("run the venv interpreter in", &paths.root))?;
    if !out.status.success() {
        return Err(VenvError::Broken {
            venv: paths.root.clone(),
            output_tail: tail(&out),
        });
    }
    crate::say_err!(
        "wsgate: simulator venv ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn python_version(interpreter: &str) -> Result<String, VenvError> {
    let out = run(Command::new(interpreter).arg("--version")).map_err(|source| {
        VenvError::PythonMissing {
            interpreter: interpreter.to_owned(),
            source,
        }
    })?;
    if !out.status.success() {
        return Err(VenvError::PythonMissing {
            interpreter: interpreter.to_owned(),
            source: io::Error::other(format!("`--version` exited {}", out.status)),
        });
    }
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    Ok(text.trim().to_owned())
}

fn run(cmd: &mut Command) -> io::Result<Output> {
    cmd.stdin(Stdio::null()).output()
}

fn tail(out: &Output) -> String {
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

/// pip's wording when the index cannot be reached (no network, proxy refused, DNS).
fn looks_like_registry_failure(text: &str) -> bool {
    [
        "Failed to establish a new connection",
        "Could not fetch URL",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "ProxyError",
        "Max retries exceeded",
        "No matching distribution found",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

fn clear_except_lock(root: &Path) -> Result<(), VenvError> {
    for entry in fs::read_dir(root).map_err(io_err("list", root))? {
        let entry = entry.map_err(io_err("list", root))?;
        if entry.file_name() == LOCK_FILE {
            continue;
        }
        let path = entry.path();
        let result = if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        result.map_err(io_err("remove", &path))?;
    }
    Ok(())
}

/// An exclusive advisory lock, released when dropped (the file is closed).
struct FileLock(#[allow(dead_code)] File);

fn lock_exclusive(path: &Path) -> Result<FileLock, VenvError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_err("open", path))?;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        crate::say_err!(
            "wsgate: waiting for another process that is building {}",
            path.parent().unwrap_or(path).display()
        );
        // SAFETY: as above.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(VenvError::Io {
                action: "lock",
                path: path.to_owned(),
                source: io::Error::last_os_error(),
            });
        }
    }
    Ok(FileLock(file))
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> VenvError {
    let path = path.to_owned();
    move |source| VenvError::Io {
        action,
        path,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_failures_are_recognised() {
        assert!(looks_like_registry_failure(
            "WARNING: Retrying ... NewConnectionError('Failed to establish a new connection')"
        ));
        assert!(looks_like_registry_failure(
            "ERROR: No matching distribution found for jupyter_server==2.21.1"
        ));
        assert!(!looks_like_registry_failure(
            "ERROR: invalid requirement: '=='"
        ));
    }

    #[test]
    fn missing_interpreter_is_a_clear_error() {
        let err = python_version("/nonexistent/python3-wsgate").unwrap_err();
        assert!(matches!(err, VenvError::PythonMissing { .. }));
        assert!(err.to_string().contains(PYTHON_ENV), "{err}");
    }

    #[test]
    fn the_venv_lives_in_the_cache_keyed_by_the_requirements_and_the_python() {
        // Read only: the process environment is not changed (tests run in parallel).
        let dir = venv_dir("Python 3.11.7").expect("HOME is set where the tests run");
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let keyed = format!("{REQUIREMENTS_TXT}\nPython 3.11.7");
        let hash = hex::encode(Sha256::digest(keyed.as_bytes()));
        assert_eq!(name, format!("sim-venv-{}", &hash[..16]));
        assert_ne!(
            dir,
            venv_dir("Python 3.12.1").unwrap(),
            "keyed by the interpreter too"
        );
        assert!(dir.is_absolute(), "{}", dir.display());
        assert!(
            !dir.starts_with(std::env::current_dir().unwrap()),
            "not under the working directory: {}",
            dir.display()
        );
        assert!(REQUIREMENTS_TXT.contains("ipykernel"));
    }
}
