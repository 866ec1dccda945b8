//! "Did you mean": the candidate closest to a word that was not recognised,
//! for error messages about unknown keys, resources and verbs.
//!
//! Invariant: a suggestion is offered only when it is close (an edit
//! distance of at most a third of the word's length, and at most 3, or the
//! word plus or minus a plural `s`), so a message never suggests something
//! unrelated.

/// The Levenshtein distance between `a` and `b` (by characters).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate closest to `word`, if one is close enough to suggest.
///
/// ```
/// use kube_informer::suggest::closest;
/// let keys = ["fuel_per_event", "timeout_ms", "memory_mb"];
/// assert_eq!(closest("fuel", keys), None);
/// assert_eq!(closest("timout_ms", keys), Some("timeout_ms"));
/// assert_eq!(closest("v1/pod", ["v1/pods", "v1/nodes"]), Some("v1/pods"));
/// ```
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| {
            let plural = c.strip_suffix('s') == Some(word) || word.strip_suffix('s') == Some(c);
            (if plural { 0 } else { edit_distance(word, c) }, c)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, c.len()))
        .map(|(_, c)| c)
}

/// `; did you mean "X"?` for a close candidate, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(word, candidates) {
        Some(c) => format!("; did you mean {c:?}?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("write_qps", "write_qsp"), 2);
    }

    #[test]
    fn suggests_only_what_is_close() {
        let keys = ["write_qps", "write_burst", "write_timeout_ms", "resources"];
        assert_eq!(closest("write_qsp", keys), Some("write_qps"));
        assert_eq!(closest("resource", keys), Some("resources"));
        assert_eq!(closest("zzz", keys), None);
        assert_eq!(did_you_mean("zzz", keys), "");
        assert_eq!(
            did_you_mean("resource", keys),
            "; did you mean \"resources\"?"
        );
    }
}
