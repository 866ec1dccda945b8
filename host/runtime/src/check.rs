//! Validation of a plugin component without running it: is it wasm, a
//! component, complete, built for our world and package version, importing
//! only what the host provides, and does it link?
//!
//! The host provides exactly what [`PluginEngine`]'s linker holds: WASI 0.2
//! (`wasi:cli/imports`: every `wasi:cli`, `wasi:clocks`, `wasi:filesystem`,
//! `wasi:io`, `wasi:random` and `wasi:sockets` interface; sockets and files are
//! present so that JavaScript and Python runtimes link, but an instance is
//! granted no preopened directory and no network) plus the interfaces of our
//! package that the component's world may import (0.1: `types`, `cache`,
//! `log`; 0.2: also `objects`, `kube` and `events`). Anything else, for example
//! `wasi:http` or `wasi:keyvalue`, is rejected by name. The report says which
//! world, and so which version of the package, the component targets.
//!
//! Invariant: every failure is a distinct [`CheckError`] variant whose message
//! names the file and the reason; a component that passes compiles and links
//! against the same linker the runtime instantiates plugins with.

use std::fmt;
use std::path::Path;

use wasmparser::{Encoding, Parser, Payload, Validator, WasmFeatures};

use super::engine::PluginEngine;
use super::world::{v0_1, v0_2, World, PACKAGE};

/// The worlds, as named in messages.
fn worlds() -> String {
    World::ALL
        .iter()
        .map(|w| w.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The versions of our package the host implements, as named in messages.
fn versions() -> String {
    World::versions().join(" and ")
}
use super::limits::PluginLimits;
use super::memory_floor::{
    check_floor_pages, memory_floor_pages, MemoryFloorError, WASM_PAGE_BYTES,
};

/// WASI 0.2 interfaces the linker provides (any `0.2.x` version).
pub const PROVIDED_WASI: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];

/// What a valid plugin looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The file checked.
    pub path: String,
    /// The world it targets, for example
    /// `wasm-informer:plugin/event-handler@0.2.1`.
    pub world: String,
    /// The version of the WIT package it was built against.
    pub version: String,
    /// Top-level imports, as `package:ns/interface@version`.
    pub imports: Vec<String>,
    /// Top-level exports.
    pub exports: Vec<String>,
    /// File size.
    pub size_bytes: usize,
    /// Initial size of its largest linear memory, in pages of 64 KiB (what
    /// `memory_mb` must allow for it to start at all), when known.
    pub memory_floor_pages: Option<u64>,
}

impl CheckReport {
    /// Checks the component's memory floor against a manifest's limits.
    pub fn check_limits(&self, limits: &PluginLimits) -> Result<(), CheckError> {
        check_floor_pages(self.memory_floor_pages, limits).map_err(|source| {
            CheckError::MemoryFloor {
                path: self.path.clone(),
                source,
            }
        })
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: ok ({} bytes)", self.path, self.size_bytes)?;
        writeln!(f, "world: {}", self.world)?;
        writeln!(f, "version: {}", self.version)?;
        if let Some(pages) = self.memory_floor_pages {
            writeln!(
                f,
                "memory: starts with {pages} pages ({:.1} MiB); memory_mb must allow that",
                (pages * WASM_PAGE_BYTES) as f64 / f64::from(1u32 << 20)
            )?;
        }
        writeln!(f, "imports:")?;
        for i in &self.imports {
            writeln!(f, "  {i}")?;
        }
        writeln!(f, "exports:")?;
        for e in &self.exports {
            writeln!(f, "  {e}")?;
        }
        Ok(())
    }
}

/// Why a file is not a usable plugin.
// Each variant's message says what it means; the fields are named in it.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("{path}: cannot read file: {reason}")]
    Read { path: String, reason: String },
    #[error("{path}: not a WebAssembly file (it does not start with the `\\0asm` magic bytes)")]
    NotWasm { path: String },
    #[error(
        "{path}: a core WebAssembly module, not a component; build a component for one of the \
         worlds {} (a Rust cdylib for wasm32-wasip2 is one already)",
        worlds()
    )]
    CoreModule { path: String },
    #[error("{path}: truncated: the file ends in the middle of the binary ({detail})")]
    Truncated { path: String, detail: String },
    #[error("{path}: not a valid WebAssembly component: {detail}")]
    Invalid { path: String, detail: String },
    #[error(
        "{path}: built against {found}, but this host implements \
         {PACKAGE} versions {}; rebuild it against the host's WIT",
        versions()
    )]
    WrongVersion { path: String, found: String },
    #[error(
        "{path}: not a plugin of any world this host runs ({}): it exports none of their \
         interfaces (its exports: {exports})",
        worlds()
    )]
    WrongWorld { path: String, exports: String },
    #[error(
        "{path}: imports interfaces the host does not provide: {imports} (the host provides \
         WASI 0.2 cli/clocks/filesystem/io/random/sockets, {PACKAGE}/{{types,cache,log}}@0.1.0 \
         and {PACKAGE}/{{types,objects,cache,log,kube,events}}@0.2.x)"
    )]
    UnsupportedImports { path: String, imports: String },
    #[error("{path}: exports {export} with the wrong functions or types: {detail}")]
    BadExports {
        path: String,
        export: String,
        detail: String,
    },
    #[error("{path}: does not link against the host: {detail}")]
    Link { path: String, detail: String },
    #[error("{path}: cannot compile: {detail}")]
    Compile { path: String, detail: String },
    #[error("{path}: {source}")]
    MemoryFloor {
        path: String,
        source: MemoryFloorError,
    },
}

/// Checks a component file.
pub fn check_file(engine: &PluginEngine, path: &Path) -> Result<CheckReport, CheckError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| CheckError::Read {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    check_bytes(engine, &shown, &bytes)
}

/// Splits `ns:pkg/iface@ver` into (`ns:pkg/iface`, `ver`).
fn split_version(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (name, None),
    }
}

/// Whether the host's linker provides the import `name` to a component of
/// `world`.
pub fn is_provided(world: World, name: &str) -> bool {
    let (iface, version) = split_version(name);
    if iface.starts_with(PACKAGE) {
        return world.may_import(name);
    }
    PROVIDED_WASI.contains(&iface) && version.is_some_and(|v| v.starts_with("0.2."))
}

fn own_package_version(name: &str) -> Option<&str> {
    let (iface, version) = split_version(name);
    iface
        .strip_prefix(PACKAGE)
        .filter(|r| r.starts_with('/'))
        .map(|_| version.unwrap_or("(no version)"))
}

/// Top-level import and export names of a component.
fn top_level_names(path: &str, bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), CheckError> {
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| parse_error(path, e))?;
        match payload {
            Payload::Version { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(r) if depth == 1 => {
                for i in r {
                    imports.push(i.map_err(|e| parse_error(path, e))?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(r) if depth == 1 => {
                for e in r {
                    exports.push(e.map_err(|e| parse_error(path, e))?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

fn parse_error(path: &str, e: wasmparser::BinaryReaderError) -> CheckError {
    let detail = format!("{} at offset {}", e.message(), e.offset());
    if e.message().contains("unexpected end") {
        CheckError::Truncated {
            path: path.to_string(),
            detail,
        }
    } else {
        CheckError::Invalid {
            path: path.to_string(),
            detail,
        }
    }
}

/// Checks component bytes; `path` only names them in messages.
pub fn check_bytes(
    engine: &PluginEngine,
    path: &str,
    bytes: &[u8],
) -> Result<CheckReport, CheckError> {
    let p = || path.to_string();
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(CheckError::NotWasm { path: p() });
    }
    match Parser::new(0).parse(&bytes[..8], false) {
        Ok(wasmparser::Chunk::Parsed {
            payload: Payload::Version { encoding, .. },
            ..
        }) => {
            if encoding == Encoding::Module {
                return Err(CheckError::CoreModule { path: p() });
            }
        }
        Ok(_) => return Err(CheckError::NotWasm { path: p() }),
        Err(e) => {
            return Err(CheckError::Invalid {
                path: p(),
                detail: e.message().to_string(),
            })
        }
    }
    let (imports, exports) = top_level_names(path, bytes)?;
    Validator::new_with_features(WasmFeatures::all())
        .validate_all(bytes)
        .map_err(|e| parse_error(path, e))?;

    let known = World::versions();
    if let Some(found) = imports
        .iter()
        .chain(exports.iter())
        .filter_map(|n| own_package_version(n).map(|v| (n, v)))
        .find(|(_, v)| !known.contains(v))
    {
        return Err(CheckError::WrongVersion {
            path: p(),
            found: format!("{PACKAGE}@{} (in `{}`)", found.1, found.0),
        });
    }
    let Some(world) = World::detect(&exports) else {
        return Err(CheckError::WrongWorld {
            path: p(),
            exports: if exports.is_empty() {
                "none".into()
            } else {
                exports.join(", ")
            },
        });
    };
    let unsupported: Vec<&str> = imports
        .iter()
        .map(String::as_str)
        .filter(|i| !is_provided(world, i))
        .collect();
    if !unsupported.is_empty() {
        return Err(CheckError::UnsupportedImports {
            path: p(),
            imports: unsupported.join(", "),
        });
    }

    let component = engine
        .compile_labelled(path, bytes)
        .map_err(|e| CheckError::Compile {
            path: p(),
            detail: format!("{e:?}"),
        })?;
    let pre = engine
        .linker()
        .instantiate_pre(&component)
        .map_err(|e| CheckError::Link {
            path: p(),
            detail: format!("{e:?}"),
        })?;
    let bad_exports = |e: wasmtime::Error| CheckError::BadExports {
        path: p(),
        export: world.export(),
        detail: format!("{e:?}"),
    };
    match world {
        World::EventHandlerV01 => drop(v0_1::EventHandlerPre::new(pre).map_err(bad_exports)?),
        World::EventHandlerV02 => drop(v0_2::EventHandlerPre::new(pre).map_err(bad_exports)?),
        World::ControllerV02 => drop(v0_2::ControllerPre::new(pre).map_err(bad_exports)?),
    }
    // The version it was built against, which may be earlier than the
    // host's (a 0.2.0 component runs against 0.2.1).
    let built = exports
        .iter()
        .filter(|e| world.may_export(e))
        .find_map(|e| own_package_version(e))
        .unwrap_or(world.version())
        .to_string();
    Ok(CheckReport {
        path: p(),
        world: format!("{PACKAGE}/{}@{built}", world.short_name()),
        version: built,
        imports,
        exports,
        size_bytes: bytes.len(),
        memory_floor_pages: memory_floor_pages(&component),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provided_imports_follow_the_linker() {
        let v1 = World::EventHandlerV01;
        let v2 = World::EventHandlerV02;
        assert!(is_provided(v1, "wasi:cli/environment@0.2.0"));
        assert!(is_provided(v1, "wasi:io/streams@0.2.6"));
        assert!(is_provided(v1, "wasi:sockets/tcp@0.2.3"));
        assert!(is_provided(v1, "wasm-informer:plugin/cache@0.1.0"));
        assert!(!is_provided(v1, "wasm-informer:plugin/cache@0.2.0"));
        assert!(!is_provided(v1, "wasm-informer:plugin/kube@0.1.0"));
        assert!(is_provided(v2, "wasm-informer:plugin/cache@0.2.0"));
        assert!(is_provided(v2, "wasm-informer:plugin/kube@0.2.0"));
        assert!(is_provided(v2, "wasm-informer:plugin/kube@0.2.1"));
        assert!(is_provided(
            World::ControllerV02,
            "wasm-informer:plugin/events@0.2.0"
        ));
        assert!(!is_provided(v2, "wasm-informer:plugin/cache@0.1.0"));
        assert!(!is_provided(v1, "wasm-informer:plugin/handler@0.1.0"));
        assert!(!is_provided(v2, "wasi:http/outgoing-handler@0.2.4"));
        assert!(!is_provided(v2, "wasi:http/types@0.2.4"));
        assert!(!is_provided(v1, "wasi:cli/environment@0.3.0"));
        assert!(!is_provided(v1, "wasi:keyvalue/store@0.2.0-draft"));
    }

    #[test]
    fn own_package_versions_are_found() {
        assert_eq!(
            own_package_version("wasm-informer:plugin/handler@0.2.0"),
            Some("0.2.0")
        );
        assert_eq!(own_package_version("wasi:io/poll@0.2.0"), None);
        assert_eq!(own_package_version("wasm-informer:pluginx/a@0.1.0"), None);
    }
}
