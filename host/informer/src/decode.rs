//! Reading the wire: watch lines, list pages and API objects, each in one
//! skipping pass over its bytes.
//!
//! Job: turn the bytes the API server sent into [`Object`]s while parsing only
//! what the informer reads (name, namespace, uid, resourceVersion, generation,
//! labels, annotations, timestamps and owner references). Everything else,
//! `spec` and `status` above all, is skipped, not decoded: the scanner is
//! [sonic-rs](https://docs.rs/sonic-rs)'s lazy object iterator, which finds the
//! end of a value it does not parse with SIMD string and bracket scans. (simd-json
//! was the other candidate: it builds a tape of the whole document and rewrites
//! its input in place, so it would decode what we skip and need a copy of the
//! bytes we keep.)
//!
//! Invariant: the cached JSON is the object's own text with exactly one change,
//! `metadata.managedFields` removed when the transform strips it; an object
//! without managedFields is cached byte for byte as it arrived. Every metadata
//! field comes from the same pass that finds the metadata, and a value of the
//! wrong JSON type is an error naming the field, as serde's derive would say.

use std::borrow::Cow;

use sonic_rs::{JsonValueTrait, LazyValue};

use crate::object::{ControllerRef, Object, ObjectError, ObjectMeta, Transform};
use crate::str_map::StrMap;

/// One line of a watch stream: its `type` and the raw text of its `object`.
#[derive(Debug)]
pub(crate) struct WatchLine<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub(crate) kind: Cow<'a, str>,
    /// The event's object, undecoded.
    pub(crate) object: &'a str,
}

/// Splits a watch line into its type and its object's text.
pub(crate) fn watch_line(line: &[u8]) -> Result<WatchLine<'_>, String> {
    let text = std::str::from_utf8(line).map_err(|e| e.to_string())?;
    let mut kind = None;
    let mut object = None;
    for field in sonic_rs::to_object_iter(text) {
        let (k, v) = field.map_err(|e| e.to_string())?;
        match &*k {
            "type" => kind = Some(string(&v).ok_or("field `type` is not a string")?),
            "object" => object = Some(span(text, &v)),
            _ => {}
        }
    }
    Ok(WatchLine {
        kind: kind.ok_or("missing field `type`")?,
        object: object.ok_or("missing field `object`")?,
    })
}

/// A list page: its `metadata` undecoded and each item's text.
pub(crate) struct RawPage<'a> {
    /// `metadata`, for the caller to decode (it is small).
    pub(crate) metadata: Option<&'a str>,
    /// `items`, each undecoded.
    pub(crate) items: Vec<&'a str>,
}

/// Splits a list answer into its metadata and its items.
pub(crate) fn list_page(body: &[u8]) -> Result<RawPage<'_>, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let mut page = RawPage {
        metadata: None,
        items: Vec::new(),
    };
    for field in sonic_rs::to_object_iter(text) {
        let (k, v) = field.map_err(|e| e.to_string())?;
        match &*k {
            "metadata" if !v.is_null() => page.metadata = Some(span(text, &v)),
            "items" if v.is_null() => {}
            "items" => {
                let items = span(text, &v);
                if !items.starts_with('[') {
                    return Err("field `items` is not an array".into());
                }
                for item in self::items(items, Checked::Yes) {
                    page.items
                        .push(span(items, &item.map_err(|e| e.to_string())?));
                }
            }
            _ => {}
        }
    }
    Ok(page)
}

/// Parses one object's text (see [`Object::from_json`]). `checked` says the
/// text was already validated as JSON, as a value of a watch line or a list
/// page read by [`watch_line`] or [`list_page`]: it is then scanned without a
/// second validation.
pub(crate) fn object(
    text: &str,
    transform: &Transform,
    checked: Checked,
) -> Result<Object, ObjectError> {
    let mut meta_span: Option<&str> = None;
    for field in fields(text, checked) {
        let (k, v) = field.map_err(json)?;
        if k == "metadata" {
            meta_span = Some(span(text, &v));
        }
    }
    let Some(meta_text) = meta_span.filter(|m| *m != "null") else {
        return Err(ObjectError::MissingName);
    };
    // The object's own pass validated everything inside it.
    let (meta, stripped) = metadata(meta_text, transform, Checked::Yes)?;
    let json = match stripped {
        // The metadata's text lies inside `text`: splice the new one in.
        Some(new_meta) => {
            let start = offset(text, meta_text);
            let mut out = String::with_capacity(text.len() - meta_text.len() + new_meta.len());
            out.push_str(&text[..start]);
            out.push_str(&new_meta);
            out.push_str(&text[start + meta_text.len()..]);
            out.into_boxed_str()
        }
        None => Box::from(text),
    };
    Ok(Object::new(meta, json))
}

/// Reads `metadata`; returns its new text when the transform removed a field.
fn metadata(
    text: &str,
    transform: &Transform,
    checked: Checked,
) -> Result<(ObjectMeta, Option<String>), ObjectError> {
    if !text.starts_with('{') {
        return Err(ObjectError::Json("metadata is not an object".into()));
    }
    let mut meta = ObjectMeta::default();
    let mut name = None;
    let mut dropped = false;
    // The fields kept, in order, for rebuilding the text if one is dropped.
    let mut kept: Vec<(Cow<'_, str>, &str)> = Vec::new();
    for field in fields(text, checked) {
        let (k, v) = field.map_err(json)?;
        if transform.strip_managed_fields && k == "managedFields" {
            dropped = true;
            continue;
        }
        match &*k {
            "name" => name = opt_string(&v, "name")?,
            "namespace" => meta.namespace = opt_string(&v, "namespace")?.filter(|n| !n.is_empty()),
            "uid" => meta.uid = opt_string(&v, "uid")?.unwrap_or_default(),
            "resourceVersion" => {
                meta.resource_version = opt_string(&v, "resourceVersion")?.unwrap_or_default()
            }
            "generation" => {
                meta.generation = if v.is_null() {
                    None
                } else {
                    Some(
                        v.as_i64()
                            .ok_or_else(|| wrong("generation", "an integer"))?,
                    )
                }
            }
            "labels" => meta.labels = string_map(&v, "labels")?,
            "annotations" => meta.annotations = string_map(&v, "annotations")?,
            "creationTimestamp" => meta.creation_timestamp = opt_string(&v, "creationTimestamp")?,
            "deletionTimestamp" => meta.deletion_timestamp = opt_string(&v, "deletionTimestamp")?,
            "ownerReferences" => owners(&v, &mut meta)?,
            _ => {}
        }
        kept.push((k, span(text, &v)));
    }
    meta.name = name.ok_or(ObjectError::MissingName)?;
    if !dropped {
        return Ok((meta, None));
    }
    let mut out = String::with_capacity(text.len());
    out.push('{');
    for (i, (k, raw)) in kept.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_key(&mut out, k);
        out.push(':');
        out.push_str(raw);
    }
    out.push('}');
    Ok((meta, Some(out)))
}

/// `metadata.ownerReferences`: every owner's uid, and the controlling one.
fn owners(v: &LazyValue<'_>, meta: &mut ObjectMeta) -> Result<(), ObjectError> {
    if v.is_null() {
        return Ok(());
    }
    let text = v.as_raw_str();
    if !text.starts_with('[') {
        return Err(wrong("ownerReferences", "an array"));
    }
    for item in items(text, Checked::Yes) {
        let item = item.map_err(json)?;
        if !item.as_raw_str().starts_with('{') {
            return Err(wrong("ownerReferences", "an array of objects"));
        }
        let mut owner = ControllerRef::default();
        let mut controller = false;
        for field in fields(item.as_raw_str(), Checked::Yes) {
            let (k, v) = field.map_err(json)?;
            let slot = match &*k {
                "uid" => &mut owner.uid,
                "apiVersion" => &mut owner.api_version,
                "kind" => &mut owner.kind,
                "name" => &mut owner.name,
                "controller" => {
                    controller = match v.as_bool() {
                        Some(b) => b,
                        None if v.is_null() => false,
                        None => return Err(wrong("ownerReferences.controller", "a boolean")),
                    };
                    continue;
                }
                _ => continue,
            };
            *slot = opt_string(&v, "ownerReferences")?.unwrap_or_default();
        }
        meta.owner_uids.push(owner.uid.clone());
        if controller && meta.controller.is_none() {
            meta.controller = Some(owner);
        }
    }
    Ok(())
}

/// Whether a text was validated as JSON by an enclosing pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// It comes from a value that a validating pass already skipped over.
    Yes,
    /// It comes from outside: every value is validated as it is skipped.
    No,
}

/// The fields of a JSON object, validated while they are skipped unless
/// `checked` says an enclosing pass did that.
fn fields(text: &str, checked: Checked) -> sonic_rs::ObjectJsonIter<'_> {
    match checked {
        // SAFETY: sonic-rs requires valid JSON for its unchecked scan; the
        // text is a value that a validating iterator already skipped over
        // (the only callers passing `Checked::Yes`), and it is `&str`, so UTF-8.
        Checked::Yes => unsafe { sonic_rs::to_object_iter_unchecked(text) },
        Checked::No => sonic_rs::to_object_iter(text),
    }
}

/// The elements of a JSON array; see [`fields`].
fn items(text: &str, checked: Checked) -> sonic_rs::ArrayJsonIter<'_> {
    match checked {
        // SAFETY: as in `fields`.
        Checked::Yes => unsafe { sonic_rs::to_array_iter_unchecked(text) },
        Checked::No => sonic_rs::to_array_iter(text),
    }
}

/// A map of strings (`labels`, `annotations`); `null` is empty.
fn string_map(v: &LazyValue<'_>, field: &str) -> Result<StrMap, ObjectError> {
    if v.is_null() {
        return Ok(StrMap::default());
    }
    let text = v.as_raw_str();
    if !text.starts_with('{') {
        return Err(wrong(field, "a map of strings"));
    }
    let mut pairs = Vec::new();
    for entry in fields(text, Checked::Yes) {
        let (k, v) = entry.map_err(json)?;
        let v = string(&v).ok_or_else(|| wrong(field, "a map of strings"))?;
        pairs.push((k, v));
    }
    Ok(StrMap::from_pairs(pairs))
}

/// A string field that may be `null` or absent.
fn opt_string(v: &LazyValue<'_>, field: &str) -> Result<Option<String>, ObjectError> {
    if v.is_null() {
        return Ok(None);
    }
    string(v)
        .map(|s| Some(s.into_owned()))
        .ok_or_else(|| wrong(field, "a string"))
}

/// A JSON string's value, borrowed from the input unless it has escapes.
fn string<'de>(v: &LazyValue<'de>) -> Option<Cow<'de, str>> {
    match v.as_raw_cow() {
        Cow::Borrowed(raw)
            if raw.len() >= 2 && raw.starts_with('"') && !raw.as_bytes().contains(&b'\\') =>
        {
            Some(Cow::Borrowed(&raw[1..raw.len() - 1]))
        }
        _ => v.as_str().map(|s| Cow::Owned(s.to_string())),
    }
}

/// The text of `v`, a value read from `text`, as a slice of `text`.
fn span<'a>(text: &'a str, v: &LazyValue<'_>) -> &'a str {
    let raw = v.as_raw_str();
    let start = offset(text, raw);
    &text[start..start + raw.len()]
}

/// Where `inner`, a slice of `outer`, starts in it.
fn offset(outer: &str, inner: &str) -> usize {
    let start = (inner.as_ptr() as usize).wrapping_sub(outer.as_ptr() as usize);
    assert!(
        start <= outer.len() && start + inner.len() <= outer.len(),
        "a value borrowed from the input lies inside it"
    );
    start
}

/// Writes a JSON object key, escaping it only when it needs it.
fn push_key(out: &mut String, key: &str) {
    if key
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(key);
        out.push('"');
    } else {
        // Keys come from a JSON object, so re-encoding them cannot fail.
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
    }
}

fn json(e: sonic_rs::Error) -> ObjectError {
    ObjectError::Json(e.to_string())
}

fn wrong(field: &str, expected: &str) -> ObjectError {
    ObjectError::Json(format!("metadata.{field} is not {expected}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<Object, ObjectError> {
        object(raw, &Transform::default(), Checked::No)
    }

    #[test]
    fn an_object_without_managed_fields_is_cached_byte_for_byte() {
        let raw = r#"{"kind":"Pod", "metadata":{"name":"a","namespace":"ns","labels":{"x":"1"}},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
        assert_eq!(&*parse(raw).unwrap().json(), raw);
    }

    #[test]
    fn stripping_managed_fields_changes_nothing_else() {
        let raw = r#"{"kind":"Pod","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}],"uid":"u"},"spec":{"x":[1,{"y":"]}"}]}}"#;
        let o = parse(raw).unwrap();
        assert_eq!(
            &*o.json(),
            r#"{"kind":"Pod","metadata":{"name":"a","uid":"u"},"spec":{"x":[1,{"y":"]}"}]}}"#
        );
        assert_eq!(o.meta.uid, "u");
    }

    #[test]
    fn escaped_strings_are_unescaped_in_metadata_and_kept_in_the_json() {
        let raw = r#"{"metadata":{"name":"a\u0062","labels":{"k\"q":"v\\w"},"annotations":{"n":"line\nbreak"}}}"#;
        let o = parse(raw).unwrap();
        assert_eq!(o.meta.name, "ab");
        assert_eq!(o.meta.labels.get("k\"q"), Some("v\\w"));
        assert_eq!(o.meta.annotations.get("n"), Some("line\nbreak"));
        assert_eq!(&*o.json(), raw);
    }

    #[test]
    fn owner_references_give_every_uid_and_the_first_controller() {
        let raw = r#"{"metadata":{"name":"p","ownerReferences":[{"uid":"o1","kind":"A"},{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"o2","controller":true,"blockOwnerDeletion":true},{"uid":"o3","controller":true}]}}"#;
        let o = parse(raw).unwrap();
        assert_eq!(o.meta.owner_uids, ["o1", "o2", "o3"]);
        let c = o.meta.controller.unwrap();
        assert_eq!(
            (c.kind.as_str(), c.name.as_str(), c.uid.as_str()),
            ("ReplicaSet", "rs", "o2")
        );
        assert_eq!(c.group(), "apps");
    }

    #[test]
    fn null_metadata_fields_read_as_absent() {
        let raw = r#"{"metadata":{"name":"p","namespace":null,"labels":null,"generation":null,"ownerReferences":null,"deletionTimestamp":null}}"#;
        let o = parse(raw).unwrap();
        assert_eq!(o.key(), "p");
        assert!(o.meta.labels.is_empty() && o.meta.generation.is_none());
    }

    #[test]
    fn wrong_types_and_broken_json_are_errors_naming_the_field() {
        for (raw, says) in [
            (
                r#"{"metadata":{"name":1}}"#,
                "metadata.name is not a string",
            ),
            (
                r#"{"metadata":{"name":"a","labels":{"k":1}}}"#,
                "metadata.labels",
            ),
            (
                r#"{"metadata":{"name":"a","generation":"2"}}"#,
                "metadata.generation",
            ),
            (
                r#"{"metadata":{"name":"a","ownerReferences":{}}}"#,
                "ownerReferences",
            ),
            (r#"{"metadata":[]}"#, "metadata is not an object"),
        ] {
            let e = parse(raw).unwrap_err().to_string();
            assert!(e.contains(says), "{raw}: {e}");
        }
        for raw in [
            r#"{"metadata":{"name":"a"},"spec":{"x":[1,}}"#,
            r#"{"metadata":{"name":"a""#,
            "[]",
        ] {
            assert!(matches!(parse(raw), Err(ObjectError::Json(_))), "{raw}");
        }
        assert!(matches!(
            parse(r#"{"kind":"Pod"}"#),
            Err(ObjectError::MissingName)
        ));
    }

    #[test]
    fn watch_lines_and_list_pages_split_without_decoding_objects() {
        let line = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"},"spec":{}}}"#;
        let w = watch_line(line).unwrap();
        assert_eq!(w.kind, "MODIFIED");
        assert_eq!(w.object, r#"{"metadata":{"name":"a"},"spec":{}}"#);
        assert!(watch_line(br#"{"object":{}}"#).is_err());
        // The line's pass validates the object it carries: what is later
        // scanned unchecked is valid JSON.
        assert!(
            watch_line(br#"{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":[1,]}}"#)
                .is_err()
        );
        assert!(list_page(br#"{"items":[{"metadata":{"name":"a"},"spec":{"x":}}]}"#).is_err());
        assert!(watch_line(b"{\"type\":\"ADDED\",\"object\":{\xff}}").is_err());

        let body = br#"{"kind":"PodList","metadata":{"resourceVersion":"9","continue":"c"},"items":[{"metadata":{"name":"a"}}, {"metadata":{"name":"b"}}]}"#;
        let p = list_page(body).unwrap();
        assert_eq!(
            p.metadata,
            Some(r#"{"resourceVersion":"9","continue":"c"}"#)
        );
        assert_eq!(
            p.items,
            [
                r#"{"metadata":{"name":"a"}}"#,
                r#"{"metadata":{"name":"b"}}"#
            ]
        );
        assert!(list_page(br#"{"items":null}"#).unwrap().items.is_empty());
        assert!(list_page(br#"{"items":{}}"#).is_err());
    }
}
