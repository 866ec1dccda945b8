//! The configuration directory: `DIR/host.toml` plus one plugin manifest per file in
//! `DIR/plugins/*.toml`.
//!
//! Job: parse and validate both kinds of file into [`HostSettings`] and
//! [`PluginManifest`], resolving paths relative to the file that names them and
//! filling plugin limits from the host's defaults.
//!
//! Invariant: every rejection is a [`ConfigError`] that names the file, the line and
//! column (from toml's spans), the key, and the reason. Unknown keys are errors, never
//! silently ignored. Parsing has no side effects: a bad file cannot disturb anything
//! already running (I9).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use wasm_informer_runtime::capability::kube::{EventsGrant, KubeSettings, WriteGrant};

mod controller;

pub use controller::{ControllerSpec, WatchBy, WatchSpec, MAX_WORKERS};

/// Default address of the metrics and health endpoints.
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9898";

/// A rejected configuration file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file at fault.
    pub file: PathBuf,
    /// 1-based line and column, when the fault has a position in the file.
    pub position: Option<(usize, usize)>,
    /// The key at fault (dotted for nested keys), when there is one.
    pub key: Option<String>,
    /// Why the file was rejected.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "key `{key}`: ")?;
        }
        write!(f, "{}", self.reason)
    }
}

impl ConfigError {
    fn whole_file(file: &Path, reason: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            position: None,
            key: None,
            reason: reason.into(),
        }
    }

    fn at(src: &Source<'_>, span: Range<usize>, key: &str, reason: impl Into<String>) -> Self {
        Self {
            file: src.path.to_path_buf(),
            position: Some(line_col(src.text, span.start)),
            key: Some(key.to_string()),
            reason: reason.into(),
        }
    }
}

/// A file's path and text, for turning spans into positions.
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// The key written at the start of the line containing `offset`, or the table
/// header on that line.
fn key_on_line(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = text[offset..]
        .find('\n')
        .map(|i| offset + i)
        .unwrap_or(text.len());
    let line = text[start..end].trim();
    if let Some(header) = line.strip_prefix('[') {
        let header = header.trim_start_matches('[');
        let close = header.find(']')?;
        return Some(header[..close].trim().to_string());
    }
    let eq = line.find('=')?;
    let key = line[..eq].trim();
    (!key.is_empty()).then(|| key.to_string())
}

/// The first back-quoted word of a serde message.
fn quoted(msg: &str) -> Option<&str> {
    let start = msg.find('`')? + 1;
    let end = msg[start..].find('`')? + start;
    Some(&msg[start..end])
}

/// Turns a toml deserialisation error into a [`ConfigError`] with key and reason.
fn from_toml_error(src: &Source<'_>, err: &toml::de::Error) -> ConfigError {
    let msg = err.message().trim();
    let span = err.span().unwrap_or(0..0);
    let position = Some(line_col(src.text, span.start));
    let file = src.path.to_path_buf();
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        let key = quoted(rest).map(str::to_string);
        let expected = rest.split_once(", expected ").map(|(_, e)| e.to_string());
        let reason = match expected {
            Some(e) => {
                let candidates: Vec<&str> = e.split('`').skip(1).step_by(2).collect();
                let hint = key
                    .as_deref()
                    .map(|k| kube_informer::suggest::did_you_mean(k, candidates))
                    .unwrap_or_default();
                format!("unknown key{hint} (expected {e})")
            }
            None => "unknown key".to_string(),
        };
        return ConfigError {
            file,
            position,
            key,
            reason,
        };
    }
    if let Some(rest) = msg.strip_prefix("missing field ") {
        return ConfigError {
            file,
            position,
            key: quoted(rest).map(str::to_string),
            reason: "required key is missing".to_string(),
        };
    }
    let is_syntax = !(msg.starts_with("invalid type")
        || msg.starts_with("invalid value")
        || msg.starts_with("invalid length")
        || msg.starts_with("unknown variant"));
    if is_syntax {
        return ConfigError {
            file,
            position,
            key: None,
            reason: format!("invalid TOML: {msg}"),
        };
    }
    ConfigError {
        file,
        position,
        key: key_on_line(src.text, span.start),
        reason: msg.to_string(),
    }
}

fn parse<T: serde::de::DeserializeOwned>(src: &Source<'_>) -> Result<T, ConfigError> {
    toml::from_str(src.text).map_err(|e| from_toml_error(src, &e))
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::whole_file(path, format!("cannot read file: {e}")))
}

/// Checks the syntax of a resource id: `VERSION/PLURAL` (core group) or
/// `GROUP/VERSION/PLURAL`, lower-case letters, digits, `-` and `.` only. Whether the
/// cluster serves it is decided later by discovery.
pub fn check_resource_id(id: &str) -> Result<(), String> {
    let parts: Vec<&str> = id.split('/').collect();
    if !(parts.len() == 2 || parts.len() == 3) {
        return Err(format!(
            "invalid resource {id:?}: expected VERSION/PLURAL (for example \"v1/pods\") or GROUP/VERSION/PLURAL (for example \"apps/v1/deployments\")"
        ));
    }
    for p in &parts {
        if p.is_empty() {
            return Err(format!(
                "invalid resource {id:?}: empty group, version or plural"
            ));
        }
        if !p
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        {
            return Err(format!(
                "invalid resource {id:?}: only lower-case letters, digits, '-' and '.' are allowed"
            ));
        }
    }
    let version = parts[parts.len() - 2];
    if !(version.starts_with('v') && version[1..].starts_with(|c: char| c.is_ascii_digit())) {
        return Err(format!(
            "invalid resource {id:?}: {version:?} is not an API version (like \"v1\" or \"v1beta1\")"
        ));
    }
    Ok(())
}

/// Checks a plugin name: 1 to 63 characters, lower-case letters, digits, `-` and
/// `_`, starting and ending with a letter or digit (it becomes a metric label and a
/// log field).
pub fn check_plugin_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    let ends_ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > 63 || !ok_chars || !ends_ok {
        return Err(format!(
            "invalid plugin name {name:?}: use 1-63 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Checks a namespace name (an RFC 1123 label).
fn check_namespace(ns: &str) -> Result<(), String> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && ns.starts_with(|c: char| c.is_ascii_alphanumeric())
        && ns.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid namespace {ns:?}: must be an RFC 1123 label (lower-case letters, digits and '-', at most 63)"
        ))
    }
}

/// Per-plugin resource limits, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Full notifications the plugin's listener holds before coalescing (I4).
    pub queue_capacity: usize,
    /// Wasm fuel granted per event.
    pub fuel_per_event: u64,
    /// Wall-clock deadline per event, in milliseconds.
    pub timeout_ms: u64,
    /// Linear memory cap, in MiB.
    pub memory_mb: u64,
    /// Resync period in seconds; 0 disables resync.
    pub resync_seconds: u64,
    /// How long a plugin quarantined after consecutive failures rests
    /// before the next attempt, in seconds.
    pub quarantine_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        // The runtime's defaults: 50M fuel leaves two orders of magnitude over a
        // trivial JavaScript call (~190k); 1 s deadline; 256 MiB memory cap.
        Self {
            queue_capacity: 1024,
            fuel_per_event: 50_000_000,
            timeout_ms: 1_000,
            memory_mb: 256,
            resync_seconds: 0,
            quarantine_seconds: wasm_informer_runtime::limits::DEFAULT_QUARANTINE_SECONDS,
        }
    }
}

/// Limits as written in a file: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    queue_capacity: Option<Spanned<u64>>,
    fuel_per_event: Option<Spanned<u64>>,
    timeout_ms: Option<Spanned<u64>>,
    memory_mb: Option<Spanned<u64>>,
    resync_seconds: Option<Spanned<u64>>,
    quarantine_seconds: Option<Spanned<u64>>,
}

impl RawLimits {
    /// Applies these values over `base`, validating ranges.
    fn apply(&self, src: &Source<'_>, prefix: &str, base: &Limits) -> Result<Limits, ConfigError> {
        let key = |k: &str| format!("{prefix}{k}");
        let ranged = |v: &Option<Spanned<u64>>,
                      name: &str,
                      min: u64,
                      max: u64,
                      dflt: u64|
         -> Result<u64, ConfigError> {
            match v {
                None => Ok(dflt),
                Some(s) if *s.get_ref() < min || *s.get_ref() > max => Err(ConfigError::at(
                    src,
                    s.span(),
                    &key(name),
                    format!(
                        "{} is out of range: must be between {min} and {max}",
                        s.get_ref()
                    ),
                )),
                Some(s) => Ok(*s.get_ref()),
            }
        };
        Ok(Limits {
            queue_capacity: ranged(
                &self.queue_capacity,
                "queue_capacity",
                1,
                1 << 20,
                base.queue_capacity as u64,
            )? as usize,
            fuel_per_event: ranged(
                &self.fuel_per_event,
                "fuel_per_event",
                1_000,
                u64::MAX / 2,
                base.fuel_per_event,
            )?,
            timeout_ms: ranged(&self.timeout_ms, "timeout_ms", 1, 600_000, base.timeout_ms)?,
            memory_mb: ranged(&self.memory_mb, "memory_mb", 1, 4_096, base.memory_mb)?,
            resync_seconds: ranged(
                &self.resync_seconds,
                "resync_seconds",
                0,
                86_400 * 7,
                base.resync_seconds,
            )?,
            quarantine_seconds: ranged(
                &self.quarantine_seconds,
                "quarantine_seconds",
                1,
                86_400,
                base.quarantine_seconds,
            )?,
        })
    }
}

/// What the host does to objects before caching them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformSettings {
    /// Drop `metadata.managedFields` (default true).
    pub strip_managed_fields: bool,
    /// Pack the cached JSON in the background with a per-resource zstd
    /// dictionary (default true).
    pub pack: bool,
}

impl Default for TransformSettings {
    fn default() -> Self {
        Self {
            strip_managed_fields: true,
            pack: true,
        }
    }
}

impl TransformSettings {
    /// The informer-side transform.
    pub fn to_transform(&self) -> kube_informer::object::Transform {
        kube_informer::object::Transform {
            strip_managed_fields: self.strip_managed_fields,
            pack: self.pack,
        }
    }
}

/// One secondary index on a resource: objects are indexed by the value at `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexerSetting {
    /// Index name, as plugins pass it to `cache.by-index`.
    pub name: String,
    /// Dotted field path into the object, for example `spec.nodeName`.
    pub path: String,
}

/// Settings of the embedded API simulator behind `run --sim`.
#[derive(Debug, Clone, PartialEq)]
pub struct SimSettings {
    /// Pods seeded before the host starts.
    pub pods: usize,
    /// Namespaces the pods spread over.
    pub namespaces: usize,
    /// Nodes pods are scheduled on.
    pub nodes: usize,
    /// Workload generator seed.
    pub seed: u64,
    /// Churn operations per second while the host runs (0 for none).
    pub churn_per_second: f64,
    /// Deployments of the workload generator (containers with ports), over
    /// the same namespaces; a fraction `expose_fraction` of them is labelled
    /// `expose: "true"` (what the service-exposer example reconciles).
    pub deployments: usize,
    /// Fraction (0 to 1) of generated Deployments labelled `expose: "true"`.
    pub expose_fraction: f64,
    /// Weight of Deployment operations (create, relabel, change ports,
    /// delete) in churn, against 4 for the pod operations; 0 for none.
    pub deployment_churn: u32,
    /// The simulator authenticates bearer tokens and enforces RBAC and
    /// impersonation, over HTTPS (kubectl sends credentials only there).
    pub rbac: bool,
    /// Bearer tokens it accepts besides the admin's: (token, user). Set by
    /// `wasm-informer sim --token`, not by host.toml.
    pub tokens: Vec<(String, String)>,
    /// The simulator serves server-side sharded list and watch (KEP-5866,
    /// the `ShardedListAndWatch` feature gate of Kubernetes 1.36): lists and
    /// watches honour `shardSelector`. Off, it ignores the parameter as an
    /// older server does.
    pub sharded_list_and_watch: bool,
}

impl Default for SimSettings {
    fn default() -> Self {
        Self {
            pods: 600,
            namespaces: 6,
            nodes: 12,
            seed: 42,
            churn_per_second: 40.0,
            deployments: 40,
            expose_fraction: 0.25,
            deployment_churn: 1,
            rbac: false,
            tokens: Vec::new(),
            sharded_list_and_watch: false,
        }
    }
}

/// The validated `host.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSettings {
    /// The file these settings came from.
    pub file: PathBuf,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    pub metrics_addr: SocketAddr,
    /// Resources whose informers start with the host, whether or not a plugin
    /// needs them.
    pub prewarm: Vec<String>,
    /// Directory of the compiled-component cache (absolute or relative to
    /// host.toml); none disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Limits for plugins whose manifests do not set them.
    pub defaults: Limits,
    /// Object transform before caching.
    pub transform: TransformSettings,
    /// Secondary indexes per resource id.
    pub indexers: BTreeMap<String, Vec<IndexerSetting>>,
    /// How long shutdown waits for each plugin to finish its current event.
    pub shutdown_grace_ms: u64,
    /// Whether the process may use transparent huge pages (off by default:
    /// see [`crate::memory`]).
    pub huge_pages: bool,
    /// Embedded simulator settings.
    pub sim: SimSettings,
    /// How replicas share the work (`[cluster]`).
    pub cluster: ClusterSettings,
    /// Who the plugins' requests act as (`[identity]`).
    pub identity: IdentitySettings,
}

impl Default for HostSettings {
    fn default() -> Self {
        Self {
            file: PathBuf::from("host.toml"),
            metrics_addr: DEFAULT_METRICS_ADDR.parse().expect("valid default address"),
            prewarm: Vec::new(),
            cache_dir: None,
            defaults: Limits::default(),
            transform: TransformSettings::default(),
            indexers: BTreeMap::new(),
            shutdown_grace_ms: 10_000,
            huge_pages: false,
            sim: SimSettings::default(),
            cluster: ClusterSettings::default(),
            identity: IdentitySettings::default(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransform {
    strip_managed_fields: Option<bool>,
    pack: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSim {
    pods: Option<usize>,
    namespaces: Option<Spanned<usize>>,
    nodes: Option<Spanned<usize>>,
    seed: Option<u64>,
    churn_per_second: Option<Spanned<f64>>,
    deployments: Option<usize>,
    expose_fraction: Option<Spanned<f64>>,
    deployment_churn: Option<u32>,
    rbac: Option<bool>,
    sharded_list_and_watch: Option<bool>,
}

/// `[indexers.RESOURCE]` tables: index name to field path.
type RawIndexers = BTreeMap<Spanned<String>, BTreeMap<Spanned<String>, Spanned<String>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    metrics_addr: Option<Spanned<String>>,
    resources: Option<Vec<Spanned<String>>>,
    cache_dir: Option<String>,
    shutdown_grace_ms: Option<u64>,
    huge_pages: Option<bool>,
    defaults: Option<RawLimits>,
    transform: Option<RawTransform>,
    indexers: Option<RawIndexers>,
    sim: Option<RawSim>,
    cluster: Option<RawCluster>,
    identity: Option<RawIdentity>,
}

/// `[identity]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIdentity {
    impersonate: Option<bool>,
    namespace: Option<Spanned<String>>,
}

/// Who the plugins' requests act as (`[identity]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentitySettings {
    /// Each plugin's requests carry `Impersonate-User` for the plugin's own
    /// ServiceAccount, so the API server enforces its grants a second time.
    pub impersonate: bool,
    /// The namespace of the plugins' ServiceAccounts (and of the host's).
    pub namespace: String,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        Self {
            impersonate: false,
            namespace: "wasm-informer".into(),
        }
    }
}

/// The prefix of every plugin's ServiceAccount name.
pub const PLUGIN_ACCOUNT_PREFIX: &str = "wasm-informer-";

impl IdentitySettings {
    /// The ServiceAccount of plugin `name`: `wasm-informer-NAME`, with `_`
    /// (allowed in plugin names, not in account names) as `-`.
    pub fn account_name(name: &str) -> String {
        format!("{PLUGIN_ACCOUNT_PREFIX}{}", name.replace('_', "-"))
    }

    /// The user plugin `name`'s requests act as, when impersonating.
    pub fn user_of(&self, name: &str) -> Option<String> {
        self.impersonate.then(|| {
            format!(
                "system:serviceaccount:{}:{}",
                self.namespace,
                Self::account_name(name)
            )
        })
    }
}

impl HostSettings {
    /// Reads and validates a `host.toml`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read(path)?;
        Self::parse(path, &text)
    }

    /// Validates the text of a `host.toml` that lives at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let src = Source { path, text };
        let raw: RawHost = parse(&src)?;
        let mut out = HostSettings {
            file: path.to_path_buf(),
            ..HostSettings::default()
        };
        if let Some(addr) = raw.metrics_addr {
            out.metrics_addr = addr.get_ref().parse().map_err(|_| {
                ConfigError::at(
                    &src,
                    addr.span(),
                    "metrics_addr",
                    format!(
                        "{:?} is not a socket address like \"127.0.0.1:9898\"",
                        addr.get_ref()
                    ),
                )
            })?;
        }
        for r in raw.resources.unwrap_or_default() {
            check_resource_id(r.get_ref())
                .map_err(|e| ConfigError::at(&src, r.span(), "resources", e))?;
            if !out.prewarm.contains(r.get_ref()) {
                out.prewarm.push(r.into_inner());
            }
        }
        let base = path.parent().unwrap_or(Path::new("."));
        out.cache_dir = raw
            .cache_dir
            .filter(|d| !d.is_empty())
            .map(|d| base.join(d))
            .map(|p| normalize(&std::path::absolute(&p).unwrap_or(p)));
        if let Some(ms) = raw.shutdown_grace_ms {
            out.shutdown_grace_ms = ms;
        }
        out.huge_pages = raw.huge_pages.unwrap_or(false);
        if let Some(d) = raw.defaults {
            out.defaults = d.apply(&src, "defaults.", &Limits::default())?;
        }
        if let Some(t) = raw.transform {
            out.transform.strip_managed_fields = t.strip_managed_fields.unwrap_or(true);
            out.transform.pack = t.pack.unwrap_or(true);
        }
        for (resource, indexes) in raw.indexers.unwrap_or_default() {
            check_resource_id(resource.get_ref()).map_err(|e| {
                ConfigError::at(
                    &src,
                    resource.span(),
                    &format!("indexers.{}", resource.get_ref()),
                    e,
                )
            })?;
            let mut list = Vec::new();
            for (name, field) in indexes {
                let key = format!("indexers.{}.{}", resource.get_ref(), name.get_ref());
                if name.get_ref() == "namespace" {
                    return Err(ConfigError::at(
                        &src,
                        name.span(),
                        &key,
                        "the index \"namespace\" is built in and cannot be redefined",
                    ));
                }
                check_field_path(field.get_ref())
                    .map_err(|e| ConfigError::at(&src, field.span(), &key, e))?;
                list.push(IndexerSetting {
                    name: name.into_inner(),
                    path: field.into_inner(),
                });
            }
            out.indexers.insert(resource.into_inner(), list);
        }
        if let Some(s) = raw.sim {
            let d = SimSettings::default();
            let positive =
                |v: Option<Spanned<usize>>, k: &str, dflt: usize| -> Result<usize, ConfigError> {
                    match v {
                        Some(v) if *v.get_ref() == 0 => {
                            Err(ConfigError::at(&src, v.span(), k, "must be at least 1"))
                        }
                        Some(v) => Ok(v.into_inner()),
                        None => Ok(dflt),
                    }
                };
            let churn = match s.churn_per_second {
                Some(c) if !(c.get_ref().is_finite() && *c.get_ref() >= 0.0) => {
                    return Err(ConfigError::at(
                        &src,
                        c.span(),
                        "sim.churn_per_second",
                        "must be a finite number >= 0",
                    ))
                }
                Some(c) => c.into_inner(),
                None => d.churn_per_second,
            };
            let expose_fraction = match s.expose_fraction {
                Some(f) if !(0.0..=1.0).contains(f.get_ref()) => {
                    return Err(ConfigError::at(
                        &src,
                        f.span(),
                        "sim.expose_fraction",
                        "must be a number between 0 and 1",
                    ))
                }
                Some(f) => f.into_inner(),
                None => d.expose_fraction,
            };
            out.sim = SimSettings {
                pods: s.pods.unwrap_or(d.pods),
                namespaces: positive(s.namespaces, "sim.namespaces", d.namespaces)?,
                nodes: positive(s.nodes, "sim.nodes", d.nodes)?,
                seed: s.seed.unwrap_or(d.seed),
                churn_per_second: churn,
                deployments: s.deployments.unwrap_or(d.deployments),
                expose_fraction,
                deployment_churn: s.deployment_churn.unwrap_or(d.deployment_churn),
                rbac: s.rbac.unwrap_or(false),
                tokens: Vec::new(),
                sharded_list_and_watch: s.sharded_list_and_watch.unwrap_or(false),
            };
        }
        if let Some(c) = raw.cluster {
            out.cluster = c.validate(&src)?;
        }
        if let Some(i) = raw.identity {
            out.identity.impersonate = i.impersonate.unwrap_or(false);
            if let Some(ns) = i.namespace {
                check_namespace(ns.get_ref())
                    .map_err(|e| ConfigError::at(&src, ns.span(), "identity.namespace", e))?;
                out.identity.namespace = ns.into_inner();
            }
        }
        Ok(out)
    }
}

/// How replicas of the host divide the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClusterMode {
    /// One replica does everything (the default).
    #[default]
    None,
    /// One leader delivers to plugins; the others are warm standbys.
    Leader,
    /// Each replica delivers the keys its share of a hash ring owns.
    Sharded,
}

impl ClusterMode {
    /// As written in host.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterMode::None => "none",
            ClusterMode::Leader => "leader",
            ClusterMode::Sharded => "sharded",
        }
    }
}

/// What places an object on the shard ring (`[cluster] shard_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardBy {
    /// `group/Kind/namespace/name` of the object's controller owner, else of
    /// itself: an owner and its children on one replica, every replica
    /// caching everything (the default).
    #[default]
    Owner,
    /// The FNV-1a hash of `metadata.uid`, as the API server's sharded list
    /// and watch (KEP-5866) computes it: each replica lists, watches and
    /// caches only its shard; one large namespace spreads over every replica.
    Uid,
    /// The FNV-1a hash of `metadata.namespace`, sharded at the source too:
    /// a namespace, and so an owner with its children, stays on one replica.
    Namespace,
}

impl ShardBy {
    /// As written in host.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardBy::Owner => "owner",
            ShardBy::Uid => "uid",
            ShardBy::Namespace => "namespace",
        }
    }

    /// The field the API server shards by, for the modes sharded at the source.
    pub fn source_field(self) -> Option<kube_informer::shard::ShardField> {
        match self {
            ShardBy::Owner => None,
            ShardBy::Uid => Some(kube_informer::shard::ShardField::Uid),
            ShardBy::Namespace => Some(kube_informer::shard::ShardField::Namespace),
        }
    }
}

/// The `[cluster]` table: leader election or sharding on Leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `none`, `leader` or `sharded`.
    pub mode: ClusterMode,
    /// Namespace of the Leases; default: `POD_NAMESPACE`, else `default`.
    pub namespace: Option<String>,
    /// Leader mode: the election's Lease.
    pub lease_name: String,
    /// Sharded mode: the ring's name (a label value on every member's Lease).
    pub ring: String,
    /// client-go's LeaseDuration, ms.
    pub lease_duration_ms: u64,
    /// client-go's RenewDeadline, ms.
    pub renew_deadline_ms: u64,
    /// client-go's RetryPeriod, ms.
    pub retry_period_ms: u64,
    /// Taken off the fence's deadline against clock-rate differences, ms.
    pub clock_skew_margin_ms: u64,
    /// Sharded mode: virtual nodes per member on the hash ring.
    pub virtual_nodes: u32,
    /// Sharded mode: what places an object on the ring, for every resource
    /// not in `shard_by_resource`.
    pub shard_by: ShardBy,
    /// Sharded mode: `shard_by` per resource (canonical ids such as
    /// `v1/pods`).
    pub shard_by_resource: BTreeMap<String, ShardBy>,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            mode: ClusterMode::None,
            namespace: None,
            lease_name: "wasm-informer".into(),
            ring: "wasm-informer".into(),
            lease_duration_ms: 15_000,
            renew_deadline_ms: 10_000,
            retry_period_ms: 2_000,
            clock_skew_margin_ms: 1_000,
            virtual_nodes: 100,
            shard_by: ShardBy::Owner,
            shard_by_resource: BTreeMap::new(),
        }
    }
}

impl ClusterSettings {
    /// What places an object of `resource` (a canonical id) on the ring.
    pub fn shard_by_for(&self, resource: &str) -> ShardBy {
        self.shard_by_resource
            .get(resource)
            .copied()
            .unwrap_or(self.shard_by)
    }

    /// The durations, as the lease code takes them.
    pub fn timing(&self) -> crate::cluster::lease::Timing {
        use std::time::Duration;
        crate::cluster::lease::Timing {
            lease_duration: Duration::from_millis(self.lease_duration_ms),
            renew_deadline: Duration::from_millis(self.renew_deadline_ms),
            retry_period: Duration::from_millis(self.retry_period_ms),
            skew_margin: Duration::from_millis(self.clock_skew_margin_ms),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    mode: Option<ClusterMode>,
    namespace: Option<Spanned<String>>,
    lease_name: Option<Spanned<String>>,
    ring: Option<Spanned<String>>,
    lease_duration_ms: Option<Spanned<u64>>,
    renew_deadline_ms: Option<Spanned<u64>>,
    retry_period_ms: Option<Spanned<u64>>,
    clock_skew_margin_ms: Option<Spanned<u64>>,
    virtual_nodes: Option<Spanned<u32>>,
    shard_by: Option<ShardBy>,
    shard_by_resource: Option<BTreeMap<Spanned<String>, ShardBy>>,
}

/// Checks a Lease name (an RFC 1123 subdomain).
fn check_lease_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|part| check_namespace(part).is_ok());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid name {name:?}: must be an RFC 1123 subdomain (lower-case letters, digits, '-' and '.')"
        ))
    }
}

impl RawCluster {
    fn validate(self, src: &Source<'_>) -> Result<ClusterSettings, ConfigError> {
        let d = ClusterSettings::default();
        let mut out = ClusterSettings {
            mode: self.mode.unwrap_or_default(),
            ..d.clone()
        };
        if let Some(ns) = &self.namespace {
            check_namespace(ns.get_ref())
                .map_err(|e| ConfigError::at(src, ns.span(), "cluster.namespace", e))?;
            out.namespace = Some(ns.get_ref().clone());
        }
        if let Some(n) = &self.lease_name {
            check_lease_name(n.get_ref())
                .map_err(|e| ConfigError::at(src, n.span(), "cluster.lease_name", e))?;
            out.lease_name = n.get_ref().clone();
        }
        if let Some(r) = &self.ring {
            // A label value: at most 63, alphanumeric at both ends.
            let v = r.get_ref();
            let ok = !v.is_empty()
                && v.len() <= 63
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric());
            if !ok {
                return Err(ConfigError::at(
                    src,
                    r.span(),
                    "cluster.ring",
                    format!("invalid ring name {v:?}: must be a label value (1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"),
                ));
            }
            out.ring = v.clone();
        }
        let ms = |v: &Option<Spanned<u64>>, dflt: u64| v.as_ref().map_or(dflt, |s| *s.get_ref());
        out.lease_duration_ms = ms(&self.lease_duration_ms, d.lease_duration_ms);
        out.renew_deadline_ms = ms(&self.renew_deadline_ms, d.renew_deadline_ms);
        out.retry_period_ms = ms(&self.retry_period_ms, d.retry_period_ms);
        out.clock_skew_margin_ms = ms(&self.clock_skew_margin_ms, d.clock_skew_margin_ms);
        if let Some(v) = &self.virtual_nodes {
            if !(1..=1000).contains(v.get_ref()) {
                return Err(ConfigError::at(
                    src,
                    v.span(),
                    "cluster.virtual_nodes",
                    format!(
                        "{} is out of range: must be between 1 and 1000",
                        v.get_ref()
                    ),
                ));
            }
            out.virtual_nodes = *v.get_ref();
        }
        out.shard_by = self.shard_by.unwrap_or_default();
        for (r, by) in self.shard_by_resource.unwrap_or_default() {
            let id = kube_informer::ResourceId::parse(r.get_ref()).map_err(|e| {
                ConfigError::at(src, r.span(), "cluster.shard_by_resource", e.to_string())
            })?;
            out.shard_by_resource.insert(id.to_string(), by);
        }
        if let Err(reason) = out.timing().validate() {
            // Point at the first key the message names that the file sets.
            let keys = [
                ("lease_duration_ms", &self.lease_duration_ms),
                ("renew_deadline_ms", &self.renew_deadline_ms),
                ("retry_period_ms", &self.retry_period_ms),
                ("clock_skew_margin_ms", &self.clock_skew_margin_ms),
            ];
            let at = keys
                .iter()
                .filter(|(k, v)| v.is_some() && reason.contains(k))
                .min_by_key(|(k, _)| reason.find(k))
                .or_else(|| keys.iter().find(|(_, v)| v.is_some()));
            let key = at.map_or("cluster", |(k, _)| k);
            return Err(match at.and_then(|(_, v)| v.as_ref()) {
                Some(v) => ConfigError::at(
                    src,
                    v.span(),
                    &format!("cluster.{key}"),
                    format!("{reason} (client-go's rule: lease duration > renew deadline > 1.2 x retry period)"),
                ),
                None => ConfigError::whole_file(src.path, reason),
            });
        }
        Ok(out)
    }
}

/// The key of a manifest's `[config]` the host fills in (the replica's
/// identity and shard); a manifest may not set it.
pub const RESERVED_CONFIG_KEY: &str = "wasm-informer";

/// Checks an index field path: dot-separated, non-empty segments.
fn check_field_path(path: &str) -> Result<(), String> {
    if path.is_empty()
        || path
            .split('.')
            .any(|s| s.is_empty() || s.chars().any(char::is_whitespace))
    {
        return Err(format!(
            "invalid field path {path:?}: expected dot-separated field names like \"spec.nodeName\""
        ));
    }
    Ok(())
}

/// Where a value sits in its manifest, for errors found after parsing (for
/// example, discovery saying a resource does not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// 1-based line and column in the manifest.
    pub position: (usize, usize),
}

/// A validated plugin manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginManifest {
    /// The manifest file.
    pub file: PathBuf,
    /// Unique plugin name.
    pub name: String,
    /// The component, resolved relative to the manifest (for an OCI
    /// reference, the reference as written).
    pub wasm: PathBuf,
    /// `wasm = "oci://..."`: the component is pulled from this registry
    /// reference at each load.
    pub oci: Option<crate::oci::OciRef>,
    /// Resources whose events the plugin receives, with their positions.
    pub resources: Vec<Located<String>>,
    /// Only objects in this namespace.
    pub namespace: Option<String>,
    /// Only objects matching this label selector.
    pub label_selector: Option<String>,
    /// Resources the plugin may query through `cache` (its `resources` are always
    /// readable too), with their positions.
    pub read: Vec<Located<String>>,
    /// Effective limits (the manifest's, else the host's defaults).
    pub limits: Limits,
    /// The `[config]` table as JSON, handed to `init` (`{}` when absent).
    pub config_json: String,
    /// Position of the `name` key, for duplicate-name errors.
    pub name_position: (usize, usize),
    /// Line and column of the `wasm` value (for errors about the component).
    pub wasm_position: (usize, usize),
    /// What the plugin may do on the API server (`[[write]]`, `events`,
    /// `dry_run`) and how its calls are paced and bounded.
    pub kube: KubeSettings,
    /// Set for a controller (a manifest with `for`): its triggers, workers
    /// and retry limiter. Its `resources` is then empty.
    pub controller: Option<ControllerSpec>,
    /// `shadow_of = "LIVE"`: this plugin is a shadow version of plugin
    /// `LIVE`: it gets the same events or keys, writes only in dry run under
    /// LIVE's grants, publishes no Events, and its intended writes are
    /// compared with LIVE's (see `crate::shadow`).
    pub shadow_of: Option<Located<String>>,
}

impl PluginManifest {
    /// Resource ids the plugin subscribes to (a controller: every resource
    /// its triggers watch).
    pub fn resource_ids(&self) -> Vec<String> {
        match &self.controller {
            Some(c) => c.resource_ids(),
            None => self.resources.iter().map(|r| r.value.clone()).collect(),
        }
    }

    /// What two plugins may not share: the name, up to `_` and `-` (both
    /// name the same ServiceAccount).
    pub fn identity_key(&self) -> String {
        IdentitySettings::account_name(&self.name)
    }

    /// Resource ids the plugin may read: `resources` plus `read`, deduplicated.
    pub fn readable(&self) -> Vec<String> {
        let mut out = self.resource_ids();
        for r in &self.read {
            if !out.contains(&r.value) {
                out.push(r.value.clone());
            }
        }
        out
    }

    /// An error about this manifest at a known position.
    pub fn error_at(
        &self,
        position: (usize, usize),
        key: &str,
        reason: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            position: Some(position),
            key: Some(key.to_string()),
            reason: reason.into(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: Spanned<String>,
    wasm: Spanned<String>,
    resources: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(rename = "for")]
    for_: Option<Spanned<String>>,
    owns: Option<Spanned<Vec<Spanned<String>>>>,
    watches: Option<Vec<controller::RawWatch>>,
    workers: Option<Spanned<u64>>,
    retry_base_delay_ms: Option<Spanned<u64>>,
    retry_max_delay_ms: Option<Spanned<u64>>,
    retry_qps: Option<Spanned<f64>>,
    retry_burst: Option<Spanned<u64>>,
    max_low_priority_wait_ms: Option<Spanned<u64>>,
    namespace: Option<Spanned<String>>,
    label_selector: Option<Spanned<String>>,
    read: Option<Vec<Spanned<String>>>,
    queue_capacity: Option<Spanned<u64>>,
    fuel_per_event: Option<Spanned<u64>>,
    timeout_ms: Option<Spanned<u64>>,
    memory_mb: Option<Spanned<u64>>,
    resync_seconds: Option<Spanned<u64>>,
    quarantine_seconds: Option<Spanned<u64>>,
    config: Option<toml::Table>,
    write: Option<Vec<RawWrite>>,
    events: Option<Spanned<toml::Value>>,
    dry_run: Option<bool>,
    write_qps: Option<Spanned<f64>>,
    write_burst: Option<Spanned<u64>>,
    write_timeout_ms: Option<Spanned<u64>>,
    api_time_per_event_ms: Option<Spanned<u64>>,
    max_request_bytes: Option<Spanned<u64>>,
    max_answer_bytes: Option<Spanned<u64>>,
    shadow_of: Option<Spanned<String>>,
}

/// What `events` says: off, `true` (the namespaces the plugin reads or
/// writes in), or `{ namespaces = [...] }`.
enum EventsKey {
    Off,
    Implied,
    Listed(std::collections::BTreeSet<kube_informer::names::Namespace>),
}

impl EventsKey {
    fn parse(src: &Source<'_>, v: &Option<Spanned<toml::Value>>) -> Result<Self, ConfigError> {
        let Some(v) = v else { return Ok(Self::Off) };
        let bad = |key: &str, why: String| ConfigError::at(src, v.span(), key, why);
        let shape = "must be true, false, or a table { namespaces = [\"NS\", ...] }";
        match v.get_ref() {
            toml::Value::Boolean(true) => Ok(Self::Implied),
            toml::Value::Boolean(false) => Ok(Self::Off),
            toml::Value::Table(t) => {
                if let Some(k) = t.keys().find(|k| *k != "namespaces") {
                    return Err(bad(
                        &format!("events.{k}"),
                        format!("unknown key {k:?}: events {shape}"),
                    ));
                }
                let Some(toml::Value::Array(list)) = t.get("namespaces") else {
                    return Err(bad("events.namespaces", format!("events {shape}")));
                };
                if list.is_empty() {
                    return Err(bad(
                        "events.namespaces",
                        "must list at least one namespace; `events = true` records Events in \
                         the namespaces the plugin reads or writes in"
                            .into(),
                    ));
                }
                let mut set = std::collections::BTreeSet::new();
                for n in list {
                    let toml::Value::String(n) = n else {
                        return Err(bad(
                            "events.namespaces",
                            "every entry must be a string".into(),
                        ));
                    };
                    let ns = kube_informer::names::Namespace::parse(n)
                        .map_err(|e| bad("events.namespaces", e.to_string()))?;
                    set.insert(ns);
                }
                Ok(Self::Listed(set))
            }
            _ => Err(bad("events", format!("events {shape}"))),
        }
    }

    /// The grant: where Events go and what they may be about.
    fn grant(
        self,
        namespace: Option<&str>,
        regarding: std::collections::BTreeSet<String>,
        grants: &[WriteGrant],
    ) -> Option<EventsGrant> {
        let namespaces = match self {
            Self::Off => return None,
            Self::Listed(set) => Some(set),
            // A plugin limited to one namespace records Events there and in the
            // namespaces its grants name; one that sees every namespace, anywhere.
            Self::Implied => namespace.map(|ns| {
                let mut set: std::collections::BTreeSet<_> = grants
                    .iter()
                    .filter_map(|g| g.namespaces.clone())
                    .flatten()
                    .collect();
                set.extend(kube_informer::names::Namespace::parse(ns).ok());
                set
            }),
        };
        Some(EventsGrant {
            namespaces,
            regarding,
        })
    }
}

/// One `[[write]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWrite {
    resource: Spanned<String>,
    subresource: Option<Spanned<String>>,
    verbs: Spanned<Vec<String>>,
    namespaces: Option<Spanned<Vec<String>>>,
}

impl RawWrite {
    /// Validates one grant; errors point at the field at fault.
    fn grant(&self, src: &Source<'_>, index: usize) -> Result<WriteGrant, ConfigError> {
        let key = |f: &str| format!("write[{index}].{f}");
        check_resource_id(self.resource.get_ref())
            .map_err(|e| ConfigError::at(src, self.resource.span(), &key("resource"), e))?;
        if let Some(ns) = &self.namespaces {
            for n in ns.get_ref() {
                check_namespace(n)
                    .map_err(|e| ConfigError::at(src, ns.span(), &key("namespaces"), e))?;
            }
        }
        WriteGrant::new(
            self.resource.get_ref(),
            self.subresource.as_ref().map(|s| s.get_ref().as_str()),
            self.verbs.get_ref(),
            self.namespaces.as_ref().map(|n| n.get_ref().as_slice()),
        )
        .map_err(|e| {
            let span = match e.field {
                "subresource" => self
                    .subresource
                    .as_ref()
                    .map(|s| s.span())
                    .unwrap_or(self.resource.span()),
                "verbs" => self.verbs.span(),
                "namespaces" => self
                    .namespaces
                    .as_ref()
                    .map(|s| s.span())
                    .unwrap_or(self.resource.span()),
                _ => self.resource.span(),
            };
            ConfigError::at(src, span, &key(e.field), e.reason)
        })
    }
}

/// The manifest's API settings over the runtime's defaults.
fn kube_settings(src: &Source<'_>, raw: &RawManifest) -> Result<KubeSettings, ConfigError> {
    let mut k = KubeSettings::default();
    for (i, w) in raw.write.iter().flatten().enumerate() {
        let g = w.grant(src, i)?;
        if k.grants
            .iter()
            .any(|x| x.resource == g.resource && x.subresource == g.subresource)
        {
            return Err(ConfigError::at(
                src,
                w.resource.span(),
                &format!("write[{i}].resource"),
                format!(
                    "{:?}{} has two [[write]] tables; merge them into one",
                    g.resource,
                    g.subresource
                        .map(|s| format!(" (subresource {s})"))
                        .unwrap_or_default()
                ),
            ));
        }
        k.grants.push(g);
    }
    k.dry_run = raw.dry_run.unwrap_or(false);
    if let Some(q) = &raw.write_qps {
        let v = *q.get_ref();
        if !(0.0..=10_000.0).contains(&v) || v.is_nan() {
            return Err(ConfigError::at(
                src,
                q.span(),
                "write_qps",
                format!("{v} is out of range: must be between 0 (no limit) and 10000"),
            ));
        }
        k.write_qps = v;
    }
    let ranged = |v: &Option<Spanned<u64>>, name: &str, min: u64, max: u64| match v {
        Some(s) if *s.get_ref() < min || *s.get_ref() > max => Err(ConfigError::at(
            src,
            s.span(),
            name,
            format!(
                "{} is out of range: must be between {min} and {max}",
                s.get_ref()
            ),
        )),
        Some(s) => Ok(Some(*s.get_ref())),
        None => Ok(None),
    };
    if let Some(b) = ranged(&raw.write_burst, "write_burst", 1, 100_000)? {
        k.write_burst = b as u32;
    }
    if let Some(t) = ranged(&raw.write_timeout_ms, "write_timeout_ms", 1, 600_000)? {
        k.write_timeout = std::time::Duration::from_millis(t);
    }
    if let Some(t) = ranged(
        &raw.api_time_per_event_ms,
        "api_time_per_event_ms",
        1,
        3_600_000,
    )? {
        k.api_time_per_event = std::time::Duration::from_millis(t);
    }
    if let Some(b) = ranged(&raw.max_request_bytes, "max_request_bytes", 1024, 64 << 20)? {
        k.max_request_bytes = b as usize;
    }
    if let Some(b) = ranged(&raw.max_answer_bytes, "max_answer_bytes", 1024, 64 << 20)? {
        k.max_answer_bytes = b as usize;
    }
    Ok(k)
}

impl PluginManifest {
    /// Reads and validates a manifest, filling unset limits from `defaults`.
    pub fn load(path: &Path, defaults: &Limits) -> Result<Self, ConfigError> {
        let text = read(path)?;
        Self::parse(path, &text, defaults)
    }

    /// Validates the text of a manifest that lives at `path`.
    pub fn parse(path: &Path, text: &str, defaults: &Limits) -> Result<Self, ConfigError> {
        let src = Source { path, text };
        let raw: RawManifest = parse(&src)?;
        let shadow_of = match &raw.shadow_of {
            Some(live) => {
                check_plugin_name(live.get_ref())
                    .map_err(|e| ConfigError::at(&src, live.span(), "shadow_of", e))?;
                if live.get_ref() == raw.name.get_ref() {
                    return Err(ConfigError::at(
                        &src,
                        live.span(),
                        "shadow_of",
                        "names this plugin itself: name the live plugin this one shadows",
                    ));
                }
                // A shadow writes under its live plugin's grants, in dry run.
                let own = [
                    ("write", raw.write.as_ref().map(|_| live.span())),
                    ("events", raw.events.as_ref().map(|e| e.span())),
                    ("dry_run", raw.dry_run.map(|_| live.span())),
                    ("write_qps", raw.write_qps.as_ref().map(|v| v.span())),
                    ("write_burst", raw.write_burst.as_ref().map(|v| v.span())),
                    (
                        "write_timeout_ms",
                        raw.write_timeout_ms.as_ref().map(|v| v.span()),
                    ),
                    (
                        "api_time_per_event_ms",
                        raw.api_time_per_event_ms.as_ref().map(|v| v.span()),
                    ),
                    (
                        "max_request_bytes",
                        raw.max_request_bytes.as_ref().map(|v| v.span()),
                    ),
                    (
                        "max_answer_bytes",
                        raw.max_answer_bytes.as_ref().map(|v| v.span()),
                    ),
                ];
                if let Some((key, span)) = own.iter().find_map(|(k, s)| s.clone().map(|s| (*k, s)))
                {
                    return Err(ConfigError::at(
                        &src,
                        span,
                        key,
                        format!(
                            "a shadow writes only in dry run, under the grants and API settings of `{}`, and publishes no Events: remove `{key}`",
                            live.get_ref()
                        ),
                    ));
                }
                Some(Located {
                    value: live.get_ref().clone(),
                    position: line_col(text, live.span().start),
                })
            }
            None => None,
        };
        let mut kube = kube_settings(&src, &raw)?;
        let events = EventsKey::parse(&src, &raw.events)?;
        let pos = |span: Range<usize>| line_col(text, span.start);

        check_plugin_name(raw.name.get_ref())
            .map_err(|e| ConfigError::at(&src, raw.name.span(), "name", e))?;

        if raw.wasm.get_ref().is_empty() {
            return Err(ConfigError::at(
                &src,
                raw.wasm.span(),
                "wasm",
                "must name a .wasm file",
            ));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let oci = match crate::oci::is_oci(raw.wasm.get_ref()) {
            true => Some(
                crate::oci::OciRef::parse(raw.wasm.get_ref())
                    .map_err(|e| ConfigError::at(&src, raw.wasm.span(), "wasm", e))?,
            ),
            false => None,
        };
        let wasm = match oci {
            Some(_) => PathBuf::from(raw.wasm.get_ref()),
            None => normalize(&base.join(raw.wasm.get_ref())),
        };
        if oci.is_none() && !wasm.is_file() {
            return Err(ConfigError::at(
                &src,
                raw.wasm.span(),
                "wasm",
                format!(
                    "file not found: {}: build the plugin first (a project made by `wasm-informer \
                     new` says how in its README: `cargo build --release`, `npm run build`, \
                     `python3 build.py` or `make`)",
                    wasm.display()
                ),
            ));
        }

        let controller = controller::controller_spec(&src, &raw)?;
        let listed: &[Spanned<String>] = match (&raw.resources, &controller) {
            (_, Some(_)) => &[],
            (Some(r), None) if !r.get_ref().is_empty() => r.get_ref(),
            (r, None) => {
                return Err(ConfigError {
                    file: path.to_path_buf(),
                    position: Some(line_col(
                        text,
                        r.as_ref().map_or(raw.name.span(), |r| r.span()).start,
                    )),
                    key: Some("resources".into()),
                    reason: "must list at least one resource, for example [\"v1/pods\"] (an event handler), or name the resource to reconcile with `for = \"GROUP/VERSION/PLURAL\"` (a controller)".into(),
                })
            }
        };
        let mut resources: Vec<Located<String>> = Vec::new();
        for r in listed {
            check_resource_id(r.get_ref())
                .map_err(|e| ConfigError::at(&src, r.span(), "resources", e))?;
            if resources.iter().any(|x| &x.value == r.get_ref()) {
                return Err(ConfigError::at(
                    &src,
                    r.span(),
                    "resources",
                    format!("{:?} is listed twice", r.get_ref()),
                ));
            }
            resources.push(Located {
                value: r.get_ref().clone(),
                position: pos(r.span()),
            });
        }
        let mut read = Vec::new();
        for r in raw.read.unwrap_or_default() {
            check_resource_id(r.get_ref())
                .map_err(|e| ConfigError::at(&src, r.span(), "read", e))?;
            read.push(Located {
                position: pos(r.span()),
                value: r.into_inner(),
            });
        }

        let namespace = match raw.namespace {
            Some(ns) => {
                check_namespace(ns.get_ref())
                    .map_err(|e| ConfigError::at(&src, ns.span(), "namespace", e))?;
                Some(ns.into_inner())
            }
            None => None,
        };
        let label_selector = match raw.label_selector {
            Some(sel) if sel.get_ref().trim().is_empty() => None,
            Some(sel) => {
                wasm_informer_selector::LabelSelector::parse(sel.get_ref()).map_err(|e| {
                    ConfigError::at(
                        &src,
                        sel.span(),
                        "label_selector",
                        format!("invalid label selector: {e}"),
                    )
                })?;
                Some(sel.into_inner())
            }
            None => None,
        };

        let limits = RawLimits {
            queue_capacity: raw.queue_capacity,
            fuel_per_event: raw.fuel_per_event,
            timeout_ms: raw.timeout_ms,
            memory_mb: raw.memory_mb,
            resync_seconds: raw.resync_seconds,
            quarantine_seconds: raw.quarantine_seconds,
        }
        .apply(&src, "", defaults)?;
        if raw
            .config
            .as_ref()
            .is_some_and(|t| t.contains_key(RESERVED_CONFIG_KEY))
        {
            let at = text
                .find(&format!("\"{RESERVED_CONFIG_KEY}\""))
                .or_else(|| text.find(RESERVED_CONFIG_KEY))
                .unwrap_or(0);
            return Err(ConfigError::at(
                &src,
                at..at,
                &format!("config.{RESERVED_CONFIG_KEY}"),
                "reserved: the host puts the replica's identity and shard there",
            ));
        }
        let config_json = match raw.config {
            Some(t) => serde_json::to_string(&t).map_err(|e| {
                ConfigError::whole_file(
                    path,
                    format!("[config] cannot be represented as JSON: {e}"),
                )
            })?,
            None => "{}".to_string(),
        };
        let mut manifest = PluginManifest {
            file: path.to_path_buf(),
            name_position: pos(raw.name.span()),
            wasm_position: pos(raw.wasm.span()),
            name: raw.name.into_inner(),
            wasm,
            oci,
            resources,
            namespace,
            label_selector,
            read,
            limits,
            config_json,
            kube: KubeSettings::default(),
            controller,
            shadow_of,
        };
        let mut regarding: std::collections::BTreeSet<String> =
            manifest.readable().into_iter().collect();
        regarding.extend(kube.grants.iter().map(|g| g.resource.clone()));
        kube.events = events.grant(manifest.namespace.as_deref(), regarding, &kube.grants);
        manifest.kube = kube;
        Ok(manifest)
    }
}

/// Removes `.` and resolves `..` components lexically (without touching the
/// file system), so error messages show plain paths.
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let last_is_normal =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if last_is_normal {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The manifest files of a config directory: `DIR/plugins/*.toml`, sorted by path.
/// A missing `plugins/` directory holds no manifests.
pub fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let plugins = dir.join("plugins");
    let entries = match std::fs::read_dir(&plugins) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(ConfigError::whole_file(
                &plugins,
                format!("cannot list directory: {e}"),
            ))
        }
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| is_manifest_path(p))
        .collect();
    out.sort();
    Ok(out)
}

/// Whether a path looks like a plugin manifest (`*.toml`, not hidden, not an
/// editor's temporary file).
pub fn is_manifest_path(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    p.extension().is_some_and(|e| e == "toml") && !name.starts_with('.') && !name.starts_with('#')
}

/// The result of reading a whole plugins directory: the manifests that validated,
/// and an error for each file that did not.
#[derive(Debug, Default)]
pub struct ManifestScan {
    /// Valid manifests, unique by name, sorted by file.
    pub manifests: Vec<PluginManifest>,
    /// One error per rejected file.
    pub errors: Vec<ConfigError>,
}

/// Reads every manifest in `DIR/plugins`. Files are taken in path order; a file
/// whose plugin name an earlier file already uses is rejected as a duplicate.
pub fn scan_manifests(dir: &Path, defaults: &Limits) -> ManifestScan {
    let mut scan = ManifestScan::default();
    let files = match manifest_files(dir) {
        Ok(f) => f,
        Err(e) => {
            scan.errors.push(e);
            return scan;
        }
    };
    let mut owners: HashMap<String, usize> = HashMap::new();
    for file in files {
        match PluginManifest::load(&file, defaults) {
            Ok(m) => {
                if let Some(&i) = owners.get(&m.identity_key()) {
                    scan.errors.push(duplicate_name(&m, &scan.manifests[i]));
                } else {
                    owners.insert(m.identity_key(), scan.manifests.len());
                    scan.manifests.push(m);
                }
            }
            Err(e) => scan.errors.push(e),
        }
    }
    scan
}

/// The error for `m` reusing the name `owner` already has (or one that
/// differs only by `_` and `-`, which name the same ServiceAccount).
pub fn duplicate_name(m: &PluginManifest, owner: &PluginManifest) -> ConfigError {
    let what = if m.name == owner.name {
        format!("duplicate plugin name {:?}", m.name)
    } else {
        format!(
            "plugin name {:?} names the same ServiceAccount ({}) as {:?}",
            m.name,
            IdentitySettings::account_name(&m.name),
            owner.name
        )
    };
    m.error_at(
        m.name_position,
        "name",
        format!(
            "{what}: already defined in {}:{}:{}",
            owner.file.display(),
            owner.name_position.0,
            owner.name_position.1
        ),
    )
}

/// A whole configuration directory.
#[derive(Debug, Clone)]
pub struct ConfigDir {
    /// The directory.
    pub dir: PathBuf,
    /// Its host.toml (defaults when the file is absent).
    pub host: HostSettings,
}

impl ConfigDir {
    /// Reads `DIR/host.toml`. A missing directory is an error; a missing host.toml
    /// means all defaults.
    pub fn open(dir: &Path) -> Result<Self, ConfigError> {
        if !dir.is_dir() {
            return Err(ConfigError::whole_file(dir, "config directory not found"));
        }
        let file = dir.join("host.toml");
        let host = if file.exists() {
            HostSettings::load(&file)?
        } else {
            HostSettings {
                file,
                ..HostSettings::default()
            }
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            host,
        })
    }

    /// The plugins directory.
    pub fn plugins_dir(&self) -> PathBuf {
        self.dir.join("plugins")
    }

    /// Reads every manifest, with the host's default limits.
    pub fn scan(&self) -> ManifestScan {
        scan_manifests(&self.dir, &self.host.defaults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarantine_seconds_comes_from_the_manifest_else_the_hosts_defaults() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.wasm"), b"").unwrap();
        let path = dir.path().join("p.toml");
        let head = "name = \"p\"\nwasm = \"p.wasm\"\nresources = [\"v1/pods\"]\n";
        let defaults = Limits::default();
        let m = PluginManifest::parse(&path, head, &defaults).unwrap();
        assert_eq!(m.limits.quarantine_seconds, 300);
        let host = Limits {
            quarantine_seconds: 20,
            ..Limits::default()
        };
        let m = PluginManifest::parse(&path, head, &host).unwrap();
        assert_eq!(m.limits.quarantine_seconds, 20);
        let m = PluginManifest::parse(&path, &format!("{head}quarantine_seconds = 2\n"), &host)
            .unwrap();
        assert_eq!(m.limits.quarantine_seconds, 2);
        let e = PluginManifest::parse(&path, &format!("{head}quarantine_seconds = 0\n"), &host)
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("quarantine_seconds"), "{e}");
    }

    #[test]
    fn transform_pack_defaults_to_on_and_can_be_turned_off() {
        let p = Path::new("/x/host.toml");
        let on = HostSettings::parse(p, "").unwrap();
        assert!(on.transform.pack && on.transform.to_transform().pack);
        let off = HostSettings::parse(p, "[transform]\npack = false\n").unwrap();
        assert!(!off.transform.pack && !off.transform.to_transform().pack);
        assert!(off.transform.strip_managed_fields);
        let e = HostSettings::parse(p, "[transform]\npack = \"yes\"\n").unwrap_err();
        assert!(e.to_string().contains("pack"), "{e}");
    }

    #[test]
    fn huge_pages_default_to_off_and_can_be_turned_on() {
        let p = Path::new("/x/host.toml");
        assert!(!HostSettings::parse(p, "").unwrap().huge_pages);
        assert!(
            HostSettings::parse(p, "huge_pages = true\n")
                .unwrap()
                .huge_pages
        );
        let e = HostSettings::parse(p, "huge_pages = 1\n").unwrap_err();
        assert!(e.to_string().contains("huge_pages"), "{e}");
    }

    #[test]
    fn line_col_counts_lines_and_chars() {
        let t = "a = 1\nbé = 2\n";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 6), (2, 1));
        assert_eq!(line_col(t, t.find('=').unwrap()), (1, 3));
        assert_eq!(line_col(t, t.rfind('=').unwrap()), (2, 4));
    }

    #[test]
    fn key_on_line_finds_key_and_header() {
        let t = "[defaults]\nqueue_capacity = \"x\"\n";
        assert_eq!(key_on_line(t, 2).as_deref(), Some("defaults"));
        assert_eq!(
            key_on_line(t, t.find('"').unwrap()).as_deref(),
            Some("queue_capacity")
        );
    }

    #[test]
    fn resource_ids() {
        assert!(check_resource_id("v1/pods").is_ok());
        assert!(check_resource_id("apps/v1/deployments").is_ok());
        assert!(check_resource_id("stable.example.com/v1beta1/crontabs").is_ok());
        assert!(check_resource_id("pods").is_err());
        assert!(check_resource_id("v1/Pods").is_err());
        assert!(check_resource_id("apps//deployments").is_err());
        assert!(check_resource_id("apps/x1/deployments").is_err());
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(
            normalize(Path::new("config/plugins/../../target/x.wasm")),
            PathBuf::from("target/x.wasm")
        );
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("../x")), PathBuf::from("../x"));
    }

    #[test]
    fn shard_by_is_read_per_resource_and_bad_values_are_named() {
        let path = Path::new("/cfg/host.toml");
        let ok = HostSettings::parse(
            path,
            "[cluster]\nmode = \"sharded\"\nshard_by = \"uid\"\n\n[cluster.shard_by_resource]\n\"apps/v1/deployments\" = \"namespace\"\n\"v1/namespaces\" = \"owner\"\n",
        )
        .unwrap();
        assert_eq!(ok.cluster.shard_by, ShardBy::Uid);
        assert_eq!(ok.cluster.shard_by_for("v1/pods"), ShardBy::Uid);
        assert_eq!(
            ok.cluster.shard_by_for("apps/v1/deployments"),
            ShardBy::Namespace
        );
        assert_eq!(ok.cluster.shard_by_for("v1/namespaces"), ShardBy::Owner);
        assert_eq!(
            HostSettings::parse(path, "").unwrap().cluster.shard_by,
            ShardBy::Owner,
            "the default caches everything"
        );
        let e = HostSettings::parse(path, "[cluster]\nshard_by = \"name\"\n").unwrap_err();
        assert!(
            e.reason.contains("unknown variant") && e.reason.contains("namespace"),
            "{e}"
        );
        let e = HostSettings::parse(path, "[cluster.shard_by_resource]\n\"pods\" = \"uid\"\n")
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("cluster.shard_by_resource"), "{e}");
    }

    #[test]
    fn cluster_table_is_validated_as_client_go_validates_leader_election() {
        let path = Path::new("/cfg/host.toml");
        let ok = HostSettings::parse(
            path,
            "[cluster]\nmode = \"sharded\"\nring = \"shop\"\nlease_duration_ms = 3000\nrenew_deadline_ms = 2000\nretry_period_ms = 500\nclock_skew_margin_ms = 500\nvirtual_nodes = 64\n",
        )
        .unwrap();
        assert_eq!(ok.cluster.mode, ClusterMode::Sharded);
        assert_eq!(ok.cluster.ring, "shop");
        assert_eq!(ok.cluster.virtual_nodes, 64);
        assert_eq!(
            HostSettings::parse(path, "").unwrap().cluster,
            ClusterSettings::default()
        );

        let e = HostSettings::parse(
            path,
            "[cluster]\nmode = \"leader\"\nlease_duration_ms = 10000\nrenew_deadline_ms = 10000\n",
        )
        .unwrap_err();
        assert_eq!(e.position, Some((3, 21)), "{e}");
        assert_eq!(e.key.as_deref(), Some("cluster.lease_duration_ms"), "{e}");
        assert!(e.to_string().starts_with("/cfg/host.toml:3:21: key `cluster.lease_duration_ms`: lease_duration_ms (10000) must be greater than renew_deadline_ms (10000)"), "{e}");

        let e = HostSettings::parse(path, "[cluster]\nretry_period_ms = 9000\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("cluster.retry_period_ms"), "{e}");
        assert!(e.reason.contains("1.2 x retry_period_ms"), "{e}");

        let e = HostSettings::parse(path, "[cluster]\nclock_skew_margin_ms = 6000\n").unwrap_err();
        assert_eq!(
            e.key.as_deref(),
            Some("cluster.clock_skew_margin_ms"),
            "{e}"
        );

        let e = HostSettings::parse(path, "[cluster]\nmode = \"primary\"\n").unwrap_err();
        assert_eq!(e.position.map(|p| p.0), Some(2), "{e}");
        assert!(e.reason.contains("unknown variant"), "{e}");

        let e = HostSettings::parse(path, "[cluster]\nring = \"-bad\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("cluster.ring"), "{e}");
        let e = HostSettings::parse(path, "[cluster]\nlease_name = \"Bad_Name\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("cluster.lease_name"), "{e}");
        let e = HostSettings::parse(path, "[cluster]\nvirtual_nodes = 0\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("cluster.virtual_nodes"), "{e}");
        let e = HostSettings::parse(path, "[cluster]\nleader = true\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("leader"), "{e}");
        assert!(e.reason.starts_with("unknown key"), "{e}");
    }

    #[test]
    fn a_manifest_may_not_set_the_reserved_config_key() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(&wasm, b"").unwrap();
        let path = dir.path().join("p.toml");
        let text = "name = \"p\"\nwasm = \"p.wasm\"\nresources = [\"v1/pods\"]\n\n[config.\"wasm-informer\"]\nidentity = \"me\"\n";
        let e = PluginManifest::parse(&path, text, &Limits::default()).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("config.wasm-informer"), "{e}");
        assert_eq!(e.position.map(|p| p.0), Some(5), "{e}");
    }

    #[test]
    fn plugin_names() {
        assert!(check_plugin_name("pod-ready-counter").is_ok());
        assert!(check_plugin_name("a").is_ok());
        assert!(check_plugin_name("").is_err());
        assert!(check_plugin_name("-a").is_err());
        assert!(check_plugin_name("A").is_err());
        assert!(check_plugin_name(&"a".repeat(64)).is_err());
    }
}
