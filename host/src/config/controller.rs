//! The keys of a controller manifest: `for` (the primary resource), `owns`,
//! `[[watches]]`, `workers`, the retry rate limiter (`retry_*`) and the work
//! queue's ageing (`max_low_priority_wait_ms`).
//!
//! Job: validate them into a [`ControllerSpec`], and refuse the mixes that
//! cannot mean anything: controller keys without `for`, and the event-handler
//! keys `resources` and `queue_capacity` with it.
//!
//! Invariant: as for every manifest key, a rejection names the file, the
//! line and column, the key and the reason; a manifest with `for` is a
//! controller manifest and nothing else.

use std::ops::Range;
use std::time::Duration;

use kube_informer::workqueue::triggers::KeyMap;
use kube_informer::workqueue::RateLimiterConfig;
use serde::Deserialize;
use toml::Spanned;

use wasm_informer_runtime::World;

use super::{check_resource_id, ConfigError, Located, PluginManifest, RawManifest, Source};

/// Most workers (instances) a controller may run.
pub const MAX_WORKERS: u64 = 64;

/// How a watched resource names the primary object to reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchBy {
    /// The value of this label is the primary's name (in the watched
    /// object's namespace).
    Label(String),
    /// The value of this annotation is the primary's name, or
    /// `namespace/name`.
    Annotation(String),
}

/// One `[[watches]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchSpec {
    /// The secondary resource, for example `v1/configmaps`.
    pub resource: Located<String>,
    /// What in it names the primary.
    pub by: WatchBy,
}

/// What makes a manifest a controller's.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerSpec {
    /// `for`: the resource whose keys are reconciled.
    pub primary: Located<String>,
    /// `owns`: resources whose objects queue their controller owner.
    pub owns: Vec<Located<String>>,
    /// `[[watches]]`: resources whose objects name a primary.
    pub watches: Vec<WatchSpec>,
    /// `workers`: instances reconciling side by side (default 1).
    pub workers: usize,
    /// `retry_base_delay_ms`, `retry_max_delay_ms`, `retry_qps`,
    /// `retry_burst` (default client-go's: 5 ms, 1000 s, 10/s, 100).
    pub rate_limiter: RateLimiterConfig,
    /// `max_low_priority_wait_ms`: how long an initial-list or resync key
    /// waits behind live ones before it takes every other turn (default 5 s;
    /// `None`, from 0: never, as controller-runtime).
    pub max_low_priority_wait: Option<Duration>,
}

impl ControllerSpec {
    /// How each trigger's objects name the primary keys they queue: the
    /// primary itself, then every `owns` resource (through the controller
    /// owner reference of the primary's `group` and `kind`), then every
    /// `[[watches]]` table, in manifest order. The one reading of the
    /// triggers that the host's work queue and `test` share.
    pub fn key_maps(&self, group: &str, kind: &str, namespaced: bool) -> Vec<(String, KeyMap)> {
        let mut out = vec![(self.primary.value.clone(), KeyMap::Primary)];
        for o in &self.owns {
            let map = KeyMap::ControllerOwner {
                group: group.to_string(),
                kind: kind.to_string(),
                namespaced,
            };
            out.push((o.value.clone(), map));
        }
        for w in &self.watches {
            let map = match &w.by {
                WatchBy::Label(key) => KeyMap::Label {
                    key: key.clone(),
                    namespaced,
                },
                WatchBy::Annotation(key) => KeyMap::Annotation {
                    key: key.clone(),
                    namespaced,
                },
            };
            out.push((w.resource.value.clone(), map));
        }
        out
    }

    /// Every resource a trigger watches: the primary, then owned, then
    /// watched ones, deduplicated.
    pub fn resource_ids(&self) -> Vec<String> {
        let mut out = vec![self.primary.value.clone()];
        let rest = self
            .owns
            .iter()
            .chain(self.watches.iter().map(|w| &w.resource));
        for r in rest {
            if !out.contains(&r.value) {
                out.push(r.value.clone());
            }
        }
        out
    }
}

/// One `[[watches]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWatch {
    resource: Spanned<String>,
    label: Option<Spanned<String>>,
    annotation: Option<Spanned<String>>,
}

fn pos(src: &Source<'_>, span: Range<usize>) -> (usize, usize) {
    super::line_col(src.text, span.start)
}

/// Checks a label or annotation key: an optional DNS-subdomain prefix and
/// `/`, then a name of 1 to 63 characters of letters, digits, `-`, `_`, `.`
/// starting and ending with a letter or digit.
fn check_metadata_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(format!(
            "invalid key {k:?}: expected an optional DNS prefix and '/', then 1-63 letters, digits, '-', '_' or '.' (for example \"app.example.com/owner\")"
        ))
    }
}

/// The controller keys that are set, with their spans, for "needs `for`".
fn controller_only_keys(raw: &RawManifest) -> Vec<(&'static str, Range<usize>)> {
    let mut out = Vec::new();
    if let Some(o) = &raw.owns {
        out.push(("owns", o.span()));
    }
    if let Some(w) = raw.watches.as_ref().and_then(|w| w.first()) {
        out.push(("watches", w.resource.span()));
    }
    let spans: [(&'static str, Option<Range<usize>>); 6] = [
        ("workers", raw.workers.as_ref().map(|v| v.span())),
        (
            "retry_base_delay_ms",
            raw.retry_base_delay_ms.as_ref().map(|v| v.span()),
        ),
        (
            "retry_max_delay_ms",
            raw.retry_max_delay_ms.as_ref().map(|v| v.span()),
        ),
        ("retry_qps", raw.retry_qps.as_ref().map(|v| v.span())),
        ("retry_burst", raw.retry_burst.as_ref().map(|v| v.span())),
        (
            "max_low_priority_wait_ms",
            raw.max_low_priority_wait_ms.as_ref().map(|v| v.span()),
        ),
    ];
    out.extend(spans.into_iter().filter_map(|(k, s)| s.map(|s| (k, s))));
    out
}

fn ranged(
    src: &Source<'_>,
    v: &Option<Spanned<u64>>,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ConfigError> {
    match v {
        Some(s) if *s.get_ref() < min || *s.get_ref() > max => Err(ConfigError::at(
            src,
            s.span(),
            key,
            format!(
                "{} is out of range: must be between {min} and {max}",
                s.get_ref()
            ),
        )),
        Some(s) => Ok(Some(*s.get_ref())),
        None => Ok(None),
    }
}

/// The manifest's controller, if it has `for`; errors for keys that do not
/// fit its kind.
pub(super) fn controller_spec(
    src: &Source<'_>,
    raw: &RawManifest,
) -> Result<Option<ControllerSpec>, ConfigError> {
    let Some(primary) = &raw.for_ else {
        if let Some((key, span)) = controller_only_keys(raw).into_iter().next() {
            return Err(ConfigError::at(
                src,
                span,
                key,
                "only a controller has this key: name the resource it reconciles with `for = \"GROUP/VERSION/PLURAL\"` (and drop `resources`), or remove it",
            ));
        }
        return Ok(None);
    };
    check_resource_id(primary.get_ref())
        .map_err(|e| ConfigError::at(src, primary.span(), "for", e))?;
    if let Some(r) = &raw.resources {
        return Err(ConfigError::at(
            src,
            r.span(),
            "resources",
            "a controller (a manifest with `for`) takes no `resources`: its primary resource is `for`, and what queues its keys is `owns` and `[[watches]]`",
        ));
    }
    if let Some(q) = &raw.queue_capacity {
        return Err(ConfigError::at(
            src,
            q.span(),
            "queue_capacity",
            "a controller's work queue holds one entry per key and never overflows: remove `queue_capacity`",
        ));
    }
    let primary_id = primary.get_ref().clone();
    let mut owns: Vec<Located<String>> = Vec::new();
    for r in raw
        .owns
        .as_ref()
        .map(|o| o.get_ref().as_slice())
        .unwrap_or_default()
    {
        check_resource_id(r.get_ref()).map_err(|e| ConfigError::at(src, r.span(), "owns", e))?;
        if *r.get_ref() == primary_id {
            return Err(ConfigError::at(
                src,
                r.span(),
                "owns",
                format!(
                    "{:?} is the primary resource (`for`); a controller cannot own its own kind",
                    r.get_ref()
                ),
            ));
        }
        if owns.iter().any(|o| o.value == *r.get_ref()) {
            return Err(ConfigError::at(
                src,
                r.span(),
                "owns",
                format!("{:?} is listed twice", r.get_ref()),
            ));
        }
        owns.push(Located {
            value: r.get_ref().clone(),
            position: pos(src, r.span()),
        });
    }
    let mut watches: Vec<WatchSpec> = Vec::new();
    for (i, w) in raw.watches.iter().flatten().enumerate() {
        let key = |f: &str| format!("watches[{i}].{f}");
        check_resource_id(w.resource.get_ref())
            .map_err(|e| ConfigError::at(src, w.resource.span(), &key("resource"), e))?;
        let by = match (&w.label, &w.annotation) {
            (Some(l), None) => {
                check_metadata_key(l.get_ref()).map_err(|e| ConfigError::at(src, l.span(), &key("label"), e))?;
                WatchBy::Label(l.get_ref().clone())
            }
            (None, Some(a)) => {
                check_metadata_key(a.get_ref())
                    .map_err(|e| ConfigError::at(src, a.span(), &key("annotation"), e))?;
                WatchBy::Annotation(a.get_ref().clone())
            }
            (Some(_), Some(a)) => {
                return Err(ConfigError::at(
                    src,
                    a.span(),
                    &key("annotation"),
                    "set either `label` or `annotation`, not both",
                ))
            }
            (None, None) => {
                return Err(ConfigError::at(
                    src,
                    w.resource.span(),
                    &key("label"),
                    "a watch needs `label = \"KEY\"` or `annotation = \"KEY\"`: the key whose value names the primary object",
                ))
            }
        };
        let spec = WatchSpec {
            resource: Located {
                value: w.resource.get_ref().clone(),
                position: pos(src, w.resource.span()),
            },
            by,
        };
        if watches
            .iter()
            .any(|x| x.resource.value == spec.resource.value && x.by == spec.by)
        {
            return Err(ConfigError::at(
                src,
                w.resource.span(),
                &key("resource"),
                "the same watch is declared twice",
            ));
        }
        watches.push(spec);
    }
    let workers = ranged(src, &raw.workers, "workers", 1, MAX_WORKERS)?.unwrap_or(1) as usize;
    let mut rl = RateLimiterConfig::default();
    if let Some(ms) = ranged(
        src,
        &raw.retry_base_delay_ms,
        "retry_base_delay_ms",
        1,
        3_600_000,
    )? {
        rl.base_delay = Duration::from_millis(ms);
    }
    if let Some(ms) = ranged(
        src,
        &raw.retry_max_delay_ms,
        "retry_max_delay_ms",
        1,
        86_400_000,
    )? {
        rl.max_delay = Duration::from_millis(ms);
    }
    if rl.max_delay < rl.base_delay {
        let span = raw
            .retry_max_delay_ms
            .as_ref()
            .or(raw.retry_base_delay_ms.as_ref())
            .map(|s| s.span())
            .unwrap_or(primary.span());
        return Err(ConfigError::at(
            src,
            span,
            "retry_max_delay_ms",
            format!(
                "{} ms is below the base delay of {} ms",
                rl.max_delay.as_millis(),
                rl.base_delay.as_millis()
            ),
        ));
    }
    if let Some(q) = &raw.retry_qps {
        let v = *q.get_ref();
        if !(0.0..=10_000.0).contains(&v) || v.is_nan() {
            return Err(ConfigError::at(
                src,
                q.span(),
                "retry_qps",
                format!("{v} is out of range: must be between 0 (no overall limit) and 10000"),
            ));
        }
        rl.qps = v;
    }
    if let Some(b) = ranged(src, &raw.retry_burst, "retry_burst", 1, 100_000)? {
        rl.burst = b as u32;
    }
    let max_low_priority_wait = match ranged(
        src,
        &raw.max_low_priority_wait_ms,
        "max_low_priority_wait_ms",
        0,
        3_600_000,
    )? {
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
        None => Some(kube_informer::workqueue::queue::DEFAULT_MAX_LOW_PRIORITY_WAIT),
    };
    Ok(Some(ControllerSpec {
        primary: Located {
            value: primary_id,
            position: pos(src, primary.span()),
        },
        owns,
        watches,
        workers,
        rate_limiter: rl,
        max_low_priority_wait,
    }))
}

impl PluginManifest {
    /// Whether the component's world fits the manifest: a controller
    /// manifest (with `for`) needs a `controller` component, any other an
    /// `event-handler` one. The error names the key that made the manifest
    /// what it is.
    pub fn check_world(&self, world: World) -> Result<(), ConfigError> {
        match (&self.controller, world) {
            (Some(_), World::ControllerV02) | (None, World::EventHandlerV01 | World::EventHandlerV02) => {
                Ok(())
            }
            (Some(c), _) => Err(self.error_at(
                c.primary.position,
                "for",
                format!(
                    "`for` makes this manifest a controller's, but {} is an event handler ({}): build it against the `controller` world (export `reconciler`), or list the resources it handles events of with `resources = [...]` instead of `for`",
                    self.wasm.display(),
                    world.name()
                ),
            )),
            (None, _) => Err(self.error_at(
                self.resources.first().map_or(self.name_position, |r| r.position),
                "resources",
                format!(
                    "{} is a controller ({}): name the resource it reconciles with `for = \"GROUP/VERSION/PLURAL\"` instead of `resources`",
                    self.wasm.display(),
                    world.name()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Limits;

    #[test]
    fn max_low_priority_wait_defaults_to_five_seconds_and_zero_turns_ageing_off() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.wasm"), b"").unwrap();
        let path = dir.path().join("c.toml");
        let parse = |text: String| PluginManifest::parse(&path, &text, &Limits::default());
        let wait = |extra: &str| {
            parse(format!(
                "name = \"c\"\nwasm = \"c.wasm\"\nfor = \"apps/v1/deployments\"\n{extra}\n"
            ))
            .map(|m| m.controller.unwrap().max_low_priority_wait)
        };
        assert_eq!(wait("").unwrap(), Some(Duration::from_secs(5)));
        assert_eq!(wait("max_low_priority_wait_ms = 0").unwrap(), None);
        assert_eq!(
            wait("max_low_priority_wait_ms = 250").unwrap(),
            Some(Duration::from_millis(250))
        );
        let e = wait("max_low_priority_wait_ms = 4000000").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("max_low_priority_wait_ms"));
        let e = parse(
            "name = \"c\"\nwasm = \"c.wasm\"\nresources = [\"v1/pods\"]\nmax_low_priority_wait_ms = 10\n"
                .into(),
        )
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("max_low_priority_wait_ms"), "{e}");
    }

    #[test]
    fn metadata_keys() {
        assert!(check_metadata_key("app.example.com/owner").is_ok());
        assert!(check_metadata_key("owner").is_ok());
        assert!(check_metadata_key("a_b.c-d").is_ok());
        assert!(check_metadata_key("").is_err());
        assert!(check_metadata_key("/owner").is_err());
        assert!(check_metadata_key("Example.com/owner").is_err());
        assert!(check_metadata_key("-owner").is_err());
        assert!(check_metadata_key(&"x".repeat(64)).is_err());
    }
}
