//! `bench`: side-by-side benchmarks of the wasm-informer pipeline against
//! kube-runtime 5.0 (B1..B8), in a quick smoke mode and a full mode that writes
//! `docs/BENCHMARKS.md`.
//!
//! Invariant: every measured side runs in a child process of this binary
//! (`bench child SPEC`), against the simulator served by the parent.

mod alloc;
mod child;
mod driver;
mod fixture;
mod mem;
mod ours;
mod peer;
mod plan;
mod probe;
mod raw;
mod report;
mod spec;
mod stats;
mod suite;
mod table;
mod wasm;

use std::path::PathBuf;

use anyhow::{Context, Result};
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
    /// Small sizes, one round (under a minute): checks every row is produced.
    Quick {
        /// Also write the Markdown report here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only these benchmarks (for example `--only B1,B3`).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// The real sizes; writes docs/BENCHMARKS.md.
    Full {
        /// Where to write the report.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only these benchmarks (the report then holds only their rows).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// Internal: hosts one measured side (SPEC is JSON).
    #[command(hide = true)]
    Child { spec: String },
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
    let (mode, out, only) = match cli.cmd {
        Cmd::Child { spec } => return child::main(&spec),
        Cmd::Quick { out, only } => (plan::Mode::Quick, out, only),
        Cmd::Full { out, only } => {
            let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/BENCHMARKS.md");
            // A partial run never overwrites the full report unless asked to.
            let out = match (out, only.is_empty()) {
                (Some(o), _) => Some(o),
                (None, true) => Some(default),
                (None, false) => None,
            };
            (plan::Mode::Full, out, only)
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ctx = suite::Ctx {
        rt,
        plan: plan::Plan::new(mode),
    };
    let started = std::time::Instant::now();
    let load_before = report::loadavg();
    let rows = suite::run_all(&ctx, &only);
    let doc = report::document(ctx.plan.mode, &rows, started.elapsed(), &load_before)?;
    println!("{doc}");
    if let Some(out) = out {
        std::fs::write(&out, &doc).with_context(|| format!("writing {}", out.display()))?;
        eprintln!("bench: wrote {}", out.display());
    }
    Ok(())
}
