//! The benchmarks B1..B8 and what they share: the run context, handler choices
//! and side specs.
//!
//! Invariant: every comparison runs the two sides one after the other (A B A B),
//! each in a fresh child process, against one simulator instance.

pub mod b1_throughput;
pub mod b2_marginal;
pub mod b3_isolation;
pub mod b4_memory;
pub mod b5_initial_sync;
pub mod b6_reload;
pub mod b7_many_handlers;
pub mod b8_scale;

use anyhow::Result;

use crate::driver::ChildProc;
use crate::fixture::Fixture;
use crate::plan::Plan;
use crate::spec::{ChildReport, HandlerKind, HandlerSpec, PeerFanout, Side, SideSpec};
use crate::table::Row;
use crate::wasm;

/// What every benchmark gets.
pub struct Ctx {
    /// Runtime the simulator is served from.
    pub rt: tokio::runtime::Runtime,
    /// Sizes.
    pub plan: Plan,
}

impl Ctx {
    /// The no-op handler of our side: the Rust no-op plugin when the runtime and
    /// the plugin are available, else a native no-op `Handler`.
    pub fn fast_handler(&self) -> (HandlerKind, &'static str) {
        match wasm::plugin_path("noop") {
            Some(p) => (
                HandlerKind::Wasm {
                    path: p,
                    config: "{}".into(),
                    timeout_ms: 1000,
                },
                "Rust no-op wasm plugin",
            ),
            None => (
                HandlerKind::NoopNative,
                "native no-op Handler (no wasm plugin in this build)",
            ),
        }
    }
}

/// A side spec with one handler per entry of `handlers`, against `fx` as it is
/// now (its current pod count is the expected initial list).
pub fn side(side: Side, fx: &Fixture, handlers: Vec<HandlerSpec>) -> SideSpec {
    SideSpec {
        side,
        url: fx.url(),
        handlers,
        queue_capacity: 1024,
        strip_managed_fields: side == Side::Ours,
        peer_fanout: PeerFanout::Separate,
        expect_objects: fx.pods() as u64,
        sync_timeout_secs: 300,
    }
}

/// `n` tracked handlers named `{prefix}{i}`.
pub fn handlers(prefix: &str, n: usize, kind: &HandlerKind) -> Vec<HandlerSpec> {
    (0..n)
        .map(|i| HandlerSpec {
            name: format!("{prefix}{i}"),
            kind: kind.clone(),
            tracked: true,
        })
        .collect()
}

/// Starts a child for `spec`.
pub fn spawn(spec: &SideSpec) -> Result<(ChildProc, ChildReport)> {
    ChildProc::spawn(spec)
}

/// Runs every benchmark; one that fails yields `Failed` rows and the rest go on.
/// `only` (ids such as `B1`) limits the run; empty runs everything.
pub fn run_all(ctx: &Ctx, only: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    type Bench = fn(&Ctx) -> Result<Vec<Row>>;
    let all: [(&'static str, &str, &str, Bench); 8] = [
        (
            "B1",
            "throughput, watch to handler",
            ">= 1.5x",
            b1_throughput::run,
        ),
        (
            "B2",
            "marginal cost per extra plugin",
            "<= 2 us/event/plugin",
            b2_marginal::run,
        ),
        (
            "B3",
            "isolation",
            ">= 95% solo throughput, p99 <= 2x",
            b3_isolation::run,
        ),
        ("B4", "memory per cached pod", "<= 0.5x", b4_memory::run),
        ("B5", "initial sync", "<= 1.0x", b5_initial_sync::run),
        (
            "B6",
            "hot-reload latency",
            "Rust <= 300 ms, JS <= 1.5 s",
            b6_reload::run,
        ),
        (
            "B7",
            "many handlers, total memory",
            "<= 0.1x",
            b7_many_handlers::run,
        ),
        (
            "B8",
            "scale",
            "sync <= 20 s, RSS <= 1.5 GB, no overflow",
            b8_scale::run,
        ),
    ];
    for (id, what, target, f) in all {
        if !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(id)) {
            continue;
        }
        eprintln!("bench: running {id} ({what})");
        let t = std::time::Instant::now();
        match f(ctx) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("bench: {id} failed: {e:#}");
                rows.push(Row::failed(id, what, target, &e));
            }
        }
        eprintln!("bench: {id} took {:.1} s", t.elapsed().as_secs_f64());
    }
    rows
}

/// Events per second from a probe's first and last measured event.
pub fn rate(measured: u64, first_ns: u64, last_ns: u64) -> Option<f64> {
    if measured < 2 || last_ns <= first_ns {
        return None;
    }
    Some((measured - 1) as f64 / ((last_ns - first_ns) as f64 / 1e9))
}

/// `a / b` formatted as a ratio.
pub fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        "-".into()
    } else {
        format!("{:.2}x", a / b)
    }
}
