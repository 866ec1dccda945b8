//! B4: memory per cached pod at 20k pods, by the counting allocator (live heap
//! after sync minus before) and by RSS delta, each side in a fresh process, with
//! and without managedFields stripping (kube-runtime strips with
//! `WatchStreamExt::modify`).
//!
//! Invariant: the handler is a native no-op on both sides, so the figure is the
//! informer's and cache's memory.

use anyhow::Result;

use super::{handlers, side, spawn, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::spec::{HandlerKind, Side};
use crate::stats::median;
use crate::table::{bytes, Row, Verdict};

/// Heap and RSS bytes the side added, per object.
pub fn per_object(r: &crate::spec::ChildReport, objects: usize) -> (f64, f64) {
    let heap = (r.heap_bytes - r.heap_base_bytes) as f64 / objects as f64;
    let rss = (r.rss_bytes as f64 - r.rss_base_bytes as f64) / objects as f64;
    (heap, rss)
}

/// Runs B4.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b4_pods, Mix::Default)?;
    let mut rows = Vec::new();
    for strip in [true, false] {
        let (mut ours, mut peer) = (Vec::new(), Vec::new());
        for _ in 0..p.rounds {
            for s in [Side::Ours, Side::Peer] {
                let mut spec = side(s, &fx, handlers("h", 1, &HandlerKind::NoopNative));
                spec.strip_managed_fields = strip;
                let (child, r) = spawn(&spec)?;
                child.exit();
                if r.cached_objects != p.b4_pods as u64 {
                    anyhow::bail!(
                        "{s:?} cached {} objects, expected {}",
                        r.cached_objects,
                        p.b4_pods
                    );
                }
                let v = per_object(&r, p.b4_pods);
                match s {
                    Side::Ours => ours.push(v),
                    _ => peer.push(v),
                }
            }
        }
        let m = |xs: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
            median(&xs.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0)
        };
        let (oh, orss, ph, prss) = (
            m(&ours, |x| x.0),
            m(&ours, |x| x.1),
            m(&peer, |x| x.0),
            m(&peer, |x| x.1),
        );
        rows.push(Row {
            id: "B4",
            what: format!(
                "memory per cached pod, {} pods, managedFields {} (heap / RSS)",
                p.b4_pods,
                if strip { "stripped" } else { "kept" }
            ),
            ours: format!("{} / {}", bytes(oh), bytes(orss)),
            peer: format!("{} / {}", bytes(ph), bytes(prss)),
            ratio: format!("{} heap, {} RSS", super::ratio(oh, ph), super::ratio(orss, prss)),
            target: "<= 0.5x".into(),
            verdict: Verdict::of(ph > 0.0 && oh / ph <= 0.5),
            note: "heap: counting global allocator, live bytes after sync minus before, in a fresh child process; RSS: /proc/self/statm delta after the allocators return free pages (mi_collect, malloc_trim). Verdict on the heap ratio.".into(),
        });
    }
    fx.shutdown(&ctx.rt);
    Ok(rows)
}
