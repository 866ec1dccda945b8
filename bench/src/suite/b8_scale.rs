//! B8: scale (ours only). 200k pods and 10 plugins: the initial sync time, then
//! churn at 5k events/s for a minute; the peak RSS (the kernel's high-water
//! mark of the measured process), the RSS and live heap at the end, and every
//! listener's overflow counters; each round a fresh process. Beside it, the
//! raw kube-runtime peer's sync of the same 200k pods, so that a sync that
//! slows at scale shows as a ratio in the same run, not only against a loose
//! absolute bound.
//!
//! Invariant: the churn rate reported is the rate actually written; the
//! verdict holds only when every round meets every bound.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::compare::{whole, Compare};
use super::{handlers, ours, peer, rust_plugin, spawn, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::rounds::{self, Arm};
use crate::spec::{Command, HandlerKind, ListenerCounters, PeerCache, PeerFanout};
use crate::stats::{show, show_in, Spread};
use crate::table::{bytes, Row};
use crate::target::{self, Target};

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B8",
    title: "scale",
    target: "sync <= 20 s and <= 1.0x the raw peer, peak RSS <= 1.5 GB, no overflow",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only, at a size where the design's bounds matter: 200k pods and 10 Rust no-op plugins as the \
host runs them (managedFields stripped, streaming list, the default queue of 1024 per plugin). \
Each round is a fresh process: initial sync, then status, create and delete churn at 5k events/s \
for a minute; the figures are sync time, the peak RSS of the measured process (the kernel's \
high-water mark `VmHWM` from its `/proc/self/status`, read at sync and again after the churn: every \
page it ever held resident at once, transient list buffers included), its RSS and live heap after the \
churn (after both allocators returned free pages), and listener overflows during the churn \
(overflows while the initial list streams in are shown apart). The RSS target is on the peak over \
the whole run. A second row times the raw kube-runtime peer's sync of the same pods (as in B5: \
streaming list, managedFields stripped, `ObjectMeta` decoded and `spec`/`status` as \
`Box<RawValue>`) with as many no-op subscribers of one `store_shared(1024)` reflector as we run \
plugins, synced when the store holds every pod and every subscriber saw every pod, as ours is when \
every plugin handled every pod; each arm a fresh process in ABBA order: the absolute bound is \
loose, and this ratio is what catches a sync that got slower at scale while B5's 50k pods stayed \
fast.";

/// What a round measures: ours with the churn, or the raw peer's sync alone.
#[derive(Clone, Copy)]
enum Side {
    Ours,
    PeerRaw,
}

/// One round of one arm; the peer's arm fills only `sync_ms`.
#[derive(Default)]
struct Sample {
    sync_ms: f64,
    /// VmHWM at sync, and after the churn (the whole run's peak).
    peak_sync: f64,
    peak: f64,
    /// RSS after the churn, after a trim.
    rss_end: f64,
    heap: f64,
    rate: f64,
    overflowed: u64,
    sync_overflowed: u64,
    reached: bool,
    max_depth: u64,
}

/// The raw peer's initial sync of `fx`'s pods with `n` no-op subscribers of
/// one shared reflector (each must see every pod, as each of our plugins
/// must), in ms.
fn peer_sync(fx: &Fixture, n: usize) -> Result<f64> {
    let mut spec = peer(fx, handlers("s", n, &HandlerKind::NoopNative));
    spec.peer.cache = PeerCache::RawPod;
    spec.peer.fanout = PeerFanout::Shared { buffer: 1024 };
    spec.sync_timeout_secs = 120;
    let (child, r) = spawn(fx, &spec)?;
    child.exit();
    Ok(r.sync_ms)
}

fn one(ctx: &Ctx, fx: &Fixture) -> Result<Sample> {
    let p = &ctx.plan;
    let mut spec = ours(fx, handlers("p", p.b8_plugins, &rust_plugin("noop")?));
    spec.sync_timeout_secs = 120;
    let (mut child, r0) = spawn(fx, &spec)?;
    let rv0 = fx.current_rv();
    child.cmd(&Command::Arm {
        rv: rv0,
        record: false,
    })?;
    let t = Instant::now();
    fx.paced(p.b8_rate, Duration::from_secs(p.b8_secs), false)
        .join()
        .map_err(|_| anyhow::anyhow!("churn thread panicked"))??;
    let wrote = fx.current_rv() - rv0;
    let rate = wrote as f64 / t.elapsed().as_secs_f64();
    let r = child.cmd(&Command::Wait {
        rv: fx.current_rv(),
        timeout_ms: 30_000,
    })?;
    child.exit();
    anyhow::ensure!(
        r0.rss_peak_bytes > 0 && r.rss_peak_bytes > 0,
        "B8: the child could not read its VmHWM from /proc/self/status"
    );
    let at_sync = |l: &ListenerCounters| {
        r0.listeners
            .iter()
            .find(|x| x.name == l.name)
            .map_or(0, |x| x.overflowed)
    };
    Ok(Sample {
        sync_ms: r0.sync_ms,
        peak_sync: r0.rss_peak_bytes as f64,
        peak: r.rss_peak_bytes as f64,
        rss_end: r.rss_bytes as f64,
        heap: r.heap_bytes as f64,
        rate,
        overflowed: r.listeners.iter().map(|l| l.overflowed - at_sync(l)).sum(),
        sync_overflowed: r0.listeners.iter().map(|l| l.overflowed).sum(),
        reached: r.reached,
        max_depth: r.listeners.iter().map(|l| l.max_depth).max().unwrap_or(0),
    })
}

/// Runs B8.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b8_pods, Mix::Default)?;
    let arms = [
        Arm {
            name: "ours",
            it: Side::Ours,
        },
        Arm {
            name: "peer-raw",
            it: Side::PeerRaw,
        },
    ];
    let s = rounds::run("B8", p.rounds, &arms, |a| match a.it {
        Side::Ours => one(ctx, &fx),
        Side::PeerRaw => peer_sync(&fx, p.b8_plugins).map(|sync_ms| Sample {
            sync_ms,
            ..Sample::default()
        }),
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let col = |f: fn(&Sample) -> f64| s.map("ours", f);
    let (sync, peak, heap, rate) = (
        col(|x| x.sync_ms / 1000.0),
        col(|x| x.peak),
        col(|x| x.heap),
        col(|x| x.rate),
    );
    let (peak_sync, rss_end) = (col(|x| x.peak_sync), col(|x| x.rss_end));
    let overflowed = col(|x| x.overflowed as f64);
    let caught_up = col(|x| f64::from(u8::from(x.reached)));
    let verdict = target::all(&[
        Target::AtMost(20.0).judge(Spread::of(&sync).as_ref()),
        Target::AtMost(1.5e9).judge(Spread::of(&peak).as_ref()),
        Target::AtMost(0.0).judge(Spread::of(&overflowed).as_ref()),
        Target::AtLeast(1.0).judge(Spread::of(&caught_up).as_ref()),
    ]);
    let count = |xs: &[Sample], f: fn(&Sample) -> u64| xs.iter().map(f).sum::<u64>();
    let samples = s.of("ours");
    let behind = samples.iter().filter(|x| !x.reached).count();
    let peer_ms = s.map("peer-raw", |x| x.sync_ms);
    let against_peer = Compare {
        id: "B8",
        what: format!(
            "initial sync of {} pods (ms), ours with {n} plugins against the raw peer with {n} subscribers",
            p.b8_pods,
            n = p.b8_plugins
        ),
        ours: &col(|x| x.sync_ms),
        peer: &peer_ms,
        unit: whole,
        target: Some((Target::AtMost(1.0), "<= 1.0x")),
        note: "Both streaming, managedFields stripped; the peer caches metadata + RawValue in one store_shared(1024) reflector with no-op subscribers, ours runs the Rust no-op plugins as above; synced when every handler saw every pod.".into(),
    }
    .row();
    Ok(vec![Row {
        id: "B8",
        what: format!(
            "{} pods, {} plugins: sync, then {} events/s for {} s",
            p.b8_pods,
            p.b8_plugins,
            show(&rate, |x| format!("{x:.0}")),
            p.b8_secs
        ),
        ours: format!(
            "sync {}, peak RSS (VmHWM) {} (at sync {}), after churn RSS {} and heap {}, overflows during churn {} (during sync {}) over all rounds",
            show_in(&sync, 1, "s"),
            show(&peak, bytes),
            show(&peak_sync, bytes),
            show(&rss_end, bytes),
            show(&heap, bytes),
            count(samples, |x| x.overflowed),
            count(samples, |x| x.sync_overflowed)
        ),
        peer: "-".into(),
        ratio: if behind == 0 {
            "all plugins caught up in every round".into()
        } else {
            format!("plugins behind 30 s after churn in {behind} round(s)")
        },
        target: "sync <= 20 s, peak RSS <= 1.5 GB, 0 overflows".into(),
        verdict,
        note: format!(
            "Rust no-op plugins, queue 1024 (default). Peak RSS: VmHWM of the measured child process (the host side only; the simulator runs in the parent), over the whole run; RSS and heap after churn are read after mi_collect and malloc_trim. Deepest queue per round [{}].",
            samples
                .iter()
                .map(|x| x.max_depth.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }, against_peer])
}
