//! `wasm-informer shadow`: what a shadow version would write, against its
//! live plugin, read from a running host; and the promotion of a shadow to
//! the live version.
//!
//! Job: `shadow diff NAME` reads `/shadow` from the host's metrics address
//! and prints, for every object whose verdict is not `same`, the live
//! plugin's and the shadow's last intended writes as a line diff (as
//! `kubectl diff` prints one), then the counts. `shadow promote NAME --config
//! DIR` turns the shadow's manifest into the live plugin's: the live
//! manifest file gets the shadow's text under the live plugin's name and
//! without `shadow_of`, and the shadow's file goes; a running host then
//! switches over as for any reload, with its replay.
//!
//! Invariant: `promote` writes nothing unless the new live manifest parses;
//! it never leaves the directory with neither manifest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};

use super::Failure;
use crate::config::{ConfigDir, PluginManifest};
use crate::shadow::{render_key, Outcome, ShadowReport};

/// Flags of `shadow`.
#[derive(Debug, Args)]
pub struct ShadowArgs {
    #[command(subcommand)]
    pub command: ShadowCommand,
}

/// What `shadow` does.
#[derive(Debug, Subcommand)]
pub enum ShadowCommand {
    /// Prints, per object, how the shadow's intended writes differ from the
    /// live plugin's (`-` live, `+` shadow), then the counts; exits 1 when
    /// some object differs.
    Diff(DiffArgs),
    /// Makes the shadow the live version: its manifest replaces the live
    /// plugin's (under the live name), and a running host switches over.
    Promote(PromoteArgs),
}

/// Flags of `shadow diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The shadow plugin (or the live plugin it shadows).
    pub name: String,
    /// The host's metrics endpoint: `HOST:PORT` (its `metrics_addr`).
    #[arg(long, default_value = crate::config::DEFAULT_METRICS_ADDR)]
    pub metrics: String,
    /// Print the objects whose writes are the same as well.
    #[arg(long)]
    pub all: bool,
}

/// Flags of `shadow promote`.
#[derive(Debug, Args)]
pub struct PromoteArgs {
    /// The shadow plugin.
    pub name: String,
    /// The config directory: DIR/plugins/*.toml.
    #[arg(long, value_name = "DIR")]
    pub config: PathBuf,
}

/// Runs `shadow`.
pub fn run(args: ShadowArgs) -> Result<(), Failure> {
    match args.command {
        ShadowCommand::Diff(a) => diff(a),
        ShadowCommand::Promote(a) => promote(a).map(|msg| println!("{msg}")),
    }
}

fn diff(a: DiffArgs) -> Result<(), Failure> {
    let (authority, _) = super::top::endpoint(&a.metrics).map_err(Failure::input)?;
    let body = super::top::scrape(&authority, "/shadow", Duration::from_secs(10))
        .map_err(Failure::runtime)?;
    let v: serde_json::Value = serde_json::from_str(&body)
        .map_err(|e| Failure::runtime(format!("http://{authority}/shadow: {e}")))?;
    let reports: Vec<ShadowReport> = serde_json::from_value(v["shadows"].clone())
        .map_err(|e| Failure::runtime(format!("http://{authority}/shadow: {e}")))?;
    let Some(r) = reports
        .into_iter()
        .find(|r| r.shadow == a.name || r.live == a.name)
    else {
        return Err(Failure::input(format!(
            "no shadow named {} (nor a live plugin with one) runs at {authority}",
            a.name
        )));
    };
    print!("{}", render(&r, a.all));
    if r.counts.differs > 0 {
        return Err(Failure::runtime(format!(
            "{}: {} of the compared writes differ from {}'s",
            r.shadow, r.counts.differs, r.live
        )));
    }
    Ok(())
}

/// The text `shadow diff` prints for one comparison.
pub fn render(r: &ShadowReport, all: bool) -> String {
    let mut out = String::new();
    for (key, view) in &r.keys {
        if view.verdict == Outcome::Same && !all {
            continue;
        }
        out.push_str(&render_key(key, view));
        out.push('\n');
    }
    let c = &r.counts;
    out.push_str(&format!(
        "{} against {}: {} same, {} differs, {} only live, {} only shadow ({} objects, {} writes waiting, {} ms window)\n",
        r.shadow, r.live, c.same, c.differs, c.only_live, c.only_shadow, r.objects, r.waiting, r.window_ms
    ));
    out
}

/// Makes shadow `a.name` the live version; returns what it did.
pub fn promote(a: PromoteArgs) -> Result<String, Failure> {
    let config = ConfigDir::open(&a.config).map_err(Failure::input)?;
    let plugins = config.dir.join("plugins");
    let manifests = read_manifests(&config, &plugins)?;
    let (shadow_file, shadow) = manifests
        .iter()
        .find(|(_, m)| m.name == a.name)
        .cloned()
        .ok_or_else(|| {
            Failure::input(format!(
                "no manifest in {} is named {}",
                plugins.display(),
                a.name
            ))
        })?;
    let live_name = shadow
        .shadow_of
        .as_ref()
        .map(|l| l.value.clone())
        .ok_or_else(|| {
            Failure::input(format!(
                "{}: {} has no `shadow_of`",
                shadow_file.display(),
                a.name
            ))
        })?;
    let (live_file, _) = manifests
        .iter()
        .find(|(_, m)| m.name == live_name)
        .cloned()
        .ok_or_else(|| {
            Failure::input(format!(
                "no manifest in {} is named {live_name}",
                plugins.display()
            ))
        })?;
    let text = std::fs::read_to_string(&shadow_file)
        .map_err(|e| Failure::runtime(format!("{}: {e}", shadow_file.display())))?;
    let live_text = std::fs::read_to_string(&live_file)
        .map_err(|e| Failure::runtime(format!("{}: {e}", live_file.display())))?;
    let promoted = promoted_text(&text, &live_name, &live_text)
        .map_err(|e| Failure::input(format!("{}: {e}", shadow_file.display())))?;
    // The new live manifest must parse where it will live, before anything
    // is written.
    PluginManifest::parse(&live_file, &promoted, &config.host.defaults).map_err(Failure::input)?;
    let tmp = live_file.with_extension("toml.promoting");
    std::fs::write(&tmp, &promoted)
        .map_err(|e| Failure::runtime(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, &live_file)
        .map_err(|e| Failure::runtime(format!("{}: {e}", live_file.display())))?;
    std::fs::remove_file(&shadow_file)
        .map_err(|e| Failure::runtime(format!("{}: {e}", shadow_file.display())))?;
    Ok(format!(
        "promoted {} to {live_name}: {} now holds its manifest, {} is gone; a running host switches over on its next reload",
        a.name,
        live_file.display(),
        shadow_file.display()
    ))
}

/// The top-level keys of a manifest's API settings: a shadow runs under its
/// live plugin's, whatever its own manifest says.
const KUBE_KEYS: [&str; 8] = [
    "events",
    "dry_run",
    "write_qps",
    "write_burst",
    "write_timeout_ms",
    "api_time_per_event_ms",
    "max_request_bytes",
    "max_answer_bytes",
];

/// The shadow's manifest text as the live plugin's: `name` set to the live
/// name, `shadow_of` gone, and the live manifest's `[[write]]` tables and
/// top-level API settings ([`KUBE_KEYS`]: what the shadow ran under) in
/// place of the shadow's own.
fn promoted_text(shadow: &str, live_name: &str, live: &str) -> Result<String, String> {
    let mut out = Vec::new();
    let mut named = false;
    let mut in_table = false;
    for line in shadow.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            in_table = true;
        }
        let key = t.split('=').next().unwrap_or("").trim();
        if !in_table && (key == "shadow_of" || KUBE_KEYS.contains(&key)) {
            continue;
        }
        if !in_table && key == "name" {
            out.push(format!("name = {}", toml_string(live_name)));
            named = true;
            continue;
        }
        out.push(line.to_string());
    }
    if !named {
        return Err("no top-level `name = ...` line to replace".into());
    }
    // The grants: the live manifest's top-level events/dry_run lines, then its
    // [[write]] tables, appended at the end (tables come last in TOML).
    let mut top = Vec::new();
    let mut tables = Vec::new();
    let mut section: Option<bool> = None;
    for line in live.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            section = Some(t.starts_with("[[write]]"));
        }
        match section {
            None => {
                let key = t.split('=').next().unwrap_or("").trim();
                if KUBE_KEYS.contains(&key) {
                    top.push(line.to_string());
                }
            }
            Some(true) => tables.push(line.to_string()),
            Some(false) => {}
        }
    }
    let first_table = out
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .unwrap_or(out.len());
    for (i, l) in top.into_iter().enumerate() {
        out.insert(first_table + i, l);
    }
    if !tables.is_empty() {
        out.push(String::new());
        out.extend(tables);
    }
    let mut s = out.join("\n");
    s.push('\n');
    Ok(s)
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn read_manifests(
    config: &ConfigDir,
    plugins: &Path,
) -> Result<Vec<(PathBuf, PluginManifest)>, Failure> {
    let mut out = Vec::new();
    let dir = std::fs::read_dir(plugins)
        .map_err(|e| Failure::input(format!("{}: {e}", plugins.display())))?;
    for entry in dir.flatten() {
        let p = entry.path();
        if p.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        if let Ok(m) = PluginManifest::parse(&p, &text, &config.host.defaults) {
            out.push((p, m));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_promoted_text_is_the_shadows_under_the_live_name_with_the_live_grants() {
        let shadow = "name = \"enforcer-next\"\nshadow_of = \"enforcer\"\nwasm = \"next.wasm\"\nresources = [\"v1/pods\"]\n\n[config]\nlabel = \"team\"\n";
        let live = "name = \"enforcer\"\nwasm = \"live.wasm\"\nresources = [\"v1/pods\"]\nevents = true\nwrite_qps = 50\n\n[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n\n[config]\nlabel = \"old\"\n";
        let p = promoted_text(shadow, "enforcer", live).unwrap();
        assert_eq!(
            p,
            "name = \"enforcer\"\nwasm = \"next.wasm\"\nresources = [\"v1/pods\"]\n\nevents = true\nwrite_qps = 50\n[config]\nlabel = \"team\"\n\n[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n\n"
        );
    }
}
