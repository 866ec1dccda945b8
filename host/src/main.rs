//! The `wasm-informer` command line. Each subcommand is a thin shell over a
//! library function that returns a report or a typed error.
//!
//! Invariant: every failure prints one clear line naming the file and the
//! reason on stderr and exits non-zero.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wasm_informer::runtime::{check_file, EngineConfig, PluginEngine};

#[derive(Parser)]
#[command(
    name = "wasm-informer",
    version,
    about = "Shared Kubernetes informers feeding sandboxed WebAssembly event handlers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validates a plugin component (FILE.wasm) or the component a manifest
    /// (MANIFEST.toml) names; prints its world, imports and exports.
    Check {
        /// The component or manifest.
        file: PathBuf,
        /// Compilation cache directory (speeds up checking large components).
        #[arg(long, env = "WASM_INFORMER_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
    },
}

/// The `wasm` key of a manifest, resolved relative to the manifest.
fn wasm_of_manifest(manifest: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| format!("{}: cannot read manifest: {e}", manifest.display()))?;
    let doc: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: invalid TOML: {e}", manifest.display()))?;
    let wasm = doc
        .get("wasm")
        .ok_or_else(|| format!("{}: missing key `wasm`", manifest.display()))?
        .as_str()
        .ok_or_else(|| format!("{}: key `wasm` must be a string", manifest.display()))?;
    let base = manifest.parent().unwrap_or(Path::new("."));
    Ok(base.join(wasm))
}

fn check(file: &Path, cache_dir: Option<PathBuf>) -> Result<String, String> {
    let wasm = if file.extension().is_some_and(|e| e == "toml") {
        wasm_of_manifest(file)?
    } else {
        file.to_path_buf()
    };
    let engine = PluginEngine::new(EngineConfig {
        cache_dir,
        ..EngineConfig::default()
    })
    .map_err(|e| e.to_string())?;
    check_file(&engine, &wasm)
        .map(|r| r.to_string())
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { file, cache_dir } => match check(&file, cache_dir) {
            Ok(report) => {
                print!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
