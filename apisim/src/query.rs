//! Query-string decoding and the list/watch parameters parsed from it.
//!
//! Invariant: every parameter value is percent-decoded exactly once; a malformed value of a known
//! parameter is a 400 naming the parameter, never silently ignored.

use std::time::Duration;
use wasm_informer_selector::{FieldSelector, LabelSelector};

use crate::shard::ShardSelector;
use crate::status::ApiError;
use crate::store::{ListRequest, ListVersion};

/// Percent-decodes one query component (`+` is a space).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        let x = (h * 16 + l) as u8;
                        out.push(x);
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes one boolean parameter value: `0` and `false` (any case) are false, anything else true.
pub fn parse_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

/// Parsed query parameters, in order (repeated keys are kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Decoded (key, value) pairs.
    pub pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses a raw query string (without `?`).
    pub fn parse(raw: &str) -> Query {
        let pairs = raw
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (percent_decode(k), percent_decode(v)),
                None => (percent_decode(p), String::new()),
            })
            .collect();
        Query { pairs }
    }

    /// First value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter as the apiserver decodes it (`Convert_Slice_string_To_bool`): absent,
    /// `0` or `false` (any case) is false; any other value, the empty string included, is true.
    pub fn flag(&self, key: &str) -> bool {
        self.opt_flag(key).unwrap_or(false)
    }

    /// A boolean parameter that may be absent (`*bool` in the apiserver): None when absent,
    /// otherwise decoded as [`Query::flag`] does.
    pub fn opt_flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(parse_bool)
    }

    /// Whether the request is a dry run (`dryRun=All`). Any other non-empty value is a 400, as
    /// the apiserver answers.
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        let mut dry = false;
        for (k, v) in &self.pairs {
            if k != "dryRun" || v.is_empty() {
                continue;
            }
            if v != "All" {
                return Err(ApiError::bad_request(format!(
                    "Invalid dryRun value: dryRun: Unsupported value: {v:?}: supported values: \"All\""
                )));
            }
            dry = true;
        }
        Ok(dry)
    }

    fn parse_num<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!("invalid value for query parameter {key}: {v:?}"))
            }),
        }
    }

    /// The label selector (`labelSelector`).
    pub fn label_selector(&self) -> Result<LabelSelector, ApiError> {
        LabelSelector::parse(self.get("labelSelector").unwrap_or("")).map_err(|e| {
            ApiError::bad_request(format!("unable to parse requirement: labelSelector: {e}"))
        })
    }

    /// The field selector (`fieldSelector`).
    pub fn field_selector(&self) -> Result<FieldSelector, ApiError> {
        FieldSelector::parse(self.get("fieldSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("invalid fieldSelector: {e}")))
    }

    /// The shard selector (`shardSelector`, KEP-5866) when `gate` (`ShardedListAndWatch`) is on:
    /// None when the parameter is absent or empty, a 400 naming the parameter and the reason
    /// when it is malformed. With the gate off the parameter is ignored, malformed or not, as a
    /// server without the feature ignores an unknown parameter.
    pub fn shard_selector(&self, gate: bool) -> Result<Option<ShardSelector>, ApiError> {
        if !gate {
            return Ok(None);
        }
        match self.get("shardSelector") {
            None | Some("") => Ok(None),
            Some(v) => ShardSelector::parse(v)
                .map(Some)
                .map_err(|e| ApiError::bad_request(format!("invalid shardSelector: {e}"))),
        }
    }

    /// `resourceVersion` as a number; None when unset or empty.
    pub fn resource_version(&self) -> Result<Option<u64>, ApiError> {
        match self.get("resourceVersion") {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid resource version: {v:?} (query parameter resourceVersion)"
                ))
            }),
        }
    }

    /// `timeoutSeconds` of a watch.
    pub fn timeout(&self) -> Result<Option<Duration>, ApiError> {
        Ok(self
            .parse_num::<u64>("timeoutSeconds")?
            .map(Duration::from_secs))
    }

    /// The list request these parameters describe, in `namespace`; `sharding` is the
    /// `ShardedListAndWatch` gate (see [`Query::shard_selector`]).
    pub fn list_request(
        &self,
        namespace: Option<&str>,
        sharding: bool,
    ) -> Result<ListRequest, ApiError> {
        let rv = self.resource_version()?;
        let limit = self.parse_num::<usize>("limit")?;
        let version = match (self.get("resourceVersionMatch").unwrap_or(""), rv) {
            ("", None) | ("", Some(0)) => ListVersion::Latest,
            // Legacy semantics: an RV with a limit is an exact snapshot, without one "not older than".
            ("", Some(x)) if limit.is_some_and(|l| l > 0) => ListVersion::Exact(x),
            ("", Some(x)) => ListVersion::NotOlderThan(x),
            ("NotOlderThan", Some(x)) => ListVersion::NotOlderThan(x),
            ("NotOlderThan", None) => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                ))
            }
            ("Exact", Some(0)) => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ))
            }
            ("Exact", Some(x)) => ListVersion::Exact(x),
            ("Exact", None) => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                ))
            }
            (other, _) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                )))
            }
        };
        Ok(ListRequest {
            namespace: namespace.map(str::to_string),
            labels: self.label_selector()?,
            fields: self.field_selector()?,
            limit,
            continue_token: self
                .get("continue")
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            version,
            shard: self.shard_selector(sharding)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_selectors() {
        let q = Query::parse("fieldSelector=metadata.name%3Dweb&limit=500&resourceVersion=0&labelSelector=a+in+(x%2Cy)");
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=web"));
        assert_eq!(q.get("labelSelector"), Some("a in (x,y)"));
        let r = q.list_request(None, false).unwrap();
        assert_eq!(r.limit, Some(500));
        assert_eq!(r.version, ListVersion::Latest);
    }

    #[test]
    fn rv_semantics() {
        let r = Query::parse("resourceVersion=7&limit=5")
            .list_request(None, false)
            .unwrap();
        assert_eq!(r.version, ListVersion::Exact(7));
        let r = Query::parse("resourceVersion=7")
            .list_request(None, false)
            .unwrap();
        assert_eq!(r.version, ListVersion::NotOlderThan(7));
        let e = Query::parse("resourceVersionMatch=Bogus&resourceVersion=1")
            .list_request(None, false)
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = Query::parse("limit=abc")
            .list_request(None, false)
            .unwrap_err();
        assert!(e.message.contains("limit"));
    }

    #[test]
    fn booleans_decode_like_the_apiserver() {
        let q = Query::parse("a=true&b=1&c=0&d=false&e=FALSE&f=&g&h=yes&i=False&j=TRUE");
        for (k, want) in [
            ("a", true),
            ("b", true),
            ("c", false),
            ("d", false),
            ("e", false),
            ("f", true),
            ("g", true),
            ("h", true),
            ("i", false),
            ("j", true),
            ("absent", false),
        ] {
            assert_eq!(q.flag(k), want, "{k}");
        }
        assert_eq!(q.opt_flag("absent"), None);
        assert_eq!(q.opt_flag("c"), Some(false));
        assert!(Query::parse("dryRun=All").dry_run().unwrap());
        assert!(!Query::parse("dryRun=").dry_run().unwrap());
        assert_eq!(Query::parse("dryRun=Some").dry_run().unwrap_err().code, 400);
    }

    #[test]
    fn trailing_percent_is_kept() {
        assert_eq!(percent_decode("a%"), "a%");
        assert_eq!(percent_decode("a%4"), "a%4");
        assert_eq!(percent_decode("%41"), "A");
    }
}
