//! Continue tokens for paged lists.
//!
//! Invariant: a token pins the snapshot resourceVersion of the first page, so every page of one list
//! reads the same consistent snapshot; the token also carries the fault epoch so that
//! `expire_continue_tokens` invalidates every token issued before it.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::status::ApiError;

/// Decoded contents of a continue token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// API version of the token format, as the apiserver writes it.
    pub v: String,
    /// Snapshot resourceVersion of the list.
    pub rv: u64,
    /// Key to start after (exclusive).
    pub start: String,
    /// Token epoch; tokens from an older epoch are expired.
    #[serde(default)]
    pub epoch: u64,
}

impl ContinueToken {
    /// A token continuing after `last_key` at snapshot `rv`.
    pub fn new(rv: u64, last_key: &str, epoch: u64) -> Self {
        ContinueToken {
            v: "meta.k8s.io/v1".to_string(),
            rv,
            start: last_key.to_string(),
            epoch,
        }
    }

    /// URL-safe base64 encoding.
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).expect("token serializes");
        base64::engine::general_purpose::URL_SAFE.encode(json)
    }

    /// Decodes a token, rejecting garbage with a 400 that names the parameter.
    pub fn decode(s: &str) -> Result<Self, ApiError> {
        let bytes = base64::engine::general_purpose::URL_SAFE
            .decode(s)
            .or_else(|_| base64::engine::general_purpose::STANDARD.decode(s))
            .map_err(|e| ApiError::bad_request(format!("continue key is not valid: {e}")))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request(format!("continue key is not valid: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let t = ContinueToken::new(42, "ns/pod-1", 3);
        assert_eq!(ContinueToken::decode(&t.encode()).unwrap(), t);
    }

    #[test]
    fn garbage_is_bad_request() {
        let e = ContinueToken::decode("!!!").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("continue"));
    }
}
