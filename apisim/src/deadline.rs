//! The server-side request deadline: `?timeout=` (a Go duration), capped by the server's maximum,
//! as k8s.io/apiserver's `WithRequestDeadline` filter computes it, and the 504 a write gets when
//! it is not done in time (`finisher.FinishRequest`).
//!
//! Invariant: a write whose deadline has passed before its first change is answered 504
//! `Timeout` and changes nothing; the store checks the deadline under its lock, just before it
//! commits, so a write is never applied after its deadline (and never after its 504).

use std::time::{Duration, Instant};

use crate::go_fmt::quote;
use crate::query::Query;
use crate::status::ApiError;

/// `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` with units ns, us (µs, μs), ms, s, m,
/// h, or `0`; the result in nanoseconds. The error text is Go's.
pub fn parse_go_duration(orig: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {}", quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(rest) = s.strip_prefix('-') {
        neg = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const MAX: u128 = 1 << 63;
    let mut total: u128 = 0;
    while !s.is_empty() {
        let b = s.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut v: u128 = 0;
        for c in &b[..int_len] {
            v = v * 10 + u128::from(c - b'0');
            if v > MAX {
                return Err(invalid());
            }
        }
        s = &s[int_len..];
        let (mut frac, mut scale, mut post) = (0u128, 1u128, false);
        if let Some(rest) = s.strip_prefix('.') {
            let n = rest.bytes().take_while(|c| c.is_ascii_digit()).count();
            post = n > 0;
            for c in rest[..n].bytes() {
                // Go stops accumulating digits once more would overflow.
                if frac < MAX / 10 {
                    frac = frac * 10 + u128::from(c - b'0');
                    scale *= 10;
                }
            }
            s = &rest[n..];
        }
        if int_len == 0 && !post {
            return Err(invalid());
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map(|(i, _)| i)
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let ns: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(unit),
                    quote(orig)
                ))
            }
        };
        let mut part = v
            .checked_mul(ns)
            .filter(|p| *p <= MAX)
            .ok_or_else(invalid)?;
        if frac > 0 {
            part += (frac as f64 * (ns as f64 / scale as f64)) as u128;
            if part > MAX {
                return Err(invalid());
            }
        }
        total += part;
        if total > MAX {
            return Err(invalid());
        }
    }
    if !neg && total > MAX - 1 {
        return Err(invalid());
    }
    Ok(if neg { -(total as i128) } else { total as i128 })
}

/// The deadline of a request that arrived at `received`: `timeout` when it is positive and
/// below `max`, else `max` (the apiserver's `--request-timeout`, 60 s). 400 for a malformed
/// `timeout`, with the apiserver's message.
pub fn request_deadline(q: &Query, received: Instant, max: Duration) -> Result<Instant, ApiError> {
    let mut timeout = max;
    if let Some(v) = q.get("timeout").filter(|v| !v.is_empty()) {
        let ns = parse_go_duration(v).map_err(|e| {
            ApiError::bad_request(format!(
                "invalid timeout specified in the request URL - {e}"
            ))
        })?;
        if ns > 0 && ns < max.as_nanos() as i128 {
            timeout = Duration::from_nanos(ns as u64);
        }
    }
    Ok(received + timeout)
}

/// The 504 of a write not done by its deadline (`NewTimeoutError` as `FinishRequest` builds it).
pub fn timeout_error() -> ApiError {
    ApiError {
        code: 504,
        reason: "Timeout".into(),
        message:
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
                .into(),
        details: Some(serde_json::json!({})),
        continue_token: None,
    }
}

/// Err(504) once `deadline` has passed; the store calls this under its lock before it commits.
pub fn check(deadline: Option<Instant>) -> Result<(), ApiError> {
    match deadline {
        Some(d) if Instant::now() >= d => Err(timeout_error()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let s = 1_000_000_000i128;
        for (v, want) in [
            ("10s", 10 * s),
            ("1.5s", 3 * s / 2),
            ("1h2m3s", 3723 * s),
            ("300ms", 3 * s / 10),
            ("0", 0),
            ("-1s", -s),
            ("+2m", 120 * s),
            (".5s", s / 2),
            ("1\u{b5}s", 1000),
            ("2us", 2000),
        ] {
            assert_eq!(parse_go_duration(v), Ok(want), "{v}");
        }
        assert_eq!(
            parse_go_duration("abc").unwrap_err(),
            r#"time: invalid duration "abc""#
        );
        assert_eq!(
            parse_go_duration("10").unwrap_err(),
            r#"time: missing unit in duration "10""#
        );
        assert_eq!(
            parse_go_duration("3x").unwrap_err(),
            r#"time: unknown unit "x" in duration "3x""#
        );
        for bad in ["", "-", ".s", "1..5s", "99999999999h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn deadline_is_capped_by_the_maximum() {
        let now = Instant::now();
        let max = Duration::from_secs(60);
        let d = |q: &str| request_deadline(&Query::parse(q), now, max);
        assert_eq!(d("timeout=10s").unwrap(), now + Duration::from_secs(10));
        assert_eq!(d("timeout=5m").unwrap(), now + max);
        assert_eq!(d("timeout=0s").unwrap(), now + max);
        assert_eq!(d("").unwrap(), now + max);
        let e = d("timeout=soon").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                r#"invalid timeout specified in the request URL - time: invalid duration "soon""#
            )
        );
        let t = timeout_error();
        assert_eq!(t.to_status()["details"], serde_json::json!({}));
        assert_eq!((t.code, t.reason.as_str()), (504, "Timeout"));
    }
}
