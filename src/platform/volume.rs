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
}

/// Prints, for each path argument (relative to `$HOME`), one line: its index, then
/// `present <sha256> <bytes>`, `missing` or `unreadable`. Paths travel as arguments, never
/// inside the script, so no file name can change what runs.
const SCRIPT: &str = r#"cd "$HOME" || exit 97
i=0
for f in "$@"; do
  if [ ! -e "$f" ]; then echo "$i missing"
  elif h=$(sha256sum < "$f") && n=$(wc -c < "$f"); then echo "$i present ${h%% *} $n"
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
    let name = pod.metadata.name.clone().ok_or(VolumeError::NoContainer)?;
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .ok_or(VolumeError::NoContainer)?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let (names, paths): (Vec<&String>, Vec<&String>) = files.iter().unzip();
    let mut command = vec!["sh", "-c", SCRIPT, "wsgate-files"];
    command.extend(paths.iter().map(|p| p.as_str()));
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
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_string(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_string(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = match attached.take_status() {
            Some(s) => s.await,
            None => None,
        };
        if let Some(st) = status.filter(|s| s.status.as_deref() != Some("Success")) {
            let message = st.message.unwrap_or_default();
            return Err(VolumeError::Failed {
                pod: name.clone(),
                message: format!("{message} {}", err.trim()).trim().to_owned(),
            });
        }
        Ok(out)
    };
    let out = tokio::time::timeout(limit, run)
        .await
        .map_err(|_| VolumeError::Budget {
            budget,
            limit,
            pod: name.clone(),
        })??;
    parse(&out, &names).map_err(|line| VolumeError::Garbled { pod: name, line })
}

/// The script's lines, back to file names; `Err` is the first line that does not parse.
fn parse(out: &str, names: &[&String]) -> Result<BTreeMap<String, FileState>, String> {
    let mut files = BTreeMap::new();
    for line in out.lines() {
        let mut words = line.split(' ');
        let index: Option<usize> = words.next().and_then(|i| i.parse().ok());
        let Some(name) = index.and_then(|i| names.get(i)) else {
            return Err(line.to_owned());
        };
        let state = match (words.next(), words.next(), words.next()) {
            (Some("missing"), None, None) => FileState::Missing,
            (Some("unreadable"), None, None) => FileState::Unreadable {
                reason: "not readable in the container".to_owned(),
            },
            (Some("present"), Some(sha), Some(size))
                if sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                let Ok(size) = size.parse() else {
                    return Err(line.to_owned());
                };
                FileState::Present {
                    sha256: sha.to_owned(),
                    size,
                }
            }
            _ => return Err(line.to_owned()),
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
            "3 missing",
            "x missing",
            "0 present abc 12",
            "0 present {sha} twelve",
            "0 gone",
            "0 missing extra",
        ] {
            let bad = bad.replace("{sha}", &sha);
            assert_eq!(parse(&bad, &names), Err(bad.clone()), "{bad}");
        }
    }
}
