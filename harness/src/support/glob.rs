//! `*` patterns, as baselines write cells and VUIDs: `*` stands for any run
//! of characters (none included); every other character stands for itself.

/// Whether `text` matches `pattern` as a whole.
pub fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = parts.collect();
    let Some((last, middle)) = pieces.split_last() else {
        // No `*` at all: the pattern is the text.
        return rest.is_empty();
    };
    // Each middle piece taken at its first occurrence leaves the most room
    // for the ones after it, so the greedy search is exact.
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the pattern holds a `*`, so may match more than one text.
pub fn is_glob(pattern: &str) -> bool {
    pattern.contains('*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_patterns_match_only_themselves() {
        assert!(matches("lavapipe", "lavapipe"));
        assert!(!matches("lavapipe", "lavapipe2"));
        assert!(!matches("lavapipe", "lava"));
        assert!(matches("", ""));
        assert!(!matches("", "x"));
        assert!(!is_glob("refrt:guarded"));
    }

    #[test]
    fn stars_match_any_run_of_characters() {
        assert!(matches("*", ""));
        assert!(matches("*", "anything at all"));
        assert!(matches("refrt:*", "refrt:guarded"));
        assert!(!matches("refrt:*", "external"));
        assert!(matches("*-exit", "clean-exit"));
        assert!(matches("*kept*", "buffer-kept-at-exit"));
        assert!(matches(
            "VUID-vkDestroyDevice-device-*",
            "VUID-vkDestroyDevice-device-05137"
        ));
        assert!(matches("a*b*c", "abc"));
        assert!(matches("a*b*c", "a-b-b-c"));
        assert!(!matches("a*b*c", "a-c-b"));
        assert!(matches("**", "x"));
        assert!(is_glob("*validation*"));
    }

    #[test]
    fn the_last_piece_is_anchored_at_the_end() {
        // "ab" is found early in "abab", but the end must still match.
        assert!(matches("*ab", "abab"));
        assert!(matches("a*a", "aa"));
        assert!(!matches("a*a", "a"));
        assert!(matches("x*yz", "xyzyz"));
        assert!(!matches("x*yz", "xyzy"));
    }
}
