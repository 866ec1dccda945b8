//! The drain of a held burst, the throughput measurement of B1 and B2: a fresh
//! child syncs, its watch is dropped and the reconnect held while `events`
//! writes are made, then it drains them from the watch history at full speed;
//! the rate is events handled per second, from the first to the last handled
//! event of the busiest handler.
//!
//! Invariant: the side must handle the last written event; an overflowed
//! listener is reported in the notes (a benchmark that wants every event
//! handled sizes the queue to hold the whole burst).

use anyhow::{anyhow, bail, Result};

use super::{rate, spawn};
use crate::fixture::Fixture;
use crate::spec::{Command, SideSpec};

/// One drain: its rate and anything odd.
pub struct Drain {
    /// Events handled per second.
    pub rate: f64,
    /// Notes for the table.
    pub notes: Vec<String>,
}

/// Drains one held burst of `events` into a fresh child for `spec`.
pub fn drain_rate(fx: &Fixture, spec: &SideSpec, events: usize) -> Result<Drain> {
    let (mut child, r0) = spawn(fx, spec)?;
    let mut notes = r0.notes;
    child.cmd(&Command::Arm {
        rv: fx.current_rv(),
        record: false,
    })?;
    let (_, last) = fx.held_burst(events)?;
    let r = child.cmd(&Command::Wait {
        rv: last,
        timeout_ms: 300_000,
    })?;
    child.exit();
    if !r.reached {
        bail!("the side did not handle the last event (rv {last}) within 300 s");
    }
    let first = r
        .probes
        .iter()
        .filter_map(|p| (p.1.first_ns > 0).then_some(p.1.first_ns))
        .min();
    let last_ns = r.probes.iter().map(|p| p.1.last_ns).max().unwrap_or(0);
    let measured: u64 = r.probes.iter().map(|p| p.1.measured).max().unwrap_or(0);
    for l in &r.listeners {
        if l.overflowed > 0 {
            notes.push(format!(
                "listener {} overflowed {} times",
                l.name, l.overflowed
            ));
        }
    }
    let rate = rate(measured, first.unwrap_or(0), last_ns)
        .ok_or_else(|| anyhow!("fewer than two events measured"))?;
    Ok(Drain { rate, notes })
}
