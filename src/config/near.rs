//! "Did you mean": the valid word nearest to a mistyped one, for the hints of unknown
//! sections, keys and values (Levenshtein distance, from the `strsim` crate).

/// The candidate nearest to `word` (case-insensitive), when it is close enough to be a
/// typo: at most 2 edits, or a quarter of the candidate's length for long ones. `None` for
/// an exact match or nothing near.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    candidates
        .map(|c| (strsim::levenshtein(&word, c), c))
        .filter(|(d, c)| *d > 0 && *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_word_and_nothing_near_finds_none() {
        let words = ["target", "budgets", "resume_to_running"];
        assert_eq!(
            closest("resume_to_runing", words.into_iter()),
            Some("resume_to_running")
        );
        assert_eq!(closest("Budget", words.into_iter()), Some("budgets"));
        assert_eq!(closest("target", words.into_iter()), None);
        assert_eq!(closest("zzzzzz", words.into_iter()), None);
    }
}
