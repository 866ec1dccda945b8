//! B7: many handlers. 50 plugins in one host (one informer, one cache) against
//! kube-runtime sharing one reflector between 50 handlers, as its users do:
//! 50 subscribers of one `store_shared` reflector, or 50
//! `Controller::for_shared_stream` controllers on it; plus, as an extra row, 50
//! separate reflectors (one watch and one store each); and both sides keeping
//! managedFields as a reference. The figure is the total memory each side
//! added over the same 10k pods.
//!
//! Invariant: one fresh process per arm and round, arms alternating their
//! order; every handler has synced (seen every pod) before memory is read;
//! every arm is measured with all its handlers (nothing is extrapolated).

use anyhow::Result;

use super::compare::Compare;
use super::{handlers, ours, peer, rust_plugin, spawn, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::rounds::{self, Arm};
use crate::spec::{ChildReport, HandlerKind, ManagedFields, PeerAttach, PeerFanout, SideSpec};
use crate::stats::{show, Spread};
use crate::table::{bytes, Row};
use crate::target::Target;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B7",
    title: "many handlers, total memory",
    target: "<= 0.35x",
    doc: DOC,
    run,
};

const DOC: &str = "\
Total memory (RSS, and live heap by the counting allocator) a side adds with 50 handlers over the \
same 10k pods, after every handler has seen every pod; each arm in a fresh process.

- **Ours**: 50 Rust no-op plugins on one informer, as the host runs them (managedFields stripped, \
streaming list, queue 1024 each, the cache packed, transparent huge pages off as the host runs by \
default). Each plugin is a WebAssembly instance with its own linear memory and its own thread.
- **The peer**, as a kube-runtime user with 50 handlers on one resource writes it: one \
`store_shared(1024)` reflector (`streaming_lists()`, `.modify()` stripping managedFields) driven on \
its own task, with either 50 subscribers consumed by no-op closures, or 50 \
`Controller::for_shared_stream(subscriber, store)` controllers with no-op reconcilers (default \
controller config). Both share one watch and one store.
- **Extra row, 50 separate reflectors** (one watcher and `Store<Pod>` each, stripped and streaming): \
what 50 independent controllers, each built with `Controller::new`, amount to. It is not what a \
user who can share would run; it shows what sharing saves.
- **Reference:** both sides keeping managedFields (the peer's subscribers variant).

The verdict is on the RSS ratio, per round.";

/// Total RSS and heap the side added.
fn added(r: &ChildReport) -> (f64, f64) {
    (
        r.rss_bytes as f64 - r.rss_base_bytes as f64,
        (r.heap_bytes - r.heap_base_bytes) as f64,
    )
}

/// Runs B7.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let n = p.b7_handlers;
    let fx = Fixture::new(&ctx.rt, p.b7_pods, Mix::Default)?;
    let noop = rust_plugin("noop")?;
    let shared = |attach: PeerAttach, mf| {
        let mut hs = handlers("h", n, &HandlerKind::NoopNative);
        for h in &mut hs {
            h.peer_attach = attach;
        }
        let mut s = peer(&fx, hs);
        s.peer.fanout = PeerFanout::Shared { buffer: 1024 };
        s.managed_fields = mf;
        s
    };
    let ours_spec = |mf| {
        let mut s = ours(&fx, handlers("p", n, &noop));
        s.managed_fields = mf;
        s
    };
    let arm = |name, it: SideSpec| Arm { name, it };
    let arms = vec![
        arm("ours", ours_spec(ManagedFields::Strip)),
        arm(
            "peer-subscribers",
            shared(PeerAttach::Subscriber, ManagedFields::Strip),
        ),
        arm(
            "peer-controllers",
            shared(PeerAttach::Controller, ManagedFields::Strip),
        ),
        arm(
            "peer-separate",
            peer(&fx, handlers("r", n, &HandlerKind::NoopNative)),
        ),
        arm("ours-keep", ours_spec(ManagedFields::Keep)),
        arm(
            "peer-keep",
            shared(PeerAttach::Subscriber, ManagedFields::Keep),
        ),
    ];
    let s = rounds::run("B7", p.rounds, &arms, |a| {
        let (c, r) = spawn(&fx, &a.it)?;
        c.exit();
        Ok(added(&r))
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let rss = |a: &str| s.map(a, |x| x.0);
    let heap = |a: &str| s.map(a, |x| x.1);
    let target = Some((Target::AtMost(0.35), "<= 0.35x"));
    let row = |what: String, o: &str, k: &str, target, note: &str| {
        let (or, kr) = (rss(o), rss(k));
        let mut r = Compare {
            id: "B7",
            what,
            ours: &or,
            peer: &kr,
            unit: bytes,
            target,
            note: format!("{note} Verdict on RSS."),
        }
        .row();
        let (oh, kh) = (heap(o), heap(k));
        r.ours = format!("{} / {}", r.ours, show(&oh, bytes));
        r.peer = format!("{} / {}", r.peer, show(&kh, bytes));
        let heap_ratio = Spread::ratio(&oh, &kh).map_or_else(|| "-".into(), |x| x.times());
        r.ratio = format!("{} RSS, {heap_ratio} heap", r.ratio);
        r
    };
    let title = |w: String| format!("{n} handlers over {} pods, {w} (RSS / heap)", p.b7_pods);
    Ok(vec![
        row(
            title(format!("peer: one shared reflector, {n} subscribers")),
            "ours",
            "peer-subscribers",
            target,
            &format!("Ours: {n} Rust no-op plugins, one informer. Peer: store_shared(1024), streaming, stripped, no-op subscribers."),
        ),
        row(
            title(format!("peer: one shared reflector, {n} Controller::for_shared_stream")),
            "ours",
            "peer-controllers",
            target,
            &format!("Peer: {n} controllers on one shared reflector, no-op reconcilers, default controller::Config."),
        ),
        row(
            title(format!("extra: peer with {n} separate reflectors")),
            "ours",
            "peer-separate",
            None,
            &format!("Peer: {n} watchers, each with its own Store<Pod> (stripped, streaming): what {n} independent controllers cost; shown for what sharing saves, not as the peer's best."),
        ),
        row(
            title("reference: both keep managedFields".into()),
            "ours-keep",
            "peer-keep",
            None,
            &format!("Peer: shared reflector with {n} subscribers, no .modify()."),
        ),
    ])
}
