//! Soak run of the informer convergence scenario (I5 + I8) against an embedded
//! apisim: random churn, random API faults, a slow overflowing listener; exits
//! non-zero if the cache or a listener's view diverges from the server.
//!
//! Usage: `cargo run -p wasm-informer --example informer_soak -- SEED [SECONDS] [RATE] [paged|streaming]`

#[path = "../tests/informer_support/mod.rs"]
mod informer_support;

use std::time::Duration;

use informer_support::soak::{run, SoakConfig};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: informer_soak SEED [SECONDS] [RATE] [paged|streaming]";
    let seed: u64 = match args.first().map(|s| s.parse()) {
        Some(Ok(s)) => s,
        _ => {
            eprintln!("{usage}: SEED must be an unsigned integer");
            std::process::exit(2);
        }
    };
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
    let rate: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(500.0);
    let streaming = match args.get(3).map(String::as_str) {
        None | Some("streaming") => true,
        Some("paged") => false,
        Some(other) => {
            eprintln!("{usage}: unknown list mode {other:?}");
            std::process::exit(2);
        }
    };
    let cfg = SoakConfig {
        seed,
        pods: 2000,
        duration: Duration::from_secs(secs),
        rate,
        slow_capacity: 128,
        slow_delay: Duration::from_millis(2),
        streaming,
    };
    match run(cfg).await {
        Ok(r) => println!("converged: {r:#?}"),
        Err(e) => {
            eprintln!("seed {seed}: DIVERGED: {e}");
            std::process::exit(1);
        }
    }
}
