//! B3: isolation. Paced status-update churn; the fast no-op handler's
//! throughput and p99 latency (written to handled) alone, then next to a slow
//! neighbour (10 ms per event, sleeping) and, on our side, one that loops
//! forever. The peer's slow neighbour is attached to its shared reflector
//! either as a `Controller::for_shared_stream` reconciler (the documented way
//! to run a controller on a shared stream) or as a raw subscriber.
//!
//! Invariant: the same write rate and objects for every arm; the window starts
//! only after every slow neighbour has handled the initial list (`Settle`), so
//! no buffer is full from the list when churn starts; latency joins each
//! handled event to the time its resourceVersion was written.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{bail, Result};

use super::{handler, ours, peer, rust_plugin, spawn, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::probe::now_ns;
use crate::rounds::{self, Arm};
use crate::spec::{Command, HandlerKind, HandlerSpec, PeerAttach, PeerFanout, SideSpec};
use crate::stats::{quantile, show_in, Spread};
use crate::table::{Row, Verdict};
use crate::target::{self, Target};

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B3",
    title: "isolation",
    target: ">= 95% solo throughput, p99 <= 2x",
    doc: DOC,
    run,
};

const DOC: &str = "\
Paced status updates (updates only: a kube-runtime 5.0 subscriber whose object was deleted before it \
read it waits forever, since `ReflectHandle` returns `Pending` without a waker). The measured \
handler is a fast no-op; the figures are its throughput and p99 latency (written → handled) alone \
and next to slow neighbours, each arm in a fresh process. Every arm first waits until its slow \
neighbours have handled the initial list, so the window starts with every queue and buffer empty.

- **Ours** as shipped (managedFields stripped, streaming list, queue 1024): the fast handler is \
the Rust no-op plugin; the neighbours are the `slow` plugin (10 ms per event, sleeping) and \
`spin-forever` (loops on every event; 100 ms deadline, then restart and quarantine).
- **The peer** runs one `store_shared(1024)` reflector (`.modify()` stripping managedFields, \
`streaming_lists()`) with the fast handler as a subscriber (`for_each` on its `ReflectHandle`), the \
way kube-runtime shares one watch between handlers. Its slow neighbour (a 10 ms sleep) is \
attached two ways, each a row: as the reconciler of `Controller::for_shared_stream(subscriber, \
store)` with the default controller config (the documented way to run a controller on a shared \
stream; its scheduler reads the subscriber eagerly and deduplicates per object, and reconciles \
run concurrently), and as a raw subscriber consumed with `for_each`, which reads one event at a \
time and so holds the shared `async_broadcast` channel back once its buffer is full. No \
loop-forever neighbour on the peer: a reconciler that never yields would occupy a runtime worker \
thread for good, which no kube-runtime user would deploy.

The target applies to ours (share of the solo throughput kept, and the p99 ratio, each round \
against the solo arm of the same round); it is met only when every round meets both.";

struct Sample {
    rate: f64,
    p99_ms: f64,
    notes: Vec<String>,
}

fn one(ctx: &Ctx, fx: &Fixture, spec: &SideSpec) -> Result<Sample> {
    let p = &ctx.plan;
    let (mut child, r0) = spawn(fx, spec)?;
    let mut notes = r0.notes;
    let settle_ms = p.b3_pods as u64 * p.b3_slow_ms * 3 + 30_000;
    let settled = child.cmd(&Command::Settle {
        timeout_ms: settle_ms,
    })?;
    if !settled.reached {
        child.exit();
        bail!(
            "{}: the slow neighbours had not handled the initial list after {settle_ms} ms",
            spec.side.label()
        );
    }
    child.cmd(&Command::Arm {
        rv: fx.current_rv(),
        record: true,
    })?;
    let t0 = now_ns();
    let writes = fx
        .paced(p.b3_rate, Duration::from_secs(p.b3_secs), true)
        .join()
        .map_err(|_| anyhow::anyhow!("churn thread panicked"))??;
    let last = fx.current_rv();
    let r = child.cmd(&Command::Wait {
        rv: last,
        timeout_ms: p.b3_grace_secs * 1000,
    })?;
    child.exit();
    let written: HashMap<u64, u64> = writes.into_iter().collect();
    let fast = &r.probes[0].1;
    let lat: Vec<f64> = fast
        .records
        .iter()
        .filter_map(|(rv, t)| written.get(rv).map(|w| (t.saturating_sub(*w)) as f64 / 1e6))
        .collect();
    if !r.reached {
        notes.push(format!(
            "{}: fast handler had not reached the last write {} s after churn ended",
            spec.side.label(),
            p.b3_grace_secs
        ));
    }
    for l in &r.listeners {
        if l.restarts > 0 || l.overflowed > 0 {
            notes.push(format!(
                "{}: {} restarts, {} overflowed, {} coalesced",
                l.name, l.restarts, l.overflowed, l.coalesced
            ));
        }
    }
    let end = fast.last_ns.max(t0 + 1);
    Ok(Sample {
        rate: fast.measured as f64 / ((end - t0) as f64 / 1e9),
        p99_ms: quantile(&lat, 0.99).unwrap_or(f64::NAN),
        notes,
    })
}

fn neighbour(name: &str, kind: HandlerKind, settle: bool, attach: PeerAttach) -> HandlerSpec {
    HandlerSpec {
        tracked: false,
        settle,
        peer_attach: attach,
        ..handler(name, kind)
    }
}

/// Runs B3.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b3_pods, Mix::UpdatesOnly)?;
    let fast = rust_plugin("noop")?;
    let slow = HandlerKind::Wasm {
        path: crate::wasm::plugin_path("slow")?,
        config: format!(r#"{{"ms":{}}}"#, p.b3_slow_ms),
        timeout_ms: 1000,
    };
    let spin = HandlerKind::Wasm {
        path: crate::wasm::plugin_path("spin-forever")?,
        config: "{}".into(),
        timeout_ms: 100,
    };
    let sleep = HandlerKind::SleepNative(p.b3_slow_ms);
    let shared = |hs: Vec<HandlerSpec>| {
        let mut s = peer(&fx, hs);
        s.peer.fanout = PeerFanout::Shared { buffer: 1024 };
        s
    };
    let fast_peer = || handler("fast", HandlerKind::NoopNative);
    let arms = vec![
        Arm {
            name: "ours-alone",
            it: ours(&fx, vec![handler("fast", fast.clone())]),
        },
        Arm {
            name: "ours-with",
            it: ours(
                &fx,
                vec![
                    handler("fast", fast),
                    neighbour("slow", slow, true, PeerAttach::Subscriber),
                    neighbour("spin", spin, false, PeerAttach::Subscriber),
                ],
            ),
        },
        Arm {
            name: "peer-alone",
            it: shared(vec![fast_peer()]),
        },
        Arm {
            name: "peer-controller",
            it: shared(vec![
                fast_peer(),
                neighbour("slow", sleep.clone(), true, PeerAttach::Controller),
            ]),
        },
        Arm {
            name: "peer-subscriber",
            it: shared(vec![
                fast_peer(),
                neighbour("slow", sleep, true, PeerAttach::Subscriber),
            ]),
        },
    ];
    let s = rounds::run("B3", p.rounds, &arms, |a| one(ctx, &fx, &a.it));
    fx.shutdown(&ctx.rt);
    let s = s?;
    let rate = |a: &str| s.map(a, |x| x.rate);
    let p99 = |a: &str| s.map(a, |x| x.p99_ms);
    let notes = |a: &str| {
        // Each distinct note once, in the order the rounds first gave it.
        let mut n: Vec<String> = Vec::new();
        for note in s.of(a).iter().flat_map(|x| x.notes.iter()) {
            if !n.contains(note) {
                n.push(note.clone());
            }
        }
        n.join("; ")
    };
    let cell = |a: &str| {
        format!(
            "{}, p99 {}",
            show_in(&rate(a), 0, "events/s"),
            show_in(&p99(a), 2, "ms")
        )
    };
    let kept = |with: &str, alone: &str| Spread::ratio(&rate(with), &rate(alone));
    let p99x = |with: &str, alone: &str| Spread::ratio(&p99(with), &p99(alone));
    let summary = |with: &str, alone: &str| {
        format!(
            "keeps {} (p99 {})",
            kept(with, alone).map_or_else(|| "-".into(), |k| k.percent()),
            p99x(with, alone).map_or_else(|| "-".into(), |k| k.times())
        )
    };
    let ours_verdict = target::all(&[
        Target::AtLeast(0.95).judge(kept("ours-with", "ours-alone").as_ref()),
        Target::AtMost(2.0).judge(p99x("ours-with", "ours-alone").as_ref()),
    ]);
    let window = format!("{} updates/s for {} s", p.b3_rate, p.b3_secs);
    Ok(vec![
        Row {
            id: "B3",
            what: format!("fast handler alone, {window}: events/s, p99"),
            ours: cell("ours-alone"),
            peer: cell("peer-alone"),
            ratio: "-".into(),
            target: "-".into(),
            verdict: Verdict::Info,
            note: format!(
                "Ours: Rust no-op plugin; peer: a subscriber of store_shared(1024). Latency = handled minus written. {} {}",
                notes("ours-alone"),
                notes("peer-alone")
            ),
        },
        Row {
            id: "B3",
            what: "fast handler next to slow neighbours; peer's slow neighbour a Controller::for_shared_stream reconciler".into(),
            ours: cell("ours-with"),
            peer: cell("peer-controller"),
            ratio: format!(
                "ours {}; peer {}",
                summary("ours-with", "ours-alone"),
                summary("peer-controller", "peer-alone")
            ),
            target: ">= 95%, p99 <= 2x".into(),
            verdict: ours_verdict,
            note: format!(
                "Ours' neighbours: slow plugin ({} ms/event) + spin-forever (100 ms deadline); peer's: a reconciler sleeping {} ms, default controller::Config. Ratios against the solo arm of the same round. {} {}",
                p.b3_slow_ms,
                p.b3_slow_ms,
                notes("ours-with"),
                notes("peer-controller")
            ),
        },
        Row {
            id: "B3",
            what: "fast handler next to slow neighbours; peer's slow neighbour a raw subscriber".into(),
            ours: cell("ours-with"),
            peer: cell("peer-subscriber"),
            ratio: format!(
                "ours {}; peer {}",
                summary("ours-with", "ours-alone"),
                summary("peer-subscriber", "peer-alone")
            ),
            target: "-".into(),
            verdict: Verdict::Info,
            note: format!(
                "Ours: the same runs as the row above. Peer: the slow neighbour consumes its ReflectHandle with for_each (a {} ms sleep per object), so the shared broadcast channel waits for it once its 1024 slots are full. Peer latencies are understated when a lagging subscriber reads a newer version of the object. {}",
                p.b3_slow_ms,
                notes("peer-subscriber")
            ),
        },
    ])
}
