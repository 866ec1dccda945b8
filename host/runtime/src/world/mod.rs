//! The WIT worlds this host implements, and which one a component targets.
//!
//! Job: name each world (package version, world, the interface it must
//! export, the interfaces of our package it may import), and tell them apart
//! by a component's exports, so the host loads 0.1 and 0.2 components side by
//! side.
//!
//! Invariant: a component is run only as the one world whose export it has;
//! the host implements every import of every world listed here.

pub mod v0_1;
pub mod v0_2;

/// The WIT package.
pub const PACKAGE: &str = "wasm-informer:plugin";

/// A world a plugin may target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum World {
    /// `wasm-informer:plugin/event-handler@0.1.0`: events, cache and log.
    EventHandlerV01,
    /// `wasm-informer:plugin/event-handler@0.2.1` (and 0.2.0): events as
    /// object handles, plus the `kube` and `events` capabilities.
    EventHandlerV02,
    /// `wasm-informer:plugin/controller@0.2.1` (and 0.2.0): a reconciler fed
    /// by a work queue.
    ControllerV02,
}

impl World {
    /// Every world, newest first.
    pub const ALL: [World; 3] = [
        World::EventHandlerV02,
        World::ControllerV02,
        World::EventHandlerV01,
    ];

    /// The package version.
    pub fn version(self) -> &'static str {
        match self {
            World::EventHandlerV01 => v0_1::PACKAGE_VERSION,
            World::EventHandlerV02 | World::ControllerV02 => v0_2::VERSION,
        }
    }

    /// The package versions whose components run as this world: the
    /// world's own version and the earlier ones it is compatible with (a
    /// 0.2.0 component imports a subset of 0.2.1 and runs unchanged).
    pub fn accepts(self) -> &'static [&'static str] {
        match self {
            World::EventHandlerV01 => &[v0_1::PACKAGE_VERSION],
            World::EventHandlerV02 | World::ControllerV02 => v0_2::ACCEPTS,
        }
    }

    /// Whether `name` (`PACKAGE/IFACE@VERSION`) is `iface` of our package at
    /// a version this world accepts.
    fn names(self, name: &str, iface: &str) -> bool {
        name.strip_prefix(PACKAGE)
            .and_then(|r| r.strip_prefix('/'))
            .and_then(|r| r.split_once('@'))
            .is_some_and(|(i, v)| i == iface && self.accepts().contains(&v))
    }

    /// The world's short name.
    pub fn short_name(self) -> &'static str {
        match self {
            World::EventHandlerV01 | World::EventHandlerV02 => "event-handler",
            World::ControllerV02 => "controller",
        }
    }

    /// `wasm-informer:plugin/event-handler@0.2.1`.
    pub fn name(self) -> String {
        format!("{PACKAGE}/{}@{}", self.short_name(), self.version())
    }

    /// The interface the world exports.
    fn export_iface(self) -> &'static str {
        match self {
            World::EventHandlerV01 | World::EventHandlerV02 => "handler",
            World::ControllerV02 => "reconciler",
        }
    }

    /// The interface the world exports, with its version.
    pub fn export(self) -> String {
        format!("{PACKAGE}/{}@{}", self.export_iface(), self.version())
    }

    /// The interfaces of our package the world may import.
    pub fn own_imports(self) -> &'static [&'static str] {
        match self {
            World::EventHandlerV01 => &["types", "cache", "log"],
            World::EventHandlerV02 | World::ControllerV02 => {
                &["types", "objects", "cache", "log", "kube", "events"]
            }
        }
    }

    /// The world whose export is among `exports`.
    pub fn detect<S: AsRef<str>>(exports: &[S]) -> Option<World> {
        World::ALL
            .into_iter()
            .find(|w| exports.iter().any(|e| w.may_export(e.as_ref())))
    }

    /// Whether `name` is the interface this world exports, at a version it
    /// accepts.
    pub fn may_export(self, name: &str) -> bool {
        self.names(name, self.export_iface())
    }

    /// Whether `name` is an interface of our package that `self` may import,
    /// at a version it accepts.
    pub fn may_import(self, name: &str) -> bool {
        self.own_imports().iter().any(|i| self.names(name, i))
    }

    /// The package versions the host runs components of.
    pub fn versions() -> Vec<&'static str> {
        let mut v: Vec<&str> = World::ALL
            .iter()
            .flat_map(|w| w.accepts().iter().copied())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worlds_are_told_apart_by_their_export() {
        assert_eq!(
            World::detect(&["wasm-informer:plugin/handler@0.1.0"]),
            Some(World::EventHandlerV01)
        );
        assert_eq!(
            World::detect(&["wasm-informer:plugin/handler@0.2.0"]),
            Some(World::EventHandlerV02)
        );
        assert_eq!(
            World::detect(&["wasm-informer:plugin/handler@0.2.1"]),
            Some(World::EventHandlerV02)
        );
        assert_eq!(
            World::detect(&["wasm-informer:plugin/reconciler@0.2.0"]),
            Some(World::ControllerV02)
        );
        assert_eq!(World::detect(&["wasm-informer:plugin/handler@0.2.2"]), None);
        assert_eq!(World::detect(&["wasi:cli/run@0.2.0"]), None);
        assert_eq!(
            World::ControllerV02.name(),
            "wasm-informer:plugin/controller@0.2.1"
        );
        assert_eq!(World::versions(), vec!["0.1.0", "0.2.0", "0.2.1"]);
        assert!(World::EventHandlerV02.may_import("wasm-informer:plugin/kube@0.2.0"));
        assert!(World::EventHandlerV02.may_import("wasm-informer:plugin/kube@0.2.1"));
        assert!(!World::EventHandlerV01.may_import("wasm-informer:plugin/kube@0.2.1"));
    }
}
