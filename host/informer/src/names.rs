//! Names as the API server accepts them: namespaces, object names and
//! subresources, parsed once into typed values that are safe to put in a
//! request path, a cache query or a log line.
//!
//! Job: check a string against the API server's own rule for what it names
//! (apimachinery `pkg/util/validation`: `IsDNS1123Label`,
//! `IsDNS1123Subdomain`, `IsDNS1035Label`; `pkg/api/validation/path`:
//! `IsValidPathSegmentName`) and answer with the rule it broke, in the API
//! server's words, or a typed value.
//!
//! Invariant: a [`Namespace`] is an RFC 1123 label and an [`ObjectName`] is at
//! least a valid path segment (not empty, not `.` or `..`, no `/` or `%`, at
//! most [`MAX_NAME_LENGTH`] bytes) and satisfies its resource's [`NameRule`];
//! neither can be built any other way, so a path assembled from them names
//! exactly one object of one resource in one namespace. [`quoted`] is the one
//! way a string from outside is shown in a message or a log line: escaped and
//! bounded.

use std::fmt;

/// The longest name any built-in kind stores (a DNS subdomain); longer names
/// are refused before they reach a URL.
pub const MAX_NAME_LENGTH: usize = 253;
/// The longest RFC 1123 or RFC 1035 label.
pub const MAX_LABEL_LENGTH: usize = 63;
/// How much of an untrusted string [`quoted`] shows.
pub const QUOTE_LIMIT: usize = 80;

const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

/// A string from outside (a plugin's argument, a header), as it may appear
/// in a message or a log line: in double quotes, with every control
/// character, quote and backslash escaped, and cut after [`QUOTE_LIMIT`]
/// characters with the full length said. It never contains a newline, so a
/// caller cannot forge a second log line.
///
/// ```
/// use kube_informer::names::quoted;
/// assert_eq!(quoted("web\nplugin=x"), r#""web\nplugin=x""#);
/// assert!(quoted(&"a".repeat(1000)).ends_with("…(1000 bytes)"));
/// ```
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(QUOTE_LIMIT) + 2);
    out.push('"');
    for (shown, c) in s.chars().enumerate() {
        if shown == QUOTE_LIMIT {
            out.push('"');
            out.push_str(&format!("…({} bytes)", s.len()));
            return out;
        }
        out.extend(c.escape_debug());
    }
    out.push('"');
    out
}

/// What a name must look like, per resource: the API server validates each
/// kind's `metadata.name` with one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameRule {
    /// RFC 1123 subdomain: most kinds (`NameIsDNSSubdomain`).
    Subdomain,
    /// RFC 1123 label: Namespaces (`ValidateNamespaceName`).
    Label,
    /// RFC 1035 label: Services (`ValidateServiceName`).
    Dns1035Label,
    /// Any valid path segment: RBAC kinds (`ValidateRBACName`), and the
    /// least the host asks of a resource whose rule it does not know.
    PathSegment,
}

/// Why a name, a namespace or a subresource was refused: the value (as
/// [`quoted`] shows it) and the API server's words for the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value}: {rule}")]
pub struct NameError {
    /// What was being parsed: `namespace`, `name`, ...
    pub what: &'static str,
    /// The value, quoted and bounded.
    pub value: String,
    /// The rule it broke.
    pub rule: String,
}

fn refuse(what: &'static str, value: &str, rule: impl Into<String>) -> NameError {
    NameError {
        what,
        value: quoted(value),
        rule: rule.into(),
    }
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (without the length).
fn label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum(c) || c == b'-')
}

/// apimachinery `IsDNS1123Label`: the messages of every rule it breaks.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > MAX_LABEL_LENGTH {
        errs.push(format!(
            "must be no more than {MAX_LABEL_LENGTH} characters"
        ));
    }
    if !label_shape(s) {
        errs.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
             and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', \
             regex used for validation is '{LABEL_FMT}')"
        ));
    }
    errs
}

/// apimachinery `IsDNS1123Subdomain`: the messages of every rule it breaks.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > MAX_NAME_LENGTH {
        errs.push(format!("must be no more than {MAX_NAME_LENGTH} characters"));
    }
    if s.is_empty() || !s.split('.').all(label_shape) {
        errs.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
             or '.', and must start and end with an alphanumeric character (e.g. 'example.com', \
             regex used for validation is '{SUBDOMAIN_FMT}')"
        ));
    }
    errs
}

/// apimachinery `IsDNS1035Label`: the messages of every rule it breaks.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > MAX_LABEL_LENGTH {
        errs.push(format!(
            "must be no more than {MAX_LABEL_LENGTH} characters"
        ));
    }
    if !(label_shape(s) && s.as_bytes()[0].is_ascii_lowercase()) {
        errs.push(format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. \
             'my-name',  or 'abc-123', regex used for validation is '{DNS1035_FMT}')"
        ));
    }
    errs
}

/// apimachinery `IsValidPathSegmentName`, with the host's length bound and
/// the empty name (which would address the collection) refused.
pub fn path_segment(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.is_empty() {
        errs.push("may not be empty: an empty name addresses the whole collection".to_string());
        return errs;
    }
    if s == "." || s == ".." {
        errs.push(format!("may not be '{s}'"));
        return errs;
    }
    if s.contains('/') {
        errs.push("may not contain '/'".to_string());
    }
    if s.contains('%') {
        errs.push("may not contain '%'".to_string());
    }
    if s.len() > MAX_NAME_LENGTH {
        errs.push(format!("must be no more than {MAX_NAME_LENGTH} characters"));
    }
    errs
}

impl NameRule {
    /// The messages of every rule `name` breaks (empty when it is valid).
    pub fn check(self, name: &str) -> Vec<String> {
        let mut errs = path_segment(name);
        if !errs.is_empty() {
            return errs;
        }
        errs.extend(match self {
            NameRule::Subdomain => dns1123_subdomain(name),
            NameRule::Label => dns1123_label(name),
            NameRule::Dns1035Label => dns1035_label(name),
            NameRule::PathSegment => Vec::new(),
        });
        errs
    }
}

/// A namespace name: an RFC 1123 label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    /// Parses a namespace name.
    ///
    /// ```
    /// use kube_informer::names::Namespace;
    /// assert!(Namespace::parse("team-a").is_ok());
    /// let e = Namespace::parse("team-b/pods/web#").unwrap_err();
    /// assert!(e.rule.contains("RFC 1123 label"), "{e}");
    /// ```
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let errs = dns1123_label(s);
        if errs.is_empty() {
            Ok(Self(s.to_string()))
        } else {
            Err(refuse("namespace", s, errs.join(", ")))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An object's name, valid for its resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectName(String);

impl ObjectName {
    /// Parses a name under `rule`.
    ///
    /// ```
    /// use kube_informer::names::{NameRule, ObjectName};
    /// assert!(ObjectName::parse("web-0", NameRule::Subdomain).is_ok());
    /// for bad in ["", ".", "..", "web/status", "web%2Fstatus", "Web"] {
    ///     assert!(ObjectName::parse(bad, NameRule::Subdomain).is_err(), "{bad}");
    /// }
    /// assert!(ObjectName::parse("system:controller", NameRule::PathSegment).is_ok());
    /// ```
    pub fn parse(s: &str, rule: NameRule) -> Result<Self, NameError> {
        let errs = rule.check(s);
        if errs.is_empty() {
            Ok(Self(s.to_string()))
        } else {
            Err(refuse("name", s, errs.join(", ")))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A subresource a plugin may address. Only what a grant can name exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subresource {
    /// `status`.
    Status,
}

impl Subresource {
    /// Every subresource, as grants name them.
    pub const ALL: [Subresource; 1] = [Subresource::Status];

    /// The path segment.
    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Status => "status",
        }
    }

    /// Parses a grant's `subresource`.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        Self::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| refuse("subresource", s, "the only subresource is \"status\""))
    }
}

impl fmt::Display for Subresource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cache key, `namespace/name` or `name`, split and checked: the
/// namespace as a [`Namespace`], the name as a path segment (the cache holds
/// only names the server accepted, so anything else matches nothing).
pub fn split_key(key: &str) -> Result<(Option<Namespace>, ObjectName), NameError> {
    match key.split_once('/') {
        Some((ns, name)) => Ok((
            Some(Namespace::parse(ns)?),
            ObjectName::parse(name, NameRule::PathSegment)?,
        )),
        None => Ok((None, ObjectName::parse(key, NameRule::PathSegment)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_servers_messages() {
        let e = Namespace::parse("Bad_NS").unwrap_err();
        assert_eq!(e.what, "namespace");
        assert_eq!(e.value, "\"Bad_NS\"");
        assert!(e
            .rule
            .starts_with("a lowercase RFC 1123 label must consist of"));
        let e = ObjectName::parse("Bad_Name", NameRule::Subdomain).unwrap_err();
        assert!(e
            .rule
            .starts_with("a lowercase RFC 1123 subdomain must consist of"));
        let e = ObjectName::parse("1abc", NameRule::Dns1035Label).unwrap_err();
        assert!(e.rule.starts_with("a DNS-1035 label must consist of"));
        let long = "a".repeat(64);
        let e = Namespace::parse(&long).unwrap_err();
        assert!(e.rule.contains("must be no more than 63 characters"), "{e}");
    }

    #[test]
    fn path_segments_refuse_what_would_change_the_path() {
        for (bad, rule) in [
            ("", "may not be empty"),
            (".", "may not be '.'"),
            ("..", "may not be '..'"),
            ("web/status", "may not contain '/'"),
            ("web%2Fstatus", "may not contain '%'"),
        ] {
            let e = ObjectName::parse(bad, NameRule::PathSegment).unwrap_err();
            assert!(e.rule.contains(rule), "{bad:?}: {e}");
        }
        let e = ObjectName::parse(&"a".repeat(254), NameRule::PathSegment).unwrap_err();
        assert!(e.rule.contains("253"), "{e}");
        // Other characters are a valid segment; the path encodes them.
        assert!(ObjectName::parse("web#x?y", NameRule::PathSegment).is_ok());
        assert!(ObjectName::parse("web#x", NameRule::Subdomain).is_err());
    }

    #[test]
    fn quoted_escapes_and_bounds() {
        assert_eq!(quoted("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quoted("x\r\ny\u{1b}"), r#""x\r\ny\u{1b}""#);
        let q = quoted(&"é".repeat(100));
        assert!(
            q.starts_with(&format!("\"{}\"", "é".repeat(QUOTE_LIMIT))),
            "{q}"
        );
        assert!(q.ends_with("…(200 bytes)"), "{q}");
        assert!(!quoted("a\nb").contains('\n'));
    }

    #[test]
    fn cache_keys_split_into_checked_parts() {
        let (ns, name) = split_key("team-a/web").unwrap();
        assert_eq!(ns.unwrap().as_str(), "team-a");
        assert_eq!(name.as_str(), "web");
        let (ns, name) = split_key("node-1").unwrap();
        assert!(ns.is_none());
        assert_eq!(name.as_str(), "node-1");
        assert!(split_key("team-a/pods/web").is_err());
        assert!(split_key("Team/web").is_err());
        assert!(split_key("team-a/").is_err());
    }
}
