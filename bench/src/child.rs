//! The child process that hosts one measured side, so that every measurement
//! starts from a fresh heap and its RSS holds nothing but that side.
//!
//! Invariant: the child prints exactly one JSON [`ChildReport`] line after sync
//! (with the side's observed configuration, read after its memory) and one per
//! command; it exits on `Exit` or when stdin closes.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use k8s_openapi::api::apps::v1::Deployment;

use crate::probe::{now_ns, HandlerProbe};
use crate::spec::{ChildReport, Command, FreshChange, FreshTiming, Side, SideFacts, SideSpec};
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
    let (cached, listeners, api) = match run {
        Running::Ours(s) => (s.cached_objects(), s.listener_counters(), s.api_timings()),
        Running::Peer(s) => (s.cached_objects(), Vec::new(), Vec::new()),
        Running::Raw(_) => (0, Vec::new(), Vec::new()),
    };
    ChildReport {
        sync_ms: 0.0,
        reached,
        rss_bytes: mem::rss_bytes().unwrap_or(0),
        rss_base_bytes: base.0,
        rss_peak_bytes: mem::peak_rss_bytes().unwrap_or(0),
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
        api,
        fresh: None,
        packing: None,
    }
}

/// Reconciles the side has finished, over every handler.
fn reconciled(run: &Running) -> u64 {
    run.probes().iter().map(|p| p.total()).sum()
}

/// Creates the fresh Deployment `f` through `client` right after sync, then
/// waits until it and every initial object were reconciled.
async fn fresh_change(
    run: &Running,
    spec: &SideSpec,
    f: &FreshChange,
    client: kube::Client,
) -> Result<FreshTiming> {
    for p in run.probes() {
        p.probe.watch_for(&f.name);
    }
    let body: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f.name, "namespace": f.namespace, "labels": {"app": "fresh"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "fresh"}},
            "template": {
                "metadata": {"labels": {"app": "fresh"}},
                "spec": {"containers": [{"name": "main", "image": "registry.example/fresh:1"}]},
            },
        },
    }))?;
    kube::Api::<Deployment>::namespaced(client, &f.namespace)
        .create(&kube::api::PostParams::default(), &body)
        .await
        .with_context(|| format!("creating the fresh Deployment {}/{}", f.namespace, f.name))?;
    let created_ns = now_ns();
    let reconciled_at_create = reconciled(run);
    let timeout = Duration::from_secs(spec.sync_timeout_secs);
    let all = spec.expect_objects + 1;
    let done = until(timeout, || {
        reconciled(run) >= all && run.probes().iter().any(|p| p.probe.fresh_seen().is_some())
    })
    .await;
    anyhow::ensure!(
        done,
        "after {timeout:?}: {} of {all} reconciles, fresh change reconciled: {}",
        reconciled(run),
        run.probes().iter().any(|p| p.probe.fresh_seen().is_some())
    );
    let (seen_ns, reconciled_at_fresh) = run
        .probes()
        .iter()
        .find_map(|p| p.probe.fresh_seen())
        .context("the fresh change was reconciled but no probe kept it")?;
    let drain = run
        .probes()
        .iter()
        .filter_map(|p| {
            let r = p.probe.report();
            crate::suite::rate(r.measured, r.first_ns, r.last_ns)
        })
        .sum();
    Ok(FreshTiming {
        latency_ms: seen_ns.saturating_sub(created_ns) as f64 / 1e6,
        reconciled_at_create,
        reconciled_at_fresh,
        drain_per_sec: drain,
    })
}

/// Runs the child: `spec_json` is a [`SideSpec`].
pub fn main(spec_json: &str) -> Result<()> {
    let spec: SideSpec = serde_json::from_str(spec_json).context("child: bad side spec")?;
    // The host's memory policy (no transparent huge pages), on both sides.
    mem::apply_huge_page_policy()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = client(&spec.url)?;
        let writer = client.clone();
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
        let (synced_at, heap_at_sync) = (Instant::now(), alloc::live_bytes());
        let facts = run.facts();
        let fresh = match &spec.fresh {
            Some(f) => Some(fresh_change(&run, &spec, f, writer).await?),
            None => None,
        };
        // Our cache is packed in the background once synced: memory is read
        // after that, and the heap at sync is kept beside it.
        let packing = match &run {
            Running::Ours(s) => {
                let mut p = s.wait_packed(synced_at, Duration::from_secs(120)).await;
                p.heap_at_sync_bytes = heap_at_sync;
                Some(p)
            }
            _ => None,
        };
        // Let transient list buffers be freed before memory is read.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut r = report(&run, base, true, notes);
        r.packing = packing;
        r.sync_ms = sync_ms;
        r.facts = Some(facts);
        r.fresh = fresh;
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
        if let Running::Ours(s) = &mut run {
            s.finish_recording().await?;
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
