//! The outcome of one call into a plugin, and the classification of traps.
//!
//! Invariant: every call ends in exactly one [`CallOutcome`]; a trap always names
//! one [`TrapKind`], and an error that is not a recognised Wasm trap is
//! [`TrapKind::Other`], never lost.

use std::fmt;

/// Why an instance died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrapKind {
    /// The event's fuel budget ran out.
    OutOfFuel,
    /// The event's wall-clock deadline passed.
    Deadline,
    /// The instance hit its memory cap (a refused `memory.grow`, after which the
    /// guest aborted).
    MemoryLimit,
    /// The Wasm call stack overflowed.
    StackOverflow,
    /// The guest panicked or reached `unreachable` (a Rust panic, `abort()`, an
    /// uncaught Python exception).
    Panic,
    /// Anything else: out-of-bounds access, a host error, an instance that
    /// cannot be entered.
    Other,
}

impl TrapKind {
    /// Every kind, in report order.
    pub const ALL: [TrapKind; 6] = [
        TrapKind::OutOfFuel,
        TrapKind::Deadline,
        TrapKind::MemoryLimit,
        TrapKind::StackOverflow,
        TrapKind::Panic,
        TrapKind::Other,
    ];

    /// Snake-case name used in logs, metrics and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            TrapKind::OutOfFuel => "out_of_fuel",
            TrapKind::Deadline => "deadline",
            TrapKind::MemoryLimit => "memory_limit",
            TrapKind::StackOverflow => "stack_overflow",
            TrapKind::Panic => "panic",
            TrapKind::Other => "other",
        }
    }

    /// Position in [`TrapKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A classified trap with the full error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginTrap {
    /// The kind.
    pub kind: TrapKind,
    /// wasmtime's error, printed with its context chain and backtrace.
    pub message: String,
}

impl fmt::Display for PluginTrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trap ({}): {}", self.kind, self.message)
    }
}

/// How one call into a plugin ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The plugin returned `ok`.
    Ok,
    /// The plugin returned `err(message)`; the instance lives on.
    HandlerError(String),
    /// The instance trapped and must be discarded.
    Trap(PluginTrap),
}

/// Classifies an error returned by a call into a component.
///
/// `memory_refused` is whether the store's limiter refused a memory growth
/// during the call: the guest then typically aborts with `unreachable`, which is
/// reported as [`TrapKind::MemoryLimit`] rather than a panic.
pub fn classify(err: &wasmtime::Error, memory_refused: bool) -> PluginTrap {
    let message = format!("{err:?}");
    let kind = match err.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => TrapKind::OutOfFuel,
        Some(wasmtime::Trap::Interrupt) => TrapKind::Deadline,
        Some(wasmtime::Trap::StackOverflow) => TrapKind::StackOverflow,
        Some(wasmtime::Trap::UnreachableCodeReached) if memory_refused => TrapKind::MemoryLimit,
        Some(wasmtime::Trap::UnreachableCodeReached) => TrapKind::Panic,
        Some(_) if memory_refused => TrapKind::MemoryLimit,
        _ => TrapKind::Other,
    };
    PluginTrap { kind, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trap(t: wasmtime::Trap) -> wasmtime::Error {
        wasmtime::Error::from(t)
    }

    #[test]
    fn wasm_traps_map_to_kinds() {
        assert_eq!(
            classify(&trap(wasmtime::Trap::OutOfFuel), false).kind,
            TrapKind::OutOfFuel
        );
        assert_eq!(
            classify(&trap(wasmtime::Trap::Interrupt), false).kind,
            TrapKind::Deadline
        );
        assert_eq!(
            classify(&trap(wasmtime::Trap::StackOverflow), false).kind,
            TrapKind::StackOverflow
        );
        assert_eq!(
            classify(&trap(wasmtime::Trap::UnreachableCodeReached), false).kind,
            TrapKind::Panic
        );
        assert_eq!(
            classify(&trap(wasmtime::Trap::UnreachableCodeReached), true).kind,
            TrapKind::MemoryLimit
        );
        assert_eq!(
            classify(&trap(wasmtime::Trap::MemoryOutOfBounds), false).kind,
            TrapKind::Other
        );
    }

    #[test]
    fn host_errors_are_other_and_keep_their_text() {
        let e = wasmtime::Error::msg("cannot enter component instance");
        let t = classify(&e, false);
        assert_eq!(t.kind, TrapKind::Other);
        assert!(t.message.contains("cannot enter"));
    }

    #[test]
    fn kinds_index_their_position() {
        for (i, k) in TrapKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }
}
