//! The capacity-contention drill: N paused workspaces resume at the same moment on a pool
//! of M < N compatible GPUs. Per workspace: how long it waited for a GPU, how long until
//! Running, and the verdict (full kernel evidence on a sample; the platform's `PodRestored`
//! on the rest); p50/p95/max over all; at most one restore attempt per workspace at any
//! time; nothing lost. A workspace that is Running and checked is deleted, giving its GPU to
//! the next one, as users finishing their work would.

mod page;
pub mod stats;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;

use crate::config::Config;
use crate::platform::attempts::AttemptWatch;
use crate::platform::board::WorkspaceBoard;
use crate::platform::crd::WorkspaceState;
use crate::platform::gpu;
use crate::platform::ledger::Ledger;
use crate::platform::workspace as ws;
use crate::session::Secret;
use crate::trial::{Trial, TrialError, read_token};
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
    /// Whether a kernel-checked workspace was a false restore (the platform claimed a
    /// restore, the process state was lost): the drill then exits 14, as the gate and the
    /// suite do.
    pub fn false_restore(&self) -> bool {
        self.results
            .iter()
            .any(|r| r.verdict.ends_with(FALSE_RESTORE_MARK))
    }

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
        source: TrialError,
    },
    /// Preparing stopped at its first failure: no workspace was started after it.
    #[error(
        "{first} (the drill had started {started} of its {of} workspaces; none was started \
         after this failure)"
    )]
    Stopped {
        first: Box<DrillError>,
        started: usize,
        of: usize,
    },
    #[error(transparent)]
    Trial(#[from] TrialError),
    #[error(transparent)]
    Gpu(#[from] gpu::GpuError),
    #[error("cannot watch the namespace's pods: {0}")]
    Watch(String),
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
        .map_err(TrialError::from)?;
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
    // M at a time, started one by one as others finish (never N futures at once), and no new
    // one after the first failure; those in flight finish, so what they created is recorded.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let stop = &stop;
    let mut tasks = futures::stream::iter(0..plan.workspaces)
        .map(|i| async move {
            let mut own = Ledger::default();
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return (own, None);
            }
            let result = prepare_one(client, cfg, plan, drill_id, i, &mut own).await;
            if result.is_err() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            (own, Some(result))
        })
        .buffer_unordered(plan.gpus.max(1) as usize);
    let mut prepared = Vec::new();
    let mut failure = None;
    // Every task that did not find `stop` set started its workspace.
    let mut started = 0;
    while let Some((own, result)) = tasks.next().await {
        ledger.entries.extend(own.entries);
        started += usize::from(result.is_some());
        match result {
            Some(Ok(p)) => prepared.push(p),
            Some(Err(e)) => failure = failure.or(Some(e)),
            None => {}
        }
    }
    drop(tasks);
    if let Some(e) = failure {
        return Err(DrillError::Stopped {
            first: Box::new(e),
            started,
            of: plan.workspaces,
        });
    }
    // In name order, whatever order they finished in.
    prepared.sort_by(|(a, _), (b, _)| a.workspace.name.cmp(&b.workspace.name));
    progress(&format!("all {} workspaces Paused", prepared.len()));

    // 2. Watch the pods, then resume them all at the same moment.
    let watch = Arc::new(
        AttemptWatch::start(client, &ns, cfg.api.response_timeout.duration())
            .await
            .map_err(DrillError::Watch)?,
    );
    // One Workspace watch for all of them (the run's labels), not one per workspace.
    let selector = plan
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let board = WorkspaceBoard::start(client, &ns, &selector, cfg.api.response_timeout.duration())
        .await
        .map_err(DrillError::Watch)?;
    let started = Instant::now();
    watch.mark_resumed();
    let resumes = prepared
        .iter_mut()
        .map(|(trial, _)| trial.resume_under(watch.clone()));
    for r in futures::future::join_all(resumes).await {
        r?;
    }
    progress(&format!(
        "resumed all {} at once on {} GPU(s)",
        prepared.len(),
        plan.gpus
    ));

    // 3. Each one: Running within the drill budget, checked, then deleted to free its GPU.
    let finish = prepared
        .iter()
        .map(|(trial, sampled)| finish_one(cfg, &board, trial, *sampled, started, progress));
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

/// Creates workspace `i`, waits for it to be Running, marks it when it is in the sample,
/// pauses it and finds the snapshot it paused into. Returns it with whether it is sampled.
async fn prepare_one(
    client: &kube::Client,
    cfg: &Config,
    plan: &DrillPlan,
    drill_id: &str,
    i: usize,
    ledger: &mut Ledger,
) -> Result<(Trial, bool), DrillError> {
    let name = format!("wsgate-drill-{drill_id}-{i:03}");
    let sampled = i < plan.sample;
    let annotations = if sampled {
        plan.sample_annotations.clone()
    } else {
        BTreeMap::new()
    };
    let err = |source: TrialError| DrillError::Prepare {
        workspace: name.clone(),
        source,
    };
    let new = Trial::from_config(cfg, name.clone(), plan.labels.clone(), annotations);
    let mut trial = Trial::create(client, ledger, new).await.map_err(err)?;
    let mut running =
        Trial::wait_for(cfg, "workspace_running", WorkspaceState::Running).map_err(err)?;
    running.progress_every = None;
    trial
        .wait_state(&running, WorkspaceState::Running)
        .await
        .map_err(err)?;
    if sampled {
        let label = format!("{}-{name}", plan.run_id);
        trial.mark(cfg, &plan.token, label).await.map_err(err)?;
    }
    trial.pause().await.map_err(err)?;
    let mut paused =
        Trial::wait_for(cfg, "pause_to_paused", WorkspaceState::Paused).map_err(err)?;
    paused.progress_every = None;
    trial
        .wait_state(&paused, WorkspaceState::Paused)
        .await
        .map_err(err)?;
    // The snapshot the resume should restore from: what `PodRestored` must name.
    trial.find_ready_snapshot().await.map_err(err)?;
    Ok((trial, sampled))
}

/// One resumed workspace: Running within the `drill_resume` budget, checked, then deleted
/// to give its GPU to the next one.
async fn finish_one(
    cfg: &Config,
    board: &WorkspaceBoard,
    trial: &Trial,
    sampled: bool,
    started: Instant,
    progress: &(dyn Fn(&str) + Sync),
) -> WorkspaceResult {
    let name = trial.workspace.name.clone();
    let mut result = WorkspaceResult {
        name: name.clone(),
        sampled,
        waited: None,
        to_running: None,
        ready_to_pod_restored: None,
        verdict: "-".into(),
        max_attempts: 0,
        problem: None,
    };
    let waited = Trial::wait_for(cfg, "drill_resume", WorkspaceState::Running).map(|mut wf| {
        wf.progress_every = None;
        wf
    });
    let running = match waited {
        Ok(wf) => board
            .wait_state(&name, &trial.uid, WorkspaceState::Running, &wf)
            .await
            .map_err(TrialError::from),
        Err(e) => Err(e),
    };
    let seen = match running {
        Ok(Ok(seen)) => seen,
        Ok(Err(uid)) => {
            result.verdict = "not Running".into();
            result.problem = Some(
                TrialError::Replaced {
                    workspace: format!("{}/{name}", trial.workspace.namespace),
                    ours: trial.uid.clone(),
                    theirs: uid,
                }
                .to_string(),
            );
            return result;
        }
        Err(e) => {
            result.verdict = "not Running".into();
            result.problem = Some(e.to_string());
            return result;
        }
    };
    // When the watch saw it Running, not when this task got round to looking.
    result.to_running = Some(seen.instant.saturating_duration_since(started));
    match check(cfg, trial, sampled).await {
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
    if let Err(e) = trial.delete().await {
        let why = format!("could not delete it to free its GPU: {e}");
        progress(&format!("{name}: {why}"));
        result.problem.get_or_insert(why);
    }
    result
}

/// What [`check`] found about one resumed workspace.
struct Checked {
    verdict: String,
    problem: Option<String>,
    ready_to_pod_restored: Option<Duration>,
}

/// How a false restore is written in a kernel-checked workspace's verdict.
const FALSE_RESTORE_MARK: &str = "(FALSE RESTORE)";

/// The verdict of one resumed workspace: the restore verdict for the sample, the
/// platform's restore condition for the rest ([`verdict::platform_restored`]).
async fn check(cfg: &Config, trial: &Trial, sampled: bool) -> Result<Checked, TrialError> {
    let seen = trial.platform_evidence(cfg, sampled).await?;
    let lag = seen.lag;
    let platform = seen.evidence;
    if !sampled {
        let (verdict, problem) = match verdict::platform_restored(&platform) {
            Ok(()) => (PLATFORM_RESTORED.into(), None),
            Err(said) => (PLATFORM_NOT_RESTORED.into(), Some(said)),
        };
        return Ok(Checked {
            verdict,
            problem,
            ready_to_pod_restored: lag,
        });
    }
    let token = read_token(trial.client(), &trial.workspace.namespace).await?;
    let (after, _) = trial.kernel_evidence(cfg, &token).await?;
    let v = trial.decide(&after, &platform)?;
    if v.false_restore() {
        return Ok(Checked {
            verdict: format!("{} {FALSE_RESTORE_MARK}", v.kind),
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
