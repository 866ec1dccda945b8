//! The commands for plugin authors and distributors, one module each: `new`
//! (a plugin project from a template), `test` (a plugin against fixtures,
//! without a cluster), `dev` (the edit, build and hot-load loop), `top` (a live view
//! of a running host), `shadow` (a shadow version's diff, and its promotion)
//! and `push` (a component to an OCI registry).
//!
//! Invariant: a command fails with one [`Failure`], whose code is 2 for bad
//! input (arguments, files, configuration) and 1 for everything else, as the
//! rest of the binary does.

pub mod dev;
pub mod live;
pub mod new;
pub mod shadow;
pub mod test;
pub mod top;

use std::path::PathBuf;

/// The compilation cache a command uses: the one asked for, else the config
/// directory's `cache_dir`, else the user's cache directory
/// (`$XDG_CACHE_HOME/wasm-informer`, or `~/.cache/wasm-informer`), so that a
/// large JavaScript or Python component compiles once per version, not once
/// per run.
pub fn cache_dir(explicit: Option<PathBuf>, configured: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or(configured).or_else(|| {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("wasm-informer"))
    })
}

/// A failure with its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// 2 for bad input, 1 otherwise.
    pub code: u8,
    /// One line naming what and why.
    pub message: String,
}

impl Failure {
    /// Bad input: exit code 2.
    pub fn input(message: impl std::fmt::Display) -> Self {
        Self {
            code: 2,
            message: message.to_string(),
        }
    }

    /// Any other failure: exit code 1.
    pub fn runtime(message: impl std::fmt::Display) -> Self {
        Self {
            code: 1,
            message: message.to_string(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn termination() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return "SIGINT";
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}
