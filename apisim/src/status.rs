//! Kubernetes `Status` failures: the error type every store and HTTP operation returns.
//!
//! Invariant: every error the simulator sends over HTTP is a `kind: Status` body whose `code` equals
//! the HTTP status code, shaped exactly like the real apiserver's (see apisim-protocol.md).

use serde_json::{json, Value};

/// A failed API operation, rendered as a `metav1.Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (also `status.code`).
    pub code: u16,
    /// Machine-readable reason, e.g. `NotFound`, `Conflict`, `Expired`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// `details` object, if any.
    pub details: Option<Value>,
    /// `metadata.continue` of the Status (set for expired continue tokens).
    pub continue_token: Option<String>,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: String) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message,
            details: None,
            continue_token: None,
        }
    }

    /// 404 `<resource> "<name>" not found`.
    pub fn not_found(qualified_plural: &str, name: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{qualified_plural} \"{name}\" not found"),
        );
        e.details = Some(details(qualified_plural, name));
        e
    }

    /// 404 for a URL that names no served resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource (path {path})"),
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(qualified_plural: &str, name: &str) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{qualified_plural} \"{name}\" already exists"),
        );
        e.details = Some(details(qualified_plural, name));
        e
    }

    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(qualified_plural: &str, name: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified_plural} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        );
        e.details = Some(details(qualified_plural, name));
        e
    }

    /// 409 Conflict of a server-side apply (`NewApplyConflict`): `causes` name each field and
    /// manager; the details name no object.
    pub fn apply_conflict(message: String, causes: Vec<Value>) -> Self {
        let mut e = Self::new(409, "Conflict", message);
        e.details = Some(json!({ "causes": causes }));
        e
    }

    /// 409 Conflict of a failed DELETE precondition, as the registry reports a storage
    /// `InvalidObj` error for `key` (`Precondition failed: UID in precondition: ...`).
    pub fn precondition_failed(qualified_plural: &str, name: &str, key: &str, what: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified_plural} \"{name}\": StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {what}"
            ),
        );
        e.details = Some(details(qualified_plural, name));
        e
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into())
    }

    /// 422 Invalid.
    pub fn invalid(qualified_plural: &str, name: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(422, "Invalid", message.into());
        e.details = Some(details(qualified_plural, name));
        e
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message.into())
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"),
        )
    }

    /// 410 Expired for a continue token that is too old or was expired by a fault.
    pub fn expired_continue(token: &str) -> Self {
        let mut e = Self::new(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".to_string(),
        );
        e.continue_token = Some(token.to_string());
        e
    }

    /// 410 Expired for a list or watch at a compacted resourceVersion.
    pub fn too_old_rv(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 504 for a resourceVersion newer than the store's, as k8s.io/apiserver's
    /// `NewTooLargeResourceVersionError` builds it: a `NewTimeoutError` (message prefixed with
    /// `Timeout: `, reason Timeout, `retryAfterSeconds` 1) with the `ResourceVersionTooLarge` cause.
    pub fn too_large_rv(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        e.details = Some(
            json!({"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1}),
        );
        e
    }

    /// 500 InternalError (used by injected faults).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message.into())
    }

    /// An injected failure with `code` and the reason the apiserver uses for that code.
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(code, reason, format!("injected fault: {reason} ({code})"))
    }

    /// 429 TooManyRequests (used by injected faults).
    pub fn too_many_requests(retry_after_secs: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.".to_string(),
        );
        e.details = Some(json!({"retryAfterSeconds": retry_after_secs}));
        e
    }

    /// The `Status` body bytes, with fields in the apiserver's order.
    pub fn body(&self) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Meta<'a> {
            #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
            cont: Option<&'a str>,
        }
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Status<'a> {
            kind: &'static str,
            api_version: &'static str,
            metadata: Meta<'a>,
            status: &'static str,
            message: &'a str,
            reason: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            details: Option<&'a Value>,
            code: u16,
        }
        serde_json::to_vec(&Status {
            kind: "Status",
            api_version: "v1",
            metadata: Meta {
                cont: self.continue_token.as_deref(),
            },
            status: "Failure",
            message: &self.message,
            reason: &self.reason,
            details: self.details.as_ref(),
            code: self.code,
        })
        .expect("Status serializes")
    }

    /// The `Status` object as JSON.
    pub fn to_status(&self) -> Value {
        let mut metadata = serde_json::Map::new();
        if let Some(c) = &self.continue_token {
            metadata.insert("continue".into(), Value::String(c.clone()));
        }
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": metadata,
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v["code"] = json!(self.code);
        v
    }
}

fn details(qualified_plural: &str, name: &str) -> Value {
    let (kind, group) = match qualified_plural.split_once('.') {
        Some((k, g)) => (k, Some(g)),
        None => (qualified_plural, None),
    };
    let mut d = serde_json::Map::new();
    d.insert("name".into(), json!(name));
    if let Some(g) = group {
        d.insert("group".into(), json!(g));
    }
    d.insert("kind".into(), json!(kind));
    Value::Object(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_body_matches_apiserver() {
        let s = String::from_utf8(ApiError::conflict("configmaps", "x").body()).unwrap();
        assert_eq!(
            s,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"kind":"configmaps","name":"x"},"code":409}"#
        );
    }

    #[test]
    fn too_large_rv_matches_new_too_large_resource_version_error() {
        let v: Value = serde_json::from_slice(&ApiError::too_large_rv(120, 7).body()).unwrap();
        let want: Value = serde_json::from_str(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 120, current: 7","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#,
        )
        .unwrap();
        assert_eq!(v, want);
    }

    #[test]
    fn expired_continue_carries_token() {
        let v = ApiError::expired_continue("abc").to_status();
        assert_eq!(v["metadata"]["continue"], "abc");
        assert_eq!(v["code"], 410);
        assert_eq!(v["reason"], "Expired");
    }
}
