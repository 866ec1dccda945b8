//! ConfigMaps and Secrets, as `pkg/apis/core/validation/validation.go` checks them:
//! `ValidateConfigMap` / `ValidateConfigMapUpdate` and `ValidateSecret` / `ValidateSecretUpdate`
//! (keys are `IsConfigMapKey`, at most 1 MiB of data, the type-specific keys of a Secret, and
//! `immutable` objects keep their data).
//!
//! Invariant: sizes are those of the decoded bytes (Secret `data` and ConfigMap `binaryData`
//! are base64 on the wire), as the apiserver counts them after decoding.

use base64::Engine;
use serde_json::{Map, Value};

use super::field::{self, Bad, ErrorList};
use super::meta::{immutable_str, validate_object_meta, validate_object_meta_update};
use super::names;

/// `core.MaxSecretSize` (also the ConfigMap limit).
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

fn decoded_len(v: &Value) -> usize {
    let s = v.as_str().unwrap_or("");
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map(|b| b.len())
        .unwrap_or(s.len())
}

fn keys_valid(errs: &mut ErrorList, data: Option<&Map<String, Value>>, path: &str) {
    for k in data.into_iter().flatten().map(|(k, _)| k) {
        for m in names::is_config_map_key(k) {
            errs.push(field::invalid(&field::key(path, k), Bad::str(k), m));
        }
    }
}

/// `ValidateConfigMap`.
pub fn validate_config_map(cm: &Value) -> ErrorList {
    let mut errs = validate_object_meta(cm, true, &names::name_is_dns_subdomain);
    let data = cm["data"].as_object();
    let binary = cm["binaryData"].as_object();
    let mut total = 0usize;
    for (k, v) in data.into_iter().flatten() {
        for m in names::is_config_map_key(k) {
            errs.push(field::invalid(&field::key("data", k), Bad::str(k), m));
        }
        if binary.is_some_and(|b| b.contains_key(k)) {
            errs.push(field::invalid(
                &field::key("data", k),
                Bad::str(k),
                "duplicate of key present in binaryData",
            ));
        }
        total += v.as_str().map_or(0, str::len);
    }
    keys_valid(&mut errs, binary, "binaryData");
    total += binary
        .into_iter()
        .flatten()
        .map(|(_, v)| decoded_len(v))
        .sum::<usize>();
    if total > MAX_SECRET_SIZE {
        errs.push(field::too_long(field::ROOT, MAX_SECRET_SIZE as i64));
    }
    errs
}

fn immutable_data(errs: &mut ErrorList, new: &Value, old: &Value, fields: &[&str]) {
    if old["immutable"] != true {
        return;
    }
    if new["immutable"] != true {
        errs.push(field::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    for f in fields {
        let norm = |v: &Value| v.as_object().filter(|m| !m.is_empty()).cloned();
        if norm(&new[*f]) != norm(&old[*f]) {
            errs.push(field::forbidden(
                f,
                "field is immutable when `immutable` is set",
            ));
        }
    }
}

/// `ValidateConfigMapUpdate`.
pub fn validate_config_map_update(new: &Value, old: &Value) -> ErrorList {
    let mut errs = validate_object_meta_update(new, old);
    immutable_data(&mut errs, new, old, &["data", "binaryData"]);
    errs.extend(validate_config_map(new));
    errs
}

/// `ValidateSecret`.
pub fn validate_secret(secret: &Value) -> ErrorList {
    let mut errs = validate_object_meta(secret, true, &names::name_is_dns_subdomain);
    let data = secret["data"].as_object();
    keys_valid(&mut errs, data, "data");
    let total: usize = data
        .into_iter()
        .flatten()
        .map(|(_, v)| decoded_len(v))
        .sum();
    if total > MAX_SECRET_SIZE {
        errs.push(field::too_long("data", MAX_SECRET_SIZE as i64));
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let require = |errs: &mut ErrorList, k: &str| {
        errs.push(field::required(&field::key("data", k), ""));
    };
    match secret["type"].as_str().unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let name = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .unwrap_or("");
            if name.is_empty() {
                errs.push(field::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => require(&mut errs, ".dockercfg"),
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            require(&mut errs, ".dockerconfigjson")
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            require(&mut errs, "username");
            require(&mut errs, "password");
        }
        "kubernetes.io/ssh-auth"
            if data
                .and_then(|d| d.get("ssh-privatekey"))
                .is_none_or(|v| decoded_len(v) == 0) =>
        {
            require(&mut errs, "ssh-privatekey")
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    require(&mut errs, k);
                }
            }
        }
        _ => {}
    }
    errs
}

/// `ValidateSecretUpdate`: metadata, the immutable type, immutable data, then `ValidateSecret`.
pub fn validate_secret_update(new: &Value, old: &Value) -> ErrorList {
    let mut errs = validate_object_meta_update(new, old);
    errs.extend(immutable_str(&new["type"], &old["type"], "type"));
    immutable_data(&mut errs, new, old, &["data"]);
    errs.extend(validate_secret(new));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(data: Value) -> Value {
        json!({"metadata": {"name": "c", "namespace": "default"}, "data": data})
    }

    #[test]
    fn keys_and_size() {
        assert!(validate_config_map(&cm(json!({"a.b": "1"}))).is_empty());
        assert!(validate_config_map(&cm(json!({"a b": "1"})))[0]
            .message()
            .starts_with("data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters"));
        let big = cm(json!({"a": "x".repeat(MAX_SECRET_SIZE + 1)}));
        assert_eq!(
            validate_config_map(&big)[0].message(),
            "[]: Too long: may not be more than 1048576 bytes"
        );
        assert!(validate_config_map(&cm(json!({"a": "x".repeat(MAX_SECRET_SIZE)}))).is_empty());
    }

    #[test]
    fn secret_types() {
        let s = json!({"metadata": {"name": "s", "namespace": "default"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(
            validate_secret(&s)[0].message(),
            "data[tls.key]: Required value"
        );
    }
}
