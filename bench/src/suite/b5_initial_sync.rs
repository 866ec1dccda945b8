//! B5: initial sync of 50k pods: from start until the cache holds every pod and
//! the handler has handled every initial object.
//!
//! Invariant: each side in its default configuration, fresh process per round.

use anyhow::Result;

use super::{handlers, ratio, side, spawn, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::spec::{HandlerKind, Side};
use crate::stats::median;
use crate::table::{Row, Verdict};

/// Runs B5.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b5_pods, Mix::Default)?;
    let (fast, desc) = ctx.fast_handler();
    let (mut ours, mut peer) = (Vec::new(), Vec::new());
    for _ in 0..p.rounds {
        let (c, r) = spawn(&side(Side::Ours, &fx, handlers("h", 1, &fast)))?;
        c.exit();
        ours.push(r.sync_ms);
        let (c, r) = spawn(&side(
            Side::Peer,
            &fx,
            handlers("h", 1, &HandlerKind::NoopNative),
        ))?;
        c.exit();
        peer.push(r.sync_ms);
    }
    fx.shutdown(&ctx.rt);
    let (o, k) = (median(&ours).unwrap_or(0.0), median(&peer).unwrap_or(0.0));
    Ok(vec![Row {
        id: "B5",
        what: format!("initial sync of {} pods (ms, median)", p.b5_pods),
        ours: format!("{o:.0} ms"),
        peer: format!("{k:.0} ms"),
        ratio: ratio(o, k),
        target: "<= 1.0x".into(),
        verdict: Verdict::of(k > 0.0 && o / k <= 1.0),
        note: format!(
            "until cache full and handler saw every object; ours: {desc}, default reflector (streaming list when offered, else pages of 500); peer: watcher::Config::default (pages of 500). Rounds ours {:?}, peer {:?}",
            ours.iter().map(|x| x.round()).collect::<Vec<_>>(),
            peer.iter().map(|x| x.round()).collect::<Vec<_>>()
        ),
    }])
}
