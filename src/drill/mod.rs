//! The capacity-contention drill: N paused workspaces resume at the same moment on a pool
//! of M < N compatible GPUs. Per workspace: how long it waited for a GPU, how long until
//! Running, and the verdict (full kernel evidence on a sample; the platform's `PodRestored`
//! on the rest); p50/p95/max over all; at most one restore attempt per workspace at any
//! time; nothing lost. A workspace that is Running and checked is deleted, giving its GPU to
//! the next one, as users finishing their work would.

pub mod stats;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams};
use serde::Serialize;

use crate::config::Config;
use crate::gate::{self, GateError};
use crate::platform::attempts::AttemptWatch;
use crate::platform::crd::{Workspace, WorkspaceState};
use crate::platform::idempotent;
use crate::platform::ledger::Ledger;
use crate::platform::wait::{self, WaitFor};
use crate::platform::workspace::{self as ws, NewWorkspace};
use crate::platform::{gpu, pause, snapshots};
use crate::session::{Evidence, MarkerPlan, Nonce, PlatformEvidence, Secret};
use crate::verdict::{self, VerdictKind};

pub use stats::{Spread, spread};

/// What to drill.
#[derive(Debug, Clone)]
pub struct DrillPlan {
    /// N: workspaces paused, then resumed at once.
    pub workspaces: usize,
    /// M: the GPUs they compete for.
    pub gpus: u32,
    /// How many of them get the full kernel check (marker, model, files).
    pub sample: usize,
    /// Hold the namespace to M GPUs with a ResourceQuota (a cluster, or a larger pool).
    pub quota: bool,
    /// Annotations for the sampled workspaces only (the simulator's runtime switch).
    pub sample_annotations: BTreeMap<String, String>,
    pub run_id: String,
    pub labels: BTreeMap<String, String>,
    pub token: Secret,
}

/// One workspace's drill.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceResult {
    pub name: String,
    pub sampled: bool,
    /// Resume requested -> its new pod bound to a node.
    #[serde(with = "opt_secs")]
    pub waited: Option<Duration>,
    /// Resume requested -> Workspace Running.
    #[serde(with = "opt_secs")]
    pub to_running: Option<Duration>,
    /// Its pod Ready -> `PodRestored` on it (GKE writes the condition after Ready), as the
    /// pod watch saw both; none when either was not seen.
    #[serde(with = "opt_secs")]
    pub ready_to_pod_restored: Option<Duration>,
    /// For a kernel-checked workspace the restore verdict (`Restored` needs the kernel's
    /// evidence); for the others what the platform alone said: [`PLATFORM_RESTORED`] or
    /// [`PLATFORM_NOT_RESTORED`], never `Restored`; or what went wrong.
    pub verdict: String,
    /// The most pods it had alive at once after the resume (restore attempts in flight).
    pub max_attempts: usize,
    /// Empty when it ended Restored; else what happened, in plain words.
    pub problem: Option<String>,
}

/// The verdict of a workspace that was not kernel-checked and whose pod says it was restored
/// from its own snapshot (`PodRestored=True` naming it): the platform's word, not evidence
/// that the process came back.
pub const PLATFORM_RESTORED: &str = "PlatformRestored";
/// The verdict of a workspace that was not kernel-checked and whose pod does not say it was
/// restored from its own snapshot.
pub const PLATFORM_NOT_RESTORED: &str = "PlatformNotRestored";

/// The whole drill.
#[derive(Debug, Clone, Serialize)]
pub struct DrillReport {
    pub workspaces: usize,
    pub gpus: u32,
    pub sample: usize,
    pub results: Vec<WorkspaceResult>,
    pub waited: Option<Spread>,
    pub to_running: Option<Spread>,
    /// Ready -> `PodRestored` over the workspaces that showed both.
    pub ready_to_pod_restored: Option<Spread>,
    /// Resume of all -> the last one checked, in seconds.
    pub wall_s: f64,
}

impl DrillReport {
    /// The workspaces that did not end Restored, with why.
    pub fn problems(&self) -> Vec<String> {
        self.results
            .iter()
            .filter_map(|r| r.problem.as_ref().map(|p| format!("{}: {p}", r.name)))
            .collect()
    }

    /// The per-workspace table and the spread lines.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<22} {:<7} {:>10} {:>10} {:>8}  {}\n",
            "workspace", "sampled", "waited", "to Running", "attempts", "verdict"
        );
        for r in &self.results {
            out.push_str(&format!(
                "{:<22} {:<7} {:>10} {:>10} {:>8}  {}\n",
                r.name,
                if r.sampled { "yes" } else { "no" },
                stats::secs(r.waited),
                stats::secs(r.to_running),
                r.max_attempts,
                r.problem
                    .as_deref()
                    .map_or(r.verdict.clone(), |p| format!("{} ({p})", r.verdict))
            ));
        }
        for (label, s) in [
            ("waited", &self.waited),
            ("to Running", &self.to_running),
            ("Ready -> PodRestored", &self.ready_to_pod_restored),
        ] {
            match s {
                Some(s) => out.push_str(&format!(
                    "{label:<20}  p50 {:.2} s  p95 {:.2} s  max {:.2} s  (n={})\n",
                    s.p50_s, s.p95_s, s.max_s, s.count
                )),
                None => out.push_str(&format!("{label:<20}  not measured\n")),
            }
        }
        out
    }
}

mod opt_secs {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

/// Why the drill could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error("the drill needs fewer GPUs than workspaces (got {gpus} GPUs for {workspaces})")]
    NotContended { workspaces: usize, gpus: u32 },
    #[error("preparing workspace {workspace}: {source}")]
    Prepare {
        workspace: String,
        #[source]
        source: GateError,
    },
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Gpu(#[from] gpu::GpuError),
    #[error("cannot watch the namespace's pods: {0}")]
    Watch(String),
}

/// A paused workspace, ready to resume.
struct Prepared {
    new: NewWorkspace,
    /// The Workspace's uid, from its create: the drill's resume and delete are bound to it.
    uid: String,
    marked: Option<Marked>,
    /// The name of the Ready PodSnapshot it paused into (what `PodRestored` names).
    snapshot_name: Option<String>,
}

struct Marked {
    kernel_id: String,
    nonce: Nonce,
    plan: MarkerPlan,
    before: Evidence,
}

/// Runs the drill. Everything created is recorded in `ledger` (the caller removes it).
pub async fn run(
    client: &kube::Client,
    cfg: &Config,
    plan: &DrillPlan,
    ledger: &mut Ledger,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<DrillReport, DrillError> {
    if plan.gpus as usize >= plan.workspaces {
        return Err(DrillError::NotContended {
            workspaces: plan.workspaces,
            gpus: plan.gpus,
        });
    }
    let ns = cfg.target.namespace.clone();
    ws::put_token(client, ledger, &ns, plan.token.expose(), &plan.labels)
        .await
        .map_err(GateError::from)?;
    if plan.quota {
        gpu::squeeze_with_quota(client, ledger, &ns, &plan.labels, plan.gpus).await?;
        progress(&format!(
            "namespace {ns} held to {} GPU(s) by a ResourceQuota",
            plan.gpus
        ));
    }

    // 1. Create, (for the sample) mark, and pause every workspace, M at a time.
    progress(&format!(
        "preparing {} paused workspaces, {} at a time ({} kernel-checked)",
        plan.workspaces, plan.gpus, plan.sample
    ));
    // Names unique to this drill, not just to the run: two drills of one run (a Scenario
    // Outline's rows) must never share a name, since what the platform tears down after a
    // deleted Workspace (its snapshots, policy and trigger) is found by name.
    let drill_id = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let permits = Arc::new(tokio::sync::Semaphore::new(plan.gpus.max(1) as usize));
    let tasks = (0..plan.workspaces).map(|i| {
        let permits = permits.clone();
        async move {
            let _permit = permits.acquire().await;
            let mut own = Ledger::default();
            let result = prepare_one(client, cfg, plan, drill_id, i, &mut own).await;
            (own, result)
        }
    });
    let mut prepared = Vec::new();
    let mut failure = None;
    for (own, result) in futures::future::join_all(tasks).await {
        ledger.entries.extend(own.entries);
        match result {
            Ok(p) => prepared.push(p),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    progress(&format!("all {} workspaces Paused", prepared.len()));

    // 2. Watch the pods, then resume them all at the same moment.
    let watch = AttemptWatch::start(client, &ns)
        .await
        .map_err(DrillError::Watch)?;
    let started = Instant::now();
    watch.mark_resumed();
    let resumes = prepared
        .iter()
        .map(|p| ws::set_paused(client, &ns, &p.new.name, &p.uid, false));
    for r in futures::future::join_all(resumes).await {
        r.map_err(GateError::from)?;
    }
    progress(&format!(
        "resumed all {} at once on {} GPU(s)",
        prepared.len(),
        plan.gpus
    ));

    // 3. Each one: Running within the drill budget, checked, then deleted to free its GPU.
    let budget = gate::budget(cfg, "drill_resume")?;
    let finish = prepared
        .iter()
        .map(|p| finish_one(client, cfg, p, &watch, started, budget, progress));
    let mut results = futures::future::join_all(finish).await;
    for r in &mut results {
        r.waited = watch.scheduled(&r.name).map(|t| t - started);
        r.max_attempts = watch.max_alive(&r.name);
        if r.max_attempts > 1 && r.problem.is_none() {
            r.problem = Some(format!(
                "{} restore attempts were in flight at once",
                r.max_attempts
            ));
        }
    }
    let waited: Vec<_> = results.iter().map(|r| r.waited).collect();
    let to_running: Vec<_> = results.iter().map(|r| r.to_running).collect();
    let lags: Vec<_> = results.iter().map(|r| r.ready_to_pod_restored).collect();
    Ok(DrillReport {
        workspaces: plan.workspaces,
        gpus: plan.gpus,
        sample: plan.sample,
        waited: spread(&waited),
        to_running: spread(&to_running),
        ready_to_pod_restored: spread(&lags),
        wall_s: started.elapsed().as_secs_f64(),
        results,
    })
}

async fn prepare_one(
    client: &kube::Client,
    cfg: &Config,
    plan: &DrillPlan,
    drill_id: &str,
    i: usize,
    ledger: &mut Ledger,
) -> Result<Prepared, DrillError> {
    let name = format!("wsgate-drill-{drill_id}-{i:03}");
    let sampled = i < plan.sample;
    let new = NewWorkspace {
        namespace: cfg.target.namespace.clone(),
        name: name.clone(),
        kind: cfg.workspace.kind.clone(),
        image_config: cfg.workspace.image_config.clone(),
        pod_config: cfg.workspace.pod_config.clone(),
        home_pvc: format!("{name}-home"),
        home_size: cfg.workspace.home_pvc_size.clone(),
        labels: plan.labels.clone(),
        annotations: if sampled {
            plan.sample_annotations.clone()
        } else {
            BTreeMap::new()
        },
    };
    let err = |source: GateError| DrillError::Prepare {
        workspace: name.clone(),
        source,
    };
    ws::create_home(client, ledger, &new)
        .await
        .map_err(|e| err(e.into()))?;
    let uid = ws::create(client, ledger, &new)
        .await
        .map_err(|e| err(e.into()))?
        .metadata
        .uid
        .ok_or_else(|| {
            err(GateError::Gone(format!(
                "workspace {name} was created without a uid"
            )))
        })?;
    let api: Api<Workspace> = Api::namespaced(client.clone(), &new.namespace);
    wait_state(
        &api,
        cfg,
        &name,
        WorkspaceState::Running,
        "workspace_running",
    )
    .await
    .map_err(err)?;
    let marked = if sampled {
        Some(mark(client, cfg, plan, &new).await.map_err(err)?)
    } else {
        None
    };
    ws::set_paused(client, &new.namespace, &name, &uid, true)
        .await
        .map_err(|e| err(e.into()))?;
    let mut wf = WaitFor::new(
        "pause_to_paused",
        gate::budget(cfg, "pause_to_paused").map_err(err)?,
        "be Paused",
    );
    wf.progress_every = None;
    pause::until_paused(client, &new.namespace, &name, &wf)
        .await
        .map_err(|e| err(e.into()))?;
    let snapshot_name = snapshots::of_workspace(client, &new.namespace, &name)
        .await
        .ok()
        .and_then(|s| {
            s.into_iter()
                .filter(snapshots::is_ready)
                .max_by_key(|s| s.metadata.creation_timestamp.clone())
                .and_then(|s| s.metadata.name)
        });
    Ok(Prepared {
        new,
        uid,
        marked,
        snapshot_name,
    })
}

async fn mark(
    client: &kube::Client,
    cfg: &Config,
    plan: &DrillPlan,
    new: &NewWorkspace,
) -> Result<Marked, GateError> {
    let budgets = gate::session_budgets(cfg)?;
    let jc = gate::jupyter_for(client, cfg, &new.namespace, &new.name, &plan.token).await?;
    let kernel_id = gate::start_kernel(&jc, &budgets).await?;
    let nonce = Nonce::generate();
    let marker = MarkerPlan::new(gate::model(cfg), format!("{}-{}", plan.run_id, new.name));
    let before = crate::session::mark(&jc, &kernel_id, &nonce, &marker, &budgets).await?;
    Ok(Marked {
        kernel_id,
        nonce,
        plan: marker,
        before,
    })
}

async fn wait_state(
    api: &Api<Workspace>,
    cfg: &Config,
    name: &str,
    state: WorkspaceState,
    budget: &str,
) -> Result<(), GateError> {
    let mut wf = WaitFor::new(budget, gate::budget(cfg, budget)?, format!("be {state}"));
    wf.progress_every = None;
    wait::until(api, name, &wf, ws::describe, |o| ws::is_state(o, state)).await?;
    Ok(())
}

async fn finish_one(
    client: &kube::Client,
    cfg: &Config,
    p: &Prepared,
    watch: &AttemptWatch,
    started: Instant,
    budget: Duration,
    progress: &(dyn Fn(&str) + Sync),
) -> WorkspaceResult {
    let name = p.new.name.clone();
    let mut result = WorkspaceResult {
        name: name.clone(),
        sampled: p.marked.is_some(),
        waited: None,
        to_running: None,
        ready_to_pod_restored: None,
        verdict: "-".into(),
        max_attempts: 0,
        problem: None,
    };
    let api: Api<Workspace> = Api::namespaced(client.clone(), &p.new.namespace);
    let mut wf = WaitFor::new("drill_resume", budget, "be Running");
    wf.progress_every = None;
    if let Err(e) = wait::until(&api, &name, &wf, ws::describe, |o| {
        ws::is_state(o, WorkspaceState::Running)
    })
    .await
    {
        result.verdict = "not Running".into();
        result.problem = Some(e.to_string());
        return result;
    }
    result.to_running = Some(started.elapsed());
    match check(client, cfg, p, watch).await {
        Ok(Checked {
            verdict,
            problem,
            ready_to_pod_restored,
        }) => {
            result.verdict = verdict;
            result.problem = problem;
            result.ready_to_pod_restored = ready_to_pod_restored;
        }
        Err(e) => {
            result.verdict = "unchecked".into();
            result.problem = Some(e.to_string());
        }
    }
    progress(&format!(
        "{name}: Running after {:.2} s, {}",
        started.elapsed().as_secs_f64(),
        result.verdict
    ));
    // Give the GPU to the next one. A delete that fails leaves the GPU held, and the
    // others would wait out their budget for it: say so here, where the cause is.
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(p.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match idempotent::delete(&api, &name, &dp).await {
        Ok(_) => {}
        Err(e) => {
            let why = format!("could not delete it to free its GPU: {e}");
            progress(&format!("{name}: {why}"));
            result.problem.get_or_insert(why);
        }
    }
    result
}

/// What [`check`] found about one resumed workspace.
struct Checked {
    verdict: String,
    problem: Option<String>,
    ready_to_pod_restored: Option<Duration>,
}

/// The verdict of one resumed workspace: full evidence for the sample, the platform's
/// restore condition for the rest. With a Ready snapshot to restore from, the condition is
/// waited for within the `pod_restored` budget (GKE writes it after the pod is Ready),
/// counted from the resume or, for a workspace that queued for a GPU, from its binding.
async fn check(
    client: &kube::Client,
    cfg: &Config,
    p: &Prepared,
    watch: &AttemptWatch,
) -> Result<Checked, GateError> {
    let (ns, name) = (&p.new.namespace, &p.new.name);
    let mut lag = None;
    let mut platform = PlatformEvidence {
        observed: true,
        expected_snapshot: p.snapshot_name.clone(),
        ..Default::default()
    };
    if p.snapshot_name.is_some() {
        let limit = gate::budget(cfg, "pod_restored")?;
        let seen = watch.wait_pod_restored(name, limit).await;
        lag = seen.lag();
        platform.pod_restored_budget_s = Some(limit.as_secs_f64().ceil() as u64);
        platform.pod_restored = seen.condition.map(|(c, _)| c);
    }
    let pods = ws::pods(client, ns, name).await?;
    let pod = pods
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_none());
    if let Some(pod) = pod
        && platform.pod_restored_budget_s.is_none()
    {
        platform.pod_restored = snapshots::pod_restored(pod);
    }
    let Some(m) = &p.marked else {
        let restored_from_own = platform.pod_restored.as_ref().is_some_and(|c| {
            c.status == "True"
                && p.snapshot_name.as_ref().is_none_or(|snapshot| {
                    c.message.as_deref().is_some_and(|m| m.contains(snapshot))
                })
        });
        let (verdict, problem) = if restored_from_own {
            (PLATFORM_RESTORED.into(), None)
        } else {
            (
                PLATFORM_NOT_RESTORED.into(),
                Some(match &platform.pod_restored {
                    Some(c) => format!(
                        "PodRestored={} ({})",
                        c.status,
                        c.message.clone().unwrap_or_default()
                    ),
                    None => platform.said().swap_remove(0),
                }),
            )
        };
        return Ok(Checked {
            verdict,
            problem,
            ready_to_pod_restored: lag,
        });
    };
    let budgets = gate::session_budgets(cfg)?;
    let token = gate::read_token(client, ns).await?;
    let jc = gate::jupyter_for(client, cfg, ns, name, &token).await?;
    if let Some(pod) = pod {
        platform.restore_event = snapshots::restore_event(client, pod)
            .await
            .map_err(|source| GateError::Api {
                what: "read the pod's restore event".into(),
                source,
            })?;
    }
    let after = crate::session::collect_evidence(
        &jc,
        &m.kernel_id,
        &m.nonce,
        &m.plan,
        &budgets,
        Some(&m.before),
    )
    .await?;
    let v = verdict::decide(&m.before, &after, &platform);
    if v.false_restore() {
        return Ok(Checked {
            verdict: format!("{} (FALSE RESTORE)", v.kind),
            problem: Some(format!(
                "the platform claimed a restore and the process state was lost: {}",
                v.decided_by.join("; ")
            )),
            ready_to_pod_restored: lag,
        });
    }
    let problem = (v.kind != VerdictKind::Restored).then(|| v.decided_by.join("; "));
    Ok(Checked {
        verdict: v.kind.to_string(),
        problem,
        ready_to_pod_restored: lag,
    })
}
