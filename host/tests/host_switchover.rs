//! I6 at hot-reload switch-over, in process and under churn: every write the
//! test makes to the simulator is numbered by its resourceVersion, and each
//! version of a plugin (the `echo` plugin in log mode, tagged per version)
//! logs every event it receives. For several reloads in a row:
//!
//! - each version's replay is exactly the server's state just before its
//!   first live event, and its live events are exactly the writes after that,
//!   in order, each once (no gap, no duplicate), up to where it was stopped;
//! - so every write after the old version's last event reaches the new
//!   version exactly once: folded into its replay (when the old version was
//!   drained before handling it) or as a live event; and the last version
//!   receives every write up to the last.
//!
//! The oracle is the list of writes (the model of what was sent) and the
//! plugin's own log, never the host's counters.

use crate::inproc_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use apisim::SimConfig;
use inproc_support::*;
use parking_lot::Mutex;

const VERSIONS: usize = 5;

/// Where a version's stream sits in the writes: its replay is the state after
/// `writes[..start]`, and its live events are `writes[start..end]`.
#[derive(Debug)]
struct Coverage {
    start: usize,
    end: usize,
}

/// Checks one version's stream against the writes; returns its coverage.
fn check_version(
    tag: &str,
    got: &[Received],
    base: &BTreeMap<String, u64>,
    writes: &[Write],
) -> Coverage {
    let replay_len = got.iter().take_while(|e| e.initial).count();
    let (replay, live) = got.split_at(replay_len);
    assert!(
        replay.iter().all(|e| e.kind == "added"),
        "{tag}: replay holds only adds"
    );
    assert!(
        live.iter().all(|e| !e.initial),
        "{tag}: a replayed add after a live event"
    );
    let replayed = view_of(replay);
    assert_eq!(replayed.len(), replay.len(), "{tag}: a key replayed twice");
    // The replay is the state after some prefix of the writes: the one just
    // before the first live event (or, with no live event, any prefix).
    let start = match live.first() {
        Some(first) => writes
            .iter()
            .position(|w| {
                w.key == first.key
                    && w.kind == first.kind
                    && (w.kind == "deleted" || w.rv == first.rv)
            })
            .unwrap_or_else(|| panic!("{tag}: first live event {first:?} is not a write")),
        None => (0..=writes.len())
            .rev()
            .find(|&i| apply(base, &writes[..i]) == replayed)
            .unwrap_or_else(|| panic!("{tag}: the replay is no state the server was in")),
    };
    assert_eq!(
        replayed,
        apply(base, &writes[..start]),
        "{tag}: the replay is not the server's state just before its first live event (write {start})"
    );
    // Live events are exactly the writes that follow, in order, each once.
    let end = start + live.len();
    assert!(
        end <= writes.len(),
        "{tag}: more live events than writes after its replay"
    );
    for (i, (e, w)) in live.iter().zip(&writes[start..end]).enumerate() {
        assert!(
            e.kind == w.kind && e.key == w.key && (e.kind == "deleted" || e.rv == w.rv),
            "{tag}: live event {i} is {e:?}, the write was {w:?} (a gap or a duplicate)"
        );
    }
    Coverage { start, end }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i6_every_write_reaches_each_new_version_exactly_once_across_reloads() {
    plugin_log();
    let (sim, mut wl) = sim_with_pods(60, 61, SimConfig::default()).await;
    let base = server_pods(&sim);
    let tmp = tempfile::tempdir().unwrap();
    let host = host_on(tmp.path(), &sim, "").await;
    let manifest = tmp.path().join("plugins/echo.toml");
    std::fs::write(&manifest, echo_manifest("echo", "v1")).unwrap();
    host.reconcile().await;
    eventually("v1 replayed", 120, || {
        received("echo", "v1").len() >= base.len()
    })
    .await;

    // Churn: one writer, every write recorded with its resourceVersion.
    let sim = Arc::new(sim);
    let writes: Arc<Mutex<Vec<Write>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (sim, writes, stop) = (sim.clone(), writes.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                if let Some(w) = step(&sim, &mut wl) {
                    writes.lock().push(w);
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        })
    };
    // Reloads under churn, each a new version tagged v2, v3, ...
    for v in 2..=VERSIONS {
        tokio::time::sleep(Duration::from_millis(700)).await;
        std::fs::write(&manifest, echo_manifest("echo", &format!("v{v}"))).unwrap();
        let events = host.reconcile().await;
        assert!(
            events.iter().any(|e| e.action == "changed"),
            "reload {v}: {events:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::SeqCst);
    churn.await.unwrap();
    let writes = writes.lock().clone();
    assert!(writes.len() > 100, "only {} writes", writes.len());
    // Positive signal: the last version has received the last write.
    let last = writes.last().unwrap().clone();
    eventually("the last version got the last write", 60, || {
        received("echo", &format!("v{VERSIONS}"))
            .iter()
            .any(|e| e.key == last.key && (e.kind == "deleted" || e.rv == last.rv))
    })
    .await;

    let mut coverage = Vec::new();
    for v in 1..=VERSIONS {
        let tag = format!("v{v}");
        coverage.push(check_version(&tag, &received("echo", &tag), &base, &writes));
    }
    for v in 1..VERSIONS {
        let (old, new) = (&coverage[v - 1], &coverage[v]);
        // Writes old.end.. reach the new version: those before new.start in its
        // replay (check_version proved it is the state after them), the rest
        // live. Snapshots only move forward.
        assert!(
            new.start >= old.start,
            "v{}: its replay predates v{v}'s",
            v + 1
        );
    }
    let last = &coverage[VERSIONS - 1];
    assert_eq!(last.end, writes.len(), "the last version saw every write");
    eprintln!(
        "switch-over: {} writes, {VERSIONS} versions; coverage (replay after write, last live write): {:?}",
        writes.len(),
        coverage.iter().map(|c| (c.start, c.end)).collect::<Vec<_>>()
    );
    host.shutdown().await;
}
