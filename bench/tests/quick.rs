//! Smoke test: the quick mode runs to completion and produces every row of
//! every benchmark, each measured (the numbers themselves are not asserted),
//! with the provenance header and the configuration section.

use std::process::Command;

/// Rows that must be present: (benchmark, a phrase of the row's label).
const ROWS: &[(&str, &str)] = &[
    ("B1", "Rust no-op plugin vs typed Pod store"),
    ("B1", "Rust no-op plugin vs raw store"),
    ("B1", "Rust plugin decoding each Pod"),
    ("B1", "JavaScript plugin parsing each object"),
    (
        "B1",
        "native no-op Handler (SharedInformer::builder + add_handler)",
    ),
    ("B1", "reference: both sides keep managedFields"),
    ("B1", "simulator ceiling"),
    ("B2", "1 plugin"),
    ("B2", "16 plugins"),
    ("B2", "WIT 0.1 event encoding"),
    ("B2", "plugins reading 5 fields of each object"),
    ("B3", "fast handler alone"),
    ("B3", "Controller::for_shared_stream reconciler"),
    ("B3", "raw subscriber"),
    ("B4", "peer caches typed Pod"),
    ("B4", "peer caches metadata + RawValue"),
    ("B4", "reference: both keep managedFields"),
    (
        "B5",
        "both streaming, managedFields stripped, peer typed Pod",
    ),
    ("B5", "peer metadata + RawValue"),
    ("B5", "reference: both streaming, managedFields kept"),
    ("B5", "both paged"),
    ("B6", "hot reload, Rust"),
    ("B7", "shared reflector, 10 subscribers"),
    ("B7", "Controller::for_shared_stream"),
    ("B7", "extra: peer with 10 separate reflectors"),
    ("B7", "reference: both keep managedFields"),
    ("B8", "plugins: sync, then"),
    ("B8", "plugins against the raw peer with"),
    ("B9", "patches/s, rate limit off"),
    ("B9", "request time at the plugin"),
    ("B9", "time between two patches at the server"),
    (
        "B9",
        "the live writer's patches/s beside a shadow of itself",
    ),
    (
        "B9",
        "the live writer's request time p50 / p99 beside the shadow",
    ),
    ("B9", "beside a plugin blocked on a hanging API server"),
    ("B9", "reference: the same neighbour alone"),
    (
        "B10",
        "no-op Rust controller (workers = 1) vs Controller::new",
    ),
    ("B10", "workers = 2 vs Controller::new"),
    ("B10", "time to first reconcile of a fresh change"),
    ("B11", "Rust no-op plugin, on-demand allocator"),
    ("B11", "Rust no-op plugin, pooling allocator"),
    (
        "B12",
        "the Rust no-op plugin's drain rate with the informer recorded",
    ),
    ("B12", "compressed bytes per 10k entries"),
    ("B13", "RSS per replica, 4 replicas vs 1"),
    ("B13", "bytes received per replica"),
    ("B13", "CPU per churn event per replica"),
    ("B13", "a fourth replica joins three"),
    ("B13", "server ignores shardSelector"),
];

#[test]
fn quick_mode_produces_every_row() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("quick")
        .output()
        .expect("running bench quick");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench quick failed: {}\n{stderr}",
        out.status
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| B")).collect();
    for (id, phrase) in ROWS {
        let prefix = format!("| {id} |");
        assert!(
            rows.iter()
                .any(|l| l.starts_with(&prefix) && l.contains(phrase)),
            "no {id} row with {phrase:?}:\n{stdout}"
        );
    }
    for row in &rows {
        let id = &row[2..4];
        assert!(
            !row.contains("**failed**"),
            "{id} was not measured: {row}\nnotes:\n{}",
            stdout
                .lines()
                .filter(|l| l.starts_with(&format!("- **{id} ")))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    for header in [
        "- commit: ",
        "- machine: ",
        "- toolchain: rustc ",
        "- load average",
        "- command: ",
        "## How each benchmark is configured",
    ] {
        assert!(stdout.contains(header), "{header:?} missing:\n{stdout}");
    }
}
