//! The Markdown document: machine, date, command line, the table and its notes.
//!
//! Invariant: everything in the header is read from the running system, not
//! assumed.

use std::time::Duration;

use anyhow::Result;

use crate::plan::Mode;
use crate::table::{markdown, notes, Row};

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn mem_total() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .map(|l| l.trim_start_matches("MemTotal:").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The 1-, 5- and 15-minute load averages (other work on the machine skews
/// every number in the table).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Renders the report; `load_before` is [`loadavg`] when the run started.
pub fn document(mode: Mode, rows: &[Row], took: Duration, load_before: &str) -> Result<String> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let cmd: Vec<String> = std::env::args().collect();
    let profile = if cfg!(debug_assertions) {
        "dev (dependencies optimised, workspace crates not)"
    } else {
        "release"
    };
    Ok(format!(
        "# Benchmarks: wasm-informer vs kube-runtime 5.0\n\n\
         - mode: {mode:?}, build profile: {profile}\n\
         - date: {}\n\
         - machine: {} ({cores} cores), {} RAM, Linux {}\n\
         - command: `{}`\n\
         - commit: {}\n\
         - run time: {:.0} s; load average before {load_before}, after {}\n\n\
         Both sides run against one apisim instance (HTTP on 127.0.0.1) holding the same seeded pods \
         (about 3 KB of JSON each, with managedFields). Every side runs in a fresh child process; \
         comparisons alternate the sides (A B A B) and report medians. Both sides run on mimalloc, \
         the global allocator the wasm-informer binary ships with.\n\n\
         {}\n## Notes\n\n{}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        cpu_model(),
        mem_total(),
        kernel(),
        cmd.join(" "),
        commit(),
        took.as_secs_f64(),
        loadavg(),
        markdown(rows),
        notes(rows)
    ))
}
