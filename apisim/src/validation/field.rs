//! Field errors as apimachinery's `util/validation/field` package builds and prints them, and the
//! 422 `Status` that `errors.NewInvalid` makes of a list of them.
//!
//! Invariant: [`FieldError::body`] is byte for byte `field.Error.ErrorBody()` of Kubernetes 1.33
//! for the value kinds apisim reports (strings quoted as Go's `%q`, numbers as `%v`, structs and
//! maps pre-rendered as Go's `%#v` by the caller), and [`invalid`] builds the message, `details`
//! and `causes` exactly as `k8s.io/apimachinery/pkg/api/errors.NewInvalid` does.

use serde_json::{json, Map, Value};

use crate::status::ApiError;

/// `field.ErrorType`: the cause `reason` and the words printed before the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `FieldValueNotFound`, "Not found".
    NotFound,
    /// `FieldValueRequired`, "Required value".
    Required,
    /// `FieldValueDuplicate`, "Duplicate value".
    Duplicate,
    /// `FieldValueInvalid`, "Invalid value".
    Invalid,
    /// `FieldValueNotSupported`, "Unsupported value".
    NotSupported,
    /// `FieldValueForbidden`, "Forbidden".
    Forbidden,
    /// `FieldValueTooLong`, "Too long".
    TooLong,
    /// `FieldValueTooMany`, "Too many".
    TooMany,
    /// `FieldValueTypeInvalid`, "Invalid value".
    TypeInvalid,
}

impl ErrorType {
    /// The `StatusCause.reason` (`metav1.CauseType`).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// `ErrorType.String()`.
    pub fn text(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
        }
    }
}

/// The bad value of an error, as `ErrorBody` prints it.
#[derive(Debug, Clone, PartialEq)]
pub enum Bad {
    /// A string, printed as Go's `%q`.
    Str(String),
    /// Anything already printed (numbers and bools as `%v`, structs as `%#v`, Stringers).
    Raw(String),
    /// `omitValue`: only the type is printed.
    Omit,
}

impl Bad {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Bad {
        Bad::Str(s.into())
    }

    /// A number or other value printed with `%v`.
    pub fn num(n: impl std::fmt::Display) -> Bad {
        Bad::Raw(n.to_string())
    }

    /// A JSON value as the Go type it decodes into would print: strings quoted, numbers and
    /// bools as `%v`, `null` as `null`, anything else as its JSON text.
    pub fn json(v: &Value) -> Bad {
        match v {
            Value::String(s) => Bad::Str(s.clone()),
            Value::Null => Bad::Raw("null".into()),
            Value::Number(n) => Bad::Raw(go_number(n)),
            other => Bad::Raw(other.to_string()),
        }
    }
}

/// One `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The error type.
    pub ty: ErrorType,
    /// The field path (`field.Path.String()`).
    pub field: String,
    /// The bad value.
    pub bad: Bad,
    /// The detail after the value.
    pub detail: String,
}

/// A list of field errors, in the order the validation found them.
pub type ErrorList = Vec<FieldError>;

fn err(ty: ErrorType, field: &str, bad: Bad, detail: impl Into<String>) -> FieldError {
    FieldError {
        ty,
        field: field.to_string(),
        bad,
        detail: detail.into(),
    }
}

/// `field.Required(path, detail)`.
pub fn required(field: &str, detail: impl Into<String>) -> FieldError {
    err(ErrorType::Required, field, Bad::str(""), detail)
}

/// `field.Invalid(path, value, detail)`.
pub fn invalid(field: &str, bad: Bad, detail: impl Into<String>) -> FieldError {
    err(ErrorType::Invalid, field, bad, detail)
}

/// `field.Forbidden(path, detail)`.
pub fn forbidden(field: &str, detail: impl Into<String>) -> FieldError {
    err(ErrorType::Forbidden, field, Bad::str(""), detail)
}

/// `field.Duplicate(path, value)`.
pub fn duplicate(field: &str, bad: Bad) -> FieldError {
    err(ErrorType::Duplicate, field, bad, "")
}

/// `field.NotFound(path, value)`.
pub fn not_found(field: &str, bad: Bad) -> FieldError {
    err(ErrorType::NotFound, field, bad, "")
}

/// `field.NotSupported(path, value, validValues)`: the detail lists the values quoted.
pub fn not_supported(field: &str, bad: Bad, valid: &[&str]) -> FieldError {
    let detail = if valid.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    err(ErrorType::NotSupported, field, bad, detail)
}

/// `field.TooLong(path, "", maxLength)` (a negative length prints "value is too long").
pub fn too_long(field: &str, max: i64) -> FieldError {
    let detail = if max >= 0 {
        format!("may not be more than {max} bytes")
    } else {
        "value is too long".to_string()
    };
    err(
        ErrorType::TooLong,
        field,
        Bad::str("<value omitted>"),
        detail,
    )
}

/// `field.TooMany(path, actual, max)` (negative numbers are unknown).
pub fn too_many(field: &str, actual: i64, max: i64) -> FieldError {
    let detail = if max >= 0 {
        format!("must have at most {max} items")
    } else {
        "has too many items".to_string()
    };
    let bad = if actual >= 0 {
        Bad::num(actual)
    } else {
        Bad::Omit
    };
    err(ErrorType::TooMany, field, bad, detail)
}

/// `field.TypeInvalid(path, value, detail)`.
pub fn type_invalid(field: &str, bad: Bad, detail: impl Into<String>) -> FieldError {
    err(ErrorType::TypeInvalid, field, bad, detail)
}

impl FieldError {
    /// `ErrorBody()`: the message without the field.
    pub fn body(&self) -> String {
        let mut s = match (self.ty, &self.bad) {
            (ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong, _)
            | (_, Bad::Omit) => self.ty.text().to_string(),
            (_, Bad::Str(v)) => format!("{}: {}", self.ty.text(), go_quote(v)),
            (_, Bad::Raw(v)) => format!("{}: {v}", self.ty.text()),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `Error()`: `field: body`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// Joins a field path: `child("spec", "containers")` is `spec.containers`.
pub fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// A subscript: `index("spec.containers", 0)` is `spec.containers[0]`.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A key subscript: `key("data", "a b")` is `data[a b]`.
pub fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

/// `field.NewPath("")`: the path of the whole object, printed `[]`.
pub const ROOT: &str = "[]";

/// The 422 of `errors.NewInvalid(schema.GroupKind{group, kind}, name, errs)`: message
/// `Kind[.group] "name" is invalid: <errors>` (one error as is, several deduplicated in brackets
/// joined with `, `), details with name, group, kind and one cause per error (not deduplicated).
pub fn invalid_status(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> ApiError {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        let m = e.message();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    let aggregate = match seen.len() {
        0 => String::new(),
        1 => seen[0].clone(),
        _ => format!("[{}]", seen.join(", ")),
    };
    let message = if errs.is_empty() {
        format!("{qualified} {} is invalid", go_quote(name))
    } else {
        format!("{qualified} {} is invalid: {aggregate}", go_quote(name))
    };
    let causes: Vec<Value> = errs
        .iter()
        .map(|e| json!({"reason": e.ty.reason(), "message": e.body(), "field": e.field}))
        .collect();
    let mut details = Map::new();
    details.insert("name".into(), json!(name));
    if !group.is_empty() {
        details.insert("group".into(), json!(group));
    }
    details.insert("kind".into(), json!(kind));
    details.insert("causes".into(), Value::Array(causes));
    ApiError {
        code: 422,
        reason: "Invalid".into(),
        message,
        details: Some(Value::Object(details)),
        continue_token: None,
    }
}

/// Go's `strconv.Quote` (`%q`): printable characters as they are, `"` and `\` escaped, control
/// characters as `\n`, `\t`, ... or `\x..`/`\u....`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON number as Go's `%v` prints the int64 or float64 it decodes into.
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    go_float(f)
}

/// A float64 as Go's `%v`: the shortest representation, in exponent form (`1e+21`, `1e-05`)
/// when the exponent is below -4 or at least 21.
pub fn go_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..21).contains(&exp) {
        return format!("{f}");
    }
    let sci = format!("{f:e}");
    let (mantissa, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", e.abs())
}

/// Go's `%#v` of a `map[string]string` (keys sorted, as fmt prints maps); `None` is the nil map.
pub fn go_string_map(m: Option<&Map<String, Value>>) -> String {
    let Some(m) = m else {
        return "map[string]string(nil)".to_string();
    };
    let mut entries: Vec<(&String, String)> = m
        .iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
        .collect();
    entries.sort();
    let inner: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v)))
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// Go's `%#v` of a `[]string`; `None` is the nil slice.
pub fn go_string_slice(items: Option<&[Value]>) -> String {
    let Some(items) = items else {
        return "[]string(nil)".to_string();
    };
    let inner: Vec<String> = items
        .iter()
        .map(|v| go_quote(v.as_str().unwrap_or_default()))
        .collect();
    format!("[]string{{{}}}", inner.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_match_error_body() {
        assert_eq!(
            required("spec.containers", "").message(),
            "spec.containers: Required value"
        );
        assert_eq!(
            invalid("metadata.name", Bad::str("Bad_Name"), "x").message(),
            "metadata.name: Invalid value: \"Bad_Name\": x"
        );
        assert_eq!(
            invalid(
                "spec.ports[0].port",
                Bad::num(0),
                "must be between 1 and 65535, inclusive"
            )
            .body(),
            "Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        assert_eq!(
            too_long(ROOT, 1 << 20).message(),
            "[]: Too long: may not be more than 1048576 bytes"
        );
        assert_eq!(
            not_supported(
                "spec.ports[0].protocol",
                Bad::str("HTTP"),
                &["SCTP", "TCP", "UDP"]
            )
            .body(),
            "Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        assert_eq!(
            duplicate("spec.containers[1].name", Bad::str("a")).body(),
            "Duplicate value: \"a\""
        );
    }

    #[test]
    fn new_invalid_dedups_the_message_but_not_the_causes() {
        let e = required("spec.containers", "");
        let s = invalid_status("", "Pod", "p", &[e.clone(), e.clone()]);
        assert_eq!(
            s.message,
            "Pod \"p\" is invalid: spec.containers: Required value"
        );
        assert_eq!(
            s.details.as_ref().unwrap()["causes"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let two = invalid_status("apps", "Deployment", "d", &[e, forbidden("spec.x", "no")]);
        assert_eq!(
            two.message,
            "Deployment.apps \"d\" is invalid: [spec.containers: Required value, spec.x: Forbidden: no]"
        );
        let d = two.details.unwrap();
        assert_eq!(d["group"], "apps");
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["causes"][1]["reason"], "FieldValueForbidden");
        assert_eq!(d["causes"][1]["message"], "Forbidden: no");
        assert_eq!(d["causes"][1]["field"], "spec.x");
    }

    #[test]
    fn go_printing() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
        let m: Map<String, Value> = serde_json::from_str(r#"{"b":"2","a":"1"}"#).unwrap();
        assert_eq!(
            go_string_map(Some(&m)),
            "map[string]string{\"a\":\"1\", \"b\":\"2\"}"
        );
        assert_eq!(go_string_map(None), "map[string]string(nil)");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(3.0), "3");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(0.00001), "1e-05");
    }
}
