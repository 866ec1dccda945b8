//! Decoding of Kubernetes protobuf request bodies for the kinds kubectl's imperative generators
//! create with the typed clientset (`kubectl create namespace|configmap|secret`) and the access
//! reviews `kubectl auth can-i` creates.
//!
//! Invariant: a protobuf body decodes either to the same JSON object kubectl would have sent as JSON
//! (for the fields listed below) or to a 415 naming the kind and the reason; it is never stored
//! half-decoded. Decoded fields: ObjectMeta name, generateName, namespace, labels, annotations,
//! finalizers; ConfigMap data, binaryData, immutable; Secret data, stringData, type, immutable;
//! Namespace spec.finalizers; SelfSubjectAccessReview spec.resourceAttributes (namespace, verb,
//! group, version, resource, subresource, name) and spec.nonResourceAttributes (path, verb);
//! SelfSubjectRulesReview spec.namespace. Other fields are skipped.

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::status::ApiError;

const MAGIC: &[u8] = b"k8s\x00";

fn unsupported(msg: impl Into<String>) -> ApiError {
    ApiError {
        code: 415,
        reason: "UnsupportedMediaType".into(),
        message: msg.into(),
        details: None,
        continue_token: None,
    }
}

/// One protobuf field.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| unsupported("protobuf body is truncated (varint)"))?;
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(unsupported("protobuf body has an over-long varint"))
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, ApiError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (num, wt) = (key >> 3, key & 7);
        let f = match wt {
            0 => Field::Varint(self.varint()?),
            1 | 5 => {
                let n = if wt == 1 { 8 } else { 4 };
                if self.pos + n > self.buf.len() {
                    return Err(unsupported("protobuf body is truncated (fixed)"));
                }
                self.pos += n;
                Field::Fixed
            }
            2 => {
                let len = self.varint()? as usize;
                let end = self
                    .pos
                    .checked_add(len)
                    .filter(|e| *e <= self.buf.len())
                    .ok_or_else(|| unsupported("protobuf body is truncated (length-delimited)"))?;
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Field::Bytes(s)
            }
            other => {
                return Err(unsupported(format!(
                    "protobuf wire type {other} is not supported"
                )))
            }
        };
        Ok(Some((num, f)))
    }
}

fn string(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| unsupported("protobuf string is not UTF-8"))
}

/// Decodes a `map<string, string|bytes>` entry.
fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), ApiError> {
    let mut r = Reader::new(b);
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1, Field::Bytes(s)) => k = string(s)?,
            (2, Field::Bytes(s)) if bytes_value => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(s))
            }
            (2, Field::Bytes(s)) => v = json!(string(s)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn insert_map(obj: &mut Map<String, Value>, field: &str, entry: (String, Value)) {
    obj.entry(field)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("map field is an object")
        .insert(entry.0, entry.1);
}

fn push(obj: &mut Map<String, Value>, field: &str, v: Value) {
    obj.entry(field)
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .expect("list field is an array")
        .push(v);
}

fn object_meta(b: &[u8]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    let mut r = Reader::new(b);
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1, Field::Bytes(s)) if !s.is_empty() => {
                m.insert("name".into(), json!(string(s)?));
            }
            (2, Field::Bytes(s)) if !s.is_empty() => {
                m.insert("generateName".into(), json!(string(s)?));
            }
            (3, Field::Bytes(s)) if !s.is_empty() => {
                m.insert("namespace".into(), json!(string(s)?));
            }
            (11, Field::Bytes(s)) => insert_map(&mut m, "labels", map_entry(s, false)?),
            (12, Field::Bytes(s)) => insert_map(&mut m, "annotations", map_entry(s, false)?),
            (14, Field::Bytes(s)) => push(&mut m, "finalizers", json!(string(s)?)),
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

fn body(kind: &str, raw: &[u8]) -> Result<Value, ApiError> {
    let mut o = Map::new();
    let mut r = Reader::new(raw);
    while let Some((n, f)) = r.next()? {
        match (kind, n, f) {
            (_, 1, Field::Bytes(s)) => {
                o.insert("metadata".into(), object_meta(s)?);
            }
            ("ConfigMap", 2, Field::Bytes(s)) => insert_map(&mut o, "data", map_entry(s, false)?),
            ("ConfigMap", 3, Field::Bytes(s)) => {
                insert_map(&mut o, "binaryData", map_entry(s, true)?)
            }
            ("ConfigMap", 4, Field::Varint(v)) => {
                o.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 2, Field::Bytes(s)) => insert_map(&mut o, "data", map_entry(s, true)?),
            ("Secret", 3, Field::Bytes(s)) if !s.is_empty() => {
                o.insert("type".into(), json!(string(s)?));
            }
            ("Secret", 4, Field::Bytes(s)) => {
                insert_map(&mut o, "stringData", map_entry(s, false)?)
            }
            ("Secret", 5, Field::Varint(v)) => {
                o.insert("immutable".into(), json!(v != 0));
            }
            ("Namespace", 2, Field::Bytes(s)) => {
                let mut spec = Map::new();
                let mut sr = Reader::new(s);
                while let Some((n, f)) = sr.next()? {
                    if let (1, Field::Bytes(x)) = (n, f) {
                        push(&mut spec, "finalizers", json!(string(x)?));
                    }
                }
                o.insert("spec".into(), Value::Object(spec));
            }
            ("SelfSubjectAccessReview", 2, Field::Bytes(s)) => {
                let mut spec = Map::new();
                let mut sr = Reader::new(s);
                while let Some((n, f)) = sr.next()? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => {
                            let names = [
                                "namespace",
                                "verb",
                                "group",
                                "version",
                                "resource",
                                "subresource",
                                "name",
                            ];
                            spec.insert("resourceAttributes".into(), strings(x, &names)?);
                        }
                        (2, Field::Bytes(x)) => {
                            spec.insert(
                                "nonResourceAttributes".into(),
                                strings(x, &["path", "verb"])?,
                            );
                        }
                        _ => {}
                    }
                }
                o.insert("spec".into(), Value::Object(spec));
            }
            ("SelfSubjectRulesReview", 2, Field::Bytes(s)) => {
                o.insert("spec".into(), strings(s, &["namespace"])?);
            }
            _ => {}
        }
    }
    Ok(Value::Object(o))
}

/// A message of string fields numbered 1.. in the order of `names`; empty ones are left out.
fn strings(b: &[u8], names: &[&str]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    let mut r = Reader::new(b);
    while let Some((n, f)) = r.next()? {
        if let (Some(name), Field::Bytes(x)) = (names.get((n as usize).wrapping_sub(1)), f) {
            if !x.is_empty() {
                m.insert(name.to_string(), json!(string(x)?));
            }
        }
    }
    Ok(Value::Object(m))
}

/// Decodes a `application/vnd.kubernetes.protobuf` body into the equivalent JSON object.
pub fn decode(buf: &[u8]) -> Result<Value, ApiError> {
    let rest = buf
        .strip_prefix(MAGIC)
        .ok_or_else(|| unsupported("protobuf body does not start with the k8s envelope magic"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    let mut r = Reader::new(rest);
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                let mut t = Reader::new(tm);
                while let Some((n, f)) = t.next()? {
                    match (n, f) {
                        (1, Field::Bytes(s)) => api_version = string(s)?,
                        (2, Field::Bytes(s)) => kind = string(s)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(s)) => raw = Some(s),
            (3, Field::Bytes(enc)) if !enc.is_empty() => {
                return Err(unsupported("protobuf content encodings are not supported"))
            }
            _ => {}
        }
    }
    if !matches!(
        (api_version.as_str(), kind.as_str()),
        ("v1", "ConfigMap")
            | ("v1", "Secret")
            | ("v1", "Namespace")
            | ("authorization.k8s.io/v1", "SelfSubjectAccessReview")
            | ("authorization.k8s.io/v1", "SelfSubjectRulesReview")
    ) {
        return Err(unsupported(format!(
            "protobuf bodies are accepted only for v1 ConfigMap, Secret, Namespace and authorization.k8s.io/v1 SelfSubjectAccessReview, SelfSubjectRulesReview (got {api_version} {kind}); send JSON"
        )));
    }
    let mut v = body(&kind, raw.unwrap_or_default())?;
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, b: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn decodes_a_configmap() {
        let entry = [field(1, b"k"), field(2, b"v")].concat();
        let label = [field(1, b"app"), field(2, b"x")].concat();
        let meta = [field(1, b"cfg"), field(3, b"ns"), field(11, &label)].concat();
        let raw = [field(1, &meta), field(2, &entry)].concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"ns","labels":{"app":"x"}},"data":{"k":"v"}})
        );
    }

    #[test]
    fn decodes_a_self_subject_access_review() {
        let attrs = [field(1, b"team-a"), field(2, b"patch"), field(5, b"pods")].concat();
        let spec = field(1, &attrs);
        let raw = [field(1, &[]), field(2, &spec)].concat();
        let tm = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap()["spec"],
            json!({"resourceAttributes": {"namespace": "team-a", "verb": "patch", "resource": "pods"}})
        );
    }

    #[test]
    fn rejects_other_kinds_and_garbage() {
        assert_eq!(decode(b"nope").unwrap_err().code, 415);
        let tm = [field(1, b"v1"), field(2, b"Pod")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm)].concat();
        let e = decode(&body).unwrap_err();
        assert!(e.message.contains("Pod"), "{}", e.message);
        let truncated = [MAGIC.to_vec(), vec![0x0a, 0x50]].concat();
        assert_eq!(decode(&truncated).unwrap_err().code, 415);
    }
}
