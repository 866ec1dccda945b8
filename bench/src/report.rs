//! The Markdown document: provenance (commit and tree state, machine, load,
//! toolchain, command), how to read the figures, the table, how each
//! benchmark's sides are configured, and the notes.
//!
//! Invariant: everything in the header is read from the running system or the
//! build (`provenance.rs`), not assumed; a run that is not publishable (quick
//! mode, fewer rounds than the full plan's minimum, a dirty tree) says so at
//! the top.

use std::time::Duration;

use crate::plan::{Mode, MIN_FULL_ROUNDS};
use crate::provenance::{self, Tree};
use crate::table::{markdown, notes, Row};

/// What the header needs from the run.
pub struct Run<'a> {
    pub mode: Mode,
    pub rounds: usize,
    pub tree: &'a Tree,
    pub took: Duration,
    pub load_before: &'a str,
    /// Benchmarks limited with `--only` (empty: all).
    pub only: &'a [String],
}

fn warnings(run: &Run) -> String {
    let mut w = Vec::new();
    if run.mode == Mode::Quick {
        w.push("**Quick mode: small sizes and two rounds. A smoke test that every row is produced; the figures are not measurements.**".to_string());
    } else if run.rounds < MIN_FULL_ROUNDS {
        w.push(format!(
            "**{} round(s) per benchmark, fewer than the {MIN_FULL_ROUNDS} a published run has: not a publishable run.**",
            run.rounds
        ));
    }
    if !run.tree.is_clean() {
        w.push(
            "**The working tree differs from the commit named below; the numbers do not belong to that commit.**"
                .to_string(),
        );
    }
    if !run.only.is_empty() {
        w.push(format!("Only {} were run.", run.only.join(", ")));
    }
    w.iter().map(|l| format!("> {l}\n")).collect()
}

/// Renders the report.
pub fn document(run: &Run, rows: &[Row]) -> String {
    let cmd: Vec<String> = std::env::args().collect();
    let profile = if cfg!(debug_assertions) {
        "dev (dependencies optimised, workspace crates not)"
    } else {
        "release"
    };
    format!(
        "# Benchmarks: wasm-informer vs kube-runtime 5.0\n\n\
         {}\n\
         - mode: {:?}, {} round(s) per benchmark, build profile: {profile}\n\
         - date: {}\n\
         - commit: {}\n\
         - machine: {}\n\
         - load average (1, 5, 15 min): before {}, after {}\n\
         - toolchain: {}\n\
         - command: `{}`\n\
         - run time: {:.0} s\n\n\
         Every arm (one side set up one way) runs in a fresh child process against one apisim \
         instance (HTTP on 127.0.0.1) holding the same seeded pods (about 3 KB of JSON each, with \
         managedFields). Each benchmark runs its arms once per round, in one order in even rounds \
         and in the reverse order in odd rounds (ABBA). Figures are the median over the rounds \
         with the min–max in brackets; a ratio is taken round by round (each side against the \
         other side of the same round), then summarised the same way. A target is **met** only \
         when every round meets it, **missed** when no round does, and **within noise** \
         otherwise. Both sides run on mimalloc, the global allocator the wasm-informer binary \
         ships with, with transparent huge pages {}. Before any number is kept, the harness \
         checks each side's configuration against the simulator's request log (streaming or paged first list, one reflector or \
         one per handler) and the side's own cache (managedFields present or not).\n\n\
         {}\n## How each benchmark is configured\n\n{}## Notes\n\n{}",
        warnings(run),
        run.mode,
        run.rounds,
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        run.tree.describe(),
        provenance::machine(),
        run.load_before,
        provenance::loadavg(),
        provenance::toolchain(),
        cmd.join(" "),
        run.took.as_secs_f64(),
        if crate::mem::huge_pages() {
            "left on (`BENCH_HUGE_PAGES=1`: not the host's default)"
        } else {
            "off for each child process, as the host runs by default (`huge_pages = false`)"
        },
        markdown(rows),
        crate::suite::methodology(run.only),
        notes(rows)
    )
}
