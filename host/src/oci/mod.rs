//! Plugins from OCI registries: `wasm = "oci://HOST/REPO:TAG"` or
//! `"oci://HOST/REPO@sha256:…"` in a manifest, and `wasm-informer push`.
//!
//! Job: parse references ([`OciRef`]), build the registry client (HTTPS,
//! plain HTTP for loopback registries and the ones named in
//! `WASM_INFORMER_INSECURE_REGISTRIES`), read credentials from the docker
//! config file ([`auth`]), pull a component into the local cache by digest
//! ([`pull`], [`store`]) and push one ([`push`]) as the Wasm OCI artifact
//! other Wasm tools use: config `application/vnd.wasm.config.v0+json`, one
//! layer `application/wasm`.
//!
//! Invariant: a component is used only after its bytes were checked against
//! the digests that name them (the manifest's digest when the reference pins
//! one, the layer's always); every failure is an [`OciError`] that names the
//! reference and the reason.

pub mod auth;
pub mod pull;
pub mod push;
pub mod store;

use std::fmt;

use sha2::{Digest, Sha256};

/// The Wasm OCI artifact's config media type (CNCF wasm OCI format).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The Wasm OCI artifact's layer media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Layer media types accepted as a component: the artifact's, and the older
/// wasm-to-oci one.
pub const ACCEPTED_LAYER_MEDIA_TYPES: [&str; 2] = [
    WASM_LAYER_MEDIA_TYPE,
    "application/vnd.wasm.content.layer.v1+wasm",
];

/// A reference to a component in a registry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciRef {
    /// `HOST[:PORT]`.
    pub registry: String,
    /// `REPO` (may contain `/`).
    pub repository: String,
    /// The tag, when the reference names one.
    pub tag: Option<String>,
    /// `sha256:HEX`, when the reference pins the manifest's digest.
    pub digest: Option<String>,
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Whether `s` is an `oci://` reference (as opposed to a file path).
pub fn is_oci(s: &str) -> bool {
    s.starts_with("oci://")
}

fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

impl OciRef {
    /// Parses `oci://HOST/REPO:TAG`, `oci://HOST/REPO@sha256:HEX` or
    /// `oci://HOST/REPO:TAG@sha256:HEX` (the digest then wins).
    pub fn parse(s: &str) -> Result<Self, String> {
        let rest = s
            .strip_prefix("oci://")
            .ok_or_else(|| format!("{s:?}: an OCI reference starts with oci://"))?;
        let (registry, path) = rest
            .split_once('/')
            .filter(|(h, p)| !h.is_empty() && !p.is_empty())
            .ok_or_else(|| format!("{s:?}: expected oci://HOST/REPOSITORY:TAG or oci://HOST/REPOSITORY@sha256:DIGEST"))?;
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => {
                if !valid_digest(d) {
                    return Err(format!(
                        "{s:?}: the digest must be sha256: and 64 lower-case hex digits"
                    ));
                }
                (p, Some(d.to_string()))
            }
            None => (path, None),
        };
        // A tag follows the last ':' after the last '/'.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t.to_string())),
            _ => (path, None),
        };
        if tag.is_none() && digest.is_none() {
            return Err(format!(
                "{s:?}: name a tag (:TAG) or a digest (@sha256:...)"
            ));
        }
        let repo_ok = !repository.is_empty()
            && repository.split('/').all(|c| {
                !c.is_empty()
                    && c.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)
                    })
            });
        if !repo_ok {
            return Err(format!("{s:?}: invalid repository {repository:?} (lower-case letters, digits, '.', '_', '-' and '/')"));
        }
        if let Some(t) = &tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !ok {
                return Err(format!("{s:?}: invalid tag {t:?}"));
            }
        }
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// The client crate's reference.
    pub fn reference(&self) -> oci_client::Reference {
        match (&self.digest, &self.tag) {
            (Some(d), _) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                d.clone(),
            ),
            (None, Some(t)) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                t.clone(),
            ),
            (None, None) => unreachable!("parse requires a tag or a digest"),
        }
    }

    /// The same repository, pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> Self {
        Self {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }
}

/// `sha256:HEX` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in d.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Why a component could not be pulled or pushed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OciError {
    /// No answer from the registry.
    #[error("{reference}: cannot reach the registry {registry}: {detail}")]
    Unreachable {
        reference: String,
        registry: String,
        detail: String,
    },
    /// The registry has no such tag, digest or repository.
    #[error("{reference}: not found in the registry (unknown tag, digest or repository)")]
    NotFound { reference: String },
    /// The registry refused the credentials (or their absence).
    #[error("{reference}: the registry refused access: {detail} (credentials come from the docker config file: $DOCKER_CONFIG/config.json or ~/.docker/config.json)")]
    Denied { reference: String, detail: String },
    /// Bytes whose digest is not the one that names them.
    #[error("{reference}: digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    /// A manifest with no layer of a Wasm media type.
    #[error("{reference}: the manifest has no Wasm layer (media type {WASM_LAYER_MEDIA_TYPE}); its layers: {found}")]
    NoWasmLayer { reference: String, found: String },
    /// Anything else the registry or the local cache answered.
    #[error("{reference}: {detail}")]
    Other { reference: String, detail: String },
}

/// The registry client for `registry`.
pub fn client_for(registry: &str) -> oci_client::Client {
    // The client's TLS uses the process's rustls provider: ring, as for the
    // Kubernetes client.
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let host = registry
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(registry);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let insecure = std::env::var("WASM_INFORMER_INSECURE_REGISTRIES")
        .map(|v| v.split(',').any(|r| r.trim() == registry))
        .unwrap_or(false);
    let protocol = if loopback || insecure {
        oci_client::client::ClientProtocol::Http
    } else {
        oci_client::client::ClientProtocol::Https
    };
    oci_client::Client::new(oci_client::client::ClientConfig {
        protocol,
        ..Default::default()
    })
}

/// Maps the client crate's error to ours.
pub(crate) fn classify(r: &OciRef, e: oci_client::errors::OciDistributionError) -> OciError {
    use oci_client::errors::OciDistributionError as E;
    let reference = r.to_string();
    let text = e.to_string();
    match &e {
        E::ImageManifestNotFoundError(_) => OciError::NotFound { reference },
        E::AuthenticationFailure(d) | E::UnauthorizedError { url: d } => OciError::Denied {
            reference,
            detail: d.clone(),
        },
        E::RequestError(re) if re.is_connect() || re.is_timeout() => OciError::Unreachable {
            reference,
            registry: r.registry.clone(),
            detail: text,
        },
        E::ServerError { code: 404, .. } => OciError::NotFound { reference },
        E::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|x| {
                matches!(
                    x.code,
                    oci_client::errors::OciErrorCode::ManifestUnknown
                        | oci_client::errors::OciErrorCode::NameUnknown
                        | oci_client::errors::OciErrorCode::BlobUnknown
                )
            }) =>
        {
            OciError::NotFound { reference }
        }
        _ if text.contains("error sending request") || text.contains("Connection refused") => {
            OciError::Unreachable {
                reference,
                registry: r.registry.clone(),
                detail: text,
            }
        }
        _ => OciError::Other {
            reference,
            detail: text,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_as_registries_write_them() {
        let r = OciRef::parse("oci://127.0.0.1:5000/team/pod-counter:v1").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/pod-counter");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/team/pod-counter:v1");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = OciRef::parse(&format!("oci://reg.example/p@{d}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        assert!(r.tag.is_none());
        for bad in [
            "oci://reg.example/p",
            "oci:///p:v1",
            "oci://reg.example/P:v1",
            "oci://reg.example/p@sha256:abc",
            "file.wasm",
        ] {
            assert!(OciRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn digests_are_sha256_of_the_bytes() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
