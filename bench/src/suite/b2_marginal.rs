//! B2: marginal cost of each extra plugin (ours only). Our side with 1, 4 and
//! 16 Rust no-op plugins drains the same held burst; the time until every
//! plugin handled every event, minus the one-plugin time of the same round,
//! per event and per extra plugin.
//!
//! Invariant: queues are large enough that every plugin handles every event;
//! the plugin counts alternate their order between rounds.
//!
//! Extension point: a row for another event encoding is another set of arms
//! whose spec selects it (a field of `OursConfig`), measured the same way.

use anyhow::Result;

use super::burst::drain_rate;
use super::{handlers, ours, rust_plugin, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::rounds::{self, Arm};
use crate::stats::{show_in, Spread};
use crate::table::{Row, Verdict};
use crate::target::Target;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B2",
    title: "marginal cost per extra plugin",
    target: "<= 2 us/event/plugin",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only: the product's cost of one more plugin on the same informer. 1, 4 and 16 Rust no-op \
plugins (as shipped: managedFields stripped, streaming list, through the registry) drain the same \
held burst, every queue holding the whole burst so each plugin handles each event. The figure is \
(drain time with N plugins − drain time with 1, same round) / (events × (N − 1)): wall time on this \
machine's cores. kube-runtime has no per-handler queue to compare with here; B7 compares many \
handlers with the peer.";

const ARMS: [(&str, usize); 3] = [("1", 1), ("4", 4), ("16", 16)];

/// Runs B2.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let mut fx = Fixture::new(&ctx.rt, p.b2_pods, Mix::Default)?;
    fx.calibrate(p.b2_events)?;
    let noop = rust_plugin("noop")?;
    let cap = p.b2_events + p.b2_pods;
    let arms: Vec<Arm<usize>> = ARMS
        .iter()
        .filter(|(_, n)| p.b2_plugins.contains(n))
        .map(|&(name, n)| Arm { name, it: n })
        .collect();
    let mut notes = Vec::new();
    let s = rounds::run("B2", p.rounds, &arms, |a| {
        let mut spec = ours(&fx, handlers("p", a.it, &noop));
        spec.ours.queue_capacity = cap;
        let d = drain_rate(&fx, &spec, p.b2_events)?;
        notes.extend(d.notes);
        // Seconds for all plugins to handle the whole burst.
        Ok(p.b2_events as f64 / d.rate)
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    notes.dedup();
    let t1 = s.of("1");
    let rates = |secs: &[f64]| -> String {
        let r: Vec<f64> = secs.iter().map(|t| p.b2_events as f64 / t).collect();
        show_in(&r, 0, "events/s")
    };
    let mut rows = vec![Row {
        id: "B2",
        what: format!("1 plugin: drain of {} events", p.b2_events),
        ours: rates(t1),
        peer: "-".into(),
        ratio: "-".into(),
        target: "-".into(),
        verdict: Verdict::Info,
        note: format!("Rust no-op plugin; every plugin sees every event (queue {cap})."),
    }];
    for a in arms.iter().filter(|a| a.it > 1) {
        let n = a.it;
        let tn = s.of(a.name);
        let us_per = |t: f64, one: f64| (t - one) * 1e6 / (p.b2_events as f64 * (n - 1) as f64);
        let us = Spread::pairwise(tn, t1, us_per);
        let per_round: Vec<String> = tn
            .iter()
            .zip(t1)
            .map(|(t, one)| format!("{:.2}", us_per(*t, *one)))
            .collect();
        rows.push(Row {
            id: "B2",
            what: format!("{n} plugins: extra time per event per extra plugin"),
            ours: us.map_or_else(
                || "-".into(),
                |u| format!("{} us", u.show(|x| format!("{x:.2}"))),
            ),
            peer: "-".into(),
            ratio: format!("{} for all {n}", rates(tn)),
            target: "<= 2 us".into(),
            verdict: Target::AtMost(2.0).judge(us.as_ref()),
            note: format!(
                "Wall time on this machine's cores; per round (ABBA order) [{}] us.{}",
                per_round.join(", "),
                if notes.is_empty() {
                    String::new()
                } else {
                    format!(" {}", notes.join("; "))
                }
            ),
        });
    }
    Ok(rows)
}
