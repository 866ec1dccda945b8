//! Recorded streams: what the informers saw, saved to a file, to replay a
//! plugin over it offline (`wasm-informer test --replay`).
//!
//! Job: [`Recorder::start`] subscribes one listener per resource to the
//! shared informers and writes, from a thread of its own, every notification
//! it is handed: first the cache as the informer holds it (the listener's
//! replay, recorded as `initial`), then every `added`, `updated` and
//! `deleted`, each with its object as cached (the host's transform applied,
//! managedFields cut) and the milliseconds since the recording started. The
//! file is zstd-compressed JSON lines: a header naming the format and each
//! resource's `apiVersion` and `kind`, then one line per notification.
//! [`Recording::read`] reads it back, and [`Recording::fixture`] turns it into
//! the objects and events files `test` takes.
//!
//! Invariants:
//! - Recording never slows the dispatcher: each resource's listener takes
//!   notifications like any plugin's (I1), and the listener only hands a
//!   line to the writer thread, which compresses and writes.
//! - Per key, the recording keeps the informer's order (I3); if the recorder
//!   falls behind by more than its queue, it records the final state of each
//!   key it missed (I5), as any listener does, and says so in its summary.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, NotificationRef};
use kube_informer::{HandlerOptions, InformerRegistry, Registration};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The format's name and version, in the header.
pub const FORMAT: &str = "wasm-informer-recording";
/// This version of the format.
pub const VERSION: u32 = 1;

/// Notifications each resource's listener holds before it coalesces.
const QUEUE: usize = 1 << 20;

/// One recorded resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedResource {
    /// Resource id (`v1/pods`).
    pub id: String,
    /// `apiVersion` of its objects.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `kind` of its objects.
    pub kind: String,
}

/// The first line of a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// What was recorded.
    pub resources: Vec<RecordedResource>,
}

/// One recorded notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds since the recording started.
    pub t: u64,
    /// Resource id.
    pub r: String,
    /// `initial`, `added`, `updated` or `deleted`.
    pub e: String,
    /// The object as cached.
    pub o: Value,
}

/// What a recording holds, once written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The file.
    pub file: PathBuf,
    /// Objects of the initial state.
    pub initial: u64,
    /// Events after it.
    pub events: u64,
    /// Bytes of the compressed file.
    pub bytes: u64,
    /// Notifications the recorder's listeners could not hold and coalesced
    /// (0: every event is in the file).
    pub coalesced: u64,
}

/// A recording under way.
pub struct Recorder {
    registrations: Vec<Registration>,
    tx: Option<std::sync::mpsc::Sender<String>>,
    writer: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    counts: Arc<Counts>,
    file: PathBuf,
}

#[derive(Default)]
struct Counts {
    initial: AtomicU64,
    events: AtomicU64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("file", &self.file)
            .finish()
    }
}

/// The listener of one resource: one line per notification, to the writer.
struct Tap {
    resource: Arc<str>,
    started: Instant,
    tx: std::sync::mpsc::Sender<String>,
    counts: Arc<Counts>,
}

impl Handler for Tap {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let e = match (n.kind, n.in_initial_list) {
            (EventKind::Added, true) => "initial",
            (EventKind::Added, false) => "added",
            (EventKind::Updated, _) => "updated",
            (EventKind::Deleted, _) => "deleted",
            (EventKind::Synced, _) => return Delivery::Ok,
        };
        let counter = if e == "initial" {
            &self.counts.initial
        } else {
            &self.counts.events
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let line = format!(
            "{{\"t\":{},\"r\":{},\"e\":\"{e}\",\"o\":{}}}\n",
            self.started.elapsed().as_millis(),
            Value::String(self.resource.to_string()),
            n.object.json()
        );
        // The writer is gone only when the recording was stopped.
        let _ = self.tx.send(line);
        Delivery::Ok
    }
}

impl Recorder {
    /// Starts recording `resources` (ids) of `registry` into `file`.
    pub async fn start(
        registry: &Arc<InformerRegistry>,
        resources: &[String],
        file: &Path,
    ) -> Result<Self, String> {
        let out = std::fs::File::create(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut recorded = Vec::new();
        let mut leases = Vec::new();
        for r in resources {
            let lease = registry
                .acquire(r)
                .await
                .map_err(|e| format!("cannot record {r}: {e}"))?;
            let spec = lease.informer().spec().clone();
            let api_version = if spec.id.group.is_empty() {
                spec.id.version.clone()
            } else {
                format!("{}/{}", spec.id.group, spec.id.version)
            };
            recorded.push(RecordedResource {
                id: r.clone(),
                api_version,
                kind: spec.kind.clone(),
            });
            leases.push(lease);
        }
        let header = serde_json::to_string(&Header {
            format: FORMAT.into(),
            version: VERSION,
            resources: recorded,
        })
        .expect("a header serialises");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let writer = std::thread::Builder::new()
            .name("recorder".into())
            .spawn(move || -> std::io::Result<()> {
                let mut z = zstd::stream::Encoder::new(std::io::BufWriter::new(out), 3)?;
                z.write_all(header.as_bytes())?;
                z.write_all(b"\n")?;
                for line in rx {
                    z.write_all(line.as_bytes())?;
                }
                z.finish()?.flush()
            })
            .map_err(|e| format!("cannot start the recorder: {e}"))?;
        let counts = Arc::new(Counts::default());
        let started = Instant::now();
        let mut registrations = Vec::new();
        for r in resources {
            let tap = Tap {
                resource: r.as_str().into(),
                started,
                tx: tx.clone(),
                counts: counts.clone(),
            };
            let reg = registry
                .add_handler(
                    r,
                    tap,
                    HandlerOptions::named("recorder").queue_capacity(QUEUE),
                )
                .await
                .map_err(|e| format!("cannot record {r}: {e}"))?;
            registrations.push(reg);
        }
        drop(leases);
        Ok(Self {
            registrations,
            tx: Some(tx),
            writer: Some(writer),
            counts,
            file: file.to_path_buf(),
        })
    }

    /// Whether every resource's initial state is recorded.
    pub fn has_synced(&self) -> bool {
        self.registrations.iter().all(|r| r.has_synced())
    }

    /// Stops recording, once every notification handed to the listeners so
    /// far is written, and finishes the file.
    pub async fn finish(mut self) -> Result<Summary, String> {
        // Let the listeners hand over what they hold.
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while self
            .registrations
            .iter()
            .any(|r| r.stats().snapshot().queue_depth > 0)
            && Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let coalesced = self
            .registrations
            .iter()
            .map(|r| r.stats().snapshot().coalesced)
            .sum();
        self.registrations.clear();
        self.tx.take();
        let writer = self.writer.take().expect("finished once");
        tokio::task::spawn_blocking(move || writer.join())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|_| "the recorder's writer panicked".to_string())?
            .map_err(|e| format!("{}: {e}", self.file.display()))?;
        let bytes = std::fs::metadata(&self.file).map(|m| m.len()).unwrap_or(0);
        Ok(Summary {
            file: self.file.clone(),
            initial: self.counts.initial.load(Ordering::Relaxed),
            events: self.counts.events.load(Ordering::Relaxed),
            bytes,
            coalesced,
        })
    }
}

/// The resources a config directory's plugins watch or read, deduplicated,
/// in manifest order (manifests that do not parse are left out: `run` says
/// why).
pub fn config_resources(config: &crate::config::ConfigDir) -> Result<Vec<String>, String> {
    let plugins = config.dir.join("plugins");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&plugins)
        .map_err(|e| format!("{}: {e}", plugins.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("toml"))
        .collect();
    files.sort();
    let mut out: Vec<String> = Vec::new();
    for f in files {
        let Ok(m) = crate::config::PluginManifest::load(&f, &config.host.defaults) else {
            continue;
        };
        for r in m.readable() {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no manifest names a resource to record",
            plugins.display()
        ));
    }
    Ok(out)
}

/// A recording, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Its header.
    pub header: Header,
    /// Its notifications, in order.
    pub entries: Vec<Entry>,
}

impl Recording {
    /// Reads `file`; an error names the file and the line.
    pub fn read(file: &Path) -> Result<Self, String> {
        let f = std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let z = zstd::stream::Decoder::new(f).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut lines = BufReader::new(z).lines();
        let first = lines
            .next()
            .ok_or_else(|| format!("{}: empty: not a recording", file.display()))?
            .map_err(|e| format!("{}: not a recording ({e})", file.display()))?;
        let header: Header = serde_json::from_str(&first)
            .map_err(|e| format!("{}: line 1: not a recording header: {e}", file.display()))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(format!(
                "{}: format {} version {}, expected {FORMAT} version {VERSION}",
                file.display(),
                header.format,
                header.version
            ));
        }
        let mut entries = Vec::new();
        for (i, line) in lines.enumerate() {
            let line = line.map_err(|e| format!("{}: line {}: {e}", file.display(), i + 2))?;
            if line.is_empty() {
                continue;
            }
            let e: Entry = serde_json::from_str(&line)
                .map_err(|e| format!("{}: line {}: {e}", file.display(), i + 2))?;
            entries.push(e);
        }
        Ok(Self { header, entries })
    }

    /// The objects and events files `test` takes, written into `dir`: the
    /// initial state as one JSON array of objects, and every later
    /// notification as a watch event, each object with its `apiVersion` and
    /// `kind`.
    pub fn fixture(&self, dir: &Path) -> Result<(PathBuf, PathBuf), String> {
        let kinds: std::collections::HashMap<&str, &RecordedResource> = self
            .header
            .resources
            .iter()
            .map(|r| (r.id.as_str(), r))
            .collect();
        let typed = |e: &Entry| -> Result<Value, String> {
            let r = kinds
                .get(e.r.as_str())
                .ok_or_else(|| format!("an entry of {}, which the header does not name", e.r))?;
            let mut o = e.o.clone();
            o["apiVersion"] = Value::String(r.api_version.clone());
            o["kind"] = Value::String(r.kind.clone());
            Ok(o)
        };
        let mut objects = Vec::new();
        let mut events = Vec::new();
        for e in &self.entries {
            let o = typed(e)?;
            let t = match e.e.as_str() {
                "initial" => {
                    objects.push(o);
                    continue;
                }
                "added" => "ADDED",
                "updated" => "MODIFIED",
                "deleted" => "DELETED",
                other => return Err(format!("an entry of unknown kind {other:?}")),
            };
            events.push(serde_json::json!({ "type": t, "object": o }));
        }
        let objects_file = dir.join("objects.json");
        let events_file = dir.join("events.json");
        let write = |p: &Path, v: Vec<Value>| {
            std::fs::write(p, serde_json::to_vec(&Value::Array(v)).expect("JSON"))
                .map_err(|e| format!("{}: {e}", p.display()))
        };
        write(&objects_file, objects)?;
        write(&events_file, events)?;
        Ok((objects_file, events_file))
    }
}
