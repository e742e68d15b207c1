//! SVG pictures for the HTML page: a scenario's timeline (pause -> GPU free -> resume ->
//! Running -> next cell, with the long paused gap drawn as a break) and a histogram of one
//! phase over many scenarios. Pure string building; sizes in px.

use std::fmt::Write;
use std::time::Duration;

use super::failure::mark_name;
use super::fmt::{duration, html, percentile};
use crate::timeline::{Mark, Timeline};

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

/// The spans drawn as bands: (from, to, css class, label).
const BANDS: &[(Mark, Mark, &str, &str)] = &[
    (
        Mark::PauseRequested,
        Mark::GpuReleased,
        "b-pause",
        "pause → GPU free",
    ),
    (
        Mark::ResumeRequested,
        Mark::WorkspaceResumed,
        "b-resume",
        "resume → Running",
    ),
    (
        Mark::WaitingForResources,
        Mark::PodScheduled,
        "b-wait",
        "waiting for a GPU",
    ),
    (
        Mark::WorkspaceResumed,
        Mark::NextCellDone,
        "b-cell",
        "Running → next cell",
    ),
];

/// Maps a time offset to x, skipping the one gap that dominates the timeline.
struct Axis {
    start: f64,
    /// (gap start, gap end) in seconds.
    gap: Option<(f64, f64)>,
    scale: f64,
}

impl Axis {
    fn new(offsets: &[f64]) -> Self {
        let start = offsets.first().copied().unwrap_or(0.0);
        let end = offsets.last().copied().unwrap_or(0.0);
        let span = end - start;
        let gap = offsets
            .windows(2)
            .map(|w| (w[0], w[1]))
            .max_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)))
            .filter(|(a, b)| span > 0.0 && b - a > span / 2.0);
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

/// The SVG timeline of one scenario, or `None` when nothing was observed.
pub fn timeline(t: &Timeline) -> Option<String> {
    if t.observations.is_empty() {
        return None;
    }
    let mut offsets: Vec<f64> = t
        .observations
        .iter()
        .map(|o| o.offset.as_secs_f64())
        .collect();
    offsets.sort_by(f64::total_cmp);
    offsets.dedup();
    let axis = Axis::new(&offsets);
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
    for (row, (from, to, class, label)) in BANDS.iter().enumerate() {
        let Some(a) = t.last(*from) else { continue };
        let Some(b) = t.first_after(*to, a.offset) else {
            continue;
        };
        let (x1, x2) = (
            axis.x(a.offset.as_secs_f64()),
            axis.x(b.offset.as_secs_f64()),
        );
        let y = axis_y + 6.0 + (row % 2) as f64 * 14.0;
        let d = duration(b.offset - a.offset);
        let _ = write!(
            svg,
            r#"<rect class="{class}" x="{x1:.1}" y="{y}" width="{:.1}" height="10"><title>{} {}</title></rect>"#,
            (x2 - x1).max(2.0),
            html(label),
            d
        );
        if x2 - x1 > 70.0 {
            let _ = write!(
                svg,
                r#"<text class="band" x="{:.1}" y="{}">{d}</text>"#,
                (x1 + x2) / 2.0,
                y + 8.5
            );
        }
    }
    if let (Some((a, b)), true) = (axis.gap, axis.scale > 0.0) {
        let x = axis.x(a) + BREAK / 2.0;
        let _ = write!(
            svg,
            r#"<rect class="gap" x="{:.1}" y="{}" width="{}" height="24"/><text class="gap" x="{x:.1}" y="{}">{} gap</text>"#,
            x - BREAK / 2.0 + 4.0,
            axis_y - 12.0,
            BREAK - 8.0,
            axis_y + 36.0,
            duration(Duration::from_secs_f64(b - a))
        );
    }
    let mut label_row = 0;
    for o in &t.observations {
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
            let _ = write!(
                svg,
                r#"<line class="lead" x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}"/><text class="mark" x="{x:.1}" y="{y}">{label}</text>"#,
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
        let axis = Axis::new(&offsets);
        assert!(axis.gap.is_some());
        // Both sides of the break share one scale: 121.4 s is ~10x wider than 11.6 s.
        let pause = axis.x(121.4) - axis.x(0.0);
        let resume = axis.x(4.0 * 3600.0 + 11.6) - axis.x(4.0 * 3600.0);
        assert!(
            (pause / resume - 121.4 / 11.6).abs() < 0.01,
            "{pause} {resume}"
        );
        assert!(axis.x(4.0 * 3600.0 + 14.7) <= WIDTH - MARGIN + 0.01);
        let svg = timeline(&t).unwrap();
        assert!(svg.contains("gap</text>"), "{svg}");
        for label in ["pause", "GPU free", "resume", "Running", "next cell"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}");
        }
        assert_eq!(svg.matches("<line class=\"tick\"").count(), 5);
        assert!(timeline(&Timeline::default()).is_none());
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
        assert!(Axis::new(&offsets).gap.is_none());
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
}
