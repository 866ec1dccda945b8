//! The local cache of pulled components, by digest, in `CACHE_DIR-oci/`
//! beside the compilation cache (never inside it: wasmtime's cache cleanup
//! removes files it did not write): `blobs/sha256/HEX` holds a component's bytes (named by
//! its layer's digest), `manifests/sha256/HEX` the layer digest a manifest
//! names. A reference pinned by digest whose entries are here loads with no
//! registry at all (after a restart too).
//!
//! Invariant: an entry is written whole (a temporary file, then a rename)
//! and read back only if its bytes still have the digest that names them; a
//! damaged entry is a miss.

use std::path::{Path, PathBuf};

use super::sha256_digest;

/// The cache directory's OCI part.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

fn hex_of(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

impl Store {
    /// The store beside the compilation cache `cache_dir`:
    /// `CACHE_DIR-oci`.
    pub fn new(cache_dir: &Path) -> Self {
        let name = cache_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "wasm-cache".into());
        Self {
            dir: cache_dir.with_file_name(format!("{name}-oci")),
        }
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        hex_of(digest).map(|h| self.dir.join("blobs/sha256").join(h))
    }

    fn manifest_path(&self, digest: &str) -> Option<PathBuf> {
        hex_of(digest).map(|h| self.dir.join("manifests/sha256").join(h))
    }

    /// The component a manifest digest names, if both entries are here and
    /// intact: (layer digest, bytes).
    pub fn by_manifest(&self, manifest_digest: &str) -> Option<(String, Vec<u8>)> {
        let layer = std::fs::read_to_string(self.manifest_path(manifest_digest)?).ok()?;
        let layer = layer.trim().to_string();
        let bytes = self.blob(&layer)?;
        Some((layer, bytes))
    }

    /// A component by its layer digest, if here and intact.
    pub fn blob(&self, layer_digest: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.blob_path(layer_digest)?).ok()?;
        (sha256_digest(&bytes) == layer_digest).then_some(bytes)
    }

    /// Keeps a pulled component.
    pub fn put(
        &self,
        manifest_digest: &str,
        layer_digest: &str,
        bytes: &[u8],
    ) -> std::io::Result<()> {
        let invalid =
            || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a sha256 digest");
        write_atomically(&self.blob_path(layer_digest).ok_or_else(invalid)?, bytes)?;
        write_atomically(
            &self.manifest_path(manifest_digest).ok_or_else(invalid)?,
            layer_digest.as_bytes(),
        )
    }

    /// The file a cached component lives in (for messages).
    pub fn blob_file(&self, layer_digest: &str) -> Option<PathBuf> {
        self.blob_path(layer_digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_entry_is_a_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::new(&tmp.path().join("wasm-cache"));
        assert!(s.dir.starts_with(tmp.path()) && s.dir.ends_with("wasm-cache-oci"));
        let bytes = b"\0asm component".to_vec();
        let layer = sha256_digest(&bytes);
        let manifest = sha256_digest(b"manifest");
        s.put(&manifest, &layer, &bytes).unwrap();
        assert_eq!(s.by_manifest(&manifest), Some((layer.clone(), bytes)));
        std::fs::write(s.blob_file(&layer).unwrap(), b"tampered").unwrap();
        assert_eq!(s.by_manifest(&manifest), None);
        assert_eq!(s.by_manifest(&sha256_digest(b"other")), None);
    }
}
