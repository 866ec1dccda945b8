//! The benchmarks and what they share: the run context, the registry of
//! benchmarks, the specs of each side's default (fair) configuration, and
//! spawning a side with its configuration checked.
//!
//! Invariant: every side of every benchmark starts through [`spawn`], which
//! checks the side's observed configuration against its spec
//! (`verify.rs`); every comparison runs its arms in alternating order
//! (`rounds.rs`), each in a fresh child process, against one simulator.
//!
//! # Adding a benchmark
//!
//! 1. A file `suite/bN_name.rs` with a module doc saying what it measures and
//!    how each side is configured and why, a `DOC` string saying the same for
//!    the report, a `run(&Ctx) -> Result<Vec<Row>>`, and a
//!    `pub const BENCH: Bench`.
//! 2. Its sizes in `plan.rs` (quick and full), one `BENCH` line in [`ALL`], and
//!    its id in `tests/quick.rs`.
//! 3. If a side needs something new (a resource, a handler kind, a peer
//!    wiring, an event encoding), a field or variant in `spec.rs` read by
//!    `ours.rs` or `peer.rs`, and its check in `verify.rs`.
//!
//! The event encoding is the plugin's: B2's WIT 0.1 arms load the same
//! no-op plugin built against 0.1 (`noop-v01`). B9's writer gets its grant
//! from `OursConfig::writes` (and a hanging API server from
//! `OursConfig::writes_hang`).
//!
//! B13 runs the real `wasm-informer` binary, several replicas in one ring,
//! each a process of its own (`b13_sharded::host_binary`: beside the bench's
//! own binary, or `WASM_INFORMER_BIN`).
//!
//! B12 records the informer as `run --record` does (`OursConfig::record`;
//! the child finishes the file and writes its summary at exit).
//!
//! B10 runs controllers: `HandlerKind::WasmController` on our side (run as
//! the host runs a controller plugin), `PeerFanout::Controller` on the
//! peer's (`Controller::new`), over `apps/v1/deployments` with
//! `PeerCache::TypedDeployment`, and `SideSpec::fresh` for the change the
//! child makes while the initial keys are still queued.
//!
//! The pieces a benchmark composes: [`ours`] and [`peer`] (a side's fair
//! defaults), [`spawn`] (a checked child), `rounds::run` (ABBA rounds over
//! named arms), `stats::Spread` and `target::Target` (median, min–max and the
//! verdict), `burst::drain_rate` (a held burst's drain rate) and the
//! fixture's `paced` churn.

pub mod b1_throughput;
pub mod b2_marginal;
pub mod b3_isolation;
pub mod b4_memory;
pub mod b5_initial_sync;
pub mod b6_reload;
pub mod b7_many_handlers;
pub mod b8_scale;
pub mod b9_writes;
pub mod b10_controller;
pub mod b11_instances;
pub mod b12_recording;
pub mod b13_sharded;
pub mod burst;
pub mod compare;

use anyhow::Result;

use crate::driver::ChildProc;
use crate::fixture::Fixture;
use crate::plan::Plan;
use crate::spec::{
    ChildReport, HandlerKind, HandlerSpec, InitialList, ManagedFields, OursApi, OursConfig,
    PeerAttach, PeerCache, PeerConfig, PeerFanout, Side, SideSpec,
};
use crate::table::Row;
use crate::wasm;

/// What every benchmark gets.
pub struct Ctx {
    /// Runtime the simulator is served from.
    pub rt: tokio::runtime::Runtime,
    /// Sizes.
    pub plan: Plan,
}

/// One benchmark: its id, what it measures, its target, how each side is
/// configured (for the report), and how to run it.
pub struct Bench {
    /// `B1`, `B2`, ...
    pub id: &'static str,
    /// What it measures, in a few words.
    pub title: &'static str,
    /// The target, as the table shows it.
    pub target: &'static str,
    /// How each side is configured and why (Markdown, for the report).
    pub doc: &'static str,
    /// Runs it.
    pub run: fn(&Ctx) -> Result<Vec<Row>>,
}

/// Every benchmark, in report order.
pub const ALL: &[Bench] = &[
    b1_throughput::BENCH,
    b2_marginal::BENCH,
    b3_isolation::BENCH,
    b4_memory::BENCH,
    b5_initial_sync::BENCH,
    b6_reload::BENCH,
    b7_many_handlers::BENCH,
    b8_scale::BENCH,
    b9_writes::BENCH,
    b10_controller::BENCH,
    b11_instances::BENCH,
    b12_recording::BENCH,
    b13_sharded::BENCH,
];

/// The Rust plugin `name` as a handler (deadline 1 s, empty config).
pub fn rust_plugin(name: &str) -> Result<HandlerKind> {
    Ok(HandlerKind::Wasm {
        path: wasm::plugin_path(name)?,
        config: "{}".into(),
        timeout_ms: 1000,
    })
}

/// The JavaScript plugin `name` (under `plugins/testing/`) as a handler.
pub fn js_plugin(name: &str) -> Result<HandlerKind> {
    Ok(HandlerKind::Wasm {
        path: wasm::built_plugin(name)?,
        config: "{}".into(),
        timeout_ms: 1000,
    })
}

/// A tracked handler named `name`.
pub fn handler(name: &str, kind: HandlerKind) -> HandlerSpec {
    HandlerSpec {
        name: name.to_string(),
        kind,
        tracked: true,
        settle: false,
        peer_attach: PeerAttach::Subscriber,
        shadow_of: None,
    }
}

/// `n` tracked handlers named `{prefix}{i}`.
pub fn handlers(prefix: &str, n: usize, kind: &HandlerKind) -> Vec<HandlerSpec> {
    (0..n)
        .map(|i| handler(&format!("{prefix}{i}"), kind.clone()))
        .collect()
}

fn base(side: Side, fx: &Fixture, handlers: Vec<HandlerSpec>) -> SideSpec {
    SideSpec {
        side,
        url: fx.url(),
        resource: "v1/pods".into(),
        handlers,
        managed_fields: ManagedFields::Strip,
        initial_list: InitialList::Streaming,
        ours: OursConfig {
            api: OursApi::Registry,
            queue_capacity: 1024,
            writes: false,
            writes_hang: false,
            record: None,
        },
        peer: PeerConfig {
            cache: PeerCache::TypedPod,
            fanout: PeerFanout::Separate,
        },
        expect_objects: fx.pods() as u64,
        sync_timeout_secs: 300,
        fresh: None,
    }
}

/// Our side as shipped: managedFields stripped, streaming list, through the
/// registry (as the host runs plugins), queue 1024; against `fx` as it is now.
pub fn ours(fx: &Fixture, handlers: Vec<HandlerSpec>) -> SideSpec {
    base(Side::Ours, fx, handlers)
}

/// kube-runtime as its best users run it when they do not read
/// managedFields: stripped with `.modify()`, streaming list, typed `Pod`, one
/// reflector per handler (change `peer.fanout` to share one).
pub fn peer(fx: &Fixture, handlers: Vec<HandlerSpec>) -> SideSpec {
    base(Side::Peer, fx, handlers)
}

/// The simulator's ceiling (a raw watch).
pub fn raw(fx: &Fixture) -> SideSpec {
    base(Side::Raw, fx, vec![handler("raw", HandlerKind::NoopNative)])
}

/// Starts a child for `spec` against `fx` and checks, from the requests the
/// simulator saw and the child's report, that it runs as `spec` says. The
/// initial list it must sync is the fixture's objects of the spec's resource
/// now (earlier arms' churn changed the count since the spec was written).
pub fn spawn(fx: &Fixture, spec: &SideSpec) -> Result<(ChildProc, ChildReport)> {
    let objects = match spec.resource.as_str() {
        "apps/v1/deployments" => fx.deployments(),
        _ => fx.pods(),
    };
    let spec = &SideSpec {
        expect_objects: objects as u64,
        ..spec.clone()
    };
    let mark = fx.request_mark();
    let (child, r) = ChildProc::spawn(spec)?;
    let checked = crate::verify::side(
        spec,
        &fx.requests_since(mark),
        &r.facts.clone().unwrap_or_default(),
    );
    if let Err(e) = checked {
        child.exit();
        return Err(e.context("the side does not run the configuration its spec claims"));
    }
    Ok((child, r))
}

/// Runs every benchmark; one that fails yields a `Failed` row and the rest go
/// on. `only` (ids such as `B1`) limits the run; empty runs everything.
pub fn run_all(ctx: &Ctx, only: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for b in ALL {
        if !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(b.id)) {
            continue;
        }
        eprintln!("bench: running {} ({})", b.id, b.title);
        let t = std::time::Instant::now();
        match (b.run)(ctx) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("bench: {} failed: {e:#}", b.id);
                rows.push(Row::failed(b.id, b.title, b.target, &e));
            }
        }
        eprintln!("bench: {} took {:.1} s", b.id, t.elapsed().as_secs_f64());
    }
    rows
}

/// The "how each side is configured" section of the report.
pub fn methodology(only: &[String]) -> String {
    let mut s = String::new();
    for b in ALL {
        if !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(b.id)) {
            continue;
        }
        s.push_str(&format!(
            "### {} {} (target {})\n\n{}\n\n",
            b.id,
            b.title,
            b.target,
            b.doc.trim()
        ));
    }
    s
}

/// Events per second from a probe's first and last measured event.
pub fn rate(measured: u64, first_ns: u64, last_ns: u64) -> Option<f64> {
    if measured < 2 || last_ns <= first_ns {
        return None;
    }
    Some((measured - 1) as f64 / ((last_ns - first_ns) as f64 / 1e9))
}
