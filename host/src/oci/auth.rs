//! Registry credentials from the docker config file, as `docker login`,
//! `oras login` and `helm registry login` write it:
//! `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, entry
//! `auths."HOST"` with `auth` (base64 of `user:password`), or `username`
//! and `password`, or `identitytoken` (a bearer token for the registry's
//! token service, used as a password as docker does).
//!
//! Invariant: no file or no entry for the host means anonymous access,
//! never an error; credentials are never logged.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;

/// The docker config file in use.
pub fn config_path() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(d).join("config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json"))
}

/// The credentials for `registry` in the docker config file at `path`.
pub fn from_file(path: &Path, registry: &str) -> RegistryAuth {
    let Ok(text) = std::fs::read_to_string(path) else {
        return RegistryAuth::Anonymous;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        tracing::warn!(file = %path.display(), "docker config file is not JSON; pulling anonymously");
        return RegistryAuth::Anonymous;
    };
    let auths = &v["auths"];
    // Entries are keyed by host, sometimes with a scheme or a path.
    let entry = auths.as_object().and_then(|m| {
        m.iter().find_map(|(k, e)| {
            let host = k
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap_or("");
            (host == registry).then_some(e)
        })
    });
    let Some(e) = entry else {
        return RegistryAuth::Anonymous;
    };
    if let Some(a) = e["auth"].as_str().filter(|a| !a.is_empty()) {
        if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(a) {
            if let Some((u, p)) = String::from_utf8_lossy(&bytes).split_once(':') {
                return RegistryAuth::Basic(u.to_string(), p.to_string());
            }
        }
    }
    if let (Some(u), Some(p)) = (e["username"].as_str(), e["password"].as_str()) {
        return RegistryAuth::Basic(u.to_string(), p.to_string());
    }
    if let Some(t) = e["identitytoken"].as_str().filter(|t| !t.is_empty()) {
        return RegistryAuth::Basic("<token>".to_string(), t.to_string());
    }
    RegistryAuth::Anonymous
}

/// The credentials for `registry` from the docker config file in use.
pub fn for_registry(registry: &str) -> RegistryAuth {
    match config_path() {
        Some(p) => from_file(&p, registry),
        None => RegistryAuth::Anonymous,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_docker_login_entries_and_falls_back_to_anonymous() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("config.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        std::fs::write(
            &f,
            format!(r#"{{"auths": {{"127.0.0.1:5000": {{"auth": "{auth}"}}, "https://reg.example/v1/": {{"username": "bob", "password": "pw"}}}}}}"#),
        )
        .unwrap();
        assert_eq!(
            from_file(&f, "127.0.0.1:5000"),
            RegistryAuth::Basic("alice".into(), "s3cret".into())
        );
        assert_eq!(
            from_file(&f, "reg.example"),
            RegistryAuth::Basic("bob".into(), "pw".into())
        );
        assert_eq!(from_file(&f, "other.example"), RegistryAuth::Anonymous);
        assert_eq!(
            from_file(&tmp.path().join("none.json"), "x"),
            RegistryAuth::Anonymous
        );
    }
}
