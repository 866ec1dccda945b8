//! Pulling a component: resolve the reference to a manifest digest (a tag
//! once per call, that is once per load), find the manifest's Wasm layer,
//! fetch it, check both digests, keep it in the [`Store`].
//!
//! Invariant: the bytes returned have the layer digest the manifest names,
//! and the manifest has the digest the reference pins (if it pins one); a
//! reference pinned by digest whose component is in the store is answered
//! without the registry.

use super::store::Store;
use super::{
    auth, classify, client_for, sha256_digest, OciError, OciRef, ACCEPTED_LAYER_MEDIA_TYPES,
};

/// A pulled component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The manifest's digest (what a tag resolved to).
    pub digest: String,
    /// The layer's digest: the component's bytes'.
    pub layer: String,
    /// The component.
    pub bytes: Vec<u8>,
    /// Whether the store answered (no registry contacted for the blob).
    pub from_cache: bool,
}

/// Pulls `r`, through `store`.
pub async fn pull(r: &OciRef, store: &Store) -> Result<Pulled, OciError> {
    if let Some(d) = &r.digest {
        if let Some((layer, bytes)) = store.by_manifest(d) {
            return Ok(Pulled {
                digest: d.clone(),
                layer,
                bytes,
                from_cache: true,
            });
        }
    }
    let client = client_for(&r.registry);
    let auth = auth::for_registry(&r.registry);
    let (raw, _) = client
        .pull_manifest_raw(
            &r.reference(),
            &auth,
            &[
                oci_client::manifest::OCI_IMAGE_MEDIA_TYPE,
                oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
            ],
        )
        .await
        .map_err(|e| classify(r, e))?;
    let digest = sha256_digest(&raw);
    if let Some(want) = &r.digest {
        if &digest != want {
            return Err(OciError::DigestMismatch {
                reference: r.to_string(),
                expected: want.clone(),
                actual: digest,
            });
        }
    }
    if let Some((layer, bytes)) = store.by_manifest(&digest) {
        return Ok(Pulled {
            digest,
            layer,
            bytes,
            from_cache: true,
        });
    }
    let manifest: oci_client::manifest::OciImageManifest =
        serde_json::from_slice(&raw).map_err(|e| OciError::Other {
            reference: r.to_string(),
            detail: format!("not an OCI image manifest: {e}"),
        })?;
    let Some(layer) = manifest
        .layers
        .iter()
        .find(|l| ACCEPTED_LAYER_MEDIA_TYPES.contains(&l.media_type.as_str()))
    else {
        let found: Vec<&str> = manifest
            .layers
            .iter()
            .map(|l| l.media_type.as_str())
            .collect();
        return Err(OciError::NoWasmLayer {
            reference: r.to_string(),
            found: if found.is_empty() {
                "none".into()
            } else {
                found.join(", ")
            },
        });
    };
    let mut bytes: Vec<u8> = Vec::with_capacity(layer.size.max(0) as usize);
    client
        .pull_blob(&r.pinned(&digest).reference(), layer, &mut bytes)
        .await
        .map_err(|e| match e {
            oci_client::errors::OciDistributionError::DigestError(
                oci_client::errors::DigestError::VerificationError { expected, actual },
            ) => OciError::DigestMismatch {
                reference: r.to_string(),
                expected,
                actual,
            },
            e => classify(r, e),
        })?;
    let actual = sha256_digest(&bytes);
    if actual != layer.digest {
        return Err(OciError::DigestMismatch {
            reference: r.to_string(),
            expected: layer.digest.clone(),
            actual,
        });
    }
    if let Err(e) = store.put(&digest, &layer.digest, &bytes) {
        tracing::warn!(reference = %r, error = %e, "pulled component not kept in the cache");
    }
    Ok(Pulled {
        digest,
        layer: layer.digest.clone(),
        bytes,
        from_cache: false,
    })
}
