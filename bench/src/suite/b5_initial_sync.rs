//! B5: initial sync of 50k pods, from the side's start (plugin loaded
//! included) until the cache holds every pod and the handler has handled every
//! initial object; both sides on the same list strategy and the same
//! managedFields treatment in every row.
//!
//! Invariant: a fresh process per arm and round; every arm of a row lists the
//! same way (streaming or paged, checked against the simulator's request log).

use anyhow::Result;

use super::compare::{whole, Compare};
use super::{handler, ours, peer, rust_plugin, spawn, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::rounds::{self, Arm};
use crate::spec::{HandlerKind, InitialList, ManagedFields, PeerCache, SideSpec};
use crate::table::Row;
use crate::target::Target;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B5",
    title: "initial sync",
    target: "<= 1.0x the typed peer, <= 0.8x the raw peer",
    doc: DOC,
    run,
};

const DOC: &str = "\
Time from the side's start (client built; our plugin compiled from the cache and started) until \
its cache holds every pod and its handler handled every initial object, in a fresh process.

- **Ours**: the Rust no-op plugin through the registry, as the host runs it.
- **The peer**: `watcher(..).default_backoff()` into a `reflector::store()`, `touched_objects()` \
into a no-op closure, synced when the store holds every pod (read with `Store::len()`, which \
leaves the store's readiness waker alone) and the closure saw every pod.
- Each row gives both sides the same list strategy and managedFields treatment: streaming list \
and stripped (our defaults; for the peer `streaming_lists()` and `.modify()`, which a user who \
syncs large lists and does not read managedFields would pick), the same keeping managedFields \
(reference), and both paging (kube-runtime's default strategy, our `StreamingList::Off`). One more \
row gives the peer the raw cached type (`ObjectMeta` decoded, `spec` and `status` as \
`Box<RawValue>`). That peer decodes more than ours, not less: it builds each pod's managedFields \
as `serde_json::Value` trees before `.modify()` drops them, where ours only scans past them.";

/// Runs B5.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b5_pods, Mix::Default)?;
    let noop = rust_plugin("noop")?;
    let ours_spec = |mf, list| {
        let mut s = ours(&fx, vec![handler("h", noop.clone())]);
        s.managed_fields = mf;
        s.initial_list = list;
        s
    };
    let peer_spec = |mf, list, cache| {
        let mut s = peer(&fx, vec![handler("h", HandlerKind::NoopNative)]);
        s.managed_fields = mf;
        s.initial_list = list;
        s.peer.cache = cache;
        s
    };
    use InitialList::{Paged, Streaming};
    use ManagedFields::{Keep, Strip};
    use PeerCache::{RawPod, TypedPod};
    let arm = |name, it: SideSpec| Arm { name, it };
    let arms = vec![
        arm("ours", ours_spec(Strip, Streaming)),
        arm("peer", peer_spec(Strip, Streaming, TypedPod)),
        arm("peer-raw", peer_spec(Strip, Streaming, RawPod)),
        arm("ours-keep", ours_spec(Keep, Streaming)),
        arm("peer-keep", peer_spec(Keep, Streaming, TypedPod)),
        arm("ours-paged", ours_spec(Strip, Paged)),
        arm("peer-paged", peer_spec(Strip, Paged, TypedPod)),
    ];
    let s = rounds::run("B5", p.rounds, &arms, |a| {
        let (c, r) = spawn(&fx, &a.it)?;
        c.exit();
        Ok(r.sync_ms)
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let target = Some((Target::AtMost(1.0), "<= 1.0x"));
    let row = |what: &str, o: &str, k: &str, target| {
        Compare {
            id: "B5",
            what: format!("initial sync of {} pods (ms): {what}", p.b5_pods),
            ours: s.of(o),
            peer: s.of(k),
            unit: whole,
            target,
            note: "From the side's start until its cache is full and its handler saw every object; ours with the Rust no-op plugin loaded.".into(),
        }
        .row()
    };
    Ok(vec![
        row(
            "both streaming, managedFields stripped, peer typed Pod",
            "ours",
            "peer",
            target,
        ),
        row(
            "both streaming, managedFields stripped, peer metadata + RawValue",
            "ours",
            "peer-raw",
            Some((Target::AtMost(0.8), "<= 0.8x")),
        ),
        row(
            "reference: both streaming, managedFields kept",
            "ours-keep",
            "peer-keep",
            None,
        ),
        row(
            "both paged (pages of 500), managedFields stripped",
            "ours-paged",
            "peer-paged",
            None,
        ),
    ])
}
