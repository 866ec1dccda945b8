//! The view `run` and `dev` show while they run: the live view (the tables of
//! `wasm-informer top`, read in-process, plus a log pane) when stdout is a
//! terminal (or `--status always`), else the plain log stream on stderr
//! (`--status never`).
//!
//! While the live view is up, everything written to stderr (the host's log
//! and `dev`'s own lines) goes to a log file instead, whose path the view
//! shows; the log pane follows that file (only the selected plugin's lines
//! and `dev:` lines once a plugin is selected).
//!
//! Invariant: whatever the view, `quit` resolves only when the user asked
//! to stop from it (`q`, Esc, Ctrl-C), and `stop` gives the terminal and
//! stderr back as they were.

use std::fs::File;
use std::io::{IsTerminal, Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use super::top::{draw, Model, Snapshot};
use crate::cli::StatusMode;
use crate::metrics::Observe;
use crate::report::Report;

/// The running view.
pub struct View {
    log_file: Option<PathBuf>,
    quit: tokio::sync::watch::Receiver<bool>,
    live: Option<Live>,
}

/// The parts of a live view.
struct Live {
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The process's stderr before it went to the log file.
    saved_stderr: i32,
}

/// A line the caller keeps under the view's summary until it replaces it
/// (`dev`: the last build's outcome; `true` for an error).
pub type Banner = Arc<Mutex<Option<(String, bool)>>>;

/// The snapshot `top` would scrape, taken in-process.
pub fn snapshot(report: Report, not_ready: &[String]) -> Snapshot {
    let mut reloads = std::collections::BTreeMap::new();
    for e in &report.reloads {
        *reloads.entry(e.action.clone()).or_insert(0) += 1;
    }
    Snapshot {
        config_errors: report.config_errors.len() as u64,
        ready: Some(not_ready.is_empty()),
        reloads,
        report,
    }
}

/// `text` without ANSI escape sequences (the log is colored when stderr
/// was a terminal).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ params final-byte.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The last lines of the log, for the pane: all of them, or `plugin`'s and
/// `dev:` lines.
pub fn log_tail(text: &str, plugin: Option<&str>, n: usize) -> Vec<String> {
    let wanted = plugin.map(|p| format!("plugin={p}"));
    let mut lines: Vec<String> = text
        .lines()
        .map(strip_ansi)
        .filter(|l| match &wanted {
            Some(w) => l.contains(w.as_str()) || l.starts_with("dev:"),
            None => true,
        })
        .collect();
    let start = lines.len().saturating_sub(n);
    lines.drain(..start);
    lines
}

/// The last 64 KiB of the log file.
fn read_tail(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(from)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    // Drop a partial first line.
    match (from > 0, text.find('\n')) {
        (true, Some(i)) => text[i + 1..].to_string(),
        _ => text,
    }
}

/// Whether the log may be coloured: only on a terminal, and not when a
/// command (`status` is its `--status`) will show the live view, which moves
/// the log into a file that must stay plain text.
pub fn log_colours(status: Option<StatusMode>, stdout_tty: bool, stderr_tty: bool) -> bool {
    let view = match status {
        None | Some(StatusMode::Never) => false,
        Some(StatusMode::Always) | Some(StatusMode::Auto) => stdout_tty,
    };
    stderr_tty && !view
}

/// Starts the view for `mode`. While the live view is up, the log goes to
/// `PROJECT/.wasm-informer/dev.log` (`dev`), or with no project (`run`) to
/// `TMPDIR/wasm-informer-PID/host.log`.
pub fn start(
    mode: StatusMode,
    source: Arc<dyn Observe>,
    project: Option<&Path>,
    banner: Option<Banner>,
) -> std::io::Result<View> {
    let (quit_tx, quit) = tokio::sync::watch::channel(false);
    let show = match mode {
        StatusMode::Always => true,
        StatusMode::Never => false,
        StatusMode::Auto => std::io::stdout().is_terminal(),
    };
    if !show {
        return Ok(View {
            log_file: None,
            quit,
            live: None,
        });
    }
    let log_path = match project {
        Some(p) => p.join(".wasm-informer/dev.log"),
        None => std::env::temp_dir()
            .join(format!("wasm-informer-{}", std::process::id()))
            .join("host.log"),
    };
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let log = File::create(&log_path)?;
    // SAFETY: dup and dup2 on the process's own descriptors; `log` stays
    // open until dup2 has made fd 2 a copy of it.
    let saved_stderr = unsafe { libc::dup(2) };
    if saved_stderr < 0 || unsafe { libc::dup2(log.as_raw_fd(), 2) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(log);
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            // SAFETY: as above.
            unsafe {
                libc::dup2(saved_stderr, 2);
                libc::close(saved_stderr);
            }
            return Err(e);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let path = log_path.clone();
    let thread = std::thread::spawn(move || {
        let mut m = Model {
            source: "this host".into(),
            log_title: Some(path.display().to_string()),
            ..Default::default()
        };
        let mut next = Instant::now();
        while !stop2.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                let s = snapshot(source.report(), &source.not_ready());
                m.rates.update(&s, Instant::now());
                m.snapshot = Some(s);
                next = Instant::now() + Duration::from_secs(1);
            }
            let selected = m.selected_plugin();
            m.logs = log_tail(&read_tail(&path), selected.as_deref(), 200);
            m.banner = banner.as_ref().and_then(|b| b.lock().clone());
            if terminal.draw(|f| draw(f, &mut m)).is_err() {
                break;
            }
            match event::poll(Duration::from_millis(250)) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => break,
            }
            let Ok(Event::Key(k)) = event::read() else {
                continue;
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            let count = m.row_names().len();
            match k.code {
                KeyCode::Char('q') | KeyCode::Esc => {
                    let _ = quit_tx.send(true);
                }
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    let _ = quit_tx.send(true);
                }
                KeyCode::Down | KeyCode::Char('j') if count > 0 => {
                    let i = m.table.selected().map(|i| (i + 1) % count).unwrap_or(0);
                    m.table.select(Some(i));
                }
                KeyCode::Up | KeyCode::Char('k') if count > 0 => {
                    let i = m
                        .table
                        .selected()
                        .map(|i| (i + count - 1) % count)
                        .unwrap_or(0);
                    m.table.select(Some(i));
                }
                _ => {}
            }
        }
        ratatui::restore();
    });
    Ok(View {
        log_file: Some(log_path),
        quit,
        live: Some(Live {
            stop,
            thread: Mutex::new(Some(thread)),
            saved_stderr,
        }),
    })
}

impl View {
    /// Resolves when the user quits from the view (`q`); never for the
    /// plain stream.
    pub async fn quit(&self) {
        let mut rx = self.quit.clone();
        if rx.wait_for(|q| *q).await.is_err() {
            std::future::pending::<()>().await
        }
    }

    /// Closes the view: the terminal and stderr as they were.
    pub async fn stop(&self) {
        let Some(live) = &self.live else {
            return;
        };
        live.stop.store(true, Ordering::Relaxed);
        let thread = live.thread.lock().take();
        if let Some(t) = thread {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
            // SAFETY: restores the descriptor saved in `start`.
            unsafe {
                libc::dup2(live.saved_stderr, 2);
                libc::close(live.saved_stderr);
            }
        }
    }

    /// Where the log went while the view was up.
    pub fn log_file(&self) -> Option<&Path> {
        self.log_file.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_plain_text_whenever_the_live_view_takes_the_terminal() {
        use StatusMode::{Always, Auto, Never};
        // (status, stdout a terminal, stderr a terminal) -> colours
        let cases = [
            (None, true, true, true),
            (None, true, false, false),
            (Some(Auto), true, true, false),
            (Some(Always), true, true, false),
            (Some(Never), true, true, true),
            (Some(Auto), false, true, true),
            (Some(Auto), false, false, false),
        ];
        for (status, out, err, colours) in cases {
            assert_eq!(
                log_colours(status, out, err),
                colours,
                "{status:?} stdout tty {out} stderr tty {err}"
            );
        }
    }

    #[test]
    fn the_pane_follows_the_selected_plugin_without_colors() {
        let log = "dev: built in 1.00 s\n\x1b[2m2026\x1b[0m \x1b[32m INFO\x1b[0m plugin=a x\nINFO plugin=b y\n";
        assert_eq!(
            log_tail(log, None, 10),
            vec![
                "dev: built in 1.00 s",
                "2026  INFO plugin=a x",
                "INFO plugin=b y"
            ]
        );
        assert_eq!(
            log_tail(log, Some("a"), 10),
            vec!["dev: built in 1.00 s", "2026  INFO plugin=a x"]
        );
        assert_eq!(log_tail(log, None, 1), vec!["INFO plugin=b y"]);
    }
}
