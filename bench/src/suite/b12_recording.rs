//! B12: what recording costs (ours only). The Rust no-op plugin drains a held
//! burst, as in B1, with the informer recorded as `run --record` records it
//! (`wasm_informer::record::Recorder`: a listener of its own that writes one
//! line per notification, zstd-compressed on a thread of its own) and
//! without; the figure is the plugin's drain rate with the recording against
//! without, round by round, and the compressed file's size per 10k entries
//! (the initial state's objects and the events after it).
//!
//! Invariant: every recorded round's file holds every notification (its
//! summary counts none coalesced, an initial state, and at least the
//! burst's events), or the round is an error.

use anyhow::{ensure, Context, Result};

use wasm_informer::record::Summary;

use super::burst::drain_rate_of;
use super::{handler, ours, rust_plugin, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::ours::summary_path;
use crate::rounds::{self, Arm};
use crate::stats::{show, show_in, Spread};
use crate::table::{Row, Verdict};
use crate::target::Target;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B12",
    title: "recording what the informers saw",
    target: ">= 90% of the drain rate",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only; kube-runtime records nothing. The Rust no-op plugin drains a held burst of churn \
events (as in B1: the side synced, its watch dropped and the reconnect held while the events are \
written), in one arm with the informer recorded as `wasm-informer run --record FILE` records it, \
in the other without. The recorder is a listener of its own, started before the plugin: it \
formats one JSON line per notification (the object as cached, managedFields stripped) and hands \
it to a thread that compresses it with zstd (level 3) into the file. The figure is the plugin's \
drain rate with the recording over without, round by round; beside it, the compressed file's \
bytes per 10k entries (objects of the initial state and events after it, as the recording's own \
summary counts them), and every round checks that the file holds every notification.";

/// One arm's round: the plugin's drain rate, and the recording's size.
struct Recorded {
    rate: f64,
    /// Compressed bytes per 10k entries (recorded arm only).
    per_10k: Option<f64>,
}

/// One round: drains the burst into a fresh child, recording into `file`
/// when given, and reads the recording's summary.
fn round(fx: &Fixture, events: usize, file: Option<&std::path::Path>) -> Result<Recorded> {
    let mut spec = ours(fx, vec![handler("plugin", rust_plugin("noop")?)]);
    spec.ours.queue_capacity = events + fx.pods();
    spec.ours.record = file.map(|f| f.display().to_string());
    let d = drain_rate_of(fx, &spec, events, "plugin")?;
    ensure!(d.notes.is_empty(), "{}", d.notes.join("; "));
    let Some(file) = file else {
        return Ok(Recorded {
            rate: d.rate,
            per_10k: None,
        });
    };
    let path = summary_path(file);
    let summary: Summary = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    ensure!(
        summary.coalesced == 0 && summary.initial > 0 && summary.events >= events as u64,
        "the recording does not hold every notification: {summary:?}"
    );
    let bytes = std::fs::metadata(file)?.len();
    ensure!(
        bytes == summary.bytes,
        "the file has {bytes} bytes: {summary:?}"
    );
    Ok(Recorded {
        rate: d.rate,
        per_10k: Some(bytes as f64 * 10_000.0 / (summary.initial + summary.events) as f64),
    })
}

/// Runs B12.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let mut fx = Fixture::new(&ctx.rt, p.b12_pods, Mix::Default)?;
    fx.calibrate(p.b12_events)?;
    let dir = tempfile::tempdir()?;
    let arms = [
        Arm {
            name: "off",
            it: false,
        },
        Arm {
            name: "recording",
            it: true,
        },
    ];
    let mut n = 0;
    let s = rounds::run("B12", p.rounds, &arms, |a| {
        n += 1;
        let file = dir.path().join(format!("round-{n}.rec"));
        round(&fx, p.b12_events, a.it.then_some(file.as_path()))
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let rate = |arm: &str| s.map(arm, |x| x.rate);
    let kept = Spread::ratio(&rate("recording"), &rate("off"));
    let sizes: Vec<f64> = s.of("recording").iter().filter_map(|x| x.per_10k).collect();
    Ok(vec![
        Row {
            id: "B12",
            what: "recording's cost: the Rust no-op plugin's drain rate with the informer recorded, against without".into(),
            ours: format!(
                "{} recorded, {} without",
                show_in(&rate("recording"), 0, "events/s"),
                show_in(&rate("off"), 0, "events/s")
            ),
            peer: "-".into(),
            ratio: kept.as_ref().map_or_else(|| "-".into(), |x| x.percent()),
            target: ">= 90%".into(),
            verdict: Target::AtLeast(0.90).judge(kept.as_ref()),
            note: format!(
                "{} pods synced, then {} events in a held burst, drained at full speed; the recorder is a second listener (see B9's reference row for what any second listener costs the dispatcher on two cores) and a compressing thread.",
                p.b12_pods, p.b12_events
            ),
        },
        Row {
            id: "B12",
            what: "recording's size: compressed bytes per 10k entries (initial objects and events)".into(),
            ours: show(&sizes, |b| format!("{:.0} KB", b / 1024.0)),
            peer: "-".into(),
            ratio: "-".into(),
            target: "-".into(),
            verdict: Verdict::Info,
            note: "Pods of about 2 KB as cached (managedFields stripped), zstd level 3; the file holds the initial state and every event with its whole object.".into(),
        },
    ])
}
