//! Per-plugin resource limits and restart policy, as read from a plugin
//! manifest, with documented defaults.
//!
//! Invariant: a [`PluginLimits`] that passed [`PluginLimits::validate`] has every
//! budget non-zero and every duration within its documented range, so the
//! runtime never has to second-guess it.

use std::time::Duration;

use serde::Deserialize;

/// Default fuel per event: 50 million units. A no-op event costs under 1k fuel
/// in Rust or C, about 35k in Python and 100k in JavaScript with the 0.2 SDKs
/// (0.1 components, which get the whole event lowered, about 160k and 1M), and
/// a JavaScript or Python instance's first call costs several times more; 50M
/// leaves two orders of magnitude of headroom for real work while stopping an
/// infinite loop in tens of milliseconds.
pub const DEFAULT_FUEL_PER_EVENT: u64 = 50_000_000;
/// Default wall-clock deadline per event: 1000 ms (the first call of a
/// JavaScript or Python instance takes about 1 ms).
pub const DEFAULT_TIMEOUT_MS: u64 = 1000;
/// Default cap per linear memory: 256 MiB (a JavaScript or Python component
/// needs a few tens of MiB).
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Default number of consecutive failures (traps or failed restarts) before the
/// plugin is quarantined.
pub const DEFAULT_MAX_FAILURES: u32 = 5;
/// Default quarantine period before the host tries the plugin again: 5 minutes.
pub const DEFAULT_QUARANTINE_SECONDS: u64 = 300;
/// Default first restart delay: 100 ms, doubled on each consecutive failure.
pub const DEFAULT_BACKOFF_INITIAL_MS: u64 = 100;
/// Default longest restart delay: 30 s.
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 30_000;
/// `init` gets this many times the per-event fuel and deadline: it may build
/// state (and for JavaScript or Python warm up the interpreter).
pub const INIT_BUDGET_FACTOR: u64 = 10;

/// Largest accepted `memory_mb`: 4 GiB, the whole 32-bit address space.
pub const MAX_MEMORY_MB: u64 = 4096;
/// Largest accepted `timeout_ms`: 10 minutes.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// The limits a plugin runs under. Field names are the manifest keys; every key
/// is optional and defaults to the `DEFAULT_*` constant of this module. Unknown
/// keys are left to the manifest loader (this struct is meant to be
/// `#[serde(flatten)]`ed into the manifest, which rejects unknown keys itself).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PluginLimits {
    /// Fuel (roughly, Wasm instructions) one event may consume.
    pub fuel_per_event: u64,
    /// Wall-clock deadline for one event, in milliseconds.
    pub timeout_ms: u64,
    /// Cap on each of the instance's linear memories, in MiB.
    pub memory_mb: u64,
    /// Consecutive failures before quarantine.
    pub max_failures: u32,
    /// How long a quarantined plugin rests before the next attempt, in seconds.
    pub quarantine_seconds: u64,
    /// First restart delay after a failure, in milliseconds.
    pub backoff_initial_ms: u64,
    /// Longest restart delay, in milliseconds.
    pub backoff_max_ms: u64,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            fuel_per_event: DEFAULT_FUEL_PER_EVENT,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            memory_mb: DEFAULT_MEMORY_MB,
            max_failures: DEFAULT_MAX_FAILURES,
            quarantine_seconds: DEFAULT_QUARANTINE_SECONDS,
            backoff_initial_ms: DEFAULT_BACKOFF_INITIAL_MS,
            backoff_max_ms: DEFAULT_BACKOFF_MAX_MS,
        }
    }
}

/// A limit that is out of range; the message names the key and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid limit `{key}` = {value}: {reason}")]
pub struct LimitsError {
    /// The manifest key.
    pub key: &'static str,
    /// The rejected value.
    pub value: u64,
    /// Why it was rejected.
    pub reason: &'static str,
}

impl PluginLimits {
    /// Checks every field; returns the first bad one.
    pub fn validate(&self) -> Result<(), LimitsError> {
        let err = |key, value, reason| Err(LimitsError { key, value, reason });
        if self.fuel_per_event == 0 {
            return err("fuel_per_event", 0, "must be at least 1");
        }
        if self.timeout_ms == 0 || self.timeout_ms > MAX_TIMEOUT_MS {
            return err(
                "timeout_ms",
                self.timeout_ms,
                "must be between 1 and 600000",
            );
        }
        if self.memory_mb == 0 || self.memory_mb > MAX_MEMORY_MB {
            return err("memory_mb", self.memory_mb, "must be between 1 and 4096");
        }
        if self.max_failures == 0 {
            return err("max_failures", 0, "must be at least 1");
        }
        if self.backoff_initial_ms == 0 {
            return err("backoff_initial_ms", 0, "must be at least 1");
        }
        if self.backoff_max_ms < self.backoff_initial_ms {
            return err(
                "backoff_max_ms",
                self.backoff_max_ms,
                "must not be below backoff_initial_ms",
            );
        }
        Ok(())
    }

    /// The per-event deadline.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The memory cap in bytes.
    pub fn memory_bytes(&self) -> usize {
        (self.memory_mb as usize) << 20
    }

    /// The quarantine period.
    pub fn quarantine(&self) -> Duration {
        Duration::from_secs(self.quarantine_seconds)
    }

    /// Delay before the restart that follows the `failures`-th consecutive
    /// failure (1-based): `backoff_initial_ms * 2^(failures-1)`, capped at
    /// `backoff_max_ms`.
    pub fn backoff(&self, failures: u32) -> Duration {
        let shift = failures.saturating_sub(1).min(63);
        let ms = self
            .backoff_initial_ms
            .checked_shl(shift)
            .filter(|v| v >> shift == self.backoff_initial_ms)
            .unwrap_or(u64::MAX)
            .min(self.backoff_max_ms);
        Duration::from_millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fit_javascript_and_python_guests() {
        let l = PluginLimits::default();
        l.validate().unwrap();
        // 190k fuel per trivial JavaScript call: at least 100 such calls fit.
        assert!(l.fuel_per_event >= 100 * 190_000);
        assert!(l.timeout_ms >= 100);
        assert!(l.memory_mb >= 128);
    }

    #[test]
    fn manifest_keys_override_defaults() {
        let l: PluginLimits = toml::from_str("fuel_per_event = 7\nmemory_mb = 16").unwrap();
        assert_eq!(l.fuel_per_event, 7);
        assert_eq!(l.memory_mb, 16);
        assert_eq!(l.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(l.memory_bytes(), 16 << 20);
    }

    #[test]
    fn flattens_into_a_manifest() {
        #[derive(Deserialize)]
        struct Manifest {
            name: String,
            #[serde(flatten)]
            limits: PluginLimits,
        }
        let m: Manifest =
            toml::from_str("name = \"a\"\ntimeout_ms = 20\nqueue_capacity = 5").unwrap();
        assert_eq!(m.name, "a");
        assert_eq!(m.limits.timeout_ms, 20);
        let e = toml::from_str::<Manifest>("name = \"a\"\ntimeout_ms = \"soon\"")
            .err()
            .unwrap();
        assert!(e.to_string().contains("invalid type"), "{e}");
    }

    #[test]
    fn validation_names_the_bad_key() {
        let l = PluginLimits {
            memory_mb: 0,
            ..Default::default()
        };
        let e = l.validate().unwrap_err();
        assert_eq!(e.key, "memory_mb");
        assert!(e.to_string().contains("memory_mb"));
        let l = PluginLimits {
            timeout_ms: MAX_TIMEOUT_MS + 1,
            ..Default::default()
        };
        assert_eq!(l.validate().unwrap_err().key, "timeout_ms");
    }

    #[test]
    fn backoff_doubles_from_100ms_to_30s() {
        let l = PluginLimits::default();
        assert_eq!(l.backoff(1), Duration::from_millis(100));
        assert_eq!(l.backoff(2), Duration::from_millis(200));
        assert_eq!(l.backoff(3), Duration::from_millis(400));
        assert_eq!(l.backoff(9), Duration::from_millis(25_600));
        assert_eq!(l.backoff(10), Duration::from_secs(30));
        assert_eq!(l.backoff(1000), Duration::from_secs(30));
    }
}
