//! `wsgate sim calibrate`: a simulator profile whose timings are a real cluster's, derived
//! from the JSON reports of runs against it. Pure: reports in, a [`Calibration`] out, and
//! the profile's text from it and a base profile (node pools, storage, faults: everything
//! that is not a timing comes from the base).
//!
//! What each timing is derived from, per passed scenario (the reports hold phases and the
//! kernel's resident memory, nothing else about the platform's inner steps):
//!
//! | profile key | from the report |
//! |---|---|
//! | `pod_start_ms` | `create_to_running` (scheduling, node scale-up, image, sandbox and server start together: the simulator reproduces their sum) |
//! | `termination_ms` | the `PodGone` mark less the `SnapshotReady` mark (both stamped from the watch) |
//! | `checkpoint_fixed_ms`, `checkpoint_mib_per_s` | `pause_to_snapshot_ready` − `pause_to_checkpointing` − the add-on's settle as it waited it (the base's settle from a stamp in whole seconds), against the kernel's resident bytes before the pause: a least-squares line, fixed cost plus bytes over bandwidth |
//! | `restore_ms`, `restore_mib_per_s` | `resume_to_running` − `resume_to_scheduled` − the median pod start, against the same resident bytes: the same fit |
//! | `pod_restored_after_ready_ms` | `ready_to_pod_restored` |
//!
//! Waits for a GPU are not a delay of the profile: they come from capacity, which is the
//! base profile's node pools (the simulator's scheduler makes a pod wait while no GPU is
//! free), so `resume_to_scheduled` is taken out of the restore and `pause_to_gpu_free` is
//! not read. `create_to_running` holds the create's own scheduling too (on a cluster with a
//! free GPU, milliseconds; with a node to scale up, the scale-up), so on such a cluster the
//! pod start comes out longer and the restore shorter by that much.
//!
//! Each becomes a distribution (the observed samples, or quantiles when there are many), so
//! the simulator draws what the cluster did, not one typical number. Only the sum of pod
//! start and restore is seen on a resume; the split rests on the create phase. The settle
//! correction reads the sub-second fraction from the harness's clock, the stamp is the API
//! server's: with clocks apart by more than the watch's lag, the checkpoint's fixed cost is
//! off by up to the settle (at most a second).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::delay::{Delay, Distribution};
use crate::report::fmt::quantile;
use crate::report::{RunReport, ScenarioReport, ScenarioStatus};
use crate::timeline::Mark;

/// A figure is written as its samples up to this many; as quantiles above.
const MAX_SAMPLES: usize = 50;
/// Below this spread of resident sizes (largest over smallest), bytes and fixed cost cannot
/// be told apart: the bandwidth is kept from the base.
const MIN_SIZE_SPREAD: f64 = 1.5;
const MIB: f64 = 1024.0 * 1024.0;
/// The first line of every profile this writes: `--out` overwrites only such a file.
pub const HEADER: &str = "# Written by `wsgate sim calibrate`";

/// Why calibration cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error(
        "{} is a report of a run on the simulator (target {server}), not a real cluster: calibrate from a cluster's reports (--allow-simulated takes it anyway, for tests)",
        path.display()
    )]
    Simulated { path: PathBuf, server: String },
    #[error(
        "the reports come from more than one cluster ({}): calibrate one cluster at a time",
        servers.join("; ")
    )]
    MixedClusters { servers: Vec<String> },
    #[error(
        "the reports mix simulator runs ({}) and cluster runs: calibrate from the cluster's alone",
        simulated.join(", ")
    )]
    MixedKinds { simulated: Vec<String> },
    #[error("{} and {} are the same run ({run_id}): give each report once", first.display(), second.display())]
    Duplicate {
        run_id: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error(
        "{key}: a sample of {ms:.0} ms (in {}) is more than the simulator's longest delay, a day: leave that report out",
        path.display()
    )]
    TooLong {
        key: &'static str,
        ms: f64,
        path: PathBuf,
    },
    #[error(
        "no passed scenario in {reports} report(s) has a phase to calibrate from (a pause and resume scenario, passed, with phases): run the suite's @nightly scenarios against the cluster first"
    )]
    NothingToCalibrate { reports: usize },
    #[error("the base profile cannot be read as TOML: {0}")]
    Base(String),
}

/// Where a calibration's figures come from (no credentials: the server's scheme, host and
/// port only).
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub run_id: String,
    pub server: String,
    /// The API server's `gitVersion` the report recorded (`""` in older reports).
    pub server_version: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub scenarios_used: usize,
}

/// One timing derived from the reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The profile key it sets.
    pub key: &'static str,
    /// What it was computed from.
    pub from: &'static str,
    /// Milliseconds, one per scenario that showed it.
    pub samples_ms: Vec<f64>,
    /// How many runs those scenarios came from.
    pub runs: usize,
}

impl Figure {
    /// The figure `key` from `(ms, run index)` samples.
    fn of(key: &'static str, samples: impl IntoIterator<Item = (f64, usize)>) -> Figure {
        let (samples_ms, runs): (Vec<f64>, std::collections::BTreeSet<usize>) =
            samples.into_iter().unzip();
        Figure {
            key,
            from: from_of(key),
            samples_ms,
            runs: runs.len(),
        }
    }

    /// The samples as a profile delay.
    pub fn delay(&self) -> Delay {
        let mut s = self.samples_ms.clone();
        s.sort_by(f64::total_cmp);
        if s.len() <= MAX_SAMPLES {
            return Delay::Drawn(Distribution::Samples(s));
        }
        let q = (0..=20)
            .map(|i| {
                let p = f64::from(i) / 20.0;
                (p, quantile(&s, p))
            })
            .collect();
        Delay::Drawn(Distribution::Quantiles(q))
    }

    fn sorted(&self) -> Vec<f64> {
        let mut s = self.samples_ms.clone();
        s.sort_by(f64::total_cmp);
        s
    }

    /// The `p` quantile of the samples, in ms.
    pub fn quantile(&self, p: f64) -> f64 {
        quantile(&self.sorted(), p)
    }
}

/// Checkpoint time against resident bytes: `fixed + bytes / bandwidth`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// The fixed cost per checkpoint at the fitted line, in ms.
    pub fixed_ms: f64,
    /// `None` when the sizes were too alike to fit it (the base's is kept).
    pub mib_per_s: Option<f64>,
    /// Root mean square of the residuals, in ms.
    pub rms_error_ms: f64,
    /// How many checkpoints, and the largest size over the smallest.
    pub points: usize,
    pub size_spread: f64,
}

/// What the reports say about the cluster's timings.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub sources: Vec<Source>,
    pub figures: Vec<Figure>,
    /// Checkpoint time against resident bytes; its fixed part is the figure
    /// `checkpoint_fixed_ms`.
    pub checkpoint: Option<Fit>,
    /// Restore time against resident bytes; its fixed part is the figure `restore_ms`.
    pub restore: Option<Fit>,
    /// What could not be derived, and what was kept instead.
    pub notes: Vec<String>,
    pub simulated: bool,
}

/// The knobs of [`calibrate`].
#[derive(Debug, Clone)]
pub struct Options {
    pub allow_simulated: bool,
    /// The base profile's add-on settle (ms): part of pause -> snapshot Ready that is not
    /// the checkpoint.
    pub settle_ms: f64,
    /// The base profile's bandwidths, kept when the sizes cannot fit one (0: none).
    pub base_mib_per_s: f64,
    pub base_restore_mib_per_s: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `a - b` of two phases of `s`, in ms, when both are there and `a >= b`.
fn between(s: &ScenarioReport, a: &str, b: &str) -> Option<f64> {
    let (a, b) = (s.phase(a)?, s.phase(b)?);
    (a >= b).then(|| ms(a - b))
}

fn too_long(key: &'static str, ms: f64, path: &Path) -> Result<(), CalibrateError> {
    if ms > super::delay::MAX_DELAY_MS {
        return Err(CalibrateError::TooLong {
            key,
            ms,
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// `to`'s time less `from`'s on `s`'s timeline (both marks stamped from the watch that saw
/// them), in ms, when both are there in that order.
fn marks_apart(s: &ScenarioReport, from: Mark, to: Mark) -> Option<f64> {
    let (a, b) = (s.timeline.last(from)?, s.timeline.last(to)?);
    (b.offset >= a.offset).then(|| ms(b.offset - a.offset))
}

/// How long the add-on waited out its settle in `s`'s pause: it counts from the pause's
/// `checkpoint-started-at` stamp, which is in whole seconds (upstream `webhook.go` formats
/// RFC 3339), so the wait is the settle less the fraction of a second the stamp dropped;
/// the Checkpointing mark's own time gives that fraction. Without the mark: the whole settle.
fn settle_waited(s: &ScenarioReport, settle_ms: f64) -> f64 {
    use chrono::Timelike;
    let dropped = s
        .timeline
        .last(Mark::Checkpointing)
        .map(|o| f64::from(o.at.nanosecond() % 1_000_000_000) / 1e6)
        .unwrap_or(0.0);
    (settle_ms - dropped).max(0.0)
}

/// The server URL with nothing but scheme, host and port.
fn bare_server(server: &str) -> String {
    match reqwest::Url::parse(server) {
        Ok(u) => format!(
            "{}://{}{}",
            u.scheme(),
            u.host_str().unwrap_or(""),
            u.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Err(_) => "(not a URL)".to_string(),
    }
}

/// Derives the timings from `reports` (each with the path it was read from).
pub fn calibrate(
    reports: &[(PathBuf, RunReport)],
    opts: &Options,
) -> Result<Calibration, CalibrateError> {
    check_sources(reports, opts)?;
    // (profile key, run index, ms), one per scenario that shows it.
    let mut seen: Vec<(&'static str, usize, f64)> = Vec::new();
    let mut checkpoints: Vec<(f64, f64, usize)> = Vec::new();
    // (resident bytes when known, resume -> Running less resume -> scheduled, run index).
    let mut resumes: Vec<(Option<f64>, f64, usize)> = Vec::new();
    let mut sources = Vec::new();
    for (run, (_, r)) in reports.iter().enumerate() {
        let mut used = 0;
        for s in r
            .scenarios
            .iter()
            .filter(|s| s.status == ScenarioStatus::Passed)
        {
            let before = seen.len() + checkpoints.len() + resumes.len();
            let derived = [
                ("pod_start_ms", s.phase("create_to_running").map(ms)),
                (
                    "termination_ms",
                    marks_apart(s, Mark::SnapshotReady, Mark::PodGone),
                ),
                (
                    "pod_restored_after_ready_ms",
                    s.phase("ready_to_pod_restored").map(ms),
                ),
            ];
            for (key, v) in derived {
                if let Some(v) = v.filter(|v| v.is_finite() && *v >= 0.0) {
                    too_long(key, v, &reports[run].0)?;
                    seen.push((key, run, v));
                }
            }
            let checkpoint = between(s, "pause_to_snapshot_ready", "pause_to_checkpointing")
                .map(|t| (t - settle_waited(s, opts.settle_ms)).max(0.0));
            let bytes = s
                .evidence_before
                .as_ref()
                .and_then(|e| e.kernel.as_ref())
                .and_then(|k| k.resident_bytes);
            if let (Some(t), Some(b)) = (checkpoint, bytes) {
                too_long("checkpoint_fixed_ms", t, &reports[run].0)?;
                checkpoints.push((b as f64, t, run));
            }
            if let Some(resume) = between(s, "resume_to_running", "resume_to_scheduled") {
                too_long("restore_ms", resume, &reports[run].0)?;
                resumes.push((bytes.map(|b| b as f64), resume, run));
            }
            used += usize::from(seen.len() + checkpoints.len() + resumes.len() > before);
        }
        sources.push(Source {
            run_id: r.run_id.clone(),
            server: bare_server(&r.target.server),
            server_version: r.target.server_version.clone(),
            started_at: r.started_at,
            scenarios_used: used,
        });
    }
    let mut per_key: BTreeMap<&'static str, Vec<(f64, usize)>> = BTreeMap::new();
    for (key, run, v) in seen {
        per_key.entry(key).or_default().push((v, run));
    }
    let mut notes = Vec::new();
    let versions: std::collections::BTreeSet<&str> = sources
        .iter()
        .map(|s| s.server_version.as_str())
        .filter(|v| !v.is_empty())
        .collect();
    if versions.len() > 1 {
        notes.push(format!(
            "the reports come from {} server versions ({}): an upgrade between them may change the timings; calibrate from one version's reports to keep them apart",
            versions.len(),
            versions.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut figures: Vec<Figure> = per_key
        .into_iter()
        .map(|(key, samples)| Figure::of(key, samples))
        .collect();
    let pod_start_median = figures
        .iter()
        .find(|f| f.key == "pod_start_ms")
        .map(|f| f.quantile(0.5));
    let mut restore = None;
    match pod_start_median {
        Some(start) if !resumes.is_empty() => {
            let clamped = resumes.iter().filter(|(_, r, _)| *r < start).count();
            if clamped > 0 {
                notes.push(format!(
                    "{clamped} resume(s) were quicker than the median pod start ({start:.0} ms): their restore is taken as 0"
                ));
            }
            let points: Vec<(Option<f64>, f64, usize)> = resumes
                .iter()
                .map(|(b, r, run)| (*b, (r - start).max(0.0), *run))
                .collect();
            let sized: Option<Vec<(f64, f64, usize)>> = points
                .iter()
                .map(|(b, t, run)| b.map(|b| (b, *t, *run)))
                .collect();
            match sized {
                Some(sized) => {
                    let (fit, figure) = fit_bytes(
                        &sized,
                        "restore_ms",
                        opts.base_restore_mib_per_s,
                        &mut notes,
                    );
                    restore = Some(fit);
                    figures.push(figure);
                }
                None => {
                    notes.push(
                        "restore_mib_per_s is kept from the base: some resumes have no resident size (no kernel evidence)"
                            .to_string(),
                    );
                    figures.push(Figure::of(
                        "restore_ms",
                        points.iter().map(|(_, t, run)| (*t, *run)),
                    ));
                }
            }
        }
        _ if !resumes.is_empty() => notes.push(
            "restore_ms is kept from the base: no create phase tells pod start from restore"
                .to_string(),
        ),
        _ => {}
    }
    let checkpoint = (!checkpoints.is_empty()).then(|| {
        let (fit, figure) = fit_bytes(
            &checkpoints,
            "checkpoint_fixed_ms",
            opts.base_mib_per_s,
            &mut notes,
        );
        figures.push(figure);
        fit
    });
    if figures.is_empty() && checkpoint.is_none() {
        return Err(CalibrateError::NothingToCalibrate {
            reports: reports.len(),
        });
    }
    for key in KEYS {
        if !figures.iter().any(|f| f.key == *key) {
            notes.push(format!(
                "{key} is kept from the base: no passed scenario shows it"
            ));
        }
    }
    Ok(Calibration {
        sources,
        figures,
        checkpoint,
        restore,
        notes,
        simulated: reports
            .first()
            .is_some_and(|(_, r)| r.target.is_simulator()),
    })
}

/// The profile keys calibration sets.
const KEYS: &[&str] = &[
    "pod_start_ms",
    "termination_ms",
    "checkpoint_fixed_ms",
    "restore_ms",
    "pod_restored_after_ready_ms",
];

fn from_of(key: &str) -> &'static str {
    match key {
        "pod_start_ms" => "create_to_running",
        "termination_ms" => "the pod gone, less the snapshot Ready (both as the watch saw them)",
        "pod_restored_after_ready_ms" => "ready_to_pod_restored",
        "restore_ms" => "resume_to_running - resume_to_scheduled - median pod start",
        _ => "pause_to_snapshot_ready - pause_to_checkpointing - add-on settle",
    }
}

fn check_sources(reports: &[(PathBuf, RunReport)], opts: &Options) -> Result<(), CalibrateError> {
    let sim = reports
        .iter()
        .filter(|(_, r)| r.target.is_simulator())
        .count();
    if sim > 0 && sim < reports.len() {
        return Err(CalibrateError::MixedKinds {
            simulated: reports
                .iter()
                .filter(|(_, r)| r.target.is_simulator())
                .map(|(p, _)| p.display().to_string())
                .collect(),
        });
    }
    for (i, (path, r)) in reports.iter().enumerate() {
        if let Some((first, _)) = reports[..i].iter().find(|(_, o)| o.run_id == r.run_id) {
            return Err(CalibrateError::Duplicate {
                run_id: r.run_id.clone(),
                first: first.clone(),
                second: path.clone(),
            });
        }
    }
    if let Some((path, r)) = reports
        .iter()
        .find(|(_, r)| r.target.is_simulator())
        .filter(|_| !opts.allow_simulated)
    {
        return Err(CalibrateError::Simulated {
            path: path.clone(),
            server: bare_server(&r.target.server),
        });
    }
    // A simulator listens on a new port each run; a cluster keeps its server.
    if sim == 0 {
        let mut servers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (path, r) in reports {
            servers
                .entry(bare_server(&r.target.server))
                .or_default()
                .push(path.display().to_string());
        }
        if servers.len() > 1 {
            return Err(CalibrateError::MixedClusters {
                servers: servers
                    .into_iter()
                    .map(|(server, paths)| format!("{server}: {}", paths.join(", ")))
                    .collect(),
            });
        }
    }
    Ok(())
}

/// The least-squares line through `(bytes, ms)`; `None` when the sizes are too alike.
fn line(points: &[(f64, f64, usize)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let (min, max) = points
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    if points.len() < 3 || min <= 0.0 || max / min < MIN_SIZE_SPREAD {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    Some((my - slope * mx, slope))
}

/// Fits `(bytes, ms)` as `fixed + bytes / bandwidth` for the figure `key` (its fixed part,
/// one sample per point). Sizes too alike, or time not growing with size, keep the base's
/// bandwidth (`base_mib_per_s`, 0 for none) and say so in `notes`.
fn fit_bytes(
    points: &[(f64, f64, usize)],
    key: &'static str,
    base_mib_per_s: f64,
    notes: &mut Vec<String>,
) -> (Fit, Figure) {
    let (lo, hi) = points
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let spread = if lo > 0.0 { hi / lo } else { f64::INFINITY };
    // ms per byte.
    // A bandwidth under 1 MiB/s is no profile's (and no cluster's): not a fit.
    let fitted = line(points).filter(|(_, slope)| *slope > 0.0 && 1000.0 / (slope * MIB) >= 1.0);
    let per_byte = match fitted {
        Some((_, slope)) => slope,
        None => {
            notes.push(format!(
                "{} is kept from the base ({}): {} point(s) with sizes {:.2}x apart cannot tell bytes from fixed cost (needs 3 or more, {MIN_SIZE_SPREAD}x apart, and time growing with size at 1 MiB/s or more)",
                bandwidth_key(key),
                if base_mib_per_s > 0.0 { format!("{base_mib_per_s:.0} MiB/s") } else { "no per-byte part".to_string() },
                points.len(),
                spread
            ));
            if base_mib_per_s > 0.0 {
                1000.0 / (base_mib_per_s * MIB)
            } else {
                0.0
            }
        }
    };
    let figure = Figure::of(
        key,
        points
            .iter()
            .map(|(b, t, run)| ((t - b * per_byte).max(0.0), *run)),
    );
    let fixed_ms = figure.samples_ms.iter().sum::<f64>() / points.len() as f64;
    let rms = (points
        .iter()
        .map(|(b, t, _)| (t - (fixed_ms + b * per_byte)).powi(2))
        .sum::<f64>()
        / points.len() as f64)
        .sqrt();
    (
        Fit {
            fixed_ms,
            mib_per_s: fitted.map(|(_, slope)| 1000.0 / (slope * MIB)),
            rms_error_ms: rms,
            points: points.len(),
            size_spread: spread,
        },
        figure,
    )
}

/// The profile key of the bandwidth that goes with the fixed part `key`.
fn bandwidth_key(key: &str) -> &'static str {
    if key == "restore_ms" {
        "restore_mib_per_s"
    } else {
        "checkpoint_mib_per_s"
    }
}

impl Calibration {
    /// The profile's text: `base` (a profile's TOML) with its timings replaced by the
    /// calibrated ones and a `[calibration]` table naming the sources.
    pub fn profile(&self, base: &str, base_name: &str) -> Result<String, CalibrateError> {
        let mut doc: toml::Table =
            toml::from_str(base).map_err(|e| CalibrateError::Base(e.to_string()))?;
        let timing = doc
            .entry("timing")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let timing = timing
            .as_table_mut()
            .ok_or_else(|| CalibrateError::Base("`timing` is not a table".into()))?;
        let value = |d: &Delay| toml::Value::try_from(d).expect("a delay serializes");
        for f in self.figures.iter() {
            timing.insert(f.key.to_string(), value(&f.delay()));
        }
        for (key, fit) in [
            ("checkpoint_mib_per_s", &self.checkpoint),
            ("restore_mib_per_s", &self.restore),
        ] {
            if let Some(bw) = fit.as_ref().and_then(|c| c.mib_per_s) {
                timing.insert(key.into(), toml::Value::Float(significant(bw)));
            }
        }
        if self.restore.is_none() && self.figures.iter().any(|f| f.key == "restore_ms") {
            // The restore samples hold their bytes' part: no per-byte part on top of them.
            timing.insert("restore_mib_per_s".into(), toml::Value::Float(0.0));
        }
        if self.checkpoint.is_some() {
            // The fitted fixed cost already holds the cluster's shortest checkpoints.
            timing.insert("checkpoint_min_ms".into(), toml::Value::Integer(0));
        }
        doc.insert(
            "calibration".into(),
            toml::Value::Table(self.record(base_name)),
        );
        let body = toml::to_string(&doc).map_err(|e| CalibrateError::Base(e.to_string()))?;
        Ok(format!(
            "{HEADER} from {} report(s){}; every [timing] key it set rests on the counts under\n# [calibration.figures]. Everything else is from the base profile, {base_name}.\n\n{body}",
            self.sources.len(),
            if self.simulated {
                " of SIMULATOR runs (--allow-simulated)"
            } else {
                ""
            }
        ))
    }

    fn record(&self, base_name: &str) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("base".into(), base_name.into());
        t.insert("simulated".into(), self.simulated.into());
        let sources: Vec<toml::Value> = self
            .sources
            .iter()
            .map(|s| {
                let mut e = toml::Table::new();
                e.insert("run_id".into(), s.run_id.clone().into());
                e.insert("server".into(), s.server.clone().into());
                if !s.server_version.is_empty() {
                    e.insert("server_version".into(), s.server_version.clone().into());
                }
                e.insert("started_at".into(), s.started_at.to_rfc3339().into());
                e.insert("scenarios_used".into(), (s.scenarios_used as i64).into());
                toml::Value::Table(e)
            })
            .collect();
        t.insert("sources".into(), toml::Value::Array(sources));
        let mut figures = toml::Table::new();
        for f in self.figures.iter() {
            let mut e = toml::Table::new();
            e.insert("from".into(), f.from.into());
            e.insert("samples".into(), (f.samples_ms.len() as i64).into());
            e.insert("runs".into(), (f.runs as i64).into());
            figures.insert(f.key.into(), toml::Value::Table(e));
        }
        t.insert("figures".into(), toml::Value::Table(figures));
        for (name, fit) in [
            ("checkpoint_fit", &self.checkpoint),
            ("restore_fit", &self.restore),
        ] {
            let Some(c) = fit else { continue };
            let mut e = toml::Table::new();
            e.insert(
                "fixed_ms".into(),
                ((c.fixed_ms * 10.0).round() / 10.0).into(),
            );
            if let Some(bw) = c.mib_per_s {
                e.insert("mib_per_s".into(), ((bw * 10.0).round() / 10.0).into());
            }
            e.insert(
                "rms_error_ms".into(),
                ((c.rms_error_ms * 10.0).round() / 10.0).into(),
            );
            e.insert("points".into(), (c.points as i64).into());
            t.insert(name.into(), toml::Value::Table(e));
        }
        if !self.notes.is_empty() {
            let notes: Vec<toml::Value> = self.notes.iter().map(|n| n.clone().into()).collect();
            t.insert("notes".into(), toml::Value::Array(notes));
        }
        t
    }

    /// What was derived, for the terminal: one line per timing, the fit, the notes.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let runs = self.sources.len();
        out.push_str(&format!(
            "calibrated from {runs} report(s): {}\n",
            self.sources
                .iter()
                .map(|s| format!("{} ({} scenarios)", s.run_id, s.scenarios_used))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!(
            "{:<30} {:>7} {:>5} {:>10} {:>10} {:>10}  from\n",
            "timing", "samples", "runs", "p10 ms", "p50 ms", "p90 ms"
        ));
        for f in self.figures.iter() {
            out.push_str(&format!(
                "{:<30} {:>7} {:>5} {:>10.0} {:>10.0} {:>10.0}  {}\n",
                f.key,
                f.samples_ms.len(),
                f.runs,
                f.quantile(0.1),
                f.quantile(0.5),
                f.quantile(0.9),
                f.from
            ));
        }
        for (what, fit) in [("checkpoint", &self.checkpoint), ("restore", &self.restore)] {
            let Some(c) = fit else { continue };
            out.push_str(&format!(
                "{what} = {:.0} ms + resident bytes / {}: rms error {:.0} ms over {} point(s), sizes {:.2}x apart\n",
                c.fixed_ms,
                c.mib_per_s
                    .map(|b| format!("{b:.1} MiB/s (fitted)"))
                    .unwrap_or_else(|| "the base's bandwidth (if any)".to_string()),
                c.rms_error_ms,
                c.points,
                c.size_spread
            ));
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

/// `x` to four significant figures (a bandwidth as a profile says it).
fn significant(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(3 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// Whether `path` may be written: it does not exist, or this command wrote it.
pub fn may_overwrite(path: &Path) -> bool {
    // A path that cannot exist (under a file) is for the write to refuse, with its reason.
    !path.exists() || std::fs::read_to_string(path).is_ok_and(|t| t.starts_with(HEADER))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{TargetInfo, TargetKind};
    use crate::timeline::{Mark, Observation, PhaseDuration, Timeline};

    const GIB: f64 = 1024.0 * MIB;

    /// A cluster's passed pause/resume scenario with these timings (ms), the kernel holding
    /// `bytes` before the pause, and the held pause seen `frac_ms` into its second.
    struct Known {
        pod_start: f64,
        termination: f64,
        checkpoint_fixed: f64,
        mib_per_s: f64,
        restore: f64,
        /// `f64::INFINITY`: no per-byte part.
        restore_mib_per_s: f64,
        restored_lag: f64,
        settle: f64,
    }

    fn scenario(k: &Known, bytes: f64, frac_ms: u32, jitter: f64) -> ScenarioReport {
        let checkpoint = k.checkpoint_fixed + bytes / MIB / k.mib_per_s * 1000.0 + jitter;
        let settle_waited = (k.settle - f64::from(frac_ms)).max(0.0);
        let to_checkpointing = 5.0;
        let to_ready = to_checkpointing + settle_waited + checkpoint;
        let scheduled = 20.0;
        let phases = [
            ("create_to_running", k.pod_start + jitter),
            ("pause_to_checkpointing", to_checkpointing),
            ("pause_to_snapshot_ready", to_ready),
            ("pause_to_gpu_free", to_ready + k.termination + jitter),
            ("resume_to_scheduled", scheduled),
            (
                "resume_to_running",
                scheduled
                    + k.pod_start
                    + k.restore
                    + bytes / MIB / k.restore_mib_per_s * 1000.0
                    + jitter,
            ),
            ("ready_to_pod_restored", k.restored_lag + jitter),
        ];
        let mut s = ScenarioReport::new("pause", "resume");
        s.status = ScenarioStatus::Passed;
        s.phases = phases
            .iter()
            .map(|(n, v)| PhaseDuration {
                name: n.to_string(),
                duration: Duration::from_secs_f64(v / 1000.0),
            })
            .collect();
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-01T02:00:07Z")
            .unwrap()
            .with_timezone(&chrono::Utc)
            + chrono::Duration::milliseconds(i64::from(frac_ms));
        let mark = |mark, after_ms: f64| Observation {
            mark,
            at: at + chrono::Duration::microseconds((after_ms * 1000.0) as i64),
            offset: Duration::from_secs_f64(after_ms / 1000.0),
            detail: None,
        };
        let ready = to_ready - to_checkpointing;
        s.timeline = Timeline {
            started_at: Some(at),
            observations: vec![
                mark(Mark::Checkpointing, 0.0),
                mark(Mark::SnapshotReady, ready),
                mark(Mark::PodGone, ready + k.termination + jitter),
            ],
        };
        s.evidence_before = Some(
            serde_json::from_value(serde_json::json!({
                "phase": "before_pause", "collected_at": at, "kernel_id": "k",
                "kernel_listed": true, "files_via_server": null, "disk_scan": null,
                "recovery": null, "notes": [],
                "kernel": {"kernel_id": "k", "kernel_id_in_process": "k",
                    "marker": {"state": "present", "digest": "d"}, "pid": 7,
                    "process_start": null, "hostname": null, "execution_count": 1,
                    "model": null, "gpu_memory_allocated": null,
                    "resident_bytes": bytes as u64, "ticker": null, "files": {}}
            }))
            .unwrap(),
        );
        s
    }

    fn run(
        id: &str,
        kind: TargetKind,
        server: &str,
        scenarios: Vec<ScenarioReport>,
    ) -> (PathBuf, RunReport) {
        let mut r = RunReport::new(
            id,
            chrono::Utc::now(),
            TargetInfo {
                kind,
                server: server.into(),
                namespace: "ns".into(),
                ..Default::default()
            },
        );
        r.scenarios = scenarios;
        (PathBuf::from(format!("{id}.json")), r)
    }

    fn options() -> Options {
        Options {
            allow_simulated: false,
            settle_ms: 3000.0,
            base_mib_per_s: 2048.0,
            base_restore_mib_per_s: 0.0,
        }
    }

    fn figure<'a>(c: &'a Calibration, key: &str) -> &'a Figure {
        c.figures
            .iter()
            .find(|f| f.key == key)
            .unwrap_or_else(|| panic!("no {key}"))
    }

    fn within_10_percent(got: f64, want: f64, what: &str) {
        assert!(
            (got - want).abs() <= want.abs() * 0.10,
            "{what}: calibrated {got:.1}, known {want:.1}"
        );
    }

    /// Reports made with known timings (sizes from 2 to 12 GiB, stamps at every fraction of
    /// a second, a little noise) give those timings back within 10%, the bandwidth fitted.
    #[test]
    fn known_timings_are_recovered_within_ten_percent() {
        let k = Known {
            pod_start: 41_000.0,
            termination: 1_800.0,
            checkpoint_fixed: 9_000.0,
            mib_per_s: 70.0,
            restore: 11_500.0,
            restore_mib_per_s: 600.0,
            restored_lag: 17_000.0,
            settle: 3_000.0,
        };
        let mut scenarios = Vec::new();
        for i in 0..12u32 {
            let bytes = (2.0 + f64::from(i % 6) * 2.0) * GIB;
            let jitter = f64::from(i % 5) * 40.0 - 80.0;
            scenarios.push(scenario(&k, bytes, (i * 173) % 1000, jitter));
        }
        let (a, b) = scenarios.split_at(6);
        let reports = vec![
            run(
                "r1",
                TargetKind::Cluster,
                "https://user:pw@gke.example:443/?t=1",
                a.to_vec(),
            ),
            run(
                "r2",
                TargetKind::Cluster,
                "https://gke.example:443",
                b.to_vec(),
            ),
        ];
        let c = calibrate(&reports, &options()).unwrap();
        within_10_percent(
            figure(&c, "pod_start_ms").quantile(0.5),
            k.pod_start,
            "pod start",
        );
        within_10_percent(
            figure(&c, "termination_ms").quantile(0.5),
            k.termination,
            "termination",
        );
        within_10_percent(figure(&c, "restore_ms").quantile(0.5), k.restore, "restore");
        within_10_percent(
            figure(&c, "pod_restored_after_ready_ms").quantile(0.5),
            k.restored_lag,
            "PodRestored lag",
        );
        let fit = c.checkpoint.as_ref().unwrap();
        within_10_percent(fit.mib_per_s.unwrap(), k.mib_per_s, "checkpoint bandwidth");
        within_10_percent(fit.fixed_ms, k.checkpoint_fixed, "checkpoint fixed cost");
        assert!(fit.rms_error_ms < 100.0, "{fit:?}");
        let fit = c.restore.as_ref().unwrap();
        within_10_percent(
            fit.mib_per_s.unwrap(),
            k.restore_mib_per_s,
            "restore bandwidth",
        );
        within_10_percent(fit.fixed_ms, k.restore, "restore fixed part");
        assert_eq!(figure(&c, "pod_start_ms").samples_ms.len(), 12);
        assert_eq!(figure(&c, "pod_start_ms").runs, 2);
        // The sources carry no credentials: scheme, host and port only.
        assert!(
            c.sources.iter().all(|s| s.server == "https://gke.example"),
            "{:?}",
            c.sources
        );
        assert_eq!(c.sources[0].scenarios_used, 6);

        // The profile it writes loads, draws what the cluster did, and names its sources.
        let text = c
            .profile(crate::sim::profile::DEFAULT_PROFILE, "default (shipped)")
            .unwrap();
        assert!(text.starts_with(HEADER), "{text}");
        assert!(!text.contains("pw") && !text.contains("t=1"), "{text}");
        let p = crate::sim::profile::SimProfile::parse("calibrated", &text).unwrap();
        assert!(p.timing.pod_start_ms.is_drawn());
        within_10_percent(
            p.timing.restore_ms.median().as_secs_f64() * 1000.0,
            k.restore,
            "the profile's restore",
        );
        within_10_percent(
            p.timing.checkpoint_mib_per_s,
            k.mib_per_s,
            "the profile's bandwidth",
        );
        within_10_percent(
            p.timing.restore_mib_per_s,
            k.restore_mib_per_s,
            "the profile's restore bandwidth",
        );
        assert_eq!(p.timing.checkpoint_min_ms, 0);
        assert_eq!(p.node_pools.len(), 2, "node pools from the base");
        let cal = p.calibration.as_ref().unwrap();
        assert_eq!(cal["sources"].as_array().unwrap().len(), 2);
        assert_eq!(
            cal["figures"]["restore_ms"]["samples"].as_integer(),
            Some(12)
        );
    }

    #[test]
    fn alike_sizes_keep_the_base_bandwidth_and_say_so() {
        let k = Known {
            pod_start: 4000.0,
            termination: 400.0,
            checkpoint_fixed: 600.0,
            mib_per_s: 2048.0,
            restore: 1500.0,
            restore_mib_per_s: f64::INFINITY,
            restored_lag: 1500.0,
            settle: 3000.0,
        };
        let s: Vec<_> = (0..4)
            .map(|i| scenario(&k, 150e6 + f64::from(i) * 1e6, 900, 0.0))
            .collect();
        let c = calibrate(
            &[run("r", TargetKind::Cluster, "https://c:443", s)],
            &options(),
        )
        .unwrap();
        let fit = c.checkpoint.as_ref().unwrap();
        assert_eq!(fit.mib_per_s, None);
        within_10_percent(
            fit.fixed_ms,
            k.checkpoint_fixed,
            "fixed cost at the base bandwidth",
        );
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("checkpoint_mib_per_s is kept from the base")),
            "{:?}",
            c.notes
        );
        assert!(c.render().contains("the base's bandwidth"));
    }

    #[test]
    fn simulated_mixed_and_empty_reports_are_refused_with_what_to_do() {
        let k = Known {
            pod_start: 100.0,
            termination: 50.0,
            checkpoint_fixed: 10.0,
            mib_per_s: 2048.0,
            restore: 300.0,
            restore_mib_per_s: f64::INFINITY,
            restored_lag: 2000.0,
            settle: 100.0,
        };
        let sc = || vec![scenario(&k, 1e8, 0, 0.0)];
        let sim = run("s", TargetKind::Sim, "https://127.0.0.1:1234", sc());
        let err = calibrate(std::slice::from_ref(&sim), &options()).unwrap_err();
        assert!(err.to_string().contains("--allow-simulated"), "{err}");
        let mut allowed = options();
        allowed.allow_simulated = true;
        assert!(
            calibrate(std::slice::from_ref(&sim), &allowed)
                .unwrap()
                .simulated
        );
        // Reports from two versions of one cluster: calibrated, with a note naming both.
        let mut before = run("v1", TargetKind::Cluster, "https://a:443", sc());
        before.1.target.server_version = "v1.32.4-gke.1200".into();
        let mut after = run("v2", TargetKind::Cluster, "https://a:443", sc());
        after.1.target.server_version = "v1.33.1-gke.300".into();
        let c = calibrate(&[before, after], &options()).unwrap();
        assert!(
            c.notes.iter().any(|n| n.contains("2 server versions")
                && n.contains("v1.32.4-gke.1200")
                && n.contains("v1.33.1-gke.300")),
            "{:?}",
            c.notes
        );
        assert!(c.render().contains("2 server versions"));
        let profile = c
            .profile(crate::sim::profile::DEFAULT_PROFILE, "default")
            .unwrap();
        assert!(
            profile.contains("server_version = \"v1.33.1-gke.300\""),
            "{profile}"
        );
        // A simulator started on its own and named as a cluster gives itself away by its
        // gitVersion.
        let mut standalone = run("t", TargetKind::Cluster, "https://127.0.0.1:6443", sc());
        standalone.1.target.server_version = "v1.32.4+wsgate-sim".into();
        let err = calibrate(std::slice::from_ref(&standalone), &options()).unwrap_err();
        assert!(err.to_string().contains("--allow-simulated"), "{err}");
        let mut real = run("u", TargetKind::Cluster, "https://127.0.0.1:6443", sc());
        real.1.target.server_version = "v1.32.4-gke.1200".into();
        let err = calibrate(&[standalone, real], &options()).unwrap_err();
        assert!(matches!(err, CalibrateError::MixedKinds { .. }), "{err}");
        let a = run("a", TargetKind::Cluster, "https://a:443", sc());
        let b = run("b", TargetKind::Cluster, "https://b:443", sc());
        let err = calibrate(&[a.clone(), b], &options()).unwrap_err();
        assert!(err.to_string().contains("one cluster at a time"), "{err}");
        let a2 = a.clone();
        let err = calibrate(&[a, sim], &allowed).unwrap_err();
        assert!(
            err.to_string().contains("mix simulator runs (s.json)"),
            "{err}"
        );
        // The same run twice, and a phase longer than any delay the simulator takes.
        let err = calibrate(&[a2.clone(), a2], &options()).unwrap_err();
        assert!(err.to_string().contains("are the same run (a)"), "{err}");
        let mut long = scenario(&k, 1e8, 0, 0.0);
        long.phases[0].duration = Duration::from_secs(2 * 86_400);
        let long = run("l", TargetKind::Cluster, "https://a:443", vec![long]);
        let err = calibrate(&[long], &options()).unwrap_err();
        assert!(
            err.to_string()
                .contains("pod_start_ms: a sample of 172800000 ms (in l.json)"),
            "{err}"
        );
        // A run with no passed scenario, or none with phases.
        let mut failed = scenario(&k, 1e8, 0, 0.0);
        failed.status = ScenarioStatus::Failed;
        let empty = run(
            "e",
            TargetKind::Cluster,
            "https://a:443",
            vec![failed, ScenarioReport::new("f", "n")],
        );
        let err = calibrate(&[empty], &options()).unwrap_err();
        assert!(err.to_string().contains("no passed scenario"), "{err}");
    }

    /// The add-on counts its settle from a stamp in whole seconds: a pause seen 900 ms into
    /// its second waited 2.1 s of a 3 s settle, not 3 s.
    #[test]
    fn the_settle_is_what_the_add_on_waited_from_its_whole_second_stamp() {
        let k = Known {
            pod_start: 100.0,
            termination: 50.0,
            checkpoint_fixed: 5000.0,
            mib_per_s: 1e6,
            restore: 300.0,
            restore_mib_per_s: f64::INFINITY,
            restored_lag: 2000.0,
            settle: 3000.0,
        };
        let s = scenario(&k, 1.0, 900, 0.0);
        assert!((settle_waited(&s, 3000.0) - 2100.0).abs() < 1.0);
        let c = calibrate(
            &[run("r", TargetKind::Cluster, "https://c:443", vec![s])],
            &options(),
        )
        .unwrap();
        within_10_percent(
            figure(&c, "checkpoint_fixed_ms").quantile(0.5),
            5000.0,
            "checkpoint",
        );
    }

    #[test]
    fn only_a_profile_this_command_wrote_is_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.toml");
        assert!(may_overwrite(&p), "a new file");
        std::fs::write(&p, format!("{HEADER} from 1 report(s)\n")).unwrap();
        assert!(may_overwrite(&p));
        std::fs::write(&p, "# my own profile\n").unwrap();
        assert!(!may_overwrite(&p));
    }
}
