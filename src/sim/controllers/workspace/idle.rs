//! The controller's activity step (kubeflow-workspaces.md §5): gathers the rule inputs
//! (namespace labels, podConfig labels), runs the Jupyter probe when it is due and applies
//! the pure rules of [`super::activity`] to `status.activity`.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::template::{self, Selected};
use super::{WorkspaceController, activity};
use crate::sim::controllers::{Ctx, kind};
use crate::sim::json::{Lookup as _, now_epoch_ms, text_at};
use crate::sim::kinds;

impl WorkspaceController {
    /// §5: probe when due (only while Running), refresh `eligibleAfter`, decide on a pause.
    /// Returns whether to pause and when the next probe is due.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn reconcile_activity(
        &self,
        ctx: &Ctx,
        ws: &Value,
        wsk: &Value,
        image: &Selected<'_>,
        pod_config: &Selected<'_>,
        pod: Option<&Value>,
        status: &mut Value,
    ) -> (bool, Option<Duration>) {
        let scale = |s: i64| Self::scale(ctx, s);
        let Some(cfg) = activity::probe_config(wsk, scale) else {
            return (false, None);
        };
        if status["state"] != json!("Running") {
            return (false, None);
        }
        let now = now_epoch_ms();
        let ns = text_at(ws, "/metadata/namespace");
        let namespace_labels = ctx
            .store
            .find(kind("Namespace"), None, ns)
            .and_then(|n| n.lookup("/metadata/labels").cloned())
            .unwrap_or(json!({}));
        let mut pod_config_labels = serde_json::Map::new();
        for l in pod_config
            .current
            .lookup("/spawner/labels")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            pod_config_labels.insert(text_at(l, "/key").to_string(), json!(text_at(l, "/value")));
        }
        let rules = wsk
            .lookup("/spec/activityRules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let rule = match activity::pause_rule(
            &rules,
            &namespace_labels,
            &Value::Object(pod_config_labels),
            scale,
        ) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(kind = text_at(wsk, "/metadata/name"), error = %e, "activity rules not evaluated");
                return (false, None);
            }
        };
        let last_running = status["lastRunningTime"].as_i64().unwrap_or(0);
        let last_activity = |s: &Value| s["activity"]["lastActivity"].as_i64().unwrap_or(0);
        if let Err(remaining) = activity::probe_due(status["activity"].get("lastProbe"), now, &cfg)
        {
            let d = activity::decide(
                rule.as_ref(),
                last_activity(status),
                last_running,
                now,
                false,
            );
            activity::apply_decision(&mut status["activity"], &d);
            return (false, Some(remaining));
        }
        let result = self.run_probe(ctx, ws, &cfg, image, pod).await;
        result.apply(&mut status["activity"]);
        let d = activity::decide(
            rule.as_ref(),
            last_activity(status),
            last_running,
            now,
            result.succeeded(),
        );
        activity::apply_decision(&mut status["activity"], &d);
        let next = if result.succeeded() {
            cfg.interval
        } else {
            cfg.min_interval
        };
        (d.pause, Some(next))
    }

    async fn run_probe(
        &self,
        ctx: &Ctx,
        ws: &Value,
        cfg: &activity::ProbeConfig,
        image: &Selected<'_>,
        pod: Option<&Value>,
    ) -> activity::ProbeResult {
        use activity::{MSG_EXEC_NOT_CONFIGURED, MSG_JUPYTER_FAILED, MSG_NO_TYPE, ProbeResult};
        let now = now_epoch_ms();
        let reported = pod.map(|p| text_at(p, "/status/podIP")).unwrap_or("");
        let ip = ctx.pods.reachable_ip(reported);
        let ip = ip.as_str();
        if ip.is_empty() {
            return ProbeResult::failed_now(now, activity::MSG_POD_NOT_READY);
        }
        let Some(port_id) = &cfg.jupyter_port else {
            let message = if cfg.has_exec {
                MSG_EXEC_NOT_CONFIGURED
            } else {
                MSG_NO_TYPE
            };
            return ProbeResult::failed_now(now, message);
        };
        let port = image
            .spec()
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| text_at(p, "/id") == port_id)
            .and_then(|p| p.get("port").and_then(Value::as_i64));
        let Some(port) = port else {
            let message = format!("{MSG_JUPYTER_FAILED}port {port_id:?} not found in imageConfig");
            return ProbeResult::failed_now(now, message);
        };
        let http = match self.http() {
            Ok(h) => h,
            Err(e) => {
                let message = format!("{MSG_JUPYTER_FAILED}http prober is not configured: {e}");
                return ProbeResult::failed_now(now, message);
            }
        };
        let ns = text_at(ws, "/metadata/namespace");
        let base = template::connect_path(ns, text_at(ws, "/metadata/name"), port_id);
        let token = jupyter_token(ctx, ns);
        // No lock is held here: the store hands out owned snapshots.
        activity::probe_jupyter(
            http,
            ip,
            port,
            &base,
            token.as_deref(),
            activity::JUPYTER_PROBE_TIMEOUT,
        )
        .await
    }
}

/// The Jupyter token from Secret `jupyter-token` (simulator convention, see
/// [`template::TOKEN_SECRET`]); `None` when Secrets are not served or it does not exist.
fn jupyter_token(ctx: &Ctx, ns: &str) -> Option<String> {
    let secrets = kinds::KINDS.iter().find(|k| k.kind == "Secret")?;
    let secret = ctx.store.find(secrets, Some(ns), template::TOKEN_SECRET)?;
    let key = template::TOKEN_KEY;
    if let Some(b64) = secret
        .lookup(&format!("/data/{key}"))
        .and_then(Value::as_str)
    {
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        return String::from_utf8(bytes).ok();
    }
    secret
        .lookup(&format!("/stringData/{key}"))
        .and_then(Value::as_str)
        .map(str::to_string)
}
