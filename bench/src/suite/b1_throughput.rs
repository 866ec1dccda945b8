//! B1: throughput from the watch to the handler. Each arm syncs 20k pods in a
//! fresh process; then its watch is dropped and the reconnect held while 20k
//! churn events (creates, status updates, deletes) are written, and the drain
//! rate (events handled per second, first to last) is the throughput.
//!
//! Sides (see [`DOC`] for why): ours as shipped (managedFields stripped,
//! streaming list) with the Rust no-op plugin, a Rust plugin that decodes each
//! object into a `Pod`, a JavaScript plugin that `JSON.parse`s it, and a native
//! no-op handler on the informer crate's public builder; the peer as a
//! kube-runtime user who does not read managedFields runs it (`.modify()`
//! stripping them, `streaming_lists()`), caching a typed `Pod` or a raw pod
//! (metadata plus `Box<RawValue>`); and both sides keeping managedFields as a
//! reference.
//!
//! Invariant: the same events, in the same order, reach every arm; our queue
//! holds the whole burst, so every event reaches our handler (none coalesced),
//! as every event reaches the peer's.

use std::collections::BTreeMap;

use anyhow::Result;

use super::burst::drain_rate;
use super::compare::{whole, Compare};
use super::{handler, js_plugin, ours, peer, raw, rust_plugin, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::rounds::{self, Arm};
use crate::spec::{HandlerKind, ManagedFields, OursApi, PeerCache, SideSpec};
use crate::stats::{show, Spread};
use crate::table::{Row, Verdict};
use crate::target::Target;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B1",
    title: "throughput, watch to handler",
    target: ">= 1.5x",
    doc: DOC,
    run,
};

const DOC: &str = "\
A held burst of churn events (25% creates, 50% status updates, 25% deletes) drains into each arm \
after it synced; the figure is events handled per second, first to last handled event.

- **Ours** runs as shipped: managedFields stripped (the default transform), streaming list, one \
listener whose queue holds the whole burst, through the registry as the host runs plugins. The \
handler is the Rust no-op plugin (the product's cheapest plugin), the `parse-pod` plugin (decodes \
each object into a k8s-openapi `Pod` inside the guest, the work the peer's typed store does), the \
`js-parse-pod` JavaScript plugin (`JSON.parse` of each object), or a native no-op `Handler` added with \
`SharedInformer::builder(client, \"v1/pods\")` and `add_handler`, the informer crate's public API as a \
native program uses it (`examples/native-informer`).
- **The peer** is `watcher(api, Config::default().streaming_lists()).default_backoff()` \
`.modify(|p| p.meta_mut().managed_fields = None).reflect(writer).touched_objects()` \
`.for_each(no-op)`: what a kube-runtime user who does not read managedFields writes (kube-rs \
documents `.modify()` for exactly this), with the list strategy that matches ours. It caches either a typed `Pod` (kube-runtime's usual choice) or a raw pod: \
`ObjectMeta` decoded, `spec` and `status` kept as `Box<RawValue>` (like for like with our cache, \
which keeps the JSON and decodes metadata; the raw peer decodes more than ours, not less, since \
it builds managedFields as `serde_json::Value` trees before `.modify()` drops them, where ours \
only scans past them). `metadata_watcher` is not used: the simulator does not \
serve `PartialObjectMetadata`, so it would send whole pods.
- **Reference:** both sides keeping managedFields (no transform, no `.modify()`).
- **Ceiling:** a raw watch that only scans each line for its resourceVersion: what any client can \
reach on this simulator and machine.

The target applies to the Rust plugins against either peer cache; the ratio is taken round by round \
and the verdict is met only when every round meets it.";

/// Runs B1.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let mut fx = Fixture::new(&ctx.rt, p.b1_pods, Mix::Default)?;
    fx.calibrate(p.b1_events)?;
    let cap = p.b1_events + p.b1_pods;
    let noop = rust_plugin("noop")?;
    let js = js_plugin("js-parse-pod");
    let ours_with = |kind: HandlerKind| {
        let mut s = ours(&fx, vec![handler("h", kind)]);
        s.ours.queue_capacity = cap;
        s
    };
    let peer_noop = || peer(&fx, vec![handler("h", HandlerKind::NoopNative)]);
    let arm = |name, it: SideSpec| Arm { name, it };
    let mut arms = vec![
        arm("ours", ours_with(noop.clone())),
        arm("peer", peer_noop()),
        arm("peer-raw", {
            let mut s = peer_noop();
            s.peer.cache = PeerCache::RawPod;
            s
        }),
        arm("ours-parse", ours_with(rust_plugin("parse-pod")?)),
        arm("ours-native", {
            let mut s = ours_with(HandlerKind::NoopNative);
            s.ours.api = OursApi::Informer;
            s
        }),
        arm("ours-keep", {
            let mut s = ours_with(noop);
            s.managed_fields = ManagedFields::Keep;
            s
        }),
        arm("peer-keep", {
            let mut s = peer_noop();
            s.managed_fields = ManagedFields::Keep;
            s
        }),
        arm("ceiling", raw(&fx)),
    ];
    if let Ok(kind) = &js {
        arms.push(arm("ours-js-parse", ours_with(kind.clone())));
    }
    let mut notes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let s = rounds::run("B1", p.rounds, &arms, |a| {
        let d = drain_rate(&fx, &a.it, p.b1_events)?;
        notes.entry(a.name).or_default().extend(d.notes);
        Ok(d.rate)
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let note = |arms: &[&str]| {
        let mut n: Vec<String> = arms
            .iter()
            .flat_map(|a| notes.get(a).cloned().unwrap_or_default())
            .collect();
        n.dedup();
        n.join("; ")
    };
    let target = Some((Target::AtLeast(1.5), ">= 1.5x"));
    let what = |w: &str| format!("{w} (events/s, {} pods, {} events)", p.b1_pods, p.b1_events);
    let cmp = |w: &str, o: &str, k: &str, target, n: &str| {
        Compare {
            id: "B1",
            what: what(w),
            ours: s.of(o),
            peer: s.of(k),
            unit: whole,
            target,
            note: format!("{n} {}", note(&[o, k])),
        }
        .row()
    };
    let mut rows = vec![
        cmp(
            "Rust no-op plugin vs typed Pod store",
            "ours",
            "peer",
            target,
            "Ours: Rust no-op plugin, managedFields stripped, streaming list, queue holds the burst. \
             Peer: streaming_lists(), .modify() stripping managedFields, Store<Pod>, no-op closure.",
        ),
        cmp(
            "Rust no-op plugin vs raw store (metadata + RawValue)",
            "ours",
            "peer-raw",
            target,
            "Peer caches ObjectMeta plus spec/status as Box<RawValue>, stripped and streaming as above.",
        ),
        cmp(
            "Rust plugin decoding each Pod vs typed Pod store",
            "ours-parse",
            "peer",
            target,
            "Like for like: both sides decode every object into a k8s-openapi Pod (ours inside the guest).",
        ),
    ];
    rows.push(match &js {
        Ok(_) => cmp(
            "JavaScript plugin parsing each object vs typed Pod store",
            "ours-js-parse",
            "peer",
            None,
            "Ours: js-parse-pod (JSON.parse of every object in the guest).",
        ),
        Err(e) => Row::failed(
            "B1",
            &what("JavaScript plugin parsing each object vs typed Pod store"),
            "-",
            e,
        ),
    });
    rows.push(cmp(
        "native no-op Handler (SharedInformer::builder + add_handler) vs typed Pod store",
        "ours-native",
        "peer",
        None,
        "The pipeline without WebAssembly, built with the informer crate's public API.",
    ));
    rows.push(cmp(
        "reference: both sides keep managedFields",
        "ours-keep",
        "peer-keep",
        None,
        "Ours: keep_managed_fields; peer: no .modify(). Both streaming.",
    ));
    let (c, k, o) = (s.of("ceiling"), s.of("peer"), s.of("ours"));
    let share = |x: &[f64]| {
        Spread::pairwise(x, c, |a, b| a / b).map_or_else(|| "-".into(), |r| r.percent())
    };
    rows.push(Row {
        id: "B1",
        what: what("simulator ceiling: raw watch, lines scanned for resourceVersion only"),
        ours: show(o, whole),
        peer: show(k, whole),
        ratio: format!(
            "ceiling {}: ours (no-op plugin) at {}, peer (typed) at {}",
            show(c, whole),
            share(o),
            share(k)
        ),
        target: "-".into(),
        verdict: Verdict::Info,
        note: "No decoding and no cache: bounds what any client can reach on this simulator and machine.".into(),
    });
    Ok(rows)
}
