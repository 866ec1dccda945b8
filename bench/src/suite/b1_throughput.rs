//! B1: throughput from the watch to the handler. Both sides sync 20k pods; then
//! their watch is dropped and its reconnect held while 20k churn events are
//! written; the drain rate (events handled per second, first to last) is the
//! throughput.
//!
//! Invariant: the same events, in the same order, reach both sides; the queue
//! is large enough that every event reaches our handler (none coalesced).

use anyhow::{bail, Result};

use super::{handlers, rate, ratio, side, spawn, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::spec::{Command, HandlerKind, Side};
use crate::stats::median;
use crate::table::{Row, Verdict};

/// Drains one held burst into a fresh child for `spec`; returns events/s.
pub fn drain_rate(
    fx: &Fixture,
    spec: &crate::spec::SideSpec,
    events: usize,
) -> Result<(f64, Vec<String>)> {
    let (mut child, r0) = spawn(spec)?;
    let mut notes = r0.notes;
    child.cmd(&Command::Arm {
        rv: fx.current_rv(),
        record: false,
    })?;
    let (_, last) = fx.held_burst(events)?;
    let r = child.cmd(&Command::Wait {
        rv: last,
        timeout_ms: 300_000,
    })?;
    child.exit();
    if !r.reached {
        bail!("the side did not handle the last event (rv {last}) within 300 s");
    }
    let first = r
        .probes
        .iter()
        .filter_map(|p| (p.1.first_ns > 0).then_some(p.1.first_ns))
        .min();
    let last_ns = r.probes.iter().map(|p| p.1.last_ns).max().unwrap_or(0);
    let measured: u64 = r.probes.iter().map(|p| p.1.measured).max().unwrap_or(0);
    for l in &r.listeners {
        if l.overflowed > 0 {
            notes.push(format!(
                "listener {} overflowed {} times",
                l.name, l.overflowed
            ));
        }
    }
    let v = rate(measured, first.unwrap_or(0), last_ns)
        .ok_or_else(|| anyhow::anyhow!("fewer than two events measured"))?;
    Ok((v, notes))
}

/// Runs B1.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let mut fx = Fixture::new(&ctx.rt, p.b1_pods, Mix::Default)?;
    fx.calibrate(p.b1_events)?;
    let (fast, fast_desc) = ctx.fast_handler();
    let wasm = matches!(fast, HandlerKind::Wasm { .. });
    let cap = p.b1_events + p.b1_pods;
    let (mut ours, mut peer, mut native, mut raw) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut notes = Vec::new();
    for _ in 0..p.rounds {
        let mut s = side(Side::Ours, &fx, handlers("h", 1, &fast));
        s.queue_capacity = cap;
        let (v, n) = drain_rate(&fx, &s, p.b1_events)?;
        ours.push(v);
        notes.extend(n);
        let s = side(Side::Peer, &fx, handlers("h", 1, &HandlerKind::NoopNative));
        let (v, n) = drain_rate(&fx, &s, p.b1_events)?;
        peer.push(v);
        notes.extend(n);
        let s = side(Side::Raw, &fx, handlers("raw", 1, &HandlerKind::NoopNative));
        let (v, _) = drain_rate(&fx, &s, p.b1_events)?;
        raw.push(v);
        if wasm {
            let mut s = side(Side::Ours, &fx, handlers("h", 1, &HandlerKind::NoopNative));
            s.queue_capacity = cap;
            let (v, n) = drain_rate(&fx, &s, p.b1_events)?;
            native.push(v);
            notes.extend(n);
        }
    }
    fx.shutdown(&ctx.rt);
    let (o, k) = (median(&ours).unwrap_or(0.0), median(&peer).unwrap_or(0.0));
    let fmt = |xs: &[f64]| {
        xs.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut rows = vec![Row {
        id: "B1",
        what: format!("throughput, {} pods, {} churn events (events/s, median)", p.b1_pods, p.b1_events),
        ours: format!("{o:.0}"),
        peer: format!("{k:.0}"),
        ratio: ratio(o, k),
        target: ">= 1.5x".into(),
        verdict: Verdict::of(k > 0.0 && o / k >= 1.5),
        note: format!(
            "ours: {fast_desc}, queue {cap}, managedFields stripped (default); peer: watcher + reflector + Store<Pod>, no-op closure, defaults. Rounds ours [{}], peer [{}]. Drain of a held burst, first to last handled event. {}",
            fmt(&ours),
            fmt(&peer),
            notes.join("; ")
        ),
    }];
    if wasm {
        let n = median(&native).unwrap_or(0.0);
        rows.push(Row {
            id: "B1",
            what: "throughput, native no-op Handler baseline (events/s)".into(),
            ours: format!("{n:.0}"),
            peer: format!("{k:.0}"),
            ratio: ratio(n, k),
            target: "-".into(),
            verdict: Verdict::Info,
            note: format!(
                "the pipeline without WebAssembly; rounds [{}]",
                fmt(&native)
            ),
        });
    }
    let r = median(&raw).unwrap_or(0.0);
    rows.push(Row {
        id: "B1",
        what: "simulator ceiling: raw watch, lines scanned for resourceVersion only (events/s)".into(),
        ours: format!("{r:.0}"),
        peer: format!("{k:.0}"),
        ratio: format!("peer at {:.0}% of the ceiling, ours at {:.0}%", k / r * 100.0, o / r * 100.0),
        target: "-".into(),
        verdict: Verdict::Info,
        note: format!(
            "no decoding and no cache: bounds what any client can reach on this simulator and machine; rounds [{}]",
            fmt(&raw)
        ),
    });
    Ok(rows)
}
