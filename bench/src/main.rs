//! `bench`: side-by-side benchmarks of the wasm-informer pipeline against
//! kube-runtime 5.0 configured as its best users configure it, in a quick
//! smoke mode (every row, small sizes) and a full mode that writes
//! `docs/BENCHMARKS.md`.
//!
//! Invariant: every measured side runs in a child process of this binary
//! (`bench child SPEC`; B11's idle instances `bench instances SPEC`), against
//! the simulator served by the parent; a full run that would write the report
//! refuses a working tree that differs from its commit unless told otherwise,
//! and then says so in the report.

mod alloc;
mod child;
mod driver;
mod fixture;
mod instances;
mod mem;
mod ours;
mod peer;
mod peer_raw;
mod plan;
mod probe;
mod provenance;
mod raw;
mod report;
mod rounds;
mod spec;
mod stats;
mod suite;
mod table;
mod target;
mod verify;
mod wasm;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: alloc::CountingAlloc = alloc::CountingAlloc;

#[derive(Parser)]
#[command(name = "bench", about = "wasm-informer vs kube-runtime benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Small sizes, two rounds (a few minutes): checks every row is produced.
    Quick {
        /// Also write the Markdown report here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only these benchmarks (for example `--only B1,B3`).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// The real sizes, at least 7 rounds each; writes docs/BENCHMARKS.md.
    Full {
        /// Where to write the report.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only these benchmarks (the report then holds only their rows
        /// and is not written to docs/ unless `--out` says so).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Rounds per benchmark instead of the plan's (for checking one
        /// benchmark; fewer than 7 is not a publishable run and is not
        /// written to docs/ unless `--out` says so).
        #[arg(long)]
        rounds: Option<usize>,
        /// Run although the working tree differs from its commit (the report
        /// then says so at the top).
        #[arg(long)]
        allow_dirty: bool,
    },
    /// Prints how each benchmark's sides are configured (the report's
    /// methodology section).
    Describe,
    /// Internal: hosts one measured side (SPEC is JSON).
    #[command(hide = true)]
    Child { spec: String },
    /// Internal: starts idle plugin instances and reports their memory (SPEC
    /// is JSON).
    #[command(hide = true)]
    Instances { spec: String },
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let cmd = match cli.cmd {
        Cmd::Child { spec } => return child::main(&spec),
        Cmd::Instances { spec } => return instances::main(&spec),
        Cmd::Describe => {
            print!("{}", suite::methodology(&[]));
            return Ok(());
        }
        cmd => cmd,
    };
    let tree = provenance::Tree::read();
    let (mut plan, out, only) = match cmd {
        Cmd::Child { .. } | Cmd::Instances { .. } | Cmd::Describe => {
            unreachable!("handled above")
        }
        Cmd::Quick { out, only } => (plan::Plan::new(plan::Mode::Quick), out, only),
        Cmd::Full {
            out,
            only,
            rounds,
            allow_dirty,
        } => {
            let mut plan = plan::Plan::new(plan::Mode::Full);
            if let Some(r) = rounds {
                plan.rounds = r.max(1);
            }
            let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/BENCHMARKS.md");
            // A partial or short run never overwrites the full report unless asked to.
            let publishable = only.is_empty() && plan.rounds >= plan::MIN_FULL_ROUNDS;
            let out = out.or(publishable.then_some(default));
            if !tree.is_clean() {
                if !allow_dirty {
                    bail!(
                        "the working tree differs from {} ({} changed file(s): {}); commit or stash first, or pass --allow-dirty to run anyway (the report will say so)",
                        tree.commit,
                        tree.changes.len(),
                        tree.changes.join(", ")
                    );
                }
                eprintln!(
                    "bench: WARNING: running on a dirty tree ({} changed file(s)); the report says so at the top",
                    tree.changes.len()
                );
            }
            (plan, out, only)
        }
    };
    if plan.mode == plan::Mode::Quick {
        plan.rounds = plan.rounds.max(2);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ctx = suite::Ctx { rt, plan };
    let started = std::time::Instant::now();
    let load_before = provenance::loadavg();
    let rows = suite::run_all(&ctx, &only);
    let doc = report::document(
        &report::Run {
            mode: ctx.plan.mode,
            rounds: ctx.plan.rounds,
            tree: &tree,
            took: started.elapsed(),
            load_before: &load_before,
            only: &only,
        },
        &rows,
    );
    println!("{doc}");
    if let Some(out) = out {
        std::fs::write(&out, &doc).with_context(|| format!("writing {}", out.display()))?;
        eprintln!("bench: wrote {}", out.display());
    }
    Ok(())
}
