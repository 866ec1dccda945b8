//! B2: marginal cost of each extra plugin (ours only). Our side with 1, 4 and
//! 16 Rust no-op plugins drains the same held burst; the time until every
//! plugin handled every event, minus the one-plugin time of the same round,
//! per event and per extra plugin.
//!
//! Invariant: queues are large enough that every plugin handles every event;
//! the plugin counts alternate their order between rounds.
//!
//! The same arms with the no-op plugin built against WIT 0.1 (`noop-v01`,
//! whose events carry every field encoded up front) give the cost of the old
//! event encoding, and the ratio of the two, round by round; the same with
//! `read-fields` (five metadata reads through `objects` per event) gives the
//! cost of a plugin that looks at what it is handed.

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
    target: "<= 1 us/event/plugin",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only: the product's cost of one more plugin on the same informer. 1, 4 and 16 Rust no-op \
plugins (as shipped: managedFields stripped, streaming list, through the registry) drain the same \
held burst, every queue holding the whole burst so each plugin handles each event. The figure is \
(drain time with N plugins − drain time with 1, same round) / (events × (N − 1)): wall time on this \
machine's cores. The same with the no-op built against WIT 0.1 (each event's object copied in \
whole), and with `read-fields`, which reads the object's namespace, name, uid, resourceVersion and \
one label through `objects` (five host calls) per event, each against its own one-plugin arm. \
kube-runtime has no per-handler queue to compare with here; B7 compares many handlers with the \
peer.";

/// The plugin an arm runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Subject {
    /// The Rust no-op plugin (WIT 0.2).
    Noop,
    /// The same built against WIT 0.1 (the whole object copied in per event).
    NoopV01,
    /// `read-fields`: five metadata reads through `objects` per event.
    ReadFields,
}

/// (arm, plugins, subject). Each subject's extra cost is taken against its
/// own one-plugin arm.
const ARMS: [(&str, usize, Subject); 7] = [
    ("1", 1, Subject::Noop),
    ("4", 4, Subject::Noop),
    ("16", 16, Subject::Noop),
    ("1 (0.1)", 1, Subject::NoopV01),
    ("16 (0.1)", 16, Subject::NoopV01),
    ("1 (reads 5)", 1, Subject::ReadFields),
    ("16 (reads 5)", 16, Subject::ReadFields),
];

/// The one-plugin arm of `subject`.
fn single(subject: Subject) -> &'static str {
    ARMS.iter()
        .find(|(_, n, s)| *n == 1 && *s == subject)
        .map(|(name, _, _)| *name)
        .expect("every subject has a one-plugin arm")
}

/// Runs B2.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let mut fx = Fixture::new(&ctx.rt, p.b2_pods, Mix::Default)?;
    fx.calibrate(p.b2_events)?;
    let noop = rust_plugin("noop")?;
    let noop_v01 = rust_plugin("noop-v01")?;
    let read_fields = rust_plugin("read-fields")?;
    let cap = p.b2_events + p.b2_pods;
    let arms: Vec<Arm<(usize, Subject)>> = ARMS
        .iter()
        .filter(|(_, n, _)| p.b2_plugins.contains(n))
        .map(|&(name, n, subject)| Arm {
            name,
            it: (n, subject),
        })
        .collect();
    let mut notes = Vec::new();
    let s = rounds::run("B2", p.rounds, &arms, |a| {
        let (n, subject) = a.it;
        let plugin = match subject {
            Subject::Noop => &noop,
            Subject::NoopV01 => &noop_v01,
            Subject::ReadFields => &read_fields,
        };
        let mut spec = ours(&fx, handlers("p", n, plugin));
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
    let mut per_plugin = Vec::new();
    for a in arms.iter().filter(|a| a.it.0 > 1) {
        let (n, subject) = a.it;
        let t1 = s.of(single(subject));
        let tn = s.of(a.name);
        let us_per = |t: f64, one: f64| (t - one) * 1e6 / (p.b2_events as f64 * (n - 1) as f64);
        let us = Spread::pairwise(tn, t1, us_per);
        let per_round: Vec<String> = tn
            .iter()
            .zip(t1)
            .map(|(t, one)| format!("{:.2}", us_per(*t, *one)))
            .collect();
        per_plugin.push((
            a.name,
            tn.iter()
                .zip(t1)
                .map(|(t, one)| us_per(*t, *one))
                .collect::<Vec<f64>>(),
        ));
        rows.push(Row {
            id: "B2",
            what: match subject {
                Subject::Noop => format!("{n} plugins: extra time per event per extra plugin"),
                Subject::NoopV01 => format!(
                    "{n} plugins, WIT 0.1 event encoding: extra time per event per extra plugin"
                ),
                Subject::ReadFields => format!(
                    "{n} plugins reading 5 fields of each object: extra time per event per extra plugin"
                ),
            },
            ours: us.map_or_else(
                || "-".into(),
                |u| format!("{} us", u.show(|x| format!("{x:.2}"))),
            ),
            peer: "-".into(),
            ratio: format!("{} for all {n}", rates(tn)),
            target: if subject == Subject::Noop {
                "<= 1 us".into()
            } else {
                "-".into()
            },
            verdict: if subject == Subject::Noop {
                Target::AtMost(1.0).judge(us.as_ref())
            } else {
                Verdict::Info
            },
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
    let of = |name: &str| per_plugin.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
    if let (Some(new), Some(old)) = (of("16"), of("16 (0.1)")) {
        let r = Spread::ratio(new, old);
        rows.push(Row {
            id: "B2",
            what: "16 plugins: WIT 0.2 event encoding against 0.1, per extra plugin".into(),
            ours: "-".into(),
            peer: "-".into(),
            ratio: r.map_or_else(|| "-".into(), |x| x.times()),
            target: "-".into(),
            verdict: Verdict::Info,
            note: "Extra time per event per extra plugin with the 0.2 no-op over the same with the 0.1 no-op, round by round: what an event costs a plugin that reads nothing of it.".into(),
        });
    }
    Ok(rows)
}
