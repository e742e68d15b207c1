//! SVG pictures for the HTML page: a scenario's timeline (pause -> GPU free -> resume ->
//! Running -> next cell, with the long paused gap drawn as a break) and a histogram of one
//! phase over many scenarios. Pure string building; sizes in px.

use std::fmt::Write;
use std::time::Duration;

use super::failure::mark_name;
use super::fmt::{duration, html, percentile};
use crate::timeline::{Mark, Observation, Timeline};

const WIDTH: f64 = 760.0;
const MARGIN: f64 = 16.0;
const BREAK: f64 = 48.0;

/// The marks that get a label; the others are ticks with a tooltip.
const LABELLED: &[(Mark, &str)] = &[
    (Mark::PauseRequested, "pause"),
    (Mark::GpuReleased, "GPU free"),
    (Mark::ResumeRequested, "resume"),
    (Mark::WaitingForResources, "waiting"),
    (Mark::WorkspaceResumed, "Running"),
    (Mark::NextCellDone, "next cell"),
];

/// A span drawn as a band under the axis.
struct Band {
    from: Mark,
    to: Mark,
    class: &'static str,
    label: &'static str,
    /// Drawn to the end, marked "not reached", when `to` never came: that is the finding.
    open_ended: bool,
}

const BANDS: &[Band] = &[
    Band {
        from: Mark::PauseRequested,
        to: Mark::GpuReleased,
        class: "b-pause",
        label: "pause → GPU free",
        open_ended: true,
    },
    Band {
        from: Mark::ResumeRequested,
        to: Mark::WorkspaceResumed,
        class: "b-resume",
        label: "resume → Running",
        open_ended: true,
    },
    Band {
        from: Mark::WaitingForResources,
        to: Mark::PodScheduled,
        class: "b-wait",
        label: "waiting for a GPU",
        open_ended: true,
    },
    Band {
        from: Mark::WorkspaceResumed,
        to: Mark::NextCellDone,
        class: "b-cell",
        label: "Running → next cell",
        open_ended: false,
    },
];

/// Maps a time offset to x; the paused gap (up to the resume request) is drawn as a
/// fixed-width break when it takes more than a quarter of the drawn span.
struct Axis {
    start: f64,
    /// (gap start, gap end) in seconds.
    gap: Option<(f64, f64)>,
    scale: f64,
}

impl Axis {
    /// `offsets` sorted; `resume` is the resume request's offset, if any.
    fn new(offsets: &[f64], resume: Option<f64>) -> Self {
        let start = offsets.first().copied().unwrap_or(0.0);
        let end = offsets.last().copied().unwrap_or(0.0);
        let span = end - start;
        let gap = resume
            .and_then(|r| Some((offsets.iter().copied().rfind(|o| *o < r)?, r)))
            .filter(|(a, b)| span > 0.0 && b - a > span / 4.0);
        let drawn = span - gap.map(|(a, b)| b - a).unwrap_or(0.0);
        let room = WIDTH - 2.0 * MARGIN - if gap.is_some() { BREAK } else { 0.0 };
        let scale = if drawn > 0.0 { room / drawn } else { 0.0 };
        Self { start, gap, scale }
    }

    fn x(&self, t: f64) -> f64 {
        let x = match self.gap {
            Some((a, b)) if t >= b => (a - self.start) * self.scale + BREAK + (t - b) * self.scale,
            Some((a, _)) if t > a => (a - self.start) * self.scale + BREAK / 2.0,
            _ => (t - self.start) * self.scale,
        };
        MARGIN + x
    }
}

/// The SVG timeline of one scenario, or `None` when nothing was observed. `end` is when
/// the scenario ended (bands that never completed are drawn up to it).
pub fn timeline(t: &Timeline, end: Option<Duration>) -> Option<String> {
    if t.observations.is_empty() {
        return None;
    }
    // The cycle is what matters: draw from the (last) pause request when there is one.
    let from = t
        .last(Mark::PauseRequested)
        .map(|o| o.offset)
        .unwrap_or_default();
    let shown: Vec<&Observation> = t.observations.iter().filter(|o| o.offset >= from).collect();
    let mut offsets: Vec<f64> = shown.iter().map(|o| o.offset.as_secs_f64()).collect();
    // The scenario's end matters only when a band never completed.
    let open = BANDS.iter().any(|b| {
        b.open_ended
            && t.last(b.from)
                .is_some_and(|a| a.offset >= from && t.first_after(b.to, a.offset).is_none())
    });
    if let Some(end) = end.filter(|e| open && *e > from) {
        offsets.push(end.as_secs_f64());
    }
    offsets.sort_by(f64::total_cmp);
    offsets.dedup();
    let resume = t
        .last(Mark::ResumeRequested)
        .filter(|o| o.offset >= from)
        .map(|o| o.offset.as_secs_f64());
    let axis = Axis::new(&offsets, resume);
    let (axis_y, height) = (92.0, 128.0);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img">"#
    );
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{MARGIN}" y1="{axis_y}" x2="{}" y2="{axis_y}"/>"#,
        WIDTH - MARGIN
    );
    let last = offsets.last().copied().unwrap_or_default();
    for (row, band) in BANDS.iter().enumerate() {
        let Some(a) = t.last(band.from).filter(|a| a.offset >= from) else {
            continue;
        };
        let end = t.first_after(band.to, a.offset).map(|b| b.offset);
        let (class, end_s, text) = match end {
            Some(b) => (
                band.class.to_string(),
                b.as_secs_f64(),
                duration(b - a.offset),
            ),
            None if band.open_ended && last > a.offset.as_secs_f64() => (
                format!("{} open", band.class),
                last,
                format!(
                    "not reached after {}",
                    duration(Duration::from_secs_f64(last) - a.offset)
                ),
            ),
            None => continue,
        };
        let (x1, x2) = (axis.x(a.offset.as_secs_f64()), axis.x(end_s));
        let y = axis_y + 6.0 + (row % 2) as f64 * 14.0;
        let _ = write!(
            svg,
            r#"<rect class="{class}" x="{x1:.1}" y="{y}" width="{:.1}" height="10"><title>{}: {text}</title></rect>"#,
            (x2 - x1).max(2.0),
            html(band.label),
        );
        if x2 - x1 > 6.5 * text.chars().count() as f64 {
            let _ = write!(
                svg,
                r#"<text class="band" x="{:.1}" y="{}">{text}</text>"#,
                (x1 + x2) / 2.0,
                y + 8.5
            );
        }
    }
    if let (Some((a, b)), true) = (axis.gap, axis.scale > 0.0) {
        let x = axis.x(a) + BREAK / 2.0;
        let _ = write!(
            svg,
            r#"<rect class="gap" x="{:.1}" y="{}" width="{}" height="24"/><text class="gap-label" x="{x:.1}" y="{}">{} gap</text>"#,
            x - BREAK / 2.0 + 4.0,
            axis_y - 12.0,
            BREAK - 8.0,
            axis_y - 16.0,
            duration(Duration::from_secs_f64(b - a))
        );
    }
    let mut label_row = 0;
    for o in shown {
        let x = axis.x(o.offset.as_secs_f64());
        let name = mark_name(o.mark);
        let title = format!(
            "{name} at {} (+{})",
            o.at.format("%H:%M:%S%.3f UTC"),
            duration(o.offset)
        );
        let detail = o
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        let _ = write!(
            svg,
            r#"<line class="tick" x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}"><title>{}{}</title></line>"#,
            axis_y - 6.0,
            axis_y + 4.0,
            html(&title),
            html(&detail)
        );
        if let Some((_, label)) = LABELLED.iter().find(|(m, _)| *m == o.mark) {
            let y = 16.0 + (label_row % 4) as f64 * 16.0;
            label_row += 1;
            // Keep labels inside the picture: anchor them at their end near the right edge.
            let half = label.chars().count() as f64 * 3.2;
            let class = if x + half > WIDTH - 2.0 {
                "mark-end"
            } else if x - half < 2.0 {
                "mark-start"
            } else {
                "mark"
            };
            let _ = write!(
                svg,
                r#"<line class="lead" x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}"/><text class="{class}" x="{x:.1}" y="{y}">{label}</text>"#,
                y + 3.0,
                axis_y - 6.0
            );
        }
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// A histogram of `values` (one phase over many scenarios) titled `label`.
pub fn histogram(label: &str, values: &[Duration]) -> Option<String> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort();
    let (min, max) = (
        sorted[0].as_secs_f64(),
        sorted[sorted.len() - 1].as_secs_f64(),
    );
    let bins = sorted.len().clamp(1, 12);
    let width = ((max - min) / bins as f64).max(f64::EPSILON);
    let mut counts = vec![0usize; bins];
    for v in &sorted {
        let i = (((v.as_secs_f64() - min) / width) as usize).min(bins - 1);
        counts[i] += 1;
    }
    let peak = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let (w, h, plot_h) = (WIDTH, 170.0, 110.0);
    let bar_w = (w - 2.0 * MARGIN) / bins as f64;
    let mut svg = String::new();
    let p50 = percentile(&sorted, 50.0).unwrap_or_default();
    let p90 = percentile(&sorted, 90.0).unwrap_or_default();
    let _ = write!(
        svg,
        r#"<figure><figcaption>{} over {} scenarios: median {}, p90 {}, max {}</figcaption><svg class="histogram" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">"#,
        html(label),
        sorted.len(),
        duration(p50),
        duration(p90),
        duration(sorted[sorted.len() - 1])
    );
    for (i, c) in counts.iter().enumerate() {
        let bh = plot_h * *c as f64 / peak;
        let x = MARGIN + i as f64 * bar_w;
        let lo = Duration::from_secs_f64(min + i as f64 * width);
        let hi = Duration::from_secs_f64(min + (i + 1) as f64 * width);
        let _ = write!(
            svg,
            r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}"><title>{} – {}: {c}</title></rect>"#,
            x + 1.0,
            20.0 + plot_h - bh,
            (bar_w - 2.0).max(1.0),
            duration(lo),
            duration(hi)
        );
        if *c > 0 {
            let _ = write!(
                svg,
                r#"<text class="count" x="{:.1}" y="{:.1}">{c}</text>"#,
                x + bar_w / 2.0,
                16.0 + plot_h - bh
            );
        }
    }
    let base = 20.0 + plot_h;
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{MARGIN}" y1="{base}" x2="{}" y2="{base}"/><text class="lo" x="{MARGIN}" y="{}">{}</text><text class="hi" x="{}" y="{}">{}</text></svg></figure>"#,
        w - MARGIN,
        base + 16.0,
        duration(sorted[0]),
        w - MARGIN,
        base + 16.0,
        duration(sorted[sorted.len() - 1])
    );
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tl(marks: &[(Mark, f64)]) -> Timeline {
        let start = chrono::Utc::now();
        let mut t = Timeline::new(start);
        for (m, s) in marks {
            t.push(*m, start, Duration::from_secs_f64(*s), None);
        }
        t
    }

    #[test]
    fn a_long_pause_is_drawn_as_a_break_and_phases_keep_their_scale() {
        let t = tl(&[
            (Mark::PauseRequested, 0.0),
            (Mark::GpuReleased, 121.4),
            (Mark::ResumeRequested, 4.0 * 3600.0),
            (Mark::WorkspaceResumed, 4.0 * 3600.0 + 11.6),
            (Mark::NextCellDone, 4.0 * 3600.0 + 14.7),
        ]);
        let offsets: Vec<f64> = t
            .observations
            .iter()
            .map(|o| o.offset.as_secs_f64())
            .collect();
        let axis = Axis::new(&offsets, Some(4.0 * 3600.0));
        assert!(axis.gap.is_some());
        // Both sides of the break share one scale: 121.4 s is ~10x wider than 11.6 s.
        let pause = axis.x(121.4) - axis.x(0.0);
        let resume = axis.x(4.0 * 3600.0 + 11.6) - axis.x(4.0 * 3600.0);
        assert!(
            (pause / resume - 121.4 / 11.6).abs() < 0.01,
            "{pause} {resume}"
        );
        assert!(axis.x(4.0 * 3600.0 + 14.7) <= WIDTH - MARGIN + 0.01);
        let svg = timeline(&t, None).unwrap();
        assert!(svg.contains("gap</text>"), "{svg}");
        assert!(!svg.contains(" open\""), "every band completed: {svg}");
        for label in ["pause", "GPU free", "resume", "Running", "next cell"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}");
        }
        assert_eq!(svg.matches("<line class=\"tick\"").count(), 5);
        assert!(timeline(&Timeline::default(), None).is_none());
    }

    #[test]
    fn an_even_timeline_has_no_break_and_the_histogram_counts_every_value() {
        let t = tl(&[
            (Mark::ResumeRequested, 0.0),
            (Mark::PodScheduled, 2.0),
            (Mark::WorkspaceResumed, 4.0),
        ]);
        let offsets: Vec<f64> = t
            .observations
            .iter()
            .map(|o| o.offset.as_secs_f64())
            .collect();
        assert!(Axis::new(&offsets, Some(0.0)).gap.is_none());
        // A pause of a quarter of the cycle or less is drawn to scale, longer is a break.
        let cycle = [0.0, 120.0, 150.0, 165.0];
        assert!(Axis::new(&cycle, Some(150.0)).gap.is_none());
        assert_eq!(
            Axis::new(&[0.0, 120.0, 200.0, 215.0], Some(200.0)).gap,
            Some((120.0, 200.0))
        );
        let values: Vec<Duration> = (0..30)
            .map(|i| Duration::from_millis(10_000 + i * 500))
            .collect();
        let svg = histogram("resume → Running", &values).unwrap();
        let total: usize = svg
            .split("<text class=\"count\"")
            .skip(1)
            .map(|s| {
                s.split('>')
                    .nth(1)
                    .unwrap()
                    .split('<')
                    .next()
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .sum();
        assert_eq!(total, 30);
        assert!(svg.contains("over 30 scenarios"));
    }

    #[test]
    fn the_drawing_starts_at_the_pause_request() {
        let t = tl(&[
            (Mark::WorkspaceCreated, 0.0),
            (Mark::WorkspaceRunning, 41.2),
            (Mark::PauseRequested, 80.0),
            (Mark::GpuReleased, 201.4),
            (Mark::ResumeRequested, 262.0),
            (Mark::WorkspaceResumed, 273.6),
        ]);
        let svg = timeline(&t, None).unwrap();
        assert_eq!(svg.matches("<line class=\"tick\"").count(), 4, "{svg}");
        assert!(!svg.contains("workspace_created"));
        // Waiting that never ended is drawn to the end, marked as not reached.
        let t = tl(&[
            (Mark::PauseRequested, 0.0),
            (Mark::GpuReleased, 121.0),
            (Mark::ResumeRequested, 137.0),
            (Mark::WaitingForResources, 139.1),
        ]);
        let svg = timeline(&t, Some(Duration::from_secs(439))).unwrap();
        assert!(svg.contains(r#"class="b-wait open""#), "{svg}");
        assert!(
            svg.contains("waiting for a GPU: not reached after"),
            "{svg}"
        );
        assert!(
            svg.contains(&format!(r#"<line class="tick" x1="{MARGIN:.1}""#)),
            "{svg}"
        );
    }
}
