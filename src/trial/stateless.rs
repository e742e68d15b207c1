//! The stateless kind's trial steps (GKE Workspaces' VS Code `codeserver` kind): reach
//! code-server the way `session.connect` says and read its `/healthz`; write a file, the
//! editor's settings and an extension through `pods/exec` before the pause; read them back
//! after the resume and decide `FilesKept` / `FilesLost` ([`crate::verdict::decide_files`]).
//! No kernel and no process expectations: the kind promises only its files.

use std::collections::BTreeMap;

use super::{Trial, TrialError};
use crate::config::Config;
use crate::platform::forward::{self, ForwardError};
use crate::platform::volume::{self, DataDir};
use crate::verdict::{FileState, FilesVerdict, decide_files};

/// The container port of the `codeserver` port id in upstream's kind.
pub const CODE_SERVER_PORT: u16 = 8888;

/// How often `/healthz` is asked again while code-server does not answer.
const RETRY_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// What `/healthz` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeServerHealth {
    /// `alive` or `expired`.
    pub status: String,
    /// Milliseconds since the epoch; 0 before any activity.
    pub last_heartbeat: i64,
    /// How it was reached (pod address or port-forward).
    pub route: String,
}

/// The files written before the pause: name -> (path relative to `$HOME`, checksum read
/// back through exec right after writing).
#[derive(Debug, Clone, Default)]
pub struct EditorFiles {
    pub before: BTreeMap<String, (String, FileState)>,
}

impl Trial {
    async fn running_pod(&self) -> Result<k8s_openapi::api::core::v1::Pod, TrialError> {
        let (ns, name) = (&self.workspace.namespace, &self.workspace.name);
        self.current_pod()
            .await?
            .ok_or_else(|| TrialError::Gone(format!("workspace {ns}/{name} has no running pod")))
    }

    /// Reads code-server's `GET /healthz` in the workspace's pod, within the
    /// `kernel_reachable` budget (the budget for reaching the workspace's server).
    pub async fn code_server_health(&self, cfg: &Config) -> Result<CodeServerHealth, TrialError> {
        let pod = self.running_pod().await?;
        let probe = forward::StatusProbe::code_server();
        let route = forward::route(
            self.client(),
            cfg.session.connect,
            &pod,
            CODE_SERVER_PORT,
            probe,
        )
        .await
        .map_err(|e| match e {
            refused @ ForwardError::Refused { .. } => {
                TrialError::Config(format!("session.connect: {refused}"))
            }
            other => TrialError::Gone(format!("session.connect: {other}")),
        })?;
        let limit = cfg.budgets.kernel_reachable.duration();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(limit)
            .build()
            .map_err(|e| TrialError::Config(format!("cannot build an HTTP client: {e}")))?;
        let url = format!("http://{}/healthz", route.addr());
        let unreachable = |why: String| {
            TrialError::Gone(format!(
                "code-server in pod {} did not answer GET /healthz ({}): {why}",
                pod.metadata.name.as_deref().unwrap_or("?"),
                route.describe_for("code-server")
            ))
        };
        // No readiness probe in the kind: the pod can be Running before code-server
        // listens. Ask again until it answers or the budget runs out.
        let deadline = tokio::time::Instant::now() + limit;
        let answer = loop {
            match http.get(&url).send().await {
                Ok(a) => break a,
                Err(e) if tokio::time::Instant::now() + RETRY_EVERY < deadline => {
                    tracing::debug!(error = %e, "code-server did not answer yet");
                    tokio::time::sleep(RETRY_EVERY).await;
                }
                Err(e) => {
                    return Err(unreachable(format!(
                        "budget `kernel_reachable` ({limit:?}) ran out; last: {}",
                        crate::output::one_line(&e)
                    )));
                }
            }
        };
        let status = answer.status();
        let body: serde_json::Value = answer
            .json()
            .await
            .map_err(|e| unreachable(format!("HTTP {status}, not JSON ({e})")))?;
        let health = body.get("status").and_then(|s| s.as_str());
        let beat = body.get("lastHeartbeat").and_then(|b| b.as_i64());
        match (status.is_success(), health, beat) {
            (true, Some(h @ ("alive" | "expired")), Some(b)) => Ok(CodeServerHealth {
                status: h.to_owned(),
                last_heartbeat: b,
                route: route.describe_for("code-server"),
            }),
            _ => Err(unreachable(format!(
                "HTTP {status} with {body}, not code-server's health document"
            ))),
        }
    }

    /// Writes a file in the home volume, the editor's `User/settings.json` and an extension's
    /// manifest under code-server's data directory, each holding `label` and a fresh random
    /// value (so a file that was there before cannot pass for it), and reads their checksums
    /// back; keeps them as [`Trial::editor`].
    pub async fn write_editor_files(
        &mut self,
        cfg: &Config,
        label: &str,
    ) -> Result<&EditorFiles, TrialError> {
        let pod = self.running_pod().await?;
        let limit = cfg.budgets.cell.duration();
        let data = match volume::code_server_data_dir(self.client(), &pod, "cell", limit).await? {
            DataDir::Inside(rel) => rel,
            DataDir::Outside(abs) => {
                return Err(TrialError::Config(format!(
                    "code-server keeps its settings and extensions in {abs}, outside the \
                     home volume ($XDG_DATA_HOME in the image): a pause does not keep them \
                     there, so the stateless promise does not hold for them; point \
                     XDG_DATA_HOME under /home/jovyan in the WorkspaceKind's extraEnv"
                )));
            }
        };
        let fresh = uuid::Uuid::new_v4().simple().to_string();
        let files = [
            (
                "file",
                format!("wsgate-probe/{label}/notes.md"),
                format!("# wsgate stateless check\nrun {label}\nvalue {fresh}\n"),
            ),
            (
                "settings",
                format!("{data}/User/settings.json"),
                format!(
                    "{{\n  \"editor.fontSize\": 15,\n  \"wsgate.check\": \"{label} {fresh}\"\n}}\n"
                ),
            ),
            (
                "extension",
                format!("{data}/extensions/wsgate.stateless-check-0.0.1/package.json"),
                format!(
                    "{{\"name\": \"stateless-check\", \"publisher\": \"wsgate\", \
                     \"version\": \"0.0.1\", \"description\": \"{label} {fresh}\"}}\n"
                ),
            ),
        ];
        let writes: Vec<(String, String)> = files
            .iter()
            .map(|(_, p, c)| (p.clone(), c.clone()))
            .collect();
        volume::write_files(self.client(), &pod, &writes, "cell", limit).await?;
        let paths: BTreeMap<String, String> = files
            .iter()
            .map(|(n, p, _)| ((*n).to_owned(), p.clone()))
            .collect();
        let read = volume::file_checksums(self.client(), &pod, &paths, "cell", limit).await?;
        let before = paths
            .into_iter()
            .map(|(n, p)| {
                let state = read.get(&n).cloned().unwrap_or(FileState::Missing);
                (n, (p, state))
            })
            .collect();
        Ok(self.editor.insert(EditorFiles { before }))
    }

    /// Removes the written file `name` (`file`, `settings` or `extension`) through exec.
    pub async fn remove_editor_file(&self, cfg: &Config, name: &str) -> Result<String, TrialError> {
        let path = self
            .editor()?
            .before
            .get(name)
            .map(|(p, _)| p.clone())
            .ok_or_else(|| {
                TrialError::Config(format!(
                    "no written file named {name:?} (file, settings, extension)"
                ))
            })?;
        let pod = self.running_pod().await?;
        let limit = cfg.budgets.cell.duration();
        volume::remove_file(self.client(), &pod, &path, "cell", limit).await?;
        Ok(path)
    }

    /// Reads the written files back through exec in the current pod and decides.
    pub async fn files_verdict(&self, cfg: &Config) -> Result<FilesVerdict, TrialError> {
        let written = self.editor()?;
        let paths: BTreeMap<String, String> = written
            .before
            .iter()
            .map(|(n, (p, _))| (n.clone(), p.clone()))
            .collect();
        let pod = self.running_pod().await?;
        let limit = cfg.budgets.cell.duration();
        let read = volume::file_checksums(self.client(), &pod, &paths, "cell", limit)
            .await
            .map_err(|e| crate::output::one_line(&e));
        Ok(decide_files(
            &written.before,
            read.as_ref().map_err(String::as_str),
        ))
    }

    /// The files written before the pause.
    pub fn editor(&self) -> Result<&EditorFiles, TrialError> {
        self.editor.as_ref().ok_or_else(|| {
            TrialError::Config(
                "no files were written yet: add the step that writes the file, settings and \
                 extension through exec first"
                    .into(),
            )
        })
    }
}
