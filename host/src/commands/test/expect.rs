//! `wasm-informer test --expect FILE`: does the output hold what the file
//! expects?
//!
//! The expected document has the output's shape and may leave fields out:
//! every key it has must be in the output with a matching value (objects are
//! compared key by key, recursively); arrays must have the same length and
//! match element by element; scalars must be equal. So a fixture pins the
//! number of steps, writes, Events and log lines, and the fields it names,
//! without restating what it does not care about (a write's whole body, say).
//!
//! Invariant: an output always matches itself, and a mismatch is reported by
//! the JSON path of every difference, in a stable order.

use serde_json::Value;

/// Every difference between `expected` and `actual`, as `path: reason`.
pub fn differences(expected: &Value, actual: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("$", expected, actual, &mut out);
    out
}

fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

fn walk(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => walk(&p, ev, av, out),
                    None => out.push(format!("{p}: missing (expected {})", show(ev))),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                out.push(format!(
                    "{path}: expected {} item(s), got {}: {}",
                    e.len(),
                    a.len(),
                    show(actual)
                ));
                return;
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                walk(&format!("{path}[{i}]"), ev, av, out);
            }
        }
        (e, a) if e == a => {}
        (e, a) => out.push(format!("{path}: expected {}, got {}", show(e), show(a))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_subset_matches_and_every_difference_is_named() {
        let actual = json!({"steps": [{"outcome": "ok", "logs": [{"level": "info", "message": "a"}], "writes": []}], "plugin": "p"});
        assert!(differences(&actual, &actual).is_empty());
        assert!(differences(&json!({"steps": [{"outcome": "ok"}]}), &actual).is_empty());
        let mut d = differences(
            &json!({"steps": [{"outcome": "trap", "logs": [], "extra": 1}], "plugin": "p"}),
            &actual,
        );
        d.sort();
        assert_eq!(
            d,
            vec![
                "$.steps[0].extra: missing (expected 1)".to_string(),
                "$.steps[0].logs: expected 0 item(s), got 1: [{\"level\":\"info\",\"message\":\"a\"}]".to_string(),
                "$.steps[0].outcome: expected \"trap\", got \"ok\"".to_string(),
            ]
        );
    }
}
