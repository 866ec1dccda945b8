//! Labels and label selectors, as apimachinery's `apis/meta/v1/validation` checks them
//! (`ValidateLabelName`, `ValidateLabels`, `ValidateLabelSelector`), and annotations as
//! `api/validation/objectmeta.go` checks them (`ValidateAnnotations`, the 256 KiB total).
//!
//! Invariant: label errors carry the path of the whole map (`metadata.labels`), as the
//! apiserver's do; keys and values are checked in the map's key order.

use serde_json::{Map, Value};

use super::field::{self, Bad, ErrorList};
use super::names;

/// `TotalAnnotationSizeLimitB`: keys and values of all annotations together.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * (1 << 10);

/// `ValidateLabelName`: a qualified name.
pub fn validate_label_name(name: &str, path: &str) -> ErrorList {
    names::is_qualified_name(name)
        .into_iter()
        .map(|m| field::invalid(path, Bad::str(name), m))
        .collect()
}

/// `ValidateLabels`: every key a qualified name, every value a label value.
pub fn validate_labels(labels: Option<&Map<String, Value>>, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    for (k, v) in labels.into_iter().flatten() {
        errs.extend(validate_label_name(k, path));
        let v = v.as_str().unwrap_or_default();
        for m in names::is_valid_label_value(v) {
            errs.push(field::invalid(path, Bad::str(v), m));
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are qualified names (case-insensitively) and the total size of
/// keys and values is at most 256 KiB.
pub fn validate_annotations(annotations: Option<&Map<String, Value>>, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut total = 0usize;
    for (k, v) in annotations.into_iter().flatten() {
        for m in names::is_qualified_name(&k.to_lowercase()) {
            errs.push(field::invalid(path, Bad::str(k), m));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(field::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT as i64));
    }
    errs
}

/// `ValidateLabelSelector` (without the options that relax it for stored objects).
pub fn validate_label_selector(selector: &Value, path: &str) -> ErrorList {
    let mut errs = validate_labels(
        selector["matchLabels"].as_object(),
        &field::child(path, "matchLabels"),
    );
    for (i, expr) in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = field::index(&field::child(path, "matchExpressions"), i);
        let values = expr["values"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        match expr["operator"].as_str().unwrap_or("") {
            "In" | "NotIn" if values.is_empty() => errs.push(field::required(
                &field::child(&p, "values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(field::forbidden(
                &field::child(&p, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(field::invalid(
                &field::child(&p, "operator"),
                Bad::str(other),
                "not a valid selector operator",
            )),
        }
        errs.extend(validate_label_name(
            expr["key"].as_str().unwrap_or(""),
            &field::child(&p, "key"),
        ));
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or_default();
            for m in names::is_valid_label_value(v) {
                errs.push(field::invalid(
                    &field::index(&field::child(&p, "values"), j),
                    Bad::str(v),
                    m,
                ));
            }
        }
    }
    errs
}

/// Whether the labels `labels` satisfy `selector` (`metav1.LabelSelectorAsSelector(s).Matches`):
/// a missing selector matches nothing, an empty one everything.
pub fn selector_matches(selector: Option<&Value>, labels: Option<&Map<String, Value>>) -> bool {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return false;
    };
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let match_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| get(k) == v.as_str());
    let exprs = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str().unwrap_or("") {
                "In" => get(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => get(key).is_some(),
                "DoesNotExist" => get(key).is_none(),
                _ => false,
            }
        });
    match_labels && exprs
}

/// Whether a selector selects everything (`labels.Selector.Empty()`: no labels, no
/// expressions).
pub fn selector_is_empty(selector: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_none_or(Map::is_empty)
        && selector["matchExpressions"]
            .as_array()
            .is_none_or(Vec::is_empty)
}

/// Go's `%#v` of a `metav1.LabelSelector` (the value `ValidateImmutableField` prints).
pub fn go_label_selector(selector: &Value) -> String {
    let exprs = match selector["matchExpressions"].as_array() {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(items) => {
            let inner: Vec<String> = items
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        field::go_quote(e["key"].as_str().unwrap_or("")),
                        field::go_quote(e["operator"].as_str().unwrap_or("")),
                        field::go_string_slice(e["values"].as_array().map(Vec::as_slice))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", inner.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{exprs}}}",
        field::go_string_map(selector["matchLabels"].as_object())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_errors_name_the_map() {
        let labels = json!({"team": "platform team!", "ok": "fine"});
        let errs = validate_labels(labels.as_object(), "metadata.labels");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.labels");
        assert!(errs[0]
            .message()
            .starts_with("metadata.labels: Invalid value: \"platform team!\": a valid label"));
    }

    #[test]
    fn annotation_size_limit() {
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let a = json!({"k": big});
        let errs = validate_annotations(a.as_object(), "metadata.annotations");
        assert_eq!(
            errs[0].message(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        let ok = json!({"k": "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1)});
        assert!(validate_annotations(ok.as_object(), "m").is_empty());
    }

    #[test]
    fn selectors() {
        let s = json!({"matchLabels": {"app": "web"}});
        let l = json!({"app": "web", "x": "y"});
        assert!(selector_matches(Some(&s), l.as_object()));
        assert!(!selector_matches(None, l.as_object()));
        assert!(selector_matches(Some(&json!({})), None));
        assert_eq!(
            go_label_selector(&s),
            "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
    }
}
