//! Names that must be usable as one URL path segment, as
//! `k8s.io/apimachinery/pkg/api/validation/path` checks them (`IsValidPathSegmentName`,
//! `IsValidPathSegmentPrefix`, v0.33).
//!
//! Invariant: a name this module accepts, once percent-decoded by the server, is exactly one
//! path segment that addresses exactly that object: never `.` or `..`, never containing `/`
//! (which would split it) or `%` (which would decode again).

/// Names that may not be used as a path segment (`NameMayNotBe`).
const MAY_NOT_BE: [&str; 2] = [".", ".."];
/// Substrings a path-segment name may not contain (`NameMayNotContain`).
const MAY_NOT_CONTAIN: [&str; 2] = ["/", "%"];

/// `IsValidPathSegmentName`: the reasons `name` is not a valid path segment (empty when valid).
pub fn is_valid_name(name: &str) -> Vec<String> {
    for bad in MAY_NOT_BE {
        if name == bad {
            return vec![format!("may not be '{bad}'")];
        }
    }
    is_valid_prefix(name)
}

/// `IsValidPathSegmentPrefix`: the reasons `prefix` cannot start a path-segment name (a
/// `generateName`); `.` and `..` are fine since a suffix follows.
pub fn is_valid_prefix(prefix: &str) -> Vec<String> {
    MAY_NOT_CONTAIN
        .iter()
        .filter(|bad| prefix.contains(*bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_apimachinery_rejects() {
        assert_eq!(is_valid_name("."), vec!["may not be '.'"]);
        assert_eq!(is_valid_name(".."), vec!["may not be '..'"]);
        assert_eq!(
            is_valid_name("a/b%c"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert!(is_valid_name("web.v1..x").is_empty());
        assert!(is_valid_prefix("..").is_empty());
        assert_eq!(is_valid_prefix("x/"), vec!["may not contain '/'"]);
    }
}
