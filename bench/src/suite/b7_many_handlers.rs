//! B7: many handlers. 50 plugins in one host (one shared cache) against 50
//! separate kube-runtime reflectors (each with its own watch and Store<Pod>) on
//! the same 10k pods: total memory added by each side.
//!
//! Invariant: one fresh process per side; every handler has synced.

use anyhow::Result;

use super::{handlers, side, spawn, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::plan::Mode;
use crate::spec::{HandlerKind, Side};
use crate::table::{bytes, Row, Verdict};

/// Runs B7.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b7_pods, Mix::Default)?;
    let (fast, desc) = ctx.fast_handler();
    let n = p.b7_handlers;
    let (c, ours) = spawn(&side(Side::Ours, &fx, handlers("p", n, &fast)))?;
    c.exit();
    // kube-runtime with managedFields kept holds ~30 KB of RSS per pod per
    // reflector: 50 x 10k pods would take ~16 GB on a shared 23 GB machine.
    // That variant is measured with at most 10 reflectors and scaled linearly
    // (each reflector has its own watch and Store); the stripped variant below
    // is measured with all of them.
    let n_keep = if p.mode == Mode::Full { n.min(10) } else { n };
    let (c, peer) = spawn(&side(
        Side::Peer,
        &fx,
        handlers("r", n_keep, &HandlerKind::NoopNative),
    ))?;
    c.exit();
    let mut ps = side(Side::Peer, &fx, handlers("r", n, &HandlerKind::NoopNative));
    ps.strip_managed_fields = true;
    let (c, peer_strip) = spawn(&ps)?;
    c.exit();
    fx.shutdown(&ctx.rt);
    let d = |r: &crate::spec::ChildReport| {
        (
            (r.heap_bytes - r.heap_base_bytes) as f64,
            r.rss_bytes as f64 - r.rss_base_bytes as f64,
        )
    };
    let (oh, or) = d(&ours);
    let scale = n as f64 / n_keep as f64;
    let (ph, pr) = d(&peer);
    let (ph, pr) = (ph * scale, pr * scale);
    let (sh, sr) = d(&peer_strip);
    Ok(vec![
        Row {
            id: "B7",
            what: format!("{n} handlers over {} pods: total memory (RSS / heap)", p.b7_pods),
            ours: format!("{} / {}", bytes(or), bytes(oh)),
            peer: format!("{} / {}", bytes(pr), bytes(ph)),
            ratio: format!("{} RSS, {} heap", super::ratio(or, pr), super::ratio(oh, ph)),
            target: "<= 0.1x".into(),
            verdict: Verdict::of(pr > 0.0 && or / pr <= 0.1),
            note: format!(
                "ours: {n} x {desc}, one informer, managedFields stripped (default); peer: watcher+reflector+Store<Pod> each, defaults{}. Verdict on RSS. Cached objects ours {}, peer {}",
                if n_keep < n {
                    format!(", measured with {n_keep} reflectors and scaled x{scale:.0} (memory guard)")
                } else {
                    String::new()
                },
                ours.cached_objects,
                peer.cached_objects
            ),
        },
        Row {
            id: "B7",
            what: format!("{n} handlers, peer also stripping managedFields (RSS / heap)"),
            ours: format!("{} / {}", bytes(or), bytes(oh)),
            peer: format!("{} / {}", bytes(sr), bytes(sh)),
            ratio: format!("{} RSS, {} heap", super::ratio(or, sr), super::ratio(oh, sh)),
            target: "<= 0.1x".into(),
            verdict: Verdict::of(sr > 0.0 && or / sr <= 0.1),
            note: "peer strips with WatchStreamExt::modify before caching".into(),
        },
    ])
}
