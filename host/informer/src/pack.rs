//! Packed cache bodies: each resource's cached JSON compressed with zstd against
//! a dictionary trained on that resource's own first objects, in the background.
//!
//! Objects of one resource are near-identical (pods of one workload differ in a
//! name, a uid, a few IPs and timestamps), so a dictionary trained on a few dozen
//! of them packs each body about ten times. Packing costs more CPU than the rest
//! of an event's path, so it never runs on it: the Reflector caches text, and a
//! [`Compactor`] thread at idle priority packs what the cache holds once the
//! pipeline leaves a core free, replacing the cached `Arc` with a packed copy.
//! Objects in flight (a notification, a delta) stay text; only reads of the
//! cache pay for unpacking (about 3 µs for a 3 KB pod on the reference machine,
//! see docs/BENCHMARKS.md, B4).
//!
//! Invariants:
//! - [`Object::json`] of a packed object is byte for byte the text it was
//!   packed from (tested below and by every cache test, which run with packing
//!   on);
//! - the compactor replaces an object only while the cache still holds that
//!   very object (the same `Arc`), under the Indexer's write lock, so a newer
//!   version is never overwritten by an older one and indexes never change.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use zstd::zstd_safe::{CCtx, CDict, DCtx, DDict};

use crate::indexer::Indexer;
use crate::object::{Object, ObjectRef};

/// Objects whose text trains a resource's dictionary.
const SAMPLES: usize = 64;
/// Fewest objects a dictionary is trained from: a resource with fewer is not
/// worth packing.
const MIN_SAMPLES: usize = 16;
/// Size of a trained dictionary.
const DICTIONARY_BYTES: usize = 16 * 1024;
/// zstd level: level 1 with a trained dictionary packed a pod 10.3 times at
/// 11 µs; negative levels were barely faster and packed less.
const LEVEL: i32 = 1;
/// Objects packed between two looks at the stop flag.
const BATCH: usize = 256;

/// A cached object's JSON: the text, or the text packed.
pub(crate) enum Body {
    /// The text as decoded.
    Text(Box<str>),
    /// The text compressed against its resource's dictionary.
    Packed(Packed),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Body::Packed(p) => f
                .debug_struct("Packed")
                .field("len", &p.len)
                .field("packed", &p.bytes.len())
                .finish(),
        }
    }
}

/// One packed body.
pub(crate) struct Packed {
    dictionary: Arc<Dictionary>,
    bytes: Box<[u8]>,
    /// Length of the text.
    len: u32,
}

impl Body {
    /// The text, unpacked when packed.
    pub(crate) fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Body::Text(t) => std::borrow::Cow::Borrowed(t),
            Body::Packed(p) => std::borrow::Cow::Owned(p.unpack()),
        }
    }

    /// Length of the text.
    pub(crate) fn text_len(&self) -> usize {
        match self {
            Body::Text(t) => t.len(),
            Body::Packed(p) => p.len as usize,
        }
    }

    /// Bytes held for the body.
    pub(crate) fn stored_len(&self) -> usize {
        match self {
            Body::Text(t) => t.len(),
            Body::Packed(p) => p.bytes.len(),
        }
    }
}

thread_local! {
    /// Each reading thread's decompression context (zstd's is about 100 KB:
    /// made once per thread, not per read).
    static DCTX: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
}

impl Packed {
    fn unpack(&self) -> String {
        let mut out: Vec<u8> = Vec::with_capacity(self.len as usize);
        DCTX.with(|d| {
            d.borrow_mut()
                .decompress_using_ddict(&mut out, &self.bytes, &self.dictionary.ddict)
        })
        .expect("a packed body unpacks: it was packed in this process with this dictionary");
        String::from_utf8(out).expect("a packed body unpacks to the UTF-8 text it was packed from")
    }
}

/// A resource's dictionary, prepared for packing and for unpacking.
pub struct Dictionary {
    cdict: CDict<'static>,
    ddict: DDict<'static>,
    /// Size of the dictionary itself.
    bytes: usize,
    /// Whether zstd trained it (false: the samples' raw text, used when
    /// training failed).
    trained: bool,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("bytes", &self.bytes)
            .field("trained", &self.trained)
            .finish()
    }
}

impl Dictionary {
    /// Trains a dictionary on `samples` (object texts); falls back to their
    /// concatenated text when training fails (too few or too small samples).
    fn train(samples: &[String]) -> Dictionary {
        let sizes: Vec<usize> = samples.iter().map(String::len).collect();
        let joined = samples.concat();
        let (raw, trained) =
            match zstd::dict::from_continuous(joined.as_bytes(), &sizes, DICTIONARY_BYTES) {
                Ok(d) => (d, true),
                Err(_) => {
                    let start = joined.len().saturating_sub(DICTIONARY_BYTES * 4);
                    (joined.as_bytes()[start..].to_vec(), false)
                }
            };
        Dictionary {
            cdict: CDict::create(&raw, LEVEL),
            ddict: DDict::create(&raw),
            bytes: raw.len(),
            trained,
        }
    }
}

/// Packs one resource's bodies: learns the dictionary from the first objects,
/// then compresses each text against it.
pub(crate) struct Packer {
    samples: Vec<String>,
    dictionary: Option<Arc<Dictionary>>,
    cctx: CCtx<'static>,
    scratch: Vec<u8>,
}

impl Packer {
    pub(crate) fn new() -> Packer {
        Packer {
            samples: Vec::new(),
            dictionary: None,
            cctx: CCtx::create(),
            scratch: Vec::new(),
        }
    }

    /// Whether the dictionary is ready.
    pub(crate) fn ready(&self) -> bool {
        self.dictionary.is_some()
    }

    /// Takes `text` as a sample; trains the dictionary on the [`SAMPLES`]th.
    pub(crate) fn learn(&mut self, text: &str) {
        if self.ready() {
            return;
        }
        self.samples.push(text.to_owned());
        if self.samples.len() >= SAMPLES {
            self.finish_learning();
        }
    }

    /// Trains on the samples so far, if there are at least [`MIN_SAMPLES`].
    pub(crate) fn finish_learning(&mut self) {
        if self.ready() || self.samples.len() < MIN_SAMPLES {
            return;
        }
        let samples = std::mem::take(&mut self.samples);
        self.dictionary = Some(Arc::new(Dictionary::train(&samples)));
    }

    /// `text` packed, or `None` before the dictionary is ready or when packing
    /// would not make it smaller.
    pub(crate) fn pack(&mut self, text: &str) -> Option<Packed> {
        let dictionary = self.dictionary.clone()?;
        let len = u32::try_from(text.len()).ok()?;
        self.scratch.clear();
        self.scratch
            .reserve(zstd::zstd_safe::compress_bound(text.len()));
        self.cctx
            .compress_using_cdict(&mut self.scratch, text.as_bytes(), &dictionary.cdict)
            .ok()?;
        (self.scratch.len() < text.len()).then(|| Packed {
            dictionary,
            bytes: Box::from(&self.scratch[..]),
            len,
        })
    }
}

/// What the compactor has done, for metrics and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PackStats {
    /// Cached objects whose body is packed.
    pub packed_objects: u64,
    /// Bytes the cached bodies hold (packed or text).
    pub body_bytes: u64,
    /// Bytes the same bodies would hold as text.
    pub text_bytes: u64,
}

/// The background packer of one Indexer: a thread at idle priority that packs
/// the objects the Indexer reports as unpacked.
#[derive(Debug)]
pub struct Compactor {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Compactor {
    /// Starts packing `indexer`'s objects, polling for new ones every `every`.
    /// The thread ends when [`Compactor::stop`] is called (or the compactor
    /// dropped) or the Indexer is gone.
    pub fn start(indexer: &Arc<Indexer>, resource: &str, every: Duration) -> Compactor {
        indexer.track_unpacked();
        let stop = Arc::new(AtomicBool::new(false));
        let weak = Arc::downgrade(indexer);
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("pack {resource}"))
            .spawn(move || {
                lower_priority();
                run(weak, flag, every)
            })
            .ok();
        Compactor { stop, thread }
    }

    /// Tells the thread to stop and wakes it; it ends within one batch
    /// (it is not waited for: an informer stops from async code).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
        }
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The compactor's loop.
fn run(indexer: Weak<Indexer>, stop: Arc<AtomicBool>, every: Duration) {
    let mut packer = Packer::new();
    // Keys seen while the dictionary is being learned.
    let mut waiting: HashSet<Arc<str>> = HashSet::new();
    while !stop.load(Ordering::Relaxed) {
        let Some(ix) = indexer.upgrade() else { return };
        let keys = ix.take_unpacked();
        if keys.is_empty() {
            if !packer.ready() && !waiting.is_empty() {
                packer.finish_learning();
                if packer.ready() {
                    let keys: Vec<_> = waiting.drain().collect();
                    pack_keys(&ix, &mut packer, &keys, &stop);
                }
            }
            drop(ix);
            std::thread::park_timeout(every);
            continue;
        }
        if packer.ready() {
            pack_keys(&ix, &mut packer, &keys, &stop);
            continue;
        }
        for (i, key) in keys.iter().enumerate() {
            if let Some(obj) = ix.get(key) {
                if !obj.is_packed() && waiting.insert(key.clone()) {
                    packer.learn(&obj.json());
                }
            }
            if packer.ready() {
                let learned: Vec<_> = waiting.drain().collect();
                pack_keys(&ix, &mut packer, &learned, &stop);
                pack_keys(&ix, &mut packer, &keys[i + 1..], &stop);
                break;
            }
        }
    }
}

/// Packs the cached objects under `keys` that are still text.
fn pack_keys(ix: &Indexer, packer: &mut Packer, keys: &[Arc<str>], stop: &AtomicBool) {
    for chunk in keys.chunks(BATCH) {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        for key in chunk {
            let Some(obj) = ix.get(key) else { continue };
            if let Some(packed) = packed_copy(&obj, packer) {
                ix.replace_same(key, &obj, Arc::new(packed));
            }
        }
    }
}

/// A packed copy of `obj` (same metadata), or `None` when it is packed
/// already or packing would not make it smaller.
fn packed_copy(obj: &ObjectRef, packer: &mut Packer) -> Option<Object> {
    if obj.is_packed() {
        return None;
    }
    let packed = packer.pack(&obj.json())?;
    Some(Object::with_body(obj.meta.clone(), Body::Packed(packed)))
}

/// Runs the calling thread at idle priority: it gets a core only when nothing
/// else wants it, so packing never slows the event path down.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler reads `param` and changes only the
        // calling thread's (pid 0) policy; a failure leaves it as it was.
        let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Transform;

    fn pod(i: usize) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web-{i}","namespace":"ns-{}","uid":"{:08x}-aaaa-4bbb-accc-{:012x}","resourceVersion":"{}","labels":{{"app":"web","tier":"frontend"}}}},"spec":{{"nodeName":"node-{}","containers":[{{"name":"main","image":"registry.example/web:1.{}","ports":[{{"containerPort":8080,"name":"http","protocol":"TCP"}}],"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}}],"restartPolicy":"Always","dnsPolicy":"ClusterFirst","schedulerName":"default-scheduler"}},"status":{{"phase":"Running","podIP":"10.0.{}.{}","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#,
            i % 7,
            i * 7919,
            i * 104_729,
            1000 + i,
            i % 13,
            i % 5,
            i % 250,
            i % 199
        )
    }

    #[test]
    fn a_packed_body_unpacks_to_the_text_byte_for_byte() {
        let mut p = Packer::new();
        for i in 0..SAMPLES {
            p.learn(&pod(i));
        }
        assert!(p.ready());
        for i in [0, 1, 500, 12_345] {
            let text = pod(i);
            let packed = p.pack(&text).expect("a pod packs smaller");
            assert!(
                packed.bytes.len() * 2 < text.len(),
                "{}",
                packed.bytes.len()
            );
            assert_eq!(Body::Packed(packed).text(), text);
        }
        // Text unlike the samples still round-trips.
        let odd = r#"{"kind":"ConfigMap","metadata":{"name":"x"},"data":{"k":"\u00e9 ü ✓"}}"#;
        if let Some(packed) = p.pack(odd) {
            assert_eq!(Body::Packed(packed).text(), odd);
        }
    }

    #[test]
    fn no_dictionary_is_trained_from_fewer_than_the_minimum_of_samples() {
        let mut p = Packer::new();
        for i in 0..MIN_SAMPLES - 1 {
            p.learn(&pod(i));
        }
        p.finish_learning();
        assert!(!p.ready());
        assert!(p.pack(&pod(0)).is_none());
        p.learn(&pod(99));
        p.finish_learning();
        assert!(p.ready());
    }

    #[test]
    fn the_compactor_packs_the_cache_and_keeps_every_object_equal() {
        let ix = Arc::new(Indexer::new());
        let mut c = Compactor::start(&ix, "v1/pods", Duration::from_millis(5));
        let objects: Vec<ObjectRef> = (0..200)
            .map(|i| Arc::new(Object::from_json(pod(i).as_bytes(), &Transform::default()).unwrap()))
            .collect();
        for o in &objects {
            ix.upsert(&Arc::from(o.key()), o.clone());
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while ix.pack_stats().packed_objects < 200 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        c.stop();
        let stats = ix.pack_stats();
        assert_eq!(stats.packed_objects, 200);
        assert!(stats.body_bytes * 3 < stats.text_bytes, "{stats:?}");
        for o in &objects {
            let cached = ix.get(&o.key()).unwrap();
            assert!(cached.is_packed());
            assert_eq!(*cached, **o);
        }
    }
}
