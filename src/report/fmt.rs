//! Formatting shared by the writers: phase labels, durations, byte sizes, escaping.

use std::time::Duration;

/// The phases every summary shows, with their labels.
pub const KEY_PHASES: [(&str, &str); 3] = [
    ("pause_to_gpu_free", "pause → GPU free"),
    ("resume_to_running", "resume → Running"),
    ("resume_to_next_cell", "resume → next cell"),
];

/// The label of a phase name from `crate::timeline::PHASES` (`resume_to_running` ->
/// `resume → Running`); unknown names get their `_to_` turned into an arrow.
pub fn phase_label(name: &str) -> String {
    let known = match name {
        "create_to_running" => "create → Running",
        "pause_to_checkpointing" => "pause → checkpointing",
        "pause_to_snapshot_ready" => "pause → snapshot Ready",
        "pause_to_paused" => "pause → Paused",
        "pause_to_gpu_free" => "pause → GPU free",
        "resume_to_scheduled" => "resume → scheduled",
        "resume_to_running" => "resume → Running",
        "ready_to_pod_restored" => "pod Ready → PodRestored",
        "resume_to_pod_restored" => "resume → PodRestored",
        "resume_to_kernel" => "resume → kernel",
        "resume_to_next_cell" => "resume → next cell",
        "resume_to_recovered" => "resume → recovered",
        "resume_to_editor" => "resume → editor",
        "idle_eligible_to_pause" => "idle eligible → pause",
        "idle_eligible_to_paused" => "idle eligible → Paused",
        other => return other.replace("_to_", " → ").replace('_', " "),
    };
    known.to_string()
}

/// `850 ms`, `11.8 s`, `2 m 05 s`, `1 h 02 m`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{} ms", ms.round() as u64)
    } else if ms < 60_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms < 3_600_000.0 {
        let s = (ms / 1000.0).round() as u64;
        format!("{} m {:02} s", s / 60, s % 60)
    } else {
        let m = (ms / 60_000.0).round() as u64;
        format!("{} h {:02} m", m / 60, m % 60)
    }
}

/// A signed difference: `+6.5 s`, `-850 ms`.
pub fn signed_duration(before: Duration, after: Duration) -> String {
    if after >= before {
        format!("+{}", duration(after - before))
    } else {
        format!("-{}", duration(before - after))
    }
}

/// `8.3 GiB`, `512.0 MiB`, `900 B`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Escapes text for HTML and SVG.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text fit for one Markdown table cell: no pipes, no line breaks.
pub fn md_cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace("\r\n", " ")
        .replace(['\n', '\r'], " ")
}

/// The first line of a message, for one-line contexts.
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

/// A nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[Duration], pct: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The `p` quantile of ascending `sorted` (linear between ranks); 0 for none.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = p.clamp(0.0, 1.0) * (n - 1) as f64;
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally_at_every_scale() {
        assert_eq!(duration(Duration::from_millis(850)), "850 ms");
        assert_eq!(duration(Duration::from_millis(11_840)), "11.8 s");
        assert_eq!(duration(Duration::from_secs(125)), "2 m 05 s");
        assert_eq!(duration(Duration::from_secs(3720)), "1 h 02 m");
        assert_eq!(
            signed_duration(Duration::from_secs(12), Duration::from_millis(18_500)),
            "+6.5 s"
        );
        assert_eq!(
            signed_duration(Duration::from_secs(2), Duration::from_millis(1150)),
            "-850 ms"
        );
    }

    #[test]
    fn sizes_labels_and_cells() {
        assert_eq!(bytes(8_912_896_000), "8.3 GiB");
        assert_eq!(bytes(900), "900 B");
        assert_eq!(phase_label("resume_to_running"), "resume → Running");
        assert_eq!(phase_label("drain_to_empty"), "drain → empty");
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
        assert_eq!(html("<a href='x'>&"), "&lt;a href=&#39;x&#39;&gt;&amp;");
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<Duration> = (1..=10).map(Duration::from_secs).collect();
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_secs(5)));
        assert_eq!(percentile(&v, 90.0), Some(Duration::from_secs(9)));
        assert_eq!(percentile(&v, 100.0), Some(Duration::from_secs(10)));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
