//! The child process that hosts one measured side, so that every measurement
//! starts from a fresh heap and its RSS holds nothing but that side.
//!
//! Invariant: the child prints exactly one JSON [`ChildReport`] line after sync
//! (with the side's observed configuration, read after its memory) and one per
//! command; it exits on `Exit` or when stdin closes.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::probe::HandlerProbe;
use crate::spec::{ChildReport, Command, Side, SideFacts, SideSpec};
use crate::{alloc, mem, ours, peer, raw};

enum Running {
    Ours(ours::OursSide),
    Peer(peer::PeerSide),
    Raw(raw::RawSide),
}

impl Running {
    fn probes(&self) -> &[HandlerProbe] {
        match self {
            Running::Ours(s) => &s.probes,
            Running::Peer(s) => &s.probes,
            Running::Raw(s) => &s.probes,
        }
    }

    fn facts(&self) -> SideFacts {
        match self {
            Running::Ours(s) => s.facts(),
            Running::Peer(s) => s.facts(),
            Running::Raw(_) => SideFacts::default(),
        }
    }
}

/// Polls `done` every millisecond until it holds or `timeout` passes.
async fn until(timeout: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Builds a kube client for the simulator at `url`.
pub fn client(url: &str) -> Result<kube::Client> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("bad simulator url {url}"))?;
    let config = kube::Config::new(uri);
    kube::Client::try_from(config).context("building the kube client")
}

fn emit(r: &ChildReport) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, r)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

fn report(run: &Running, base: (u64, i64), reached: bool, notes: Vec<String>) -> ChildReport {
    mem::trim();
    let (cached, listeners) = match run {
        Running::Ours(s) => (s.cached_objects(), s.listener_counters()),
        Running::Peer(s) => (s.cached_objects(), Vec::new()),
        Running::Raw(_) => (0, Vec::new()),
    };
    ChildReport {
        sync_ms: 0.0,
        reached,
        rss_bytes: mem::rss_bytes().unwrap_or(0),
        rss_base_bytes: base.0,
        heap_bytes: alloc::live_bytes(),
        heap_base_bytes: base.1,
        cached_objects: cached,
        probes: run
            .probes()
            .iter()
            .map(|p| (p.name.clone(), p.probe.report()))
            .collect(),
        listeners,
        facts: None,
        notes,
        reload: None,
    }
}

/// Runs the child: `spec_json` is a [`SideSpec`].
pub fn main(spec_json: &str) -> Result<()> {
    let spec: SideSpec = serde_json::from_str(spec_json).context("child: bad side spec")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = client(&spec.url)?;
        mem::trim();
        let base = (mem::rss_bytes()?, alloc::live_bytes());
        let t0 = Instant::now();
        let (mut run, notes) = match spec.side {
            Side::Ours => {
                let (s, n) = ours::OursSide::start(&spec, client).await?;
                (Running::Ours(s), n)
            }
            Side::Peer => {
                let (s, n) = peer::PeerSide::start(&spec, client).await?;
                (Running::Peer(s), n)
            }
            Side::Raw => {
                let (s, n) = raw::RawSide::start(&spec, client).await?;
                (Running::Raw(s), n)
            }
        };
        let sync_ms = t0.elapsed().as_secs_f64() * 1000.0;
        // Let transient list buffers be freed before memory is read.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut r = report(&run, base, true, notes);
        r.sync_ms = sync_ms;
        r.facts = Some(run.facts());
        emit(&r)?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = rx.recv().await {
            let cmd: Command = serde_json::from_str(&line)
                .with_context(|| format!("child: bad command line {line:?}"))?;
            match cmd {
                Command::Settle { timeout_ms } => {
                    let reached = until(Duration::from_millis(timeout_ms), || {
                        run.probes()
                            .iter()
                            .filter(|p| p.settle)
                            .all(|p| p.total() >= spec.expect_objects)
                    })
                    .await;
                    emit(&report(&run, base, reached, Vec::new()))?;
                }
                Command::Arm { rv, record } => {
                    for p in run.probes() {
                        p.probe.arm(rv, record);
                    }
                    emit(&report(&run, base, true, Vec::new()))?;
                }
                Command::Wait { rv, timeout_ms } => {
                    let reached = until(Duration::from_millis(timeout_ms), || {
                        run.probes().iter().filter(|p| p.tracked).all(|p| {
                            p.probe.max_rv.load(std::sync::atomic::Ordering::Acquire) >= rv
                        })
                    })
                    .await;
                    emit(&report(&run, base, reached, Vec::new()))?;
                }
                Command::Report => emit(&report(&run, base, true, Vec::new()))?,
                Command::Reload {
                    path,
                    config,
                    timeout_ms,
                } => {
                    let Running::Ours(s) = &mut run else {
                        anyhow::bail!("child: Reload is only for the wasm-informer side");
                    };
                    let timing = s.reload(&path, &config, timeout_ms).await?;
                    let mut r = report(&run, base, true, Vec::new());
                    r.reload = Some(timing);
                    emit(&r)?;
                }
                Command::Exit => break,
            }
        }
        match run {
            Running::Ours(s) => s.stop(),
            Running::Peer(s) => s.stop(),
            Running::Raw(s) => s.stop(),
        }
        Ok::<_, anyhow::Error>(())
    })?;
    // Plugin threads may still be winding down; the measurement is over.
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}
