//! A compact, immutable string map for an object's labels and annotations.
//!
//! Job: hold a few dozen short keys and values per cached object in two
//! allocations (all the text in one buffer, the end offsets in another)
//! instead of a tree node plus two strings per entry. With 200k cached pods of
//! about nine labels and annotations each, that is about 1 KB less per object.
//!
//! Invariant: keys are unique and sorted, so lookups are binary searches and
//! iteration is in key order (like the `BTreeMap` it is built from).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer};

/// An immutable map from string keys to string values, in key order.
///
/// ```
/// use kube_informer::str_map::StrMap;
/// let m: StrMap = [("tier", "web"), ("app", "shop")].into_iter().collect();
/// assert_eq!(m.get("app"), Some("shop"));
/// assert_eq!(m.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["app", "tier"]);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StrMap {
    /// Every key and value, concatenated: key 0, value 0, key 1, ...
    text: Box<str>,
    /// The end offset in `text` of each key and value (two per entry).
    ends: Box<[u32]>,
}

impl StrMap {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ends.len() / 2
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn part(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let end = self.ends[i] as usize;
        assert!(start <= end && end <= self.text.len());
        // SAFETY: every offset in `ends` was taken right after pushing a whole
        // `&str` onto `text` (see `from_sorted`), so it is a char boundary,
        // and the range is in bounds (checked above). This is the per-string
        // step of every event lowered into a plugin, hence no second check.
        unsafe { self.text.get_unchecked(start..end) }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.part(2 * mid).cmp(key) {
                std::cmp::Ordering::Equal => return Some(self.part(2 * mid + 1)),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        (0..self.len()).map(|i| (self.part(2 * i), self.part(2 * i + 1)))
    }

    /// From entries already sorted by key and unique.
    fn from_sorted<'a>(entries: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Self {
        let total: usize = entries.clone().map(|(k, v)| k.len() + v.len()).sum();
        let mut text = String::with_capacity(total);
        let mut ends = Vec::new();
        for (k, v) in entries {
            text.push_str(k);
            ends.push(offset(text.len()));
            text.push_str(v);
            ends.push(offset(text.len()));
        }
        Self {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }
}

/// An offset into the text. Labels and annotations live in one object, which
/// the API server caps far below 4 GiB.
fn offset(n: usize) -> u32 {
    u32::try_from(n).expect("labels and annotations of one object exceed 4 GiB")
}

impl From<&BTreeMap<String, String>> for StrMap {
    fn from(m: &BTreeMap<String, String>) -> Self {
        Self::from_sorted(m.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

impl From<BTreeMap<String, String>> for StrMap {
    fn from(m: BTreeMap<String, String>) -> Self {
        Self::from(&m)
    }
}

/// Collects entries in any order; a repeated key keeps its last value.
impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for StrMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let m: BTreeMap<String, String> = iter
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Self::from(&m)
    }
}

impl StrMap {
    /// From entries in any order, borrowed where they can be; a repeated key
    /// keeps its last value. Only the map's own two allocations are made.
    pub(crate) fn from_pairs(mut v: Vec<(Cow<'_, str>, Cow<'_, str>)>) -> Self {
        // Stable sort, then keep the last value of a repeated key.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Cow<'_, str>, Cow<'_, str>)> = Vec::with_capacity(v.len());
        for (k, val) in v {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = val,
                _ => out.push((k, val)),
            }
        }
        Self::from_sorted(out.iter().map(|(k, v)| (&**k, &**v)))
    }
}

impl fmt::Debug for StrMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A JSON string borrowed from the input when it has no escapes.
#[derive(Deserialize)]
pub(crate) struct JsonStr<'a>(#[serde(borrow)] pub(crate) Cow<'a, str>);

/// Reads a JSON object of strings straight into the map: the only
/// allocations are the map's own (plus any string with escapes).
impl<'de> Deserialize<'de> for StrMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = StrMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of strings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<StrMap, A::Error> {
                let mut v: Vec<(Cow<'de, str>, Cow<'de, str>)> = Vec::new();
                while let Some((k, val)) = a.next_entry::<JsonStr<'de>, JsonStr<'de>>()? {
                    v.push((k.0, val.0));
                }
                Ok(StrMap::from_pairs(v))
            }
        }
        d.deserialize_map(V)
    }
}

impl wasm_informer_selector::Labels for StrMap {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_and_order_match_a_btreemap() {
        let pairs = [
            ("app.kubernetes.io/name", "search"),
            ("app", "search"),
            ("tier", ""),
            ("", "empty key"),
            ("release", "stable"),
            ("app", "again"),
        ];
        let tree: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let m: StrMap = pairs.into_iter().collect();
        assert_eq!(m.len(), tree.len());
        assert!(m
            .iter()
            .eq(tree.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
        for k in tree.keys() {
            assert_eq!(m.get(k), tree.get(k).map(String::as_str), "{k:?}");
        }
        assert_eq!(m.get("app"), Some("again"), "the last value wins");
        assert_eq!(m.get("tier"), Some(""));
        assert_eq!(m.get("missing"), None);
        assert_eq!(m.get("ap"), None);
        assert!(StrMap::default().is_empty());
        assert_eq!(StrMap::default().get(""), None);
        assert_eq!(format!("{:?}", m).matches("=>").count(), 0);
        assert_eq!(
            format!("{:?}", StrMap::from_iter([("a", "b")])),
            r#"{"a": "b"}"#
        );
    }

    #[test]
    fn deserializes_from_a_json_object() {
        let m: StrMap =
            serde_json::from_str(r#"{"b":"2","a":"1","b":"3","\u00e9":"x\"y"}"#).unwrap();
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [("a", "1"), ("b", "3"), ("\u{e9}", "x\"y")],
            "sorted, last value wins, escapes decoded"
        );
        assert!(serde_json::from_str::<StrMap>(r#"{"a":1}"#).is_err());
    }

    #[test]
    fn selectors_match_it() {
        let m: StrMap = [("app", "web"), ("n", "5")].into_iter().collect();
        let sel = |s: &str| wasm_informer_selector::LabelSelector::parse(s).unwrap();
        assert!(sel("app=web,n>3").matches(&m));
        assert!(sel("!missing,app in (web,db)").matches(&m));
        assert!(!sel("app!=web").matches(&m));
    }
}
