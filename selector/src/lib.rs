//! Kubernetes label and field selectors: parsing and matching.
//!
//! Job: turn the selector strings that the API server and `kubectl` accept into
//! values that can be matched against an object's labels (or selectable fields),
//! with the same grammar and the same meaning as the real API server.
//!
//! Invariant: a string parses here exactly when the API server would accept it as
//! a selector, and a parsed selector matches exactly the label sets the API server
//! would match. An empty selector matches everything.
//!
//! Label selector grammar (comma-separated requirements, all must hold):
//!
//! | form | meaning |
//! |---|---|
//! | `k=v`, `k==v` | label `k` exists and equals `v` |
//! | `k!=v` | label `k` is absent or differs from `v` |
//! | `k in (a,b)` | label `k` exists and is one of the values |
//! | `k notin (a,b)` | label `k` is absent or is none of the values |
//! | `k` | label `k` exists |
//! | `!k` | label `k` does not exist |
//! | `k>5`, `k<5` | label `k` is an integer greater (less) than the number |
//!
//! ```
//! use std::collections::BTreeMap;
//! use wasm_informer_selector::LabelSelector;
//!
//! let sel = LabelSelector::parse("app in (web,api), tier!=db, !canary").unwrap();
//! let mut labels = BTreeMap::new();
//! labels.insert("app".to_string(), "web".to_string());
//! assert!(sel.matches(&labels));
//! labels.insert("canary".to_string(), "true".to_string());
//! assert!(!sel.matches(&labels));
//! ```

use std::collections::BTreeMap;
use std::fmt;

/// Why a selector string was rejected. The message names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at character {position} of {input:?})")]
pub struct SelectorError {
    pub input: String,
    pub position: usize,
    pub message: String,
}

/// The operator of one requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    /// Sorted and deduplicated values (one for `=`, `!=`, `>` and `<`).
    pub values: Vec<String>,
}

/// A set of labels a selector can be matched against.
pub trait Labels {
    /// The value of label `key`, if present.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Requirement {
    /// Whether a label set satisfies this requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key);
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(v), Some(bound)) = (value, self.values.first()) else {
                    return false;
                };
                let (Ok(v), Ok(bound)) = (v.parse::<i64>(), bound.parse::<i64>()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    v > bound
                } else {
                    v < bound
                }
            }
        }
    }
}

/// A parsed label selector: the conjunction of its requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses a selector in the API server's syntax. Whitespace around tokens is
    /// ignored; an empty string selects everything.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        Parser::new(input).parse_label_selector()
    }

    /// True when the selector has no requirement.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// If the selector pins `key` to exactly one value (`key=value` or a one-value
    /// `in`), that value: useful for answering from an index.
    pub fn required_value(&self, key: &str) -> Option<&str> {
        self.requirements.iter().find_map(|r| match r.operator {
            Operator::Equals | Operator::In if r.key == key && r.values.len() == 1 => {
                Some(r.values[0].as_str())
            }
            _ => None,
        })
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r.operator {
                Operator::Equals => write!(f, "{}={}", r.key, r.values[0])?,
                Operator::NotEquals => write!(f, "{}!={}", r.key, r.values[0])?,
                Operator::In => write!(f, "{} in ({})", r.key, r.values.join(","))?,
                Operator::NotIn => write!(f, "{} notin ({})", r.key, r.values.join(","))?,
                Operator::Exists => write!(f, "{}", r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
                Operator::GreaterThan => write!(f, "{}>{}", r.key, r.values[0])?,
                Operator::LessThan => write!(f, "{}<{}", r.key, r.values[0])?,
            }
        }
        Ok(())
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path, for example `metadata.name` or `spec.nodeName`.
    pub field: String,
    /// `true` for `!=`.
    pub negated: bool,
    pub value: String,
}

/// A parsed field selector: `field=value`, `field==value` and `field!=value` terms
/// joined by commas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses a field selector. Values may escape `\,`, `\=` and `\\` as the API
    /// server allows.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self { requirements });
        }
        let mut start = 0;
        for term in split_unescaped(input, ',') {
            let t = term.trim();
            if t.is_empty() {
                return Err(err(input, start, "empty field selector term"));
            }
            let (field, negated, value) = if let Some(i) = t.find("!=") {
                (&t[..i], true, &t[i + 2..])
            } else if let Some(i) = t.find("==") {
                (&t[..i], false, &t[i + 2..])
            } else if let Some(i) = t.find('=') {
                (&t[..i], false, &t[i + 1..])
            } else {
                return Err(err(
                    input,
                    start,
                    &format!("field selector term {t:?} has no operator (=, == or !=)"),
                ));
            };
            let field = field.trim();
            if field.is_empty() {
                return Err(err(
                    input,
                    start,
                    "field selector term has an empty field name",
                ));
            }
            requirements.push(FieldRequirement {
                field: field.to_string(),
                negated,
                value: unescape(value.trim()),
            });
            start += term.len() + 1;
        }
        Ok(Self { requirements })
    }

    /// True when the selector has no term.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object matches, given a lookup from field path to its value.
    /// A field the lookup does not know reads as the empty string, as in the API
    /// server.
    pub fn matches<'a>(&self, mut field: impl FnMut(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let v = field(&r.field).unwrap_or("");
            (v == r.value) != r.negated
        })
    }
}

fn split_unescaped(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn err(input: &str, position: usize, message: &str) -> SelectorError {
    SelectorError {
        input: input.to_string(),
        position,
        message: message.to_string(),
    }
}

/// Checks a label key: an optional DNS-subdomain prefix and `/`, then a name of at
/// most 63 characters of alphanumerics, `-`, `_` and `.`, starting and ending
/// alphanumeric.
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > 253 {
            return Err(format!("label key {key:?} has an invalid prefix"));
        }
        let ok = p.split('.').all(|part| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
        if !ok {
            return Err(format!(
                "label key prefix {p:?} must be a DNS subdomain (lower-case alphanumerics, '-' and '.')"
            ));
        }
    }
    if name.is_empty() {
        return Err(format!("label key {key:?} has an empty name"));
    }
    validate_name_part(name).map_err(|why| format!("label key {key:?}: {why}"))
}

/// Checks a label value: empty, or at most 63 characters of alphanumerics, `-`,
/// `_` and `.`, starting and ending alphanumeric.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    validate_name_part(value).map_err(|why| format!("label value {value:?}: {why}"))
}

fn validate_name_part(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be at most 63 characters".into());
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("may contain only alphanumerics, '-', '_' and '.'".into());
    }
    let first = s.chars().next().unwrap_or('a');
    let last = s.chars().last().unwrap_or('a');
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Err("must start and end with an alphanumeric character".into());
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    In,
    NotIn,
    Open,
    Close,
    Comma,
    End,
}

struct Parser<'a> {
    input: &'a str,
    toks: Vec<(usize, Tok)>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Self {
            input,
            toks: Vec::new(),
            pos: 0,
        }
    }

    fn lex(&mut self) -> Result<(), SelectorError> {
        let b = self.input.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i] as char;
            let start = i;
            match c {
                ' ' | '\t' | '\n' | '\r' => {
                    i += 1;
                    continue;
                }
                '(' => {
                    self.toks.push((start, Tok::Open));
                    i += 1;
                }
                ')' => {
                    self.toks.push((start, Tok::Close));
                    i += 1;
                }
                ',' => {
                    self.toks.push((start, Tok::Comma));
                    i += 1;
                }
                '!' if b.get(i + 1) == Some(&b'=') => {
                    self.toks.push((start, Tok::NotEq));
                    i += 2;
                }
                '!' => {
                    self.toks.push((start, Tok::Not));
                    i += 1;
                }
                '=' if b.get(i + 1) == Some(&b'=') => {
                    self.toks.push((start, Tok::DoubleEq));
                    i += 2;
                }
                '=' => {
                    self.toks.push((start, Tok::Eq));
                    i += 1;
                }
                '>' => {
                    self.toks.push((start, Tok::Gt));
                    i += 1;
                }
                '<' => {
                    self.toks.push((start, Tok::Lt));
                    i += 1;
                }
                _ => {
                    while i < b.len()
                        && !matches!(
                            b[i],
                            b' ' | b'\t'
                                | b'\n'
                                | b'\r'
                                | b'('
                                | b')'
                                | b','
                                | b'!'
                                | b'='
                                | b'>'
                                | b'<'
                        )
                    {
                        i += 1;
                    }
                    let word = &self.input[start..i];
                    let tok = match word {
                        "in" => Tok::In,
                        "notin" => Tok::NotIn,
                        _ => Tok::Ident(word.to_string()),
                    };
                    self.toks.push((start, tok));
                }
            }
        }
        self.toks.push((self.input.len(), Tok::End));
        Ok(())
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].1
    }

    fn at(&self) -> usize {
        self.toks[self.pos].0
    }

    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].1.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn fail<T>(&self, message: impl Into<String>) -> Result<T, SelectorError> {
        Err(err(self.input, self.at(), &message.into()))
    }

    fn parse_label_selector(mut self) -> Result<LabelSelector, SelectorError> {
        self.lex()?;
        let mut requirements = Vec::new();
        if *self.peek() == Tok::End {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement()?);
            match self.next() {
                Tok::Comma => continue,
                Tok::End => break,
                other => {
                    self.pos -= 1;
                    return self.fail(format!(
                        "expected ',' or the end, found {}",
                        describe(&other)
                    ));
                }
            }
        }
        Ok(LabelSelector { requirements })
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        let at = self.at();
        match self.next() {
            Tok::Ident(k) => {
                validate_label_key(&k).map_err(|m| err(self.input, at, &m))?;
                Ok(k)
            }
            other => {
                self.pos = self.pos.saturating_sub(1);
                self.fail(format!("expected a label key, found {}", describe(&other)))
            }
        }
    }

    fn value(&mut self) -> Result<String, SelectorError> {
        let at = self.at();
        match self.peek().clone() {
            Tok::Ident(v) => {
                self.next();
                validate_label_value(&v).map_err(|m| err(self.input, at, &m))?;
                Ok(v)
            }
            // An empty value (`k=` or `k in (a,)`) is allowed.
            Tok::Comma | Tok::Close | Tok::End => Ok(String::new()),
            other => self.fail(format!(
                "expected a label value, found {}",
                describe(&other)
            )),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        if *self.peek() == Tok::Not {
            self.next();
            let key = self.key()?;
            return Ok(Requirement {
                key,
                operator: Operator::DoesNotExist,
                values: vec![],
            });
        }
        let key = self.key()?;
        let op_at = self.at();
        let op = self.peek().clone();
        match op {
            Tok::Comma | Tok::End => Ok(Requirement {
                key,
                operator: Operator::Exists,
                values: vec![],
            }),
            Tok::Eq | Tok::DoubleEq | Tok::NotEq => {
                self.next();
                let v = self.value()?;
                Ok(Requirement {
                    key,
                    operator: if op == Tok::NotEq {
                        Operator::NotEquals
                    } else {
                        Operator::Equals
                    },
                    values: vec![v],
                })
            }
            Tok::Gt | Tok::Lt => {
                self.next();
                let at = self.at();
                let v = self.value()?;
                if v.parse::<i64>().is_err() {
                    return Err(err(
                        self.input,
                        at,
                        &format!("{v:?} is not an integer, as '>' and '<' require"),
                    ));
                }
                Ok(Requirement {
                    key,
                    operator: if op == Tok::Gt {
                        Operator::GreaterThan
                    } else {
                        Operator::LessThan
                    },
                    values: vec![v],
                })
            }
            Tok::In | Tok::NotIn => {
                self.next();
                if self.next() != Tok::Open {
                    self.pos = self.pos.saturating_sub(1);
                    return self.fail("expected '(' after 'in' or 'notin'");
                }
                let mut values = Vec::new();
                loop {
                    values.push(self.value()?);
                    match self.next() {
                        Tok::Comma => continue,
                        Tok::Close => break,
                        other => {
                            self.pos = self.pos.saturating_sub(1);
                            return self.fail(format!(
                                "expected ',' or ')' in a value set, found {}",
                                describe(&other)
                            ));
                        }
                    }
                }
                values.sort();
                values.dedup();
                Ok(Requirement {
                    key,
                    operator: if op == Tok::In {
                        Operator::In
                    } else {
                        Operator::NotIn
                    },
                    values,
                })
            }
            other => Err(err(
                self.input,
                op_at,
                &format!(
                    "expected an operator (=, ==, !=, in, notin, >, <) after {key:?}, found {}",
                    describe(&other)
                ),
            )),
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("{s:?}"),
        Tok::Not => "'!'".into(),
        Tok::Eq => "'='".into(),
        Tok::DoubleEq => "'=='".into(),
        Tok::NotEq => "'!='".into(),
        Tok::Gt => "'>'".into(),
        Tok::Lt => "'<'".into(),
        Tok::In => "'in'".into(),
        Tok::NotIn => "'notin'".into(),
        Tok::Open => "'('".into(),
        Tok::Close => "')'".into(),
        Tok::Comma => "','".into(),
        Tok::End => "the end".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selects_everything() {
        let s = LabelSelector::parse("  ").unwrap();
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[])));
    }

    #[test]
    fn equality_forms() {
        let l = labels(&[("app", "web")]);
        assert!(LabelSelector::parse("app=web").unwrap().matches(&l));
        assert!(LabelSelector::parse("app == web").unwrap().matches(&l));
        assert!(!LabelSelector::parse("app=api").unwrap().matches(&l));
        assert!(LabelSelector::parse("app!=api").unwrap().matches(&l));
        assert!(!LabelSelector::parse("app!=web").unwrap().matches(&l));
        // != matches objects without the label, like the API server.
        assert!(LabelSelector::parse("tier!=db").unwrap().matches(&l));
    }

    #[test]
    fn set_forms() {
        let l = labels(&[("env", "prod")]);
        assert!(LabelSelector::parse("env in (prod, staging)")
            .unwrap()
            .matches(&l));
        assert!(!LabelSelector::parse("env in (dev)").unwrap().matches(&l));
        assert!(LabelSelector::parse("env notin (dev,qa)")
            .unwrap()
            .matches(&l));
        assert!(!LabelSelector::parse("env notin (prod)")
            .unwrap()
            .matches(&l));
        assert!(LabelSelector::parse("tier notin (db)").unwrap().matches(&l));
        assert!(!LabelSelector::parse("tier in (db)").unwrap().matches(&l));
    }

    #[test]
    fn existence_forms() {
        let l = labels(&[("app", "x")]);
        assert!(LabelSelector::parse("app").unwrap().matches(&l));
        assert!(!LabelSelector::parse("!app").unwrap().matches(&l));
        assert!(LabelSelector::parse("!tier").unwrap().matches(&l));
        assert!(!LabelSelector::parse("tier").unwrap().matches(&l));
    }

    #[test]
    fn numeric_comparisons() {
        let l = labels(&[("replicas", "5")]);
        assert!(LabelSelector::parse("replicas>3").unwrap().matches(&l));
        assert!(!LabelSelector::parse("replicas<3").unwrap().matches(&l));
        assert!(LabelSelector::parse("replicas>x").is_err());
    }

    #[test]
    fn conjunction_and_prefixed_keys() {
        let s = LabelSelector::parse("app.kubernetes.io/name=web,env in (prod),!canary").unwrap();
        assert_eq!(s.requirements.len(), 3);
        assert!(s.matches(&labels(&[
            ("app.kubernetes.io/name", "web"),
            ("env", "prod")
        ])));
        assert!(!s.matches(&labels(&[
            ("app.kubernetes.io/name", "web"),
            ("env", "prod"),
            ("canary", "1")
        ])));
        assert_eq!(s.required_value("app.kubernetes.io/name"), Some("web"));
    }

    #[test]
    fn errors_name_the_position_and_reason() {
        let e = LabelSelector::parse("app=web,,tier").unwrap_err();
        assert_eq!(e.position, 8);
        assert!(e.message.contains("expected a label key"), "{e}");
        let e = LabelSelector::parse("app in web").unwrap_err();
        assert!(e.message.contains("expected '('"), "{e}");
        let e = LabelSelector::parse("app in (a,b").unwrap_err();
        assert!(e.message.contains("expected ',' or ')'"), "{e}");
        let e = LabelSelector::parse("-bad=x").unwrap_err();
        assert!(e.message.contains("alphanumeric"), "{e}");
        let e = LabelSelector::parse("app=web tier=db").unwrap_err();
        assert!(e.message.contains("expected ',' or the end"), "{e}");
        let long = "a".repeat(64);
        assert!(LabelSelector::parse(&format!("k={long}")).is_err());
    }

    #[test]
    fn display_round_trips() {
        for s in ["a=b", "a!=b", "a in (x,y)", "a notin (x)", "a", "!a", "a>3"] {
            let p = LabelSelector::parse(s).unwrap();
            assert_eq!(LabelSelector::parse(&p.to_string()).unwrap(), p, "{s}");
        }
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse("metadata.name=web,metadata.namespace!=kube-system").unwrap();
        assert!(f.matches(|p| match p {
            "metadata.name" => Some("web"),
            "metadata.namespace" => Some("default"),
            _ => None,
        }));
        assert!(!f.matches(|p| match p {
            "metadata.name" => Some("web"),
            "metadata.namespace" => Some("kube-system"),
            _ => None,
        }));
        let f = FieldSelector::parse("spec.nodeName==").unwrap();
        assert!(f.matches(|_| None), "unknown field reads as empty");
        let f = FieldSelector::parse(r"metadata.name=a\,b").unwrap();
        assert_eq!(f.requirements[0].value, "a,b");
        assert!(FieldSelector::parse("metadata.name").is_err());
        assert!(FieldSelector::parse("=x").is_err());
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }
}
