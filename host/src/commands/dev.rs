//! `wasm-informer dev MANIFEST`: the edit loop. Save a source file, and the
//! plugin is rebuilt and hot-loaded into a host running against the embedded
//! simulator; the time from the save to the new version's first event is
//! printed.
//!
//! Job: run the project's build command (the language's, told from the
//! project's files, or `--build`), stage the built component and the
//! manifest in a private config directory, and run a host on it against the
//! embedded simulator. A watcher on the project's directory (build output,
//! dependencies and editors' temporary files ignored) triggers a rebuild;
//! after a successful one the new component is staged atomically and the
//! host reloads it (replay, then live events, I6), and the first event the
//! new version handles stops the clock.
//!
//! Invariants: a failed build, or a version the host rejects, changes nothing
//! that runs (the old version keeps serving, I9), and its error is shown;
//! the staged component is only ever replaced whole (written beside, then
//! renamed), so the host never reads half a build.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use notify::{RecursiveMode, Watcher};

use super::new::Lang;
use super::Failure;
use crate::cli::StatusMode;
use crate::config::ConfigDir;
use crate::host::{Host, HostOptions};
use crate::metrics::Observe;
use crate::report::Report;
use crate::sim::EmbeddedSim;

/// Flags of `dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// The plugin's manifest, in its project directory.
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// The build command, run by `sh -c` in the project directory (default:
    /// the language's, told from the project's files).
    #[arg(long, value_name = "COMMAND")]
    pub build: Option<String>,
    /// A config directory whose host.toml sets the simulator's workload,
    /// indexes and defaults (its plugins are not loaded).
    #[arg(long, value_name = "DIR")]
    pub config: Option<PathBuf>,
    /// Stop after this many seconds (default: until `q`, SIGINT or SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Write the JSON report here at exit.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// The live view when stdout is a terminal (`auto`), always, or never
    /// (plain log lines on stderr).
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub status: StatusMode,
    /// Compilation cache directory (default: the user's cache directory).
    #[arg(long, env = "WASM_INFORMER_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// The language of a project, from the files its template writes.
pub fn detect_lang(project: &Path) -> Option<Lang> {
    let has = |f: &str| project.join(f).is_file();
    if has("Cargo.toml") {
        Some(Lang::Rust)
    } else if has("package.json") {
        Some(Lang::Js)
    } else if has("build.py") {
        Some(Lang::Python)
    } else if has("Makefile") {
        Some(Lang::C)
    } else {
        None
    }
}

/// Directories whose changes never call for a rebuild: build output,
/// dependencies, generated bindings, version control.
const IGNORED_DIRS: &[&str] = &[
    "target",
    // The JavaScript, Python and C templates' build output.
    "dist",
    "build",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".git",
    "gen",
    ".wasm-informer",
];

/// Whether a change of `path` (inside `project`) is a source change.
pub fn is_source_change(project: &Path, path: &Path) -> bool {
    let rel = path.strip_prefix(project).unwrap_or(path);
    if rel
        .components()
        .any(|c| IGNORED_DIRS.iter().any(|d| c.as_os_str() == *d))
    {
        return false;
    }
    let Some(name) = rel.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    // Editors' swap, backup and probe files, and components.
    !(name.starts_with('.')
        || name.starts_with('#')
        || name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".wasm")
        || name == "4913")
}

/// The staged manifest: the project's, with `wasm` pointing at the staged
/// component (everything else, lines included, as it is).
pub fn staged_manifest(text: &str, wasm: &Path) -> Result<String, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let Some(old) = table.get("wasm").and_then(|v| v.as_str()) else {
        return Err("no `wasm` key".into());
    };
    let quoted = toml::Value::String(old.to_string()).to_string();
    let new = toml::Value::String(wasm.display().to_string()).to_string();
    let mut out = Vec::new();
    let mut done = false;
    for line in text.lines() {
        let t = line.trim_start();
        if !done && t.starts_with("wasm") && t[4..].trim_start().starts_with('=') {
            out.push(line.replacen(&quoted, &new, 1));
            done = true;
        } else {
            out.push(line.to_string());
        }
    }
    if !done {
        return Err("cannot find the `wasm = ...` line".into());
    }
    Ok(out.join("\n") + "\n")
}

/// One build's result.
struct Built {
    ok: bool,
    output: String,
    took: Duration,
}

fn build(project: &Path, command: &[String]) -> Built {
    let started = Instant::now();
    let out = std::process::Command::new(&command[0])
        .args(&command[1..])
        .current_dir(project)
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) => Built {
            ok: o.status.success(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            took: started.elapsed(),
        },
        Err(e) => Built {
            ok: false,
            output: format!("cannot run {}: {e}", command[0]),
            took: started.elapsed(),
        },
    }
}

/// The first error of a build's output, for the view's header: the first
/// line that says `error`, with the line after it (rustc's location), or
/// the output's last line.
fn first_error(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.iter().position(|l| l.contains("error")) {
        Some(i) => lines[i..(i + 2).min(lines.len())].join(" "),
        None => lines.last().copied().unwrap_or("no output").to_string(),
    }
}

/// Copies `from` over `to` atomically; false when the bytes are the same.
fn stage(from: &Path, to: &Path) -> Result<bool, String> {
    let bytes = std::fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
    if std::fs::read(to).ok().as_deref() == Some(&bytes[..]) {
        return Ok(false);
    }
    let tmp = to.with_extension("wasm.tmp");
    std::fs::write(&tmp, &bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, to).map_err(|e| format!("{}: {e}", to.display()))?;
    Ok(true)
}

/// Now, if the plugin's version `version` (or a later one) runs and has
/// handled an event.
async fn handled(host: &Arc<Host>, name: &str, version: u64) -> Option<Instant> {
    let h = host.clone();
    let r: Option<Report> = tokio::task::spawn_blocking(move || h.report()).await.ok();
    let p = r.as_ref()?.plugins.get(name)?;
    (p.versions >= version && p.version_events > 0).then(Instant::now)
}

/// Waits until the plugin's version `version` has handled an event; returns
/// when it did, or `None` after `timeout`.
async fn first_event(
    host: &Arc<Host>,
    name: &str,
    version: u64,
    timeout: Duration,
) -> Option<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(t) = handled(host, name, version).await {
            return Some(t);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// What a dev session measured, for its closing lines and for tests.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// Save → first event of the new version, per successful reload.
    pub save_to_first_event: Vec<Duration>,
}

/// The project and its staging.
struct Session {
    project: PathBuf,
    manifest: PathBuf,
    name: String,
    wasm: PathBuf,
    staged_wasm: PathBuf,
    staged_manifest: PathBuf,
    command: Vec<String>,
}

impl Session {
    /// Copies the manifest and the built component into the staging
    /// directory; true when the component changed.
    fn restage(&self) -> Result<bool, String> {
        let text = std::fs::read_to_string(&self.manifest)
            .map_err(|e| format!("{}: {e}", self.manifest.display()))?;
        let staged = staged_manifest(&text, &self.staged_wasm)
            .map_err(|e| format!("{}: {e}", self.manifest.display()))?;
        let changed = stage(&self.wasm, &self.staged_wasm)?;
        if std::fs::read_to_string(&self.staged_manifest)
            .ok()
            .as_deref()
            != Some(&staged)
        {
            let tmp = self.staged_manifest.with_extension("toml.tmp");
            std::fs::write(&tmp, &staged).map_err(|e| e.to_string())?;
            std::fs::rename(&tmp, &self.staged_manifest).map_err(|e| e.to_string())?;
        }
        Ok(changed)
    }

    /// An error about the staged files, told about the project's.
    fn unstage(&self, msg: &str) -> String {
        msg.replace(
            &self.staged_manifest.display().to_string(),
            &self.manifest.display().to_string(),
        )
    }
}

/// Runs `dev`.
pub fn run(args: DevArgs) -> Result<(), Failure> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(dev(args)).map(|_| ())
}

async fn dev(args: DevArgs) -> Result<Timings, Failure> {
    let manifest_path = std::fs::canonicalize(&args.manifest)
        .map_err(|e| Failure::input(format!("{}: {e}", args.manifest.display())))?;
    let project = manifest_path
        .parent()
        .expect("a file has a parent")
        .to_path_buf();
    let command: Vec<String> = match &args.build {
        Some(c) => vec!["sh".into(), "-c".into(), c.clone()],
        None => detect_lang(&project)
            .ok_or_else(|| {
                Failure::input(format!(
                    "{}: no Cargo.toml, package.json, build.py or Makefile: say how to build with --build",
                    project.display()
                ))
            })?
            .build_command()
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    // The manifest must be valid apart from its component, which the first
    // build may produce.
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| Failure::input(format!("{}: {e}", manifest_path.display())))?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| Failure::input(format!("{}: {e}", manifest_path.display())))?;
    let name = table
        .get("name")
        .and_then(|v| v.as_str())
        .ok_or_else(|| Failure::input(format!("{}: no `name`", manifest_path.display())))?
        .to_string();
    let wasm = project.join(
        table
            .get("wasm")
            .and_then(|v| v.as_str())
            .ok_or_else(|| Failure::input(format!("{}: no `wasm`", manifest_path.display())))?,
    );

    // The private config directory the host runs on.
    let staging = tempfile::Builder::new()
        .prefix("wasm-informer-dev-")
        .tempdir()
        .map_err(|e| Failure::runtime(format!("cannot make a staging directory: {e}")))?;
    let dir = staging.path();
    std::fs::create_dir_all(dir.join("plugins")).map_err(Failure::runtime)?;
    let base = match &args.config {
        Some(d) => std::fs::read_to_string(d.join("host.toml")).unwrap_or_default(),
        None => "[sim]\npods = 120\nnamespaces = 3\nnodes = 4\nchurn_per_second = 10\n".into(),
    };
    let mut host_table: toml::Table =
        toml::from_str(&base).map_err(|e| Failure::input(format!("host.toml: {e}")))?;
    host_table.insert("metrics_addr".into(), "127.0.0.1:0".into());
    host_table.remove("resources");
    let configured_cache = host_table
        .get("cache_dir")
        .and_then(|v| v.as_str())
        .map(|c| args.config.clone().unwrap_or_default().join(c));
    if let Some(c) = super::cache_dir(args.cache_dir.clone(), configured_cache) {
        host_table.insert("cache_dir".into(), c.display().to_string().into());
    }
    std::fs::write(
        dir.join("host.toml"),
        toml::to_string(&host_table).unwrap_or_default(),
    )
    .map_err(Failure::runtime)?;
    let session = Session {
        project: project.clone(),
        manifest: manifest_path.clone(),
        name: name.clone(),
        staged_wasm: dir.join(format!("{name}.wasm")),
        staged_manifest: dir.join("plugins").join(format!("{name}.toml")),
        wasm,
        command,
    };

    // The watcher first, so a save during the first build is not missed.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let watched = project.clone();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        let Ok(ev) = ev else { return };
        if matches!(ev.kind, notify::EventKind::Access(_)) {
            return;
        }
        if ev.paths.iter().any(|p| is_source_change(&watched, p)) {
            let _ = tx.send(Instant::now());
        }
    })
    .map_err(|e| Failure::runtime(format!("cannot watch {}: {e}", project.display())))?;
    watcher
        .watch(&project, RecursiveMode::Recursive)
        .map_err(|e| Failure::runtime(format!("cannot watch {}: {e}", project.display())))?;

    eprintln!("dev: building {name}: {}", session.command.join(" "));
    let b = {
        let (p, c) = (project.clone(), session.command.clone());
        tokio::task::spawn_blocking(move || build(&p, &c))
            .await
            .map_err(Failure::runtime)?
    };
    if !b.ok {
        eprint!("{}", b.output);
        if !session.wasm.is_file() {
            return Err(Failure::input(format!(
                "the first build of {name} failed and there is no {} to run",
                session.wasm.display()
            )));
        }
        eprintln!(
            "dev: build failed; running the last built {}",
            session.wasm.display()
        );
    } else {
        eprintln!("dev: built in {}", secs(b.took));
    }
    session.restage().map_err(Failure::input)?;

    let config = ConfigDir::open(dir).map_err(Failure::input)?;
    let kubeconfig = dir.join("sim.kubeconfig");
    let sim = EmbeddedSim::start(
        &config.host.sim,
        "127.0.0.1:0".parse().expect("valid address"),
        &kubeconfig,
    )
    .await
    .map_err(|e| Failure::runtime(format!("cannot start the embedded simulator: {e:#}")))?;
    eprintln!(
        "dev: simulated cluster at {}; try: kubectl --kubeconfig {} get pods -A",
        sim.url(),
        kubeconfig.display()
    );
    let client = sim
        .client()
        .await
        .map_err(|e| Failure::runtime(format!("simulator client: {e:#}")))?;
    let host = Host::new(config.clone(), client, HostOptions::default())
        .await
        .map_err(Failure::input)?;
    let started = Instant::now();
    report_reloads(&session, &host.reconcile().await);
    let mut timings = Timings::default();
    let mut version = 1;
    match first_event(&host, &name, version, Duration::from_secs(120)).await {
        Some(t) => eprintln!(
            "dev: {name} version 1 running: first event {} after the start",
            secs(t - started)
        ),
        None => eprintln!("dev: {name} handled no event yet"),
    }

    let observe: Arc<dyn Observe> = host.clone();
    // The last build's outcome stays in the view's header until the next one.
    let banner: super::live::Banner = Default::default();
    let show = |text: String, error: bool| *banner.lock() = Some((text, error));
    show(format!("{name} version 1 running"), false);
    let view = super::live::start(
        args.status,
        observe,
        Some(&session.project),
        Some(banner.clone()),
    )
    .map_err(Failure::runtime)?;
    let stop = async {
        match args.duration {
            Some(s) if s.is_finite() && s >= 0.0 => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(s)) => {},
                    _ = crate::commands::termination() => {},
                    _ = view.quit() => {},
                }
            }
            _ => {
                tokio::select! {
                    _ = crate::commands::termination() => {},
                    _ = view.quit() => {},
                }
            }
        }
    };
    tokio::pin!(stop);
    loop {
        let saved = tokio::select! {
            _ = &mut stop => break,
            t = rx.recv() => match t { Some(t) => t, None => break },
        };
        // One rebuild per burst of saves.
        tokio::time::sleep(Duration::from_millis(50)).await;
        while rx.try_recv().is_ok() {}
        eprintln!("dev: change seen; building");
        show(format!("building {name}…"), false);
        let b = {
            let (p, c) = (project.clone(), session.command.clone());
            tokio::task::spawn_blocking(move || build(&p, &c))
                .await
                .map_err(Failure::runtime)?
        };
        if !b.ok {
            eprint!("{}", b.output);
            eprintln!(
                "dev: build failed after {}; version {version} keeps running",
                secs(b.took)
            );
            show(
                format!(
                    "build FAILED after {} (version {version} keeps running): {}",
                    secs(b.took),
                    first_error(&b.output)
                ),
                true,
            );
            continue;
        }
        let changed = match session.restage() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("dev: {e}; version {version} keeps running");
                show(format!("{e}; version {version} keeps running"), true);
                continue;
            }
        };
        // The reload returns once the old version has drained; the new one
        // takes events before that, so watch for its first one meanwhile.
        let next = version + 1;
        let reload = {
            let h = host.clone();
            tokio::spawn(async move { h.reconcile().await })
        };
        let mut first = None;
        while !reload.is_finished() {
            if first.is_none() {
                first = handled(&host, &name, next).await;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let events = reload.await.map_err(Failure::runtime)?;
        report_reloads(&session, &events);
        if !changed && events.is_empty() {
            eprintln!("dev: built in {}; nothing changed", secs(b.took));
            show(
                format!(
                    "built in {}; nothing changed: version {version} runs",
                    secs(b.took)
                ),
                false,
            );
            continue;
        }
        if let Some(e) = events.iter().find(|e| e.action == "rejected") {
            eprintln!("dev: version {version} keeps running");
            show(
                format!(
                    "the new version was rejected (version {version} keeps running): {}",
                    e.error
                        .as_deref()
                        .map(|err| session.unstage(err))
                        .unwrap_or_default()
                ),
                true,
            );
            continue;
        }
        if events
            .iter()
            .any(|e| e.action == "changed" || e.action == "added")
        {
            version = next;
            let first = match first {
                Some(t) => Some(t),
                None => first_event(&host, &name, version, Duration::from_secs(120)).await,
            };
            match first {
                Some(t) => {
                    let total = t - saved;
                    timings.save_to_first_event.push(total);
                    eprintln!(
                        "dev: {name} version {version}: first event {} after the save (build {})",
                        secs(total),
                        secs(b.took)
                    );
                    show(
                        format!(
                            "{name} version {version}: first event {} after the save (build {})",
                            secs(total),
                            secs(b.took)
                        ),
                        false,
                    );
                }
                None => {
                    eprintln!("dev: {name} version {version} handled no event within 120 s");
                    show(
                        format!("{name} version {version} handled no event within 120 s"),
                        true,
                    );
                }
            }
        }
    }
    drop(watcher);
    view.stop().await;
    let report = host.shutdown().await;
    let mut sim = sim;
    sim.stop_churn().await;
    if let Some(path) = &args.report {
        report.write(path).map_err(|e| {
            Failure::runtime(format!("{}: cannot write report: {e}", path.display()))
        })?;
    }
    sim.shutdown().await;
    if let Some(log) = view.log_file() {
        eprintln!("dev: the log is in {}", log.display());
    }
    if !timings.save_to_first_event.is_empty() {
        let all: Vec<String> = timings
            .save_to_first_event
            .iter()
            .map(|d| secs(*d))
            .collect();
        eprintln!("dev: save to first event: {}", all.join(", "));
    }
    Ok(timings)
}

fn report_reloads(session: &Session, events: &[crate::report::ReloadEvent]) {
    for e in events {
        match &e.error {
            Some(err) => eprintln!("dev: {} rejected: {}", session.name, session.unstage(err)),
            None => eprintln!("dev: {} {}", session.name, e.action),
        }
    }
    let _ = &session.project;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PluginManifest;

    #[test]
    fn only_source_files_trigger_a_rebuild() {
        let p = Path::new("/p");
        assert!(is_source_change(p, Path::new("/p/src/lib.rs")));
        assert!(is_source_change(p, Path::new("/p/plugin.toml")));
        assert!(!is_source_change(p, Path::new("/p/target/release/x.wasm")));
        assert!(!is_source_change(p, Path::new("/p/node_modules/a/b.js")));
        assert!(!is_source_change(p, Path::new("/p/build/src/app.py")));
        assert!(!is_source_change(p, Path::new("/p/dist/p.wasm")));
        assert!(!is_source_change(p, Path::new("/p/src/.lib.rs.swp")));
        assert!(!is_source_change(p, Path::new("/p/src/lib.rs~")));
        assert!(!is_source_change(p, Path::new("/p/plugin.wasm")));
    }

    #[test]
    fn the_staged_manifest_differs_only_in_its_wasm_line() {
        let text = "# c\nname = \"p\"\nwasm = \"target/x.wasm\"   # built here\nresources = [\"v1/pods\"]\n";
        let s = staged_manifest(text, Path::new("/stage/p.wasm")).unwrap();
        assert_eq!(
            s,
            "# c\nname = \"p\"\nwasm = \"/stage/p.wasm\"   # built here\nresources = [\"v1/pods\"]\n"
        );
        let m = PluginManifest::parse(Path::new("/stage/plugins/p.toml"), &s, &Default::default());
        assert!(
            m.is_err(),
            "the component does not exist here, so the manifest check says so"
        );
    }
}
