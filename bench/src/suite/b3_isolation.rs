//! B3: isolation. Paced status-update churn; the fast no-op handler's throughput
//! and p99 latency (write to handled) alone, then next to a slow handler (10 ms
//! per event, sleeping) and, on our side, one that loops forever. The peer uses
//! kube-runtime's shared reflector with one subscriber per handler.
//!
//! Invariant: the same write rate and objects for every configuration; latency
//! joins each handled event to the time its resourceVersion was written.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;

use super::{side, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::probe::now_ns;
use crate::spec::{Command, HandlerKind, HandlerSpec, PeerFanout, Side, SideSpec};
use crate::stats::{median, quantile};
use crate::table::{Row, Verdict};
use crate::wasm;

struct Sample {
    rate: f64,
    p99_ms: f64,
}

fn one(ctx: &Ctx, fx: &Fixture, spec: &SideSpec) -> Result<(Sample, Vec<String>)> {
    let p = &ctx.plan;
    let (mut child, r0) = super::spawn(spec)?;
    let mut notes = r0.notes;
    let start_rv = fx.current_rv();
    child.cmd(&Command::Arm {
        rv: start_rv,
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
        let who = match spec.side {
            Side::Ours => "wasm-informer",
            Side::Peer => "kube-runtime",
            Side::Raw => "raw watch",
        };
        notes.push(format!(
            "{who}: fast handler had not reached the last write {} s after churn ended",
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
    Ok((
        Sample {
            rate: fast.measured as f64 / ((end - t0) as f64 / 1e9),
            p99_ms: quantile(&lat, 0.99).unwrap_or(f64::NAN),
        },
        notes,
    ))
}

fn hs(list: Vec<(&str, HandlerKind, bool)>) -> Vec<HandlerSpec> {
    list.into_iter()
        .map(|(n, kind, tracked)| HandlerSpec {
            name: n.to_string(),
            kind,
            tracked,
        })
        .collect()
}

/// Runs B3.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b3_pods, Mix::UpdatesOnly)?;
    let (fast, desc) = ctx.fast_handler();
    let (slow, spin) = match (wasm::plugin_path("slow"), wasm::plugin_path("spin-forever")) {
        (Some(s), Some(f)) => (
            HandlerKind::Wasm {
                path: s,
                config: r#"{"ms":10}"#.into(),
                timeout_ms: 1000,
            },
            Some(HandlerKind::Wasm {
                path: f,
                config: "{}".into(),
                timeout_ms: 100,
            }),
        ),
        _ => (HandlerKind::SleepNative(10), None),
    };
    let mut ours_solo = side(Side::Ours, &fx, hs(vec![("fast", fast.clone(), true)]));
    ours_solo.sync_timeout_secs = 60;
    let mut with = vec![("fast", fast.clone(), true), ("slow", slow.clone(), false)];
    if let Some(s) = &spin {
        with.push(("spin", s.clone(), false));
    }
    let mut ours_with = side(Side::Ours, &fx, hs(with));
    ours_with.sync_timeout_secs = 60;
    let shared = PeerFanout::Shared { buffer: 1024 };
    let mut peer_solo = side(
        Side::Peer,
        &fx,
        hs(vec![("fast", HandlerKind::NoopNative, true)]),
    );
    peer_solo.peer_fanout = shared;
    peer_solo.sync_timeout_secs = 60;
    let mut peer_with = side(
        Side::Peer,
        &fx,
        hs(vec![
            ("fast", HandlerKind::NoopNative, true),
            ("slow", HandlerKind::SleepNative(10), false),
        ]),
    );
    peer_with.peer_fanout = shared;
    peer_with.sync_timeout_secs = 60;
    let specs = [&ours_solo, &ours_with, &peer_solo, &peer_with];
    let mut samples: Vec<Vec<Sample>> = (0..4).map(|_| Vec::new()).collect();
    let mut notes: Vec<Vec<String>> = (0..4).map(|_| Vec::new()).collect();
    for _ in 0..p.b3_rounds {
        for (i, s) in specs.iter().enumerate() {
            let (x, n) = one(ctx, &fx, s)?;
            samples[i].push(x);
            notes[i].extend(n);
        }
    }
    fx.shutdown(&ctx.rt);
    let med = |i: usize| {
        (
            median(&samples[i].iter().map(|s| s.rate).collect::<Vec<_>>()).unwrap_or(0.0),
            median(&samples[i].iter().map(|s| s.p99_ms).collect::<Vec<_>>()).unwrap_or(f64::NAN),
        )
    };
    let (os, ow, ps, pw) = (med(0), med(1), med(2), med(3));
    let neighbours = if spin.is_some() {
        "slow (10 ms/event, sleeping) + spin-forever (100 ms deadline)"
    } else {
        "slow native handler (10 ms sleep); no loop-forever neighbour (no wasm runtime in this build)"
    };
    let rounds = |i: usize| {
        samples[i]
            .iter()
            .map(|s| format!("{:.0}/s p99 {:.1} ms", s.rate, s.p99_ms))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let keep = ow.0 / os.0;
    let p99x = ow.1 / os.1;
    Ok(vec![
        Row {
            id: "B3",
            what: format!("fast handler alone, {} updates/s for {} s: events/s, p99", p.b3_rate, p.b3_secs),
            ours: format!("{:.0}/s, p99 {:.2} ms", os.0, os.1),
            peer: format!("{:.0}/s, p99 {:.2} ms", ps.0, ps.1),
            ratio: "-".into(),
            target: "-".into(),
            verdict: Verdict::Info,
            note: format!(
                "ours: {desc}; peer: store_shared(1024) subscriber. Latency = handled minus written. Rounds ours [{}], peer [{}]. {} {}",
                rounds(0),
                rounds(2),
                notes[0].join("; "),
                notes[2].join("; ")
            ),
        },
        Row {
            id: "B3",
            what: "fast handler next to slow neighbours: events/s, p99".into(),
            ours: format!("{:.0}/s, p99 {:.2} ms", ow.0, ow.1),
            peer: format!("{:.0}/s, p99 {:.2} ms", pw.0, pw.1),
            ratio: format!(
                "ours keeps {:.0}% (p99 {:.2}x); peer keeps {:.0}% (p99 {:.2}x)",
                keep * 100.0,
                p99x,
                pw.0 / ps.0 * 100.0,
                pw.1 / ps.1
            ),
            target: ">= 95%, p99 <= 2x".into(),
            verdict: Verdict::of(keep >= 0.95 && p99x <= 2.0),
            note: format!(
                "rounds ours [{}], peer [{}]. Ours neighbours: {neighbours}; peer neighbour: one subscriber sleeping 10 ms. Status-update churn only: a subscriber whose object was deleted before it read it waits forever in kube-runtime 5.0 (ReflectHandle returns Pending without a waker). Peer latencies are understated when a lagging subscriber reads a newer version of the object. {} {}",
                rounds(1),
                rounds(3),
                notes[1].join("; "),
                notes[3].join("; ")
            ),
        },
    ])
}
