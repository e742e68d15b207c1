//! The home volume's files as the container sees them, read through `pods/exec` and not
//! through Jupyter: the verdict's third, independent source for the files (beside the
//! kernel's own reading and the Contents API). Kubeflow's notebook images set `HOME`
//! (`/home/jovyan`) and start JupyterLab with `--notebook-dir="${HOME}"` after `cd "${HOME}"`
//! (kubeflow/kubeflow `components/example-notebook-servers/base/Dockerfile`,
//! `jupyter/s6/services.d/jupyterlab/run`), so a kernel's relative paths are relative to
//! `$HOME`; the image is Ubuntu with coreutils, so `sh`, `sha256sum` and `wc` are there.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use tokio::io::AsyncReadExt;

use crate::verdict::FileState;

/// Why the volume could not be read through `pods/exec` (the verdict then rests on the
/// other sources; the reason goes into its notes).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("the pod has no name or no container")]
    NoContainer,
    #[error("pods/exec into pod {pod}: {source}")]
    Exec {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "budget `{budget}` ({limit:?}) ran out reading the files through pods/exec in pod {pod}"
    )]
    Budget {
        budget: &'static str,
        limit: Duration,
        pod: String,
    },
    #[error("pods/exec into pod {pod}: the command failed: {message}")]
    Failed { pod: String, message: String },
    #[error("pods/exec into pod {pod}: cannot read its answer: {line:?}")]
    Garbled { pod: String, line: String },
    /// A path that could leave the home directory (absolute, or with `..`): refused before
    /// anything runs.
    #[error("file {path:?} is not a path inside the home directory")]
    Path { path: String },
}

/// Prints, for each path argument (relative to `$HOME`), one line: its index, then
/// `present <sha256> <bytes>`, `missing`, or `unreadable` (not a regular file, or not
/// readable). Paths travel as arguments, never inside the script, so no file name can
/// change what runs; only regular files are read, so a FIFO or a device cannot hold it.
const SCRIPT: &str = r#"cd "$HOME" || exit 97
command -v sha256sum >/dev/null 2>&1 || { echo "the image has no sha256sum" >&2; exit 98; }
i=0
for f in "$@"; do
  if [ ! -e "$f" ] && [ ! -L "$f" ]; then echo "$i missing"
  elif [ -L "$f" ] || [ ! -f "$f" ]; then echo "$i unreadable"
  elif h=$(sha256sum < "$f") && n=$(wc -c < "$f"); then echo "$i present ${h%% *} $((n))"
  else echo "$i unreadable"
  fi
  i=$((i+1))
done"#;

/// Reads the checksums of `files` (name -> path relative to the kernel's working
/// directory, `$HOME`) in `pod`'s first container, within `limit` (budget `budget`).
pub async fn file_checksums(
    client: &kube::Client,
    pod: &Pod,
    files: &BTreeMap<String, String>,
    budget: &'static str,
    limit: Duration,
) -> Result<BTreeMap<String, FileState>, VolumeError> {
    if let Some(bad) = files.values().find(|p| !inside_home(p)) {
        return Err(VolumeError::Path { path: bad.clone() });
    }
    let (names, paths): (Vec<&String>, Vec<&String>) = files.iter().unzip();
    let args: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    let (name, out) = run_script(client, pod, SCRIPT, &args, budget, limit).await?;
    parse(&out, &names).map_err(|line| VolumeError::Garbled { pod: name, line })
}

/// Writes each `(path, content)` (paths relative to `$HOME`, parent directories made) in
/// `pod`'s first container, within `limit`. Paths and contents travel as arguments.
pub async fn write_files(
    client: &kube::Client,
    pod: &Pod,
    files: &[(String, String)],
    budget: &'static str,
    limit: Duration,
) -> Result<(), VolumeError> {
    if let Some((bad, _)) = files.iter().find(|(p, _)| !inside_home(p)) {
        return Err(VolumeError::Path { path: bad.clone() });
    }
    let args: Vec<&str> = files
        .iter()
        .flat_map(|(p, c)| [p.as_str(), c.as_str()])
        .collect();
    run_script(client, pod, WRITE_SCRIPT, &args, budget, limit)
        .await
        .map(drop)
}

/// Removes the regular file at `path` (relative to `$HOME`) in `pod`'s first container.
pub async fn remove_file(
    client: &kube::Client,
    pod: &Pod,
    path: &str,
    budget: &'static str,
    limit: Duration,
) -> Result<(), VolumeError> {
    if !inside_home(path) {
        return Err(VolumeError::Path { path: path.into() });
    }
    let script = r#"cd "$HOME" || exit 97
[ -f "$1" ] && [ ! -L "$1" ] || { echo "not a regular file: $1" >&2; exit 96; }
rm -f -- "$1""#;
    run_script(client, pod, script, &[path], budget, limit)
        .await
        .map(drop)
}

/// Where code-server keeps its user data (settings, extensions) in `pod`:
/// `${XDG_DATA_HOME:-$HOME/.local/share}/code-server` in the container's environment.
/// `Ok(Inside(path))` relative to `$HOME` when it is on the home volume, `Ok(Outside(abs))`
/// when it is not (a pause does not keep it there).
pub async fn code_server_data_dir(
    client: &kube::Client,
    pod: &Pod,
    budget: &'static str,
    limit: Duration,
) -> Result<DataDir, VolumeError> {
    // Both sides resolved (`pwd -P`: symlinks, `..`, a trailing `/`) before they are
    // compared; a directory that does not exist yet is compared as written.
    let script = r#"home=$(cd "$HOME" && pwd -P) || exit 97
data="${XDG_DATA_HOME:-$HOME/.local/share}/code-server"
real=$(cd "$data" 2>/dev/null && pwd -P) || real="$data"
case "$real" in
  "$home"/*) echo "inside ${real#"$home"/}" ;;
  *) echo "outside $real" ;;
esac"#;
    let (name, out) = run_script(client, pod, script, &[], budget, limit).await?;
    let line = out.trim_end_matches('\n');
    match line.split_once(' ') {
        Some(("inside", rel)) if !line.contains('\n') => match inside_home(rel) {
            true => Ok(DataDir::Inside(rel.to_owned())),
            // `$HOME/../x`, written but not yet there: not on the home volume.
            false => Ok(DataDir::Outside(rel.to_owned())),
        },
        Some(("outside", abs)) if !line.contains('\n') => Ok(DataDir::Outside(abs.to_owned())),
        _ => Err(VolumeError::Garbled {
            pod: name,
            line: out,
        }),
    }
}

/// Where code-server's user data lives, from [`code_server_data_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataDir {
    /// On the home volume, relative to `$HOME`.
    Inside(String),
    /// Elsewhere (absolute).
    Outside(String),
}

/// Writes pairs of arguments: a path relative to `$HOME`, then its content.
const WRITE_SCRIPT: &str = r#"cd "$HOME" || exit 97
while [ "$#" -ge 2 ]; do
  case "$1" in /*|..|../*|*/../*|*/..) echo "refused: $1" >&2; exit 96 ;; esac
  mkdir -p -- "$(dirname -- "$1")" && printf '%s' "$2" > "$1" || exit 95
  shift 2
done"#;

/// Runs `sh -c script wsgate-files args...` in `pod`'s first container within `limit`;
/// returns the pod's name and the script's standard output once it exits with success.
async fn run_script(
    client: &kube::Client,
    pod: &Pod,
    script: &str,
    args: &[&str],
    budget: &'static str,
    limit: Duration,
) -> Result<(String, String), VolumeError> {
    let name = pod.metadata.name.clone().ok_or(VolumeError::NoContainer)?;
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .ok_or(VolumeError::NoContainer)?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut command = vec!["sh", "-c", script, "wsgate-files"];
    command.extend_from_slice(args);
    let run = async {
        let mut attached = api
            .exec(
                &name,
                command,
                &AttachParams::default()
                    .container(container)
                    .stdout(true)
                    .stderr(true),
            )
            .await
            .map_err(|source| VolumeError::Exec {
                pod: name.clone(),
                source,
            })?;
        let mut out = String::new();
        let mut err = String::new();
        let (mut stdout, mut stderr) = (attached.stdout(), attached.stderr());
        let read_out = async {
            match stdout.as_mut() {
                Some(s) => s.read_to_string(&mut out).await.map(drop),
                None => Ok(()),
            }
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_string(&mut err).await;
            }
        };
        let (read, ()) = tokio::join!(read_out, read_err);
        let failed = |message: String| VolumeError::Failed {
            pod: name.clone(),
            message,
        };
        read.map_err(|e| failed(format!("cannot read its output: {e}")))?;
        let status = match attached.take_status() {
            Some(s) => s.await,
            None => None,
        };
        match status {
            Some(st) if st.status.as_deref() == Some("Success") => Ok(out),
            Some(st) => {
                let message = st.message.unwrap_or_default();
                Err(failed(
                    format!("{message} {}", err.trim()).trim().to_owned(),
                ))
            }
            None => Err(failed("the stream ended without a final status".to_owned())),
        }
    };
    let out = tokio::time::timeout(limit, run)
        .await
        .map_err(|_| VolumeError::Budget {
            budget,
            limit,
            pod: name.clone(),
        })??;
    Ok((name, out))
}

/// Whether `path` stays inside the directory it is relative to: not absolute, no `..`.
fn inside_home(path: &str) -> bool {
    !path.is_empty() && !path.starts_with('/') && !path.split('/').any(|part| part == "..")
}

/// The script's lines, back to file names: exactly one line per file, in order; `Err` is
/// the first line that does not fit (or a note of what is missing).
fn parse(out: &str, names: &[&String]) -> Result<BTreeMap<String, FileState>, String> {
    let mut files = BTreeMap::new();
    let lines: Vec<&str> = out.lines().collect();
    if lines.len() != names.len() {
        return Err(format!(
            "{} line(s) for {} file(s): {out:?}",
            lines.len(),
            names.len()
        ));
    }
    for (i, (line, name)) in lines.iter().zip(names).enumerate() {
        let mut words = line.split_whitespace();
        if words.next() != Some(i.to_string().as_str()) {
            return Err((*line).to_owned());
        }
        let state = match (words.next(), words.next(), words.next(), words.next()) {
            (Some("missing"), None, None, None) => FileState::Missing,
            (Some("unreadable"), None, None, None) => FileState::Unreadable {
                reason: "not a regular file readable in the container".to_owned(),
            },
            (Some("present"), Some(sha), Some(size), None)
                if sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                let Ok(size) = size.parse() else {
                    return Err((*line).to_owned());
                };
                FileState::Present {
                    sha256: sha.to_owned(),
                    size,
                }
            }
            _ => return Err((*line).to_owned()),
        };
        files.insert((*name).clone(), state);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_lines_become_file_states_and_anything_else_is_refused() {
        let (a, b, c) = (
            "input".to_owned(),
            "checkpoint".to_owned(),
            "output".to_owned(),
        );
        let names = [&a, &b, &c];
        let sha = "ab".repeat(32);
        let out = format!("0 present {sha} 12\n1 missing\n2 unreadable\n");
        let files = parse(&out, &names).unwrap();
        assert_eq!(
            files["input"],
            FileState::Present {
                sha256: sha.clone(),
                size: 12
            }
        );
        assert_eq!(files["checkpoint"], FileState::Missing);
        assert!(matches!(files["output"], FileState::Unreadable { .. }));
        for bad in [
            "3 missing\n1 missing\n2 missing",
            "x missing\n1 missing\n2 missing",
            "0 present abc 12\n1 missing\n2 missing",
            "0 present {sha} twelve\n1 missing\n2 missing",
            "0 gone\n1 missing\n2 missing",
            "0 missing extra\n1 missing\n2 missing",
            "1 missing\n0 missing\n2 missing",
            "0 missing\n0 missing\n2 missing",
        ] {
            let bad = bad.replace("{sha}", &sha);
            assert!(parse(&bad, &names).is_err(), "{bad}");
        }
        // Short or empty output is not "nothing there".
        assert!(parse("", &names).is_err());
        assert!(parse("0 missing\n1 missing\n", &names).is_err());
    }

    #[test]
    fn only_paths_inside_the_home_directory_are_read() {
        assert!(inside_home("wsgate-probe/r1/input.npy"));
        for bad in ["", "/etc/shadow", "../x", "a/../../b", "a/.."] {
            assert!(!inside_home(bad), "{bad}");
        }
    }
}
