//! B4: memory per cached pod at 20k pods, by the counting allocator (live heap
//! after sync minus before) and by RSS delta, each arm in a fresh process:
//! both sides stripping managedFields (the peer caching a typed `Pod` or a raw
//! pod), and both keeping them as a reference.
//!
//! Invariant: the handler is a native no-op on both sides, so the figure is the
//! informer's and cache's memory; every arm cached exactly the seeded pods.

use anyhow::{bail, Result};

use super::compare::Compare;
use super::{handler, ours, peer, spawn, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::rounds::{self, Arm};
use crate::spec::{ChildReport, HandlerKind, ManagedFields, OursApi, PeerCache, SideSpec};
use crate::stats::{show, show_in, Spread};
use crate::table::{bytes, Row};
use crate::target::Target;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B4",
    title: "memory per cached pod",
    target: "<= 0.5x",
    doc: DOC,
    run,
};

const DOC: &str = "\
Memory the side adds per cached pod after its initial list, in a fresh process: live heap by a \
counting global allocator (after sync minus before), and RSS after both allocators returned free \
pages. Both sides run on mimalloc, the allocator the wasm-informer binary ships with, with \
transparent huge pages off for the process as the host runs by default (`huge_pages = false`), and \
use a native no-op handler, so the figure is the informer's and the cache's.

- **Ours**: `SharedInformer::builder(client, \"v1/pods\")` as shipped (managedFields stripped, \
streaming list, packing on); the cache keeps each object's JSON plus the metadata it needs \
decoded, and an idle-priority thread packs the JSON against a zstd dictionary trained on the first \
pods. Memory is read once it has packed the cache; an extra row gives the heap the moment it synced, and \
one the time packing took and the cost of reading a packed object's JSON.
- **The peer**: one `reflector::store()` fed by `watcher(..).default_backoff()` with \
`streaming_lists()` and `.modify()` stripping managedFields, caching a typed `Pod` (kube-runtime's \
usual store) or a raw pod (`ObjectMeta` decoded, `spec` and `status` as `Box<RawValue>`: the \
leanest store a kube-runtime user gets without dropping data, like for like with ours).
- **Reference:** both keeping managedFields (typed peer).

The verdict is on the heap ratio, per round.";

/// Heap and RSS bytes the side added, per object.
pub fn per_object(r: &ChildReport, objects: usize) -> (f64, f64) {
    let heap = (r.heap_bytes - r.heap_base_bytes) as f64 / objects as f64;
    let rss = (r.rss_bytes as f64 - r.rss_base_bytes as f64) / objects as f64;
    (heap, rss)
}

/// Ours, per pod: the heap before packing had finished, how long packing
/// took, a read of a packed object's JSON, and the share of pods packed.
struct Packing {
    heap_at_sync: f64,
    packed_ms: f64,
    read_ns: f64,
    packed_share: f64,
}

/// Runs B4.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b4_pods, Mix::Default)?;
    let one = || vec![handler("h", HandlerKind::NoopNative)];
    let ours_spec = |mf| {
        let mut s = ours(&fx, one());
        s.ours.api = OursApi::Informer;
        s.managed_fields = mf;
        s
    };
    let peer_spec = |mf, cache| {
        let mut s = peer(&fx, one());
        s.managed_fields = mf;
        s.peer.cache = cache;
        s
    };
    let arm = |name, it: SideSpec| Arm { name, it };
    let arms = vec![
        arm("ours", ours_spec(ManagedFields::Strip)),
        arm("peer", peer_spec(ManagedFields::Strip, PeerCache::TypedPod)),
        arm(
            "peer-raw",
            peer_spec(ManagedFields::Strip, PeerCache::RawPod),
        ),
        arm("ours-keep", ours_spec(ManagedFields::Keep)),
        arm(
            "peer-keep",
            peer_spec(ManagedFields::Keep, PeerCache::TypedPod),
        ),
    ];
    let s = rounds::run("B4", p.rounds, &arms, |a| {
        let (child, r) = spawn(&fx, &a.it)?;
        child.exit();
        if r.cached_objects != p.b4_pods as u64 {
            bail!(
                "cached {} objects, expected {}",
                r.cached_objects,
                p.b4_pods
            );
        }
        let (heap, rss) = per_object(&r, p.b4_pods);
        let n = p.b4_pods as f64;
        let packing = r.packing.as_ref().map(|k| Packing {
            heap_at_sync: (k.heap_at_sync_bytes - r.heap_base_bytes) as f64 / n,
            packed_ms: k.packed_ms,
            read_ns: k.read_ns,
            packed_share: k.packed_objects as f64 / n,
        });
        Ok((heap, rss, packing))
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let heap = |a: &str| s.map(a, |x| x.0);
    let rss = |a: &str| s.map(a, |x| x.1);
    let row = |what: &str, o: &str, k: &str, target: Option<(Target, &'static str)>| {
        let (oh, kh) = (heap(o), heap(k));
        let mut r = Compare {
            id: "B4",
            what: format!("memory per cached pod, {} pods: {what} (heap / RSS)", p.b4_pods),
            ours: &oh,
            peer: &kh,
            unit: bytes,
            target,
            note: "Heap: counting allocator, live bytes after sync minus before, fresh process; RSS: /proc/self/statm delta after mi_collect and malloc_trim. Verdict on the heap ratio.".into(),
        }
        .row();
        let (orss, krss) = (rss(o), rss(k));
        r.ours = format!("{} / {}", r.ours, show(&orss, bytes));
        r.peer = format!("{} / {}", r.peer, show(&krss, bytes));
        let rss_ratio = Spread::ratio(&orss, &krss).map_or_else(|| "-".into(), |x| x.times());
        r.ratio = format!("{} heap, {rss_ratio} RSS", r.ratio);
        r
    };
    let target = Some((Target::AtMost(0.5), "<= 0.5x"));
    let packing = |a: &str, f: &dyn Fn(&Packing) -> f64| -> Vec<f64> {
        s.of(a).iter().filter_map(|x| x.2.as_ref()).map(f).collect()
    };
    let mut at_sync = row(
        "ours at sync, before the background packing (the list's buffers not yet freed); peer caches metadata + RawValue",
        "ours",
        "peer-raw",
        None,
    );
    let (oh, kh) = (packing("ours", &|x| x.heap_at_sync), heap("peer-raw"));
    at_sync.ours = show(&oh, bytes);
    at_sync.peer = show(&kh, bytes);
    at_sync.ratio =
        Spread::ratio(&oh, &kh).map_or_else(|| "-".into(), |x| format!("{} heap", x.times()));
    at_sync.note = "Heap only; ours read the moment it synced, the peer as in the other rows. The other rows read memory once the compactor has packed the cache (kube_informer::pack: a zstd dictionary per resource, an idle-priority thread).".into();
    let cost = Row {
        id: "B4",
        what: format!("the cost of packing, {} pods: time from sync until the compactor has packed the cache (polled every 20 ms); one read of a packed object's JSON", p.b4_pods),
        ours: format!(
            "{} until packed; {} per read",
            show_in(&packing("ours", &|x| x.packed_ms), 0, "ms"),
            show_in(&packing("ours", &|x| x.read_ns / 1000.0), 2, "µs")
        ),
        peer: "- (RawValue: no cost to read)".into(),
        ratio: format!("{} of the pods packed", show(&packing("ours", &|x| x.packed_share), |x| format!("{:.0}%", x * 100.0))),
        target: "-".into(),
        verdict: crate::table::Verdict::Info,
        note: "Read: Object::json over the whole packed cache once, mean per object (unpacking into a new String).".into(),
    };
    Ok(vec![
        row(
            "both strip managedFields, peer caches typed Pod",
            "ours",
            "peer",
            target,
        ),
        row(
            "both strip managedFields, peer caches metadata + RawValue",
            "ours",
            "peer-raw",
            target,
        ),
        row(
            "reference: both keep managedFields, peer caches typed Pod",
            "ours-keep",
            "peer-keep",
            None,
        ),
        at_sync,
        cost,
    ])
}
