//! The `Accept` header's media-range parameters (`g`, `v`, `as`, `q`), as the API server
//! reads them to choose aggregated discovery or a Table.

/// What a media range must name: `as=<as_>` in group `group`, at one of `versions`.
pub struct Wanted<'a> {
    pub group: &'a str,
    pub versions: &'a [&'a str],
    pub as_: &'a str,
    /// Whether a range without `v=` still matches (a Table request may omit it).
    pub any_version_when_absent: bool,
}

/// True when any `application/json` media range in `accept` names `wanted` and is not
/// excluded by `q=0`. Parameter order, case and whitespace do not matter.
pub fn names(accept: Option<&str>, wanted: &Wanted) -> bool {
    let Some(accept) = accept else { return false };
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        if !media.eq_ignore_ascii_case("application/json") {
            return false;
        }
        let (mut g, mut v, mut as_, mut q_zero) =
            (false, wanted.any_version_when_absent, false, false);
        for param in parts {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match key.trim().to_ascii_lowercase().as_str() {
                "g" => g = value == wanted.group,
                "v" => v = wanted.versions.contains(&value),
                "as" => as_ = value == wanted.as_,
                "q" => q_zero = value.parse::<f32>().is_ok_and(|q| q <= 0.0),
                _ => {}
            }
        }
        g && v && as_ && !q_zero
    })
}
