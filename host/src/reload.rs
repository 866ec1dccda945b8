//! Hot reload: watching the config directory and the plugins' .wasm files, and
//! planning what to add, change, remove or reject.
//!
//! Job: [`ConfigWatcher`] turns debounced file-system events (notify) into
//! "rescan" signals; [`ReloadState::plan`] compares a fresh scan of the plugins
//! directory with what runs and yields [`ReloadAction`]s. The supervisor applies
//! them (compiling off the dispatch path) and reports back with
//! [`ReloadState::commit_running`], [`ReloadState::commit_removed`] and
//! [`ReloadState::commit_rejected`].
//!
//! Invariant: planning is level-based and content-addressed: a file whose bytes
//! (manifest and component) did not change produces no action, a rejected version
//! is not retried until its bytes change, and a rejected file never stops the
//! version that already runs (I9). Only a deleted manifest removes a plugin.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use notify::RecursiveMode;

use crate::config::{duplicate_name, ConfigDir, ConfigError, PluginManifest};

/// A content hash of a manifest and its component.
pub type Fingerprint = u64;

/// Caches file hashes by (length, modification time), so rescans do not re-read
/// unchanged multi-megabyte components.
#[derive(Debug, Default)]
pub struct FileHasher {
    cache: HashMap<PathBuf, (u64, Option<SystemTime>, u64)>,
}

impl FileHasher {
    /// The hash of a file's bytes; an unreadable file hashes as its error text.
    pub fn hash(&mut self, path: &Path) -> u64 {
        let meta = std::fs::metadata(path).ok();
        let key = meta.as_ref().map(|m| (m.len(), m.modified().ok()));
        if let (Some((len, mtime)), Some(&(clen, cmtime, h))) = (key, self.cache.get(path)) {
            if len == clen && mtime == cmtime {
                return h;
            }
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        match std::fs::read(path) {
            Ok(bytes) => bytes.hash(&mut hasher),
            Err(e) => e.to_string().hash(&mut hasher),
        }
        let h = hasher.finish();
        if let Some((len, mtime)) = key {
            self.cache.insert(path.to_path_buf(), (len, mtime, h));
        }
        h
    }
}

/// One manifest file as found on disk.
#[derive(Debug, Clone)]
pub struct Scanned {
    /// Hash of the manifest's bytes and, when it validated, its component's bytes.
    pub fingerprint: Fingerprint,
    /// The validated manifest, or why it was rejected.
    pub manifest: Result<PluginManifest, ConfigError>,
}

/// Reads every manifest of the config directory and fingerprints it.
pub fn scan(
    config: &ConfigDir,
    hasher: &mut FileHasher,
) -> Result<BTreeMap<PathBuf, Scanned>, ConfigError> {
    let mut out = BTreeMap::new();
    for file in crate::config::manifest_files(&config.dir)? {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        hasher.hash(&file).hash(&mut h);
        let manifest = PluginManifest::load(&file, &config.host.defaults);
        if let Ok(m) = &manifest {
            hasher.hash(&m.wasm).hash(&mut h);
        }
        out.insert(
            file,
            Scanned {
                fingerprint: h.finish(),
                manifest,
            },
        );
    }
    Ok(out)
}

/// What the supervisor should do about one manifest file.
#[derive(Debug, Clone)]
pub enum ReloadAction {
    /// Load a new plugin (then replay, then live events).
    Add {
        manifest: PluginManifest,
        fingerprint: Fingerprint,
    },
    /// Load a new version and switch over to it; keep the old one on failure.
    Change {
        /// The name currently running from this file.
        old_name: String,
        manifest: PluginManifest,
        fingerprint: Fingerprint,
    },
    /// Stop the plugin: its manifest is gone.
    Remove { file: PathBuf, name: String },
    /// The file is invalid; whatever runs keeps running.
    Reject {
        file: PathBuf,
        fingerprint: Fingerprint,
        error: ConfigError,
    },
}

#[derive(Debug, Clone)]
struct Running {
    name: String,
    fingerprint: Fingerprint,
    manifest: PluginManifest,
}

/// What runs, per manifest file, and which file versions were rejected.
#[derive(Debug, Default)]
pub struct ReloadState {
    running: BTreeMap<PathBuf, Running>,
    rejected: BTreeMap<PathBuf, Fingerprint>,
}

impl ReloadState {
    /// Plans the actions that bring the running set to `scanned`.
    pub fn plan(&self, scanned: &BTreeMap<PathBuf, Scanned>) -> Vec<ReloadAction> {
        let mut actions = Vec::new();
        for (file, r) in &self.running {
            if !scanned.contains_key(file) {
                actions.push(ReloadAction::Remove {
                    file: file.clone(),
                    name: r.name.clone(),
                });
            }
        }
        // Names owned by files that keep running or are about to be loaded.
        let mut owners: BTreeMap<String, PluginManifest> = self
            .running
            .iter()
            .filter(|(f, _)| scanned.contains_key(*f))
            .map(|(_, r)| (r.manifest.identity_key(), r.manifest.clone()))
            .collect();
        for (file, s) in scanned {
            let running = self.running.get(file);
            if running.is_some_and(|r| r.fingerprint == s.fingerprint) {
                continue;
            }
            if self.rejected.get(file) == Some(&s.fingerprint) {
                continue;
            }
            let manifest = match &s.manifest {
                Ok(m) => m,
                Err(e) => {
                    actions.push(ReloadAction::Reject {
                        file: file.clone(),
                        fingerprint: s.fingerprint,
                        error: e.clone(),
                    });
                    continue;
                }
            };
            if let Some(owner) = owners.get(&manifest.identity_key()) {
                if owner.file != *file {
                    actions.push(ReloadAction::Reject {
                        file: file.clone(),
                        fingerprint: s.fingerprint,
                        error: duplicate_name(manifest, owner),
                    });
                    continue;
                }
            }
            owners.insert(manifest.identity_key(), manifest.clone());
            match running {
                None => actions.push(ReloadAction::Add {
                    manifest: manifest.clone(),
                    fingerprint: s.fingerprint,
                }),
                Some(r) => actions.push(ReloadAction::Change {
                    old_name: r.name.clone(),
                    manifest: manifest.clone(),
                    fingerprint: s.fingerprint,
                }),
            }
        }
        actions
    }

    /// Records that `manifest` (with `fingerprint`) now runs from its file.
    pub fn commit_running(&mut self, manifest: &PluginManifest, fingerprint: Fingerprint) {
        self.rejected.remove(&manifest.file);
        self.running.insert(
            manifest.file.clone(),
            Running {
                name: manifest.name.clone(),
                fingerprint,
                manifest: manifest.clone(),
            },
        );
    }

    /// Records that nothing runs from `file` any more.
    pub fn commit_removed(&mut self, file: &Path) {
        self.running.remove(file);
        self.rejected.remove(file);
    }

    /// Records that this version of `file` was rejected, so it is not retried
    /// until its bytes change.
    pub fn commit_rejected(&mut self, file: &Path, fingerprint: Fingerprint) {
        self.rejected.insert(file.to_path_buf(), fingerprint);
    }

    /// The running plugin names by manifest file.
    pub fn running(&self) -> BTreeMap<PathBuf, String> {
        self.running
            .iter()
            .map(|(f, r)| (f.clone(), r.name.clone()))
            .collect()
    }

    /// Directories holding the running plugins' components (to watch).
    pub fn component_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self
            .running
            .values()
            .filter_map(|r| r.manifest.wasm.parent().map(Path::to_path_buf))
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }
}

/// Watches the config directory, its plugins directory and the directories of
/// the components in use, and sends one signal per debounced burst of changes.
pub struct ConfigWatcher {
    debouncer: notify_debouncer_mini::Debouncer<notify::RecommendedWatcher>,
    watched: Vec<PathBuf>,
}

impl std::fmt::Debug for ConfigWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatcher")
            .field("watched", &self.watched)
            .finish()
    }
}

impl ConfigWatcher {
    /// Starts watching `config_dir` (and `config_dir/plugins` when it exists);
    /// every debounced burst sends `()` on `tx`.
    pub fn start(
        config_dir: &Path,
        debounce: Duration,
        tx: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> notify::Result<Self> {
        let debouncer = notify_debouncer_mini::new_debouncer(
            debounce,
            move |res: notify_debouncer_mini::DebounceEventResult| match res {
                Ok(events) if !events.is_empty() => {
                    let _ = tx.send(());
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "file watcher error; the periodic rescan still applies changes")
                }
            },
        )?;
        let mut w = Self {
            debouncer,
            watched: Vec::new(),
        };
        w.watch_dirs(&[config_dir.to_path_buf(), config_dir.join("plugins")]);
        Ok(w)
    }

    /// Makes sure each of `dirs` that exists is watched (non-recursively).
    pub fn watch_dirs(&mut self, dirs: &[PathBuf]) {
        for d in dirs {
            let d = d.canonicalize().unwrap_or_else(|_| d.clone());
            if self.watched.contains(&d) || !d.is_dir() {
                continue;
            }
            match self
                .debouncer
                .watcher()
                .watch(&d, RecursiveMode::NonRecursive)
            {
                Ok(()) => self.watched.push(d),
                Err(e) => tracing::warn!(dir = %d.display(), error = %e, "cannot watch directory"),
            }
        }
    }

    /// Directories being watched.
    pub fn watched(&self) -> &[PathBuf] {
        &self.watched
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HostSettings;

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("plugins")).unwrap();
            Self { dir }
        }
        fn config(&self) -> ConfigDir {
            ConfigDir {
                dir: self.dir.path().to_path_buf(),
                host: HostSettings::default(),
            }
        }
        fn write(&self, rel: &str, text: &str) {
            std::fs::write(self.dir.path().join(rel), text).unwrap();
        }
        fn manifest(&self, file: &str, name: &str, wasm: &str) {
            self.write(
                &format!("plugins/{file}"),
                &format!("name = \"{name}\"\nwasm = \"{wasm}\"\nresources = [\"v1/pods\"]\n"),
            );
        }
        fn plan(&self, state: &ReloadState, hasher: &mut FileHasher) -> Vec<ReloadAction> {
            state.plan(&scan(&self.config(), hasher).unwrap())
        }
    }

    fn apply(state: &mut ReloadState, actions: &[ReloadAction]) {
        for a in actions {
            match a {
                ReloadAction::Add {
                    manifest,
                    fingerprint,
                }
                | ReloadAction::Change {
                    manifest,
                    fingerprint,
                    ..
                } => state.commit_running(manifest, *fingerprint),
                ReloadAction::Remove { file, .. } => state.commit_removed(file),
                ReloadAction::Reject {
                    file, fingerprint, ..
                } => state.commit_rejected(file, *fingerprint),
            }
        }
    }

    #[test]
    fn add_change_reject_remove_cycle() {
        let f = Fixture::new();
        let mut h = FileHasher::default();
        let mut state = ReloadState::default();
        f.write("plugins/a.wasm", "v1");
        f.manifest("a.toml", "a", "a.wasm");

        let actions = f.plan(&state, &mut h);
        assert!(
            matches!(actions.as_slice(), [ReloadAction::Add { manifest, .. }] if manifest.name == "a")
        );
        apply(&mut state, &actions);
        assert!(
            f.plan(&state, &mut h).is_empty(),
            "unchanged files must plan nothing"
        );

        // New component bytes (different length, so the mtime cache cannot hide it).
        f.write("plugins/a.wasm", "version 2");
        let actions = f.plan(&state, &mut h);
        assert!(
            matches!(actions.as_slice(), [ReloadAction::Change { old_name, .. }] if old_name == "a")
        );
        apply(&mut state, &actions);

        // A broken manifest is rejected once and the plugin keeps running.
        f.write(
            "plugins/a.toml",
            "name = \"a\"\nwasm = \"a.wasm\"\nresources = [\"v1/pods\"]\nbogus = 1\n",
        );
        let actions = f.plan(&state, &mut h);
        match actions.as_slice() {
            [ReloadAction::Reject { error, .. }] => {
                assert_eq!(error.key.as_deref(), Some("bogus"));
                assert_eq!(error.position, Some((4, 1)));
            }
            other => panic!("expected one reject, got {other:?}"),
        }
        apply(&mut state, &actions);
        assert_eq!(
            state.running().values().cloned().collect::<Vec<_>>(),
            vec!["a".to_string()]
        );
        assert!(
            f.plan(&state, &mut h).is_empty(),
            "a rejected version must not be retried"
        );

        std::fs::remove_file(f.dir.path().join("plugins/a.toml")).unwrap();
        let actions = f.plan(&state, &mut h);
        assert!(matches!(actions.as_slice(), [ReloadAction::Remove { name, .. }] if name == "a"));
        apply(&mut state, &actions);
        assert!(state.running().is_empty());
    }

    #[test]
    fn duplicate_name_in_second_file_is_rejected() {
        let f = Fixture::new();
        let mut h = FileHasher::default();
        let mut state = ReloadState::default();
        f.write("plugins/x.wasm", "x");
        f.manifest("a.toml", "same", "x.wasm");
        let first = f.plan(&state, &mut h);
        apply(&mut state, &first);
        f.manifest("b.toml", "same", "x.wasm");
        let actions = f.plan(&state, &mut h);
        match actions.as_slice() {
            [ReloadAction::Reject { file, error, .. }] => {
                assert!(file.ends_with("b.toml"));
                assert!(
                    error
                        .reason
                        .starts_with("duplicate plugin name \"same\": already defined in "),
                    "{error}"
                );
                assert!(error.reason.ends_with("a.toml:1:8"), "{error}");
            }
            other => panic!("expected one reject, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn watcher_signals_on_new_manifest() {
        let f = Fixture::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let _w = ConfigWatcher::start(f.dir.path(), Duration::from_millis(100), tx).unwrap();
        f.manifest("late.toml", "late", "late.wasm");
        let got = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await;
        assert!(
            matches!(got, Ok(Some(()))),
            "no change signal after writing a manifest"
        );
    }
}
