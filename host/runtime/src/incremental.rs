//! Cranelift's incremental compilation cache, kept on disk: compiled
//! functions by the hash of their input, so a component that differs from
//! one compiled before in a few functions (a JavaScript or Python plugin
//! after a one-line edit: the same embedded engine, a changed script)
//! recompiles only those.
//!
//! Job: answer cranelift's lookups from memory, else from one file per
//! entry, and write new entries to disk on a background thread, so that
//! compilation never waits on the disk for a write.
//!
//! Where: a directory beside the engine's compilation cache
//! (`CACHE_DIR-incremental`), never inside it: wasmtime's cache cleanup
//! removes files it did not write.
//!
//! Invariants: an entry is written whole or not at all (a temporary file,
//! then a rename), so a reader never sees half an entry; a missing or
//! unreadable entry is a miss, never an error; cranelift checks what it
//! reads back, so a stale entry costs a recompile of that function only.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::Mutex;

/// Longest key kept (cranelift's keys are 32-byte hashes).
const MAX_KEY: usize = 64;

/// The persistent store.
pub struct IncrementalStore {
    dir: PathBuf,
    memory: Mutex<HashMap<Vec<u8>, Arc<[u8]>>>,
    writer: Mutex<mpsc::Sender<(PathBuf, Arc<[u8]>)>>,
}

impl std::fmt::Debug for IncrementalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncrementalStore")
            .field("dir", &self.dir)
            .field("in_memory", &self.memory.lock().len())
            .finish()
    }
}

/// The store's directory for an engine compilation cache at `cache_dir`.
pub fn dir_beside(cache_dir: &Path) -> PathBuf {
    let name = cache_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "wasm-cache".into());
    cache_dir.with_file_name(format!("{name}-incremental"))
}

fn write_entry(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

impl IncrementalStore {
    /// A store in `dir` (created on first write), with its writer thread.
    pub fn open(dir: PathBuf) -> std::io::Result<Arc<Self>> {
        std::fs::create_dir_all(&dir)?;
        let (tx, rx) = mpsc::channel::<(PathBuf, Arc<[u8]>)>();
        std::thread::Builder::new()
            .name("wasm-incremental-cache".into())
            .spawn(move || {
                for (path, bytes) in rx {
                    if let Err(e) = write_entry(&path, &bytes) {
                        tracing::debug!(path = %path.display(), error = %e, "incremental cache entry not written");
                    }
                }
            })?;
        Ok(Arc::new(Self {
            dir,
            memory: Mutex::new(HashMap::new()),
            writer: Mutex::new(tx),
        }))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &[u8]) -> PathBuf {
        let mut hex = String::with_capacity(key.len() * 2);
        for b in key {
            let _ = write!(hex, "{b:02x}");
        }
        let (a, b) = hex.split_at(2.min(hex.len()));
        self.dir.join(a).join(b)
    }

    /// Waits (up to 30 s) until every entry handed to the writer is on
    /// disk (tests, and measurements that restart the engine).
    pub fn flush(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let pending = self
                .memory
                .lock()
                .keys()
                .any(|k| k.len() <= MAX_KEY && !self.path(k).exists());
            if !pending {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl wasmtime::CacheStore for IncrementalStore {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        if let Some(v) = self.memory.lock().get(key) {
            return Some(Cow::Owned(v.to_vec()));
        }
        if key.len() > MAX_KEY {
            return None;
        }
        let bytes: Arc<[u8]> = std::fs::read(self.path(key)).ok()?.into();
        self.memory.lock().insert(key.to_vec(), bytes.clone());
        Some(Cow::Owned(bytes.to_vec()))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let value: Arc<[u8]> = value.into();
        self.memory.lock().insert(key.to_vec(), value.clone());
        if key.len() <= MAX_KEY {
            let _ = self.writer.lock().send((self.path(key), value));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore;

    #[test]
    fn entries_survive_a_new_store_and_live_beside_the_engine_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("wasm-cache");
        let dir = dir_beside(&cache);
        assert_eq!(dir, tmp.path().join("wasm-cache-incremental"));
        let s = IncrementalStore::open(dir.clone()).unwrap();
        assert!(s.get(&[1; 32]).is_none());
        assert!(s.insert(&[1; 32], b"compiled".to_vec()));
        assert_eq!(s.get(&[1; 32]).as_deref(), Some(&b"compiled"[..]));
        s.flush();
        let again = IncrementalStore::open(dir).unwrap();
        assert_eq!(again.get(&[1; 32]).as_deref(), Some(&b"compiled"[..]));
        assert!(again.get(&[2; 32]).is_none());
    }
}
