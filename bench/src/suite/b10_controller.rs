//! B10: a no-op controller over 20k Deployments. Ours is the Rust
//! `noop-controller` plugin run as the host runs a controller (a `Primary`
//! trigger on `apps/v1/deployments` feeding the plugin's work queue with
//! client-go's default rate limiter, `workers` instances behind a gate that
//! opens at sync); the peer is kube-runtime's `Controller::new` with a no-op
//! reconcile. Both start reconciling when their cache has synced (ours at the
//! gate, kube-runtime's runner waits for its store to be ready).
//!
//! Figures: reconciles per second while the initial keys drain (first to last
//! reconcile), and the time from creating a fresh Deployment, right after
//! sync, to the end of its reconcile, with how many initial keys were still
//! waiting then.
//!
//! Invariant: every round of every arm reconciles every initial Deployment
//! and the fresh one (the child waits for all of them, or the round fails),
//! and each arm creates its own fresh Deployment.

use anyhow::Result;

use super::compare::{whole, Compare};
use super::{handler, ours, peer, spawn, Bench, Ctx};
use crate::fixture::Fixture;
use crate::rounds::{self, Arm};
use crate::spec::{FreshChange, FreshTiming, HandlerKind, PeerCache, PeerFanout, SideSpec};
use crate::stats::show;
use crate::table::Row;
use crate::wasm;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B10",
    title: "a no-op controller",
    target: "-",
    doc: DOC,
    run,
};

const DOC: &str = "\
Reconciles of a controller that does nothing, over every Deployment of the simulator, in a fresh \
process per arm and round.

- **Ours**: the Rust `noop-controller` plugin (WIT 0.2 `controller` world; every `reconcile` \
returns `done` without reading anything), run as the host runs a controller manifest with \
`for = \"apps/v1/deployments\"`: one shared informer (streaming list, managedFields stripped), a \
`Primary` trigger feeding the plugin's work queue (client-go's default rate limiter, the initial \
list queued behind live changes), and `workers` instances of the component behind a gate that \
opens when the informer has synced. One row with `workers = 1` (the default) and one with 2 \
(one per core here).
- **The peer**: `Controller::new(Api::<Deployment>::all(client), \
watcher::Config::default().streaming_lists())` with the default `controller::Config` \
(unbounded concurrency) and an async no-op reconcile returning `Action::await_change()`: how \
kube-runtime's examples and most operators start a controller. The seeded Deployments carry \
no managedFields, so stripping them (ours) and not (the peer, which has no `.modify()` in \
`Controller::new`) cache the same objects.
- Both hold reconciles until their cache has synced, then drain the initial keys. Right \
after sync the child creates one more Deployment through kube-client and times its reconcile; \
ours reconciles it ahead of the queued initial keys (live changes first), kube-runtime's \
scheduler has no priorities. That row compares the two queue policies, not speed: the peer's \
figure is the time to work through the keys queued before the change, so it grows with the \
number of keys.
- Both reconcilers do nothing, so the reconciles-per-second rows measure framework overhead \
alone (the notes give it per reconcile); a reconciler that does real work narrows the ratio.
- Reconciles per second: every initial key's reconcile counted after it returned, from the \
first to the last; both probes also read the object's resourceVersion (ours from the cache, \
the peer from the object it is handed).";

/// What one arm measured in one round.
struct Measured {
    fresh: FreshTiming,
    /// Initial keys in the queue when the fresh change's reconcile ended.
    waiting: f64,
}

/// Runs B10.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::with_deployments(&ctx.rt, p.b10_deployments)?;
    let controller = |workers: usize| -> Result<HandlerKind> {
        Ok(HandlerKind::WasmController {
            path: wasm::plugin_path("noop-controller")?,
            timeout_ms: 1000,
            workers,
        })
    };
    let on_deployments = |mut s: SideSpec| {
        s.resource = "apps/v1/deployments".into();
        s.peer.cache = PeerCache::TypedDeployment;
        s.peer.fanout = PeerFanout::Controller;
        s
    };
    let untracked = |name: &str, kind: HandlerKind| {
        let mut h = handler(name, kind);
        // The child waits for the reconciles itself, after the fresh change.
        h.tracked = false;
        h
    };
    let arm = |name, it: SideSpec| Arm { name, it };
    let arms = vec![
        arm(
            "ours",
            on_deployments(ours(&fx, vec![untracked("c", controller(1)?)])),
        ),
        arm(
            "peer",
            on_deployments(peer(&fx, vec![untracked("c", HandlerKind::NoopNative)])),
        ),
        arm(
            "ours-w2",
            on_deployments(ours(&fx, vec![untracked("c", controller(2)?)])),
        ),
    ];
    let mut made = 0usize;
    let s = rounds::run("B10", p.rounds, &arms, |a| {
        made += 1;
        let spec = SideSpec {
            fresh: Some(FreshChange {
                namespace: "ns-0".into(),
                name: format!("b10-fresh-{made}"),
            }),
            ..a.it.clone()
        };
        let (c, r) = spawn(&fx, &spec)?;
        c.exit();
        let fresh = r
            .fresh
            .ok_or_else(|| anyhow::anyhow!("the child reported no fresh change"))?;
        // Initial keys not yet reconciled when the fresh one was: the
        // Deployments now (the fresh one included) minus the reconciles
        // done by then (its own included).
        let waiting = (fx.deployments() as f64 - fresh.reconciled_at_fresh as f64).max(0.0);
        Ok(Measured { fresh, waiting })
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    let n = p.b10_deployments;
    let rate = |arm: &str| s.map(arm, |m| m.fresh.drain_per_sec);
    let latency = |arm: &str| s.map(arm, |m| m.fresh.latency_ms);
    let waiting = |arm: &str| show(&s.map(arm, |m| m.waiting), whole);
    let at_create = |arm: &str| show(&s.map(arm, |m| m.fresh.reconciled_at_create as f64), whole);
    let per_reconcile = |arm: &str| {
        show(
            &s.map(arm, |m| 1e6 / m.fresh.drain_per_sec.max(1e-9)),
            |x| format!("{x:.1}"),
        )
    };
    let ms = |x: f64| format!("{x:.1}");
    let rows = vec![
        Compare {
            id: "B10",
            what: format!("reconciles/s over {n} Deployments, no-op Rust controller (workers = 1) vs Controller::new"),
            ours: &rate("ours"),
            peer: &rate("peer"),
            unit: whole,
            target: None,
            note: format!(
                "First to last reconcile of the initial keys (and the fresh one), each counted after it returned. Higher is better. Both reconcilers do nothing, so this is framework overhead alone: {} us per reconcile for ours against {} us for the peer; a reconciler that does real work narrows the ratio.",
                per_reconcile("ours"),
                per_reconcile("peer"),
            ),
        }
        .row(),
        Compare {
            id: "B10",
            what: format!("reconciles/s over {n} Deployments, workers = 2 vs Controller::new"),
            ours: &rate("ours-w2"),
            peer: &rate("peer"),
            unit: whole,
            target: None,
            note: "As above with two instances of the component, each with its own Store (one per core here).".into(),
        }
        .row(),
        Compare {
            id: "B10",
            what: "time to first reconcile of a fresh change while the initial keys are queued (ms)".into(),
            ours: &latency("ours"),
            peer: &latency("peer"),
            unit: ms,
            target: None,
            note: format!(
                "From the create's answer to the end of the new Deployment's reconcile, created right after sync. Lower is better. This compares queue policies, not speed: ours queues live changes ahead of the initial keys, kube-runtime's scheduler has no priorities, so the peer's figure is the time to work through the keys queued before the change and grows with their number ({n} here). Reconciles already done when the create was answered: ours {}, peer {}; initial keys still waiting when the fresh one was reconciled: ours {}, peer {} (of {n}).",
                at_create("ours"),
                at_create("peer"),
                waiting("ours"),
                waiting("peer"),
            ),
        }
        .row(),
    ];
    Ok(rows)
}
