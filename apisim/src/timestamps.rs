//! Timestamps as the apiserver stores them: `metav1.Time` fields in RFC 3339 UTC with whole
//! seconds (`2026-01-01T00:00:00Z`), `metav1.MicroTime` fields with six fractional digits
//! (`2026-01-01T00:00:00.123456Z`), whatever offset or precision the client sent.
//!
//! Invariant: a timestamp field of a built-in kind (or of any object's metadata) that parses as
//! RFC 3339 is rewritten in the canonical form of its type; every other value is left as sent
//! (custom resources keep their own date-time strings, as the apiserver does without a schema
//! type).

use serde_json::Value;

/// `metav1.MicroTime` fields of the built-in kinds.
const MICRO: [&str; 4] = ["eventTime", "lastObservedTime", "acquireTime", "renewTime"];

/// `metav1.Time` fields of the built-in kinds.
const TIME: [&str; 15] = [
    "creationTimestamp",
    "deletionTimestamp",
    "lastTimestamp",
    "firstTimestamp",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "lastTransitionTime",
    "lastUpdateTime",
    "lastProbeTime",
    "lastHeartbeatTime",
    "lastScheduleTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "time",
];

/// Whether `s` already has the canonical shape (`YYYY-MM-DDTHH:MM:SSZ`, or with `.ffffff` for a
/// MicroTime): the common case, decided without parsing.
fn is_canonical(s: &str, micro: bool) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let len = if micro { 27 } else { 20 };
    b.len() == len
        && b[len - 1] == b'Z'
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && digits(0..4)
        && digits(5..7)
        && digits(8..10)
        && digits(11..13)
        && digits(14..16)
        && digits(17..19)
        && (!micro || (b[19] == b'.' && digits(20..26)))
}

fn canonical(s: &str, micro: bool) -> Option<String> {
    if is_canonical(s, micro) {
        return None;
    }
    let t = chrono::DateTime::parse_from_rfc3339(s)
        .ok()?
        .with_timezone(&chrono::Utc);
    Some(if micro {
        t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    })
}

fn walk(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                let micro = MICRO.contains(&k.as_str());
                if micro || TIME.contains(&k.as_str()) {
                    if let Some(c) = child.as_str().and_then(|s| canonical(s, micro)) {
                        *child = Value::String(c);
                        continue;
                    }
                }
                walk(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(walk),
        _ => {}
    }
}

/// Rewrites the timestamps of an object of a built-in kind in place.
pub fn normalize(obj: &mut Value) {
    walk(obj);
}

/// Rewrites only the timestamps of `metadata` (for custom resources).
pub fn normalize_metadata(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata") {
        walk(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_and_micro_times_take_the_canonical_form() {
        let mut v = json!({
            "eventTime": "2026-12-01T09:16:30.462743+00:00",
            "spec": {"renewTime": "2026-12-01T11:16:30.4+02:00", "note": "2026-12-01T09:16:30+00:00"},
            "status": {"conditions": [{"lastTransitionTime": "2026-12-01T09:16:30.999+00:00"}]},
            "metadata": {"creationTimestamp": "2026-12-01T09:16:30Z", "managedFields": [{"time": "2026-12-01T10:00:00+01:00"}]},
            "time": "not a time"
        });
        normalize(&mut v);
        assert_eq!(v["eventTime"], "2026-12-01T09:16:30.462743Z");
        assert_eq!(v["spec"]["renewTime"], "2026-12-01T09:16:30.400000Z");
        assert_eq!(
            v["spec"]["note"], "2026-12-01T09:16:30+00:00",
            "not a timestamp field"
        );
        assert_eq!(
            v["status"]["conditions"][0]["lastTransitionTime"],
            "2026-12-01T09:16:30Z"
        );
        assert_eq!(
            v["metadata"]["managedFields"][0]["time"],
            "2026-12-01T09:00:00Z"
        );
        assert_eq!(v["time"], "not a time");
        assert!(is_canonical("2026-12-01T09:16:30Z", false));
        assert!(is_canonical("2026-12-01T09:16:30.123456Z", true));
        assert!(!is_canonical("2026-12-01T09:16:30.123456Z", false));
        assert!(!is_canonical("2026-12-01T09:16:30+00:00", false));
    }
}
