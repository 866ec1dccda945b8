//! B9: one plugin that writes (ours only). A Rust plugin (`annotate`) gives
//! every pod of the initial list one annotation by a JSON merge patch, through
//! the `kube` capability as the host runs it: a `[[write]]` grant for
//! `v1/pods` `patch`, the write rate limit off (`write_qps = 0`), requests
//! over kube-client. Figures: patches per second as the simulator received
//! them, the plugin's request time (grant check to answer, from the
//! runtime's histogram), and the time between two patches at the server.
//!
//! Then isolation from a hanging API server: a native no-op neighbour drains
//! a held burst beside the same writer whose API server accepts connections
//! and never answers, and beside a native handler that takes as long per
//! event (10 s, the writer's `write_timeout_ms`); the
//! figure is its rate beside the blocked plugin over its rate beside the
//! stuck handler, round by round (both take every event into their queue,
//! so the ratio is what the blocked API calls cost beyond any stuck
//! listener). Alone, it shows what a second listener costs at all.
//!
//! Then a shadow's cost to the live plugin: the same writer alone, and
//! beside a shadow of itself (the same component and key, as `shadow_of`
//! wires it: every write a dry run, both sides' intents compared by one
//! shadow book); the figures are the live writer's patch rate and request
//! time, round by round against the alone arm.
//!
//! Invariant: every round patches every pod exactly once, checked in the
//! simulator's request log (a round whose count differs is an error), and
//! uses its own annotation key, so no round finds its pods already done.

use anyhow::{ensure, Result};

use super::burst::drain_rate_of;
use super::{handler, ours, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::rounds::{self, Arm};
use crate::spec::{HandlerKind, HandlerSpec};
use crate::stats::{quantile, show, show_in, Spread};
use crate::table::{Row, Verdict};
use crate::target::Target;
use crate::wasm;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B9",
    title: "one plugin that writes",
    target: "isolation >= 95%",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only; kube-runtime has no plugin writes to compare with. One Rust plugin (`annotate`) \
patches every pod of the initial list once (a JSON merge patch adding one annotation), through \
the `kube` capability exactly as the host runs a manifest with `[[write]] resource = \"v1/pods\" \
verbs = [\"patch\"]` and `write_qps = 0` (the rate limit off): each call is checked against the \
grant and sent over kube-client, one at a time from the plugin's own thread. Patches per second \
are counted from the simulator's request log (first to last patch of the round, every pod \
patched exactly once); the request time is the runtime's own histogram (grant check to answer); \
the time between patches at the server is the whole cycle of one event (the plugin's work, its \
request and the answer). Isolation: a native no-op neighbour drains a held burst beside the \
writer whose API server accepts connections and never answers (each of its calls ends in \
`timeout` after `write_timeout_ms`), and beside a native handler that takes as long (10 s) per event; both take \
every event into their queue. Its rate beside the blocked plugin over its rate beside the stuck \
handler, round by round, should stay at 95% or more; its rate alone is shown for what a second \
listener costs at all. A shadow's cost: the same writer alone, and beside a shadow of itself (the same component and annotation key, wired as `shadow_of` wires it: its own listener and instance, every write with dryRun=All, both sides' intended writes compared by one shadow book); the live writer's patch rate and request time beside the shadow, round by round against alone.";

/// What one writing round measured.
struct Writes {
    /// Patches per second at the server.
    rate: f64,
    /// Request time at the plugin, microseconds.
    p50_us: f64,
    p99_us: f64,
    /// Time between consecutive patches at the server, microseconds.
    gap_p50_us: f64,
    gap_p99_us: f64,
}

fn writer(key: &str) -> Result<HandlerSpec> {
    let mut h = handler(
        "writer",
        HandlerKind::Wasm {
            path: wasm::plugin_path("annotate")?,
            config: serde_json::json!({ "key": key }).to_string(),
            timeout_ms: 60_000,
        },
    );
    h.tracked = true;
    Ok(h)
}

/// One round of the writer patching every pod; with `shadowed`, beside a
/// shadow of itself (the same component and key, as `shadow_of` runs it).
fn writes_round(fx: &Fixture, key: &str, shadowed: bool) -> Result<Writes> {
    let mut handlers = vec![writer(key)?];
    if shadowed {
        let mut shadow = writer(key)?;
        shadow.name = "writer-next".into();
        shadow.shadow_of = Some("writer".into());
        handlers.push(shadow);
    }
    let mut spec = ours(fx, handlers);
    spec.ours.writes = true;
    let mark = fx.request_mark();
    let (child, r) = super::spawn(fx, &spec)?;
    child.exit();
    let (dry, mut patches): (Vec<_>, Vec<_>) = fx
        .requests_since(mark)
        .into_iter()
        .filter(|q| q.method == "PATCH" && q.body.contains(key))
        .partition(|q| q.param("dryRun").as_deref() == Some("All"));
    let dry_ok = dry.iter().filter(|q| q.status == 200).count();
    let want = if shadowed { fx.pods() } else { 0 };
    ensure!(
        dry.len() == want && dry_ok == want,
        "{} dry-run patches ({dry_ok} answered 200), for {want} expected",
        dry.len()
    );
    patches.sort_by_key(|q| q.seq);
    let ok = patches.iter().filter(|q| q.status == 200).count();
    ensure!(
        patches.len() == fx.pods() && ok == patches.len(),
        "{} patches ({ok} answered 200) for {} pods",
        patches.len(),
        fx.pods()
    );
    let api = r
        .api
        .iter()
        .find(|a| a.name == "writer")
        .ok_or_else(|| anyhow::anyhow!("the side reported no API timing for the writer"))?;
    ensure!(
        api.requests as usize >= patches.len() && api.denied == 0,
        "the plugin counted {} requests ({} denied) for {} patches",
        api.requests,
        api.denied,
        patches.len()
    );
    let (first, last) = (patches[0].at_micros, patches[patches.len() - 1].at_micros);
    let gaps: Vec<f64> = patches
        .windows(2)
        .map(|w| w[1].at_micros.saturating_sub(w[0].at_micros) as f64)
        .collect();
    Ok(Writes {
        rate: (patches.len() - 1) as f64 / ((last - first).max(1) as f64 / 1e6),
        p50_us: api.p50_us as f64,
        p99_us: api.p99_us as f64,
        gap_p50_us: quantile(&gaps, 0.5).unwrap_or(0.0),
        gap_p99_us: quantile(&gaps, 0.99).unwrap_or(0.0),
    })
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

/// Runs B9.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let mut rows = Vec::new();

    // Writes.
    let fx = Fixture::new(&ctx.rt, p.b9_pods, Mix::Default)?;
    let mut round = 0;
    let arms = [Arm {
        name: "writer",
        it: (),
    }];
    let s = rounds::run("B9", p.rounds, &arms, |_| {
        round += 1;
        writes_round(
            &fx,
            &format!("bench.wasm-informer.dev/round-{round}"),
            false,
        )
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let w = s.of("writer");
    let col = |f: fn(&Writes) -> f64| w.iter().map(f).collect::<Vec<f64>>();
    rows.push(Row {
        id: "B9",
        what: format!(
            "1 Rust plugin patching each of {} pods: patches/s, rate limit off",
            p.b9_pods
        ),
        ours: show_in(&col(|x| x.rate), 0, "patches/s"),
        peer: "-".into(),
        ratio: "-".into(),
        target: "-".into(),
        verdict: Verdict::Info,
        note: "JSON merge patches, one at a time from the plugin's thread, counted at the simulator; every pod patched exactly once per round.".into(),
    });
    rows.push(Row {
        id: "B9",
        what: "request time at the plugin, p50 / p99 (grant check to answer)".into(),
        ours: format!(
            "{} / {} ms",
            show(&col(|x| x.p50_us), ms),
            show(&col(|x| x.p99_us), ms)
        ),
        peer: "-".into(),
        ratio: "-".into(),
        target: "-".into(),
        verdict: Verdict::Info,
        note: "The runtime's API request histogram (`wasm_informer_plugin_api_request_duration_seconds`), read at sync.".into(),
    });
    rows.push(Row {
        id: "B9",
        what: "time between two patches at the server, p50 / p99 (one event's whole cycle)".into(),
        ours: format!(
            "{} / {} ms",
            show(&col(|x| x.gap_p50_us), ms),
            show(&col(|x| x.gap_p99_us), ms)
        ),
        peer: "-".into(),
        ratio: "-".into(),
        target: "-".into(),
        verdict: Verdict::Info,
        note:
            "From the simulator's request log: the plugin's own work, its request and the answer."
                .into(),
    });

    // A shadow's cost to the live plugin.
    let fx = Fixture::new(&ctx.rt, p.b9_pods, Mix::Default)?;
    let arms = [
        Arm {
            name: "alone",
            it: false,
        },
        Arm {
            name: "shadowed",
            it: true,
        },
    ];
    let mut round = 0;
    let s = rounds::run("B9", p.rounds, &arms, |a| {
        round += 1;
        writes_round(
            &fx,
            &format!("bench.wasm-informer.dev/shadow-{round}"),
            a.it,
        )
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let col = |arm: &str, f: fn(&Writes) -> f64| s.of(arm).iter().map(f).collect::<Vec<f64>>();
    let kept = Spread::ratio(&col("shadowed", |x| x.rate), &col("alone", |x| x.rate));
    rows.push(Row {
        id: "B9",
        what: "a shadow's cost: the live writer's patches/s beside a shadow of itself, against alone".into(),
        ours: format!(
            "{} beside the shadow, {} alone",
            show_in(&col("shadowed", |x| x.rate), 0, "patches/s"),
            show_in(&col("alone", |x| x.rate), 0, "patches/s")
        ),
        peer: "-".into(),
        ratio: kept.as_ref().map_or_else(|| "-".into(), |x| x.percent()),
        target: "-".into(),
        verdict: Verdict::Info,
        note: "The shadow is the same component with the same key, wired as `shadow_of` wires it: its own listener, queue and instance, every write with dryRun=All (checked at the simulator: one dry-run patch per pod), both sides' intended writes compared by one shadow book. Both writers share the machine's two cores and the simulator.".into(),
    });
    let p99 = Spread::ratio(&col("shadowed", |x| x.p99_us), &col("alone", |x| x.p99_us));
    rows.push(Row {
        id: "B9",
        what: "a shadow's cost: the live writer's request time p50 / p99 beside the shadow, against alone".into(),
        ours: format!(
            "{} / {} ms beside the shadow, {} / {} ms alone",
            show(&col("shadowed", |x| x.p50_us), ms),
            show(&col("shadowed", |x| x.p99_us), ms),
            show(&col("alone", |x| x.p50_us), ms),
            show(&col("alone", |x| x.p99_us), ms)
        ),
        peer: "-".into(),
        ratio: p99.as_ref().map_or_else(|| "-".into(), |x| format!("p99 {}", x.show(|v| format!("{v:.2}x")))),
        target: "-".into(),
        verdict: Verdict::Info,
        note: "The runtime's API request histogram of the live writer, as in the row above.".into(),
    });

    // Isolation from a hanging API server.
    let mut fx = Fixture::new(&ctx.rt, p.b9_pods, Mix::Default)?;
    fx.calibrate(p.b9_events)?;
    let neighbour = handler("neighbour", HandlerKind::NoopNative);
    // "stuck": beside a native handler that takes 10 s per event (as long
    // as each of the writer's calls waits, `write_timeout_ms`); "blocked":
    // beside the writer whose API server never answers.
    // Both neighbours take every event into their queue, so the ratio of
    // the two is what the blocked API calls cost beyond any stuck listener;
    // "alone" shows what a second listener costs at all.
    let arms = [
        Arm {
            name: "alone",
            it: 0u8,
        },
        Arm {
            name: "stuck",
            it: 1,
        },
        Arm {
            name: "blocked",
            it: 2,
        },
    ];
    let cap = p.b9_events + p.b9_pods;
    let mut notes = Vec::new();
    let s = rounds::run("B9", p.rounds, &arms, |a| {
        let mut handlers = vec![neighbour.clone()];
        match a.it {
            1 => {
                let mut h = handler("stuck", HandlerKind::SleepNative(10_000));
                h.tracked = false;
                handlers.push(h);
            }
            2 => {
                let mut w = writer("bench.wasm-informer.dev/hang")?;
                // Not waited for: its calls never get an answer.
                w.tracked = false;
                handlers.push(w);
            }
            _ => {}
        }
        let mut spec = ours(&fx, handlers);
        spec.ours.writes = a.it == 2;
        spec.ours.writes_hang = a.it == 2;
        spec.ours.queue_capacity = cap;
        let d = drain_rate_of(&fx, &spec, p.b9_events, "neighbour")?;
        notes.extend(d.notes);
        Ok(d.rate)
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    notes.dedup();
    let share = Spread::ratio(s.of("blocked"), s.of("stuck"));
    let second = Spread::ratio(s.of("stuck"), s.of("alone"));
    let note = |what: &str| {
        format!(
            "{} events in a held burst, drained at full speed; {what}{}",
            p.b9_events,
            if notes.is_empty() {
                String::new()
            } else {
                format!(" {}", notes.join("; "))
            }
        )
    };
    rows.push(Row {
        id: "B9",
        what: "native neighbour's drain rate beside a plugin blocked on a hanging API server, against beside a stuck native handler".into(),
        ours: format!(
            "{} beside the blocked plugin, {} beside the stuck handler",
            show_in(s.of("blocked"), 0, "events/s"),
            show_in(s.of("stuck"), 0, "events/s")
        ),
        peer: "-".into(),
        ratio: share.as_ref().map_or_else(|| "-".into(), |x| x.percent()),
        target: ">= 95%".into(),
        verdict: Target::AtLeast(0.95).judge(share.as_ref()),
        note: note("the writer's API server accepts connections and never answers; both neighbours queue every event."),
    });
    rows.push(Row {
        id: "B9",
        what: "reference: the same neighbour alone, and the cost of any second listener".into(),
        ours: show_in(s.of("alone"), 0, "events/s"),
        peer: "-".into(),
        ratio: second.as_ref().map_or_else(|| "-".into(), |x| format!("{} beside a stuck handler", x.percent())),
        target: "-".into(),
        verdict: Verdict::Info,
        note: note("a second listener that takes every event into its queue costs the dispatcher on two cores whatever its handler does."),
    });
    Ok(rows)
}
