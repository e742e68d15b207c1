//! State files one command leaves for another (`probe mark` -> `probe check`, `gate prepare`
//! -> `gate verify`): read and checked with one error type, written atomically with mode
//! 0600. A state file may come from another machine, so reading never trusts it.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Which state file: named in every message, with what to run when it is missing.
#[derive(Debug)]
pub struct StateKind {
    /// "gate state", "probe state".
    pub what: &'static str,
    /// The hint for a file that is not there.
    pub when_missing: &'static str,
}

/// Why a state file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// It could not be read.
    #[error("cannot read the {} {path}: {source}{}", kind.what, hint(kind, source))]
    Read {
        kind: &'static StateKind,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// It is not a state file of this kind and version.
    #[error("{path} is not a wsgate {}: {detail}", kind.what)]
    Invalid {
        kind: &'static StateKind,
        path: PathBuf,
        detail: String,
    },
    /// It could not be written.
    #[error("cannot write the {} {path}: {source}", kind.what)]
    Write {
        kind: &'static StateKind,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn hint(kind: &StateKind, e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::NotFound {
        format!(" ({})", kind.when_missing)
    } else {
        String::new()
    }
}

impl StateKind {
    /// The error for a file of this kind that is not what it should be.
    pub fn invalid(&'static self, path: &Path, detail: impl Into<String>) -> StateFileError {
        StateFileError::Invalid {
            kind: self,
            path: path.to_owned(),
            detail: detail.into(),
        }
    }

    /// Reads `path` as JSON, then checks its schema tag against `schema`.
    pub fn read<T: DeserializeOwned>(
        &'static self,
        path: &Path,
        schema: &str,
        schema_of: impl FnOnce(&T) -> &str,
    ) -> Result<T, StateFileError> {
        let text = fs::read_to_string(path).map_err(|source| StateFileError::Read {
            kind: self,
            path: path.to_owned(),
            source,
        })?;
        let state: T =
            serde_json::from_str(&text).map_err(|e| self.invalid(path, e.to_string()))?;
        let found = schema_of(&state);
        if found != schema {
            return Err(self.invalid(path, format!("schema `{found}`, expected `{schema}`")));
        }
        Ok(state)
    }

    /// Writes `value` to `path` (see [`write_private_json`]).
    pub fn write(&'static self, path: &Path, value: &impl Serialize) -> Result<(), StateFileError> {
        write_private_json(path, value).map_err(|source| StateFileError::Write {
            kind: self,
            path: path.to_owned(),
            source,
        })
    }
}

/// Writes `value` as pretty JSON to `path` atomically (a temporary file beside it, synced,
/// then renamed), readable by the owner only (mode 0600). Creates the parent directory.
pub fn write_private_json(path: &Path, value: &impl Serialize) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}
