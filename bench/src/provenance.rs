//! Where a run's numbers come from: the commit and whether the tree matches it,
//! the machine (CPU, cores, memory, kernel, load), and the toolchain (the
//! compiler that built the benchmark, the versions of wasmtime, kube,
//! kube-runtime and k8s-openapi it links, and the JavaScript plugin toolchain).
//!
//! Invariant: everything is read from the running system, the build, or the
//! lock file compiled in; what cannot be read is written as `unknown`, never
//! guessed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The lock file and workspace manifest the benchmark was built from.
const CARGO_LOCK: &str = include_str!("../../Cargo.lock");
const WORKSPACE_MANIFEST: &str = include_str!("../../Cargo.toml");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    Command::new(cmd)
        .args(args)
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The commit checked out and the state of the tree.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Full hash of HEAD.
    pub commit: String,
    /// Its subject line.
    pub subject: String,
    /// `git status --porcelain` lines: changed, staged and untracked files
    /// (ignored files excluded). Empty for a clean tree.
    pub changes: Vec<String>,
}

impl Tree {
    /// Reads the tree the benchmark's sources are in.
    pub fn read() -> Tree {
        Tree {
            commit: run("git", &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
            subject: run("git", &["log", "-1", "--format=%s"]).unwrap_or_default(),
            changes: run("git", &["status", "--porcelain"])
                .map(|s| s.lines().map(str::to_string).collect())
                .unwrap_or_else(|| vec!["?? (git status failed)".into()]),
        }
    }

    /// Whether the tree matches the commit.
    pub fn is_clean(&self) -> bool {
        self.changes.is_empty() && self.commit != "unknown"
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        if self.is_clean() {
            return format!("{} (\"{}\"), tree clean", self.commit, self.subject);
        }
        let shown: Vec<&str> = self.changes.iter().take(8).map(|s| s.trim()).collect();
        format!(
            "{} (\"{}\"), **DIRTY TREE: {} changed file(s) ({}{}); these numbers are not the commit's**",
            self.commit,
            self.subject,
            self.changes.len(),
            shown.join(", "),
            if self.changes.len() > shown.len() { ", ..." } else { "" }
        )
    }
}

fn first_field(file: &str, line_prefix: &str) -> Option<String> {
    std::fs::read_to_string(file).ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with(line_prefix))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_string())
    })
}

/// CPU model, logical cores, memory and kernel.
pub fn machine() -> String {
    let cpu = first_field("/proc/cpuinfo", "model name").unwrap_or_else(|| "unknown CPU".into());
    let logical = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    let usable = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = first_field("/proc/meminfo", "MemTotal")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or_else(
            || "unknown".into(),
            |kb| format!("{:.1} GiB", kb / 1048576.0),
        );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!("{cpu}, {logical} logical cores ({usable} usable by this process), {mem} RAM, Linux {kernel}")
}

/// The 1-, 5- and 15-minute load averages (other work on the machine skews
/// every number in the table).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Versions of `name` in the lock file, joined by `/`.
fn locked(name: &str) -> String {
    let mut versions = Vec::new();
    let mut lines = CARGO_LOCK.lines();
    while let Some(l) = lines.next() {
        if l == format!("name = \"{name}\"") {
            if let Some(v) = lines
                .next()
                .and_then(|v| v.strip_prefix("version = \""))
                .and_then(|v| v.strip_suffix('"'))
            {
                versions.push(v.to_string());
            }
        }
    }
    if versions.is_empty() {
        "unknown".into()
    } else {
        versions.join("/")
    }
}

/// The `features = [...]` of `name` in the workspace's dependency table.
fn features(name: &str) -> String {
    WORKSPACE_MANIFEST
        .lines()
        .find(|l| l.starts_with(&format!("{name} =")))
        .and_then(|l| l.split("features = [").nth(1))
        .and_then(|f| f.split(']').next())
        .map(|f| f.replace('"', ""))
        .unwrap_or_default()
}

/// The toolchain: compiler, the linked crates that matter, the JS toolchain.
pub fn toolchain() -> String {
    let componentize = std::fs::read_to_string(
        root().join("sdk/js/node_modules/@bytecodealliance/componentize-js/package.json"),
    )
    .ok()
    .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
    .and_then(|v| v["version"].as_str().map(str::to_string))
    .unwrap_or_else(|| "unknown".into());
    format!(
        "{}; wasmtime {}, kube {}, kube-runtime {} ({}), k8s-openapi {} ({}); node {}, componentize-js {}",
        env!("BENCH_RUSTC_VERSION"),
        locked("wasmtime"),
        locked("kube"),
        locked("kube-runtime"),
        features("kube-runtime"),
        locked("k8s-openapi"),
        features("k8s-openapi"),
        run("node", &["--version"]).unwrap_or_else(|| "unknown".into()),
        componentize
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_pinned_versions() {
        assert_eq!(locked("kube-runtime"), "5.0.0");
        assert!(locked("wasmtime").starts_with("48."));
        assert!(features("k8s-openapi").contains("v1_"));
        assert!(features("kube-runtime").contains("unstable-runtime-subscribe"));
        assert!(toolchain().starts_with("rustc "), "{}", toolchain());
        assert!(machine().contains("cores"));
    }
}
