//! The stateless kind's verdict: a VS Code (code-server) workspace promises only that its
//! files, the editor's settings and its extensions survive a pause; no process comes back.
//! Pure: the checksums read before the pause and after the resume in, a [`FilesVerdict`]
//! out.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::FileState;

/// What the stateless check concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilesVerdictKind {
    /// Every file written before the pause was read back with the same checksum and size.
    FilesKept,
    /// At least one is missing, changed or unreadable after the resume.
    FilesLost,
    /// The files could not be read after the resume, or were not there before the pause:
    /// nothing can be concluded; `reason` says why.
    Inconclusive,
}

impl fmt::Display for FilesVerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilesVerdictKind::FilesKept => "FilesKept",
            FilesVerdictKind::FilesLost => "FilesLost",
            FilesVerdictKind::Inconclusive => "Inconclusive",
        })
    }
}

/// One file the check wrote and read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCheck {
    /// What it stands for: `file`, `settings`, `extension`.
    pub name: String,
    /// Its path relative to the home directory.
    pub path: String,
    pub before: FileState,
    /// `None` when nothing could be read after the resume.
    pub after: Option<FileState>,
}

/// The stateless verdict with the lines that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesVerdict {
    pub kind: FilesVerdictKind,
    pub files: Vec<FileCheck>,
    pub decided_by: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl FilesVerdict {
    /// `FilesKept`, `FilesLost (settings)`, `Inconclusive`: the report's verdict column.
    pub fn label(&self) -> String {
        let lost: Vec<&str> = self
            .files
            .iter()
            .filter(|f| changed(&f.before, f.after.as_ref()).is_some())
            .map(|f| f.name.as_str())
            .collect();
        match self.kind {
            FilesVerdictKind::FilesLost if !lost.is_empty() => {
                format!("FilesLost ({})", lost.join(", "))
            }
            kind => kind.to_string(),
        }
    }
}

/// How `after` differs from `before`; `None` when it is the same file.
fn changed(before: &FileState, after: Option<&FileState>) -> Option<String> {
    match (before, after?) {
        (
            FileState::Present { sha256, size },
            FileState::Present {
                sha256: a_sha,
                size: a_size,
            },
        ) if sha256 == a_sha && size == a_size => None,
        (_, FileState::Present { sha256, size }) => Some(format!(
            "changed: now {size} bytes, sha256 {}",
            &sha256[..sha256.len().min(12)]
        )),
        (_, FileState::Missing) => Some("missing".into()),
        (_, FileState::Unreadable { reason }) => Some(format!("unreadable ({reason})")),
    }
}

/// Decides from what was read before the pause (`name -> (path, state)`) and what was read
/// after the resume (`Err` when nothing could be read, with why).
pub fn decide_files(
    before: &BTreeMap<String, (String, FileState)>,
    after: Result<&BTreeMap<String, FileState>, &str>,
) -> FilesVerdict {
    let files: Vec<FileCheck> = before
        .iter()
        .map(|(name, (path, state))| FileCheck {
            name: name.clone(),
            path: path.clone(),
            before: state.clone(),
            after: after.ok().and_then(|a| a.get(name).cloned()),
        })
        .collect();
    let inconclusive = |files: Vec<FileCheck>, reason: String| FilesVerdict {
        kind: FilesVerdictKind::Inconclusive,
        decided_by: vec![reason.clone()],
        files,
        reason: Some(reason),
    };
    if files.is_empty() {
        return inconclusive(files, "no files were written before the pause".into());
    }
    if let Some(f) = files
        .iter()
        .find(|f| !matches!(f.before, FileState::Present { .. }))
    {
        return inconclusive(
            files.clone(),
            format!(
                "{} ({}) was not readable before the pause: nothing to compare",
                f.name, f.path
            ),
        );
    }
    let after = match after {
        Ok(a) => a,
        Err(why) => {
            return inconclusive(
                files,
                format!("the files could not be read after the resume: {why}"),
            );
        }
    };
    if let Some(f) = files.iter().find(|f| !after.contains_key(&f.name)) {
        return inconclusive(
            files.clone(),
            format!("{} ({}) was not read after the resume", f.name, f.path),
        );
    }
    let mut decided_by = Vec::new();
    let mut lost = false;
    for f in &files {
        match changed(&f.before, f.after.as_ref()) {
            Some(how) => {
                lost = true;
                decided_by.push(format!("{} ({}) {how}", f.name, f.path));
            }
            None => decided_by.push(format!("{} ({}) unchanged", f.name, f.path)),
        }
    }
    FilesVerdict {
        kind: if lost {
            FilesVerdictKind::FilesLost
        } else {
            FilesVerdictKind::FilesKept
        },
        files,
        decided_by,
        reason: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn present(sha: char, size: u64) -> FileState {
        FileState::Present {
            sha256: sha.to_string().repeat(64),
            size,
        }
    }

    fn before() -> BTreeMap<String, (String, FileState)> {
        [
            ("file", "wsgate-probe/r1/notes.md", present('a', 10)),
            (
                "settings",
                ".local/share/code-server/User/settings.json",
                present('b', 20),
            ),
        ]
        .into_iter()
        .map(|(n, p, s)| (n.to_string(), (p.to_string(), s)))
        .collect()
    }

    fn after(pairs: &[(&str, FileState)]) -> BTreeMap<String, FileState> {
        pairs
            .iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect()
    }

    #[test]
    fn the_same_files_are_kept_and_any_difference_is_lost_naming_the_file() {
        let kept = decide_files(
            &before(),
            Ok(&after(&[
                ("file", present('a', 10)),
                ("settings", present('b', 20)),
            ])),
        );
        assert_eq!(kept.kind, FilesVerdictKind::FilesKept, "{kept:?}");
        assert_eq!(kept.label(), "FilesKept");
        for (settings, how) in [
            (FileState::Missing, "missing"),
            (present('c', 20), "changed"),
            (present('b', 21), "changed"),
            (
                FileState::Unreadable {
                    reason: "a directory".into(),
                },
                "unreadable",
            ),
        ] {
            let v = decide_files(
                &before(),
                Ok(&after(&[
                    ("file", present('a', 10)),
                    ("settings", settings),
                ])),
            );
            assert_eq!(v.kind, FilesVerdictKind::FilesLost, "{v:?}");
            assert_eq!(v.label(), "FilesLost (settings)");
            assert!(
                v.decided_by
                    .iter()
                    .any(|l| l.starts_with("settings (") && l.contains(how)),
                "{v:?}"
            );
        }
    }

    #[test]
    fn nothing_to_compare_or_nothing_read_is_inconclusive_not_kept() {
        let unread = decide_files(&before(), Err("pods/exec refused"));
        assert_eq!(unread.kind, FilesVerdictKind::Inconclusive);
        assert!(
            unread
                .reason
                .as_deref()
                .unwrap()
                .contains("pods/exec refused")
        );
        let partial = decide_files(&before(), Ok(&after(&[("file", present('a', 10))])));
        assert_eq!(partial.kind, FilesVerdictKind::Inconclusive, "{partial:?}");
        assert_eq!(
            decide_files(&BTreeMap::new(), Ok(&BTreeMap::new())).kind,
            FilesVerdictKind::Inconclusive
        );
        let mut missing_before = before();
        missing_before.get_mut("file").unwrap().1 = FileState::Missing;
        let v = decide_files(
            &missing_before,
            Ok(&after(&[
                ("file", FileState::Missing),
                ("settings", present('b', 20)),
            ])),
        );
        assert_eq!(v.kind, FilesVerdictKind::Inconclusive, "{v:?}");
    }
}
