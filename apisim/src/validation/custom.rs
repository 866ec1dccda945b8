//! Custom resources against the `openAPIV3Schema` of their CRD version, as the apiextensions
//! apiserver validates them (`pkg/registry/customresource/validator.go` `Validate`:
//! `ValidateObjectMetaAccessor` with `NameIsDNSSubdomain`, then
//! `pkg/apiserver/validation/validation.go` `ValidateCustomResource` with kube-openapi's
//! validators, whose errors `kubeOpenAPIResultToFieldErrors` turns into field errors).
//!
//! Covered keywords: `type` (object, array, string, integer, number, boolean; `nullable`;
//! `x-kubernetes-int-or-string`), `properties`, `required`, `items`, `additionalProperties` (as a
//! schema), `enum`, `minimum`/`maximum` (with `exclusiveMinimum`/`exclusiveMaximum`),
//! `multipleOf`, `minLength`/`maxLength`, `pattern`, `minItems`/`maxItems`, `uniqueItems`,
//! `minProperties`/`maxProperties`. Not covered: `format`, `allOf`/`anyOf`/`oneOf`/`not`,
//! `x-kubernetes-validations` (CEL), list-type and embedded-resource checks, pruning of unknown
//! fields and defaulting.
//!
//! Invariant: error paths and messages are kube-openapi's (`spec.x in body must be of type
//! integer: "string"`, `... should be greater than or equal to 0`, ...); on update a subtree equal
//! to the old object's at the same path is not checked again (CRD validation ratcheting).

use regex::Regex;
use serde_json::Value;

use super::field::{self, go_float, go_quote, Bad, ErrorList};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names;

const IN: &str = "body";

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

struct Walker<'a> {
    errs: ErrorList,
    old: Option<&'a Value>,
}

impl Walker<'_> {
    fn type_matches(schema: &Value, v: &Value) -> Result<(), String> {
        if schema["x-kubernetes-int-or-string"] == true {
            return if matches!(v, Value::String(_)) || type_name(v) == "integer" {
                Ok(())
            } else {
                Err("integer,string".to_string())
            };
        }
        let Some(want) = schema["type"].as_str() else {
            return Ok(());
        };
        let got = type_name(v);
        let ok = want == got
            || (want == "number" && got == "integer")
            || (want == "integer"
                && got == "number"
                && v.as_f64().is_some_and(|f| f.fract() == 0.0));
        if ok {
            Ok(())
        } else {
            Err(want.to_string())
        }
    }

    /// Validates `v` at `path` (kube-openapi's name: `spec.a`, `spec.items[0]`).
    fn walk(&mut self, schema: &Value, v: &Value, old: Option<&Value>, path: &str) {
        if old == Some(v) {
            return;
        }
        if v.is_null() {
            // Nulls of fields that are not nullable are pruned before validation.
            return;
        }
        if let Err(want) = Self::type_matches(schema, v) {
            let got = type_name(v);
            self.errs.push(field::type_invalid(
                path,
                Bad::str(got),
                format!("{path} in {IN} must be of type {want}: {}", go_quote(got)),
            ));
            return;
        }
        match v {
            Value::String(s) => self.string(schema, s, path),
            Value::Number(_) => self.number(schema, v, path),
            Value::Array(items) => self.array(schema, items, old, path),
            _ => {}
        }
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.contains(v) {
                let values: Vec<String> = allowed
                    .iter()
                    .map(|a| {
                        a.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| a.to_string())
                    })
                    .collect();
                let refs: Vec<&str> = values.iter().map(String::as_str).collect();
                self.errs
                    .push(field::not_supported(path, Bad::json(v), &refs));
            }
        }
        if let Value::Object(m) = v {
            self.object(schema, m, old, path);
        }
    }

    fn string(&mut self, schema: &Value, s: &str, path: &str) {
        let len = s.chars().count() as i64;
        if let Some(max) = schema["maxLength"].as_i64() {
            if len > max {
                self.errs.push(field::too_long(path, max));
                return;
            }
        }
        if let Some(min) = schema["minLength"].as_i64() {
            if len < min {
                self.errs.push(field::invalid(
                    path,
                    Bad::str(s),
                    format!("{path} in {IN} should be at least {min} chars long"),
                ));
                return;
            }
        }
        if let Some(p) = schema["pattern"].as_str() {
            match Regex::new(p) {
                Ok(re) if re.is_match(s) => {}
                Ok(_) => self.errs.push(field::invalid(
                    path,
                    Bad::str(s),
                    format!("{path} in {IN} should match '{p}'"),
                )),
                Err(e) => self.errs.push(field::invalid(
                    path,
                    Bad::str(s),
                    format!("{path} in {IN} should match '{p}, but pattern is invalid: {e}'"),
                )),
            }
        }
    }

    fn number(&mut self, schema: &Value, v: &Value, path: &str) {
        let Some(x) = num(v) else {
            return;
        };
        if let Some(m) = num(&schema["multipleOf"]).filter(|m| *m > 0.0) {
            if (x / m).fract() != 0.0 {
                self.errs.push(field::invalid(
                    path,
                    Bad::json(v),
                    format!("{path} in {IN} should be a multiple of {}", go_float(m)),
                ));
            }
        }
        if let Some(min) = num(&schema["minimum"]) {
            let exclusive = schema["exclusiveMinimum"] == true;
            if x < min || (exclusive && x == min) {
                let rel = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.errs.push(field::invalid(
                    path,
                    Bad::json(v),
                    format!("{path} in {IN} should be {rel} {}", go_float(min)),
                ));
            }
        }
        if let Some(max) = num(&schema["maximum"]) {
            let exclusive = schema["exclusiveMaximum"] == true;
            if x > max || (exclusive && x == max) {
                let rel = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.errs.push(field::invalid(
                    path,
                    Bad::json(v),
                    format!("{path} in {IN} should be {rel} {}", go_float(max)),
                ));
            }
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], old: Option<&Value>, path: &str) {
        if schema["items"].is_object() {
            for (i, item) in items.iter().enumerate() {
                let old_item = old.and_then(|o| o.get(i));
                self.walk(&schema["items"], item, old_item, &format!("{path}[{i}]"));
            }
        }
        let n = items.len() as i64;
        if let Some(min) = schema["minItems"].as_i64().filter(|m| n < *m) {
            self.errs.push(field::invalid(
                path,
                Bad::num(n),
                format!("{path} in {IN} should have at least {min} items"),
            ));
        }
        if let Some(max) = schema["maxItems"].as_i64().filter(|m| n > *m) {
            self.errs.push(field::too_many(path, n, max));
        }
        if schema["uniqueItems"] == true
            && items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].contains(a))
        {
            self.errs.push(field::invalid(
                path,
                Bad::str(""),
                format!("{path} in {IN} shouldn't contain duplicates"),
            ));
        }
    }

    fn object(
        &mut self,
        schema: &Value,
        m: &serde_json::Map<String, Value>,
        old: Option<&Value>,
        path: &str,
    ) {
        let n = m.len() as i64;
        if let Some(min) = schema["minProperties"].as_i64().filter(|x| n < *x) {
            self.errs.push(field::invalid(
                path,
                Bad::num(n),
                format!("{path} in {IN} should have at least {min} properties"),
            ));
        }
        if let Some(max) = schema["maxProperties"].as_i64().filter(|x| n > *x) {
            self.errs.push(field::too_many(path, n, max));
        }
        let child = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        let props = schema["properties"].as_object();
        for (k, v) in m {
            let sub = props
                .and_then(|p| p.get(k))
                .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
            if let Some(sub) = sub {
                self.walk(sub, v, old.and_then(|o| o.get(k)), &child(k));
            }
        }
        for r in schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap_or("");
            if !m.contains_key(r) {
                self.errs.push(field::required(&child(r), ""));
            }
        }
    }
}

/// The schema of version `version` in a stored CRD, if it declares one.
pub fn schema_of<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)
        .map(|v| &v["schema"]["openAPIV3Schema"])
        .filter(|s| s.is_object())
}

fn schema_errors(obj: &Value, old: Option<&Value>, schema: Option<&Value>) -> ErrorList {
    let Some(schema) = schema else {
        return vec![];
    };
    let mut w = Walker {
        errs: ErrorList::new(),
        old,
    };
    // The object's metadata is the apiserver's; the schema only describes the rest.
    let mut body = obj.clone();
    let mut old_body = w.old.cloned();
    for o in std::iter::once(&mut body).chain(old_body.as_mut()) {
        if let Some(m) = o.as_object_mut() {
            m.remove("metadata");
        }
    }
    w.walk(schema, &body, old_body.as_ref(), "");
    w.errs
}

/// The custom resource validator's `Validate`: metadata, then the schema.
pub fn validate_custom_resource(
    obj: &Value,
    namespaced: bool,
    schema: Option<&Value>,
) -> ErrorList {
    let mut errs = validate_object_meta(obj, namespaced, &names::name_is_dns_subdomain);
    errs.extend(schema_errors(obj, None, schema));
    errs
}

/// The custom resource validator's `ValidateUpdate`: metadata update, then the schema with
/// ratcheting.
pub fn validate_custom_resource_update(
    new: &Value,
    old: &Value,
    schema: Option<&Value>,
) -> ErrorList {
    let mut errs = validate_object_meta_update(new, old);
    errs.extend(schema_errors(new, Some(old), schema));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}}}})
    }

    fn cr(spec: Value) -> Value {
        json!({"apiVersion": "ex.io/v1", "kind": "W", "metadata": {"name": "w", "namespace": "default"}, "spec": spec})
    }

    fn msgs(errs: ErrorList) -> Vec<String> {
        errs.iter().map(|e| e.message()).collect()
    }

    #[test]
    fn kube_openapi_messages() {
        let s = schema();
        assert!(validate_custom_resource(&cr(json!({"size": 3})), true, Some(&s)).is_empty());
        assert_eq!(
            msgs(validate_custom_resource(&cr(json!({})), true, Some(&s))),
            vec!["spec.size: Required value"]
        );
        assert_eq!(
            msgs(validate_custom_resource(&cr(json!({"size": "3"})), true, Some(&s))),
            vec!["spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""]
        );
        assert_eq!(
            msgs(validate_custom_resource(&cr(json!({"size": 0})), true, Some(&s))),
            vec!["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]
        );
        assert_eq!(
            msgs(validate_custom_resource(
                &cr(json!({"size": 1, "color": "pink"})),
                true,
                Some(&s)
            )),
            vec!["spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\""]
        );
        assert_eq!(
            msgs(validate_custom_resource(
                &cr(json!({"size": 1, "name": "AB"})),
                true,
                Some(&s)
            )),
            vec!["spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"]
        );
        assert_eq!(
            msgs(validate_custom_resource(
                &cr(json!({"size": 1, "name": "abcdef"})),
                true,
                Some(&s)
            )),
            vec!["spec.name: Too long: may not be more than 5 bytes"]
        );
        assert_eq!(
            msgs(validate_custom_resource(
                &cr(json!({"size": 1, "tags": ["a", "b", "c"]})),
                true,
                Some(&s)
            )),
            vec!["spec.tags: Too many: 3: must have at most 2 items"]
        );
    }

    #[test]
    fn unchanged_invalid_fields_ratchet() {
        let s = schema();
        let old = cr(json!({"size": 0}));
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = json!("2");
        let mut old = old;
        old["metadata"]["resourceVersion"] = json!("2");
        new["spec"]["color"] = json!("red");
        assert!(validate_custom_resource_update(&new, &old, Some(&s)).is_empty());
    }
}
