//! The stateless kind's steps (VS Code, GKE Workspaces' `codeserver` kind): create it,
//! reach code-server, write a file, the settings and an extension through exec, remove one,
//! and the files verdict. The pause, resume
//! and state steps are the workspace steps'.

use cucumber::{given, then};

use crate::bdd::world::{StepResult, WsWorld, said};
use crate::timeline::Mark;

/// code-server needs a server process: the simulator's `none` runtime starts none.
fn require_servers(w: &WsWorld) -> StepResult {
    if w.ctx.simulator && w.ctx.config.sim.runtime.as_str() == "none" {
        return Err("not applicable: the simulator's `none` runtime runs no servers (set sim.runtime = \"jupyter\")".into());
    }
    Ok(())
}

#[given(
    expr = "a VS Code workspace of kind {string} with image {string} and pod option {string} is Running"
)]
async fn vscode_running(
    w: &mut WsWorld,
    kind: String,
    image: String,
    pod_config: String,
) -> StepResult {
    super::workspace::create_running_with(w, kind, image, pod_config).await
}

#[given(expr = "code-server answers on its port")]
async fn code_server_answers_before(w: &mut WsWorld) -> StepResult {
    code_server_answers(w).await
}

#[then(expr = "code-server answers on its port")]
async fn code_server_answers_after(w: &mut WsWorld) -> StepResult {
    code_server_answers(w).await
}

/// Reads `/healthz` and stamps [`Mark::EditorAnswered`] (after a resume, the end of the
/// phase `resume_to_editor`).
async fn code_server_answers(w: &mut WsWorld) -> StepResult {
    require_servers(w)?;
    let ctx = w.ctx.clone();
    let health = w
        .trial()?
        .code_server_health(&ctx.config)
        .await
        .map_err(|e| said(&e))?;
    let detail = format!(
        "{}, last heartbeat {}; {}",
        health.status, health.last_heartbeat, health.route
    );
    w.mark(Mark::EditorAnswered, Some(detail));
    Ok(())
}

#[given(expr = "a file, the editor settings and an extension are written through exec")]
async fn write_files(w: &mut WsWorld) -> StepResult {
    require_servers(w)?;
    let (ctx, label) = (w.ctx.clone(), w.ctx.run_id.clone());
    let written = w
        .trial_mut()?
        .write_editor_files(&ctx.config, &label)
        .await
        .map_err(|e| said(&e))?;
    let lines: Vec<String> = written
        .before
        .iter()
        .map(|(n, (p, _))| format!("wrote {n}: {p}"))
        .collect();
    w.log.extend(lines);
    Ok(())
}

#[given(expr = "the written {string} file is deleted through exec")]
async fn delete_file(w: &mut WsWorld, name: String) -> StepResult {
    let ctx = w.ctx.clone();
    let path = w
        .trial()?
        .remove_editor_file(&ctx.config, &name)
        .await
        .map_err(|e| said(&e))?;
    w.log.push(format!("deleted {name}: {path}"));
    Ok(())
}

#[then(expr = "the files verdict is {string}")]
async fn files_verdict_is(w: &mut WsWorld, expected: String) -> StepResult {
    files_verdict(w, &expected, None).await
}

#[then(expr = "the files verdict is {string} naming {string}")]
async fn files_verdict_naming(w: &mut WsWorld, expected: String, name: String) -> StepResult {
    files_verdict(w, &expected, Some(&name)).await
}

async fn files_verdict(w: &mut WsWorld, expected: &str, naming: Option<&str>) -> StepResult {
    if w.files_verdict.is_none() {
        let ctx = w.ctx.clone();
        let v = w
            .trial()?
            .files_verdict(&ctx.config)
            .await
            .map_err(|e| said(&e))?;
        w.files_verdict = Some(v);
    }
    let v = w.files_verdict.as_ref().ok_or("no files verdict")?;
    let got = v.kind.to_string();
    let named = naming.is_none_or(|n| {
        v.decided_by
            .iter()
            .any(|l| l.starts_with(&format!("{n} (")) && !l.ends_with("unchanged"))
    });
    if got == expected && named {
        return Ok(());
    }
    Err(format!(
        "files verdict {got}, expected {expected}{}{}; decided by: {}",
        naming.map(|n| format!(" naming {n}")).unwrap_or_default(),
        v.reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
        v.decided_by.join("; ")
    ))
}
