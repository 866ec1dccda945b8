//! Shadow versions: a plugin that declares `shadow_of = "LIVE"` runs beside
//! the live plugin `LIVE` on the same events or keys, writes only in dry run
//! under LIVE's grants, publishes no Events, and has its intended writes
//! compared with LIVE's, key by key.
//!
//! Job: a [`ShadowBook`] per live plugin name collects the writes both sides
//! are about to send (through the runtime's
//! [`wasm_informer_runtime::capability::kube::WriteIntents`] hook), each
//! normalised into an [`Intent`]: method, resource, namespace, name,
//! subresource, patch type, and the body in canonical form (keys sorted,
//! `resourceVersion`, `managedFields`, `uid`, `generation` and every
//! timestamp cut out, and a JSON patch's `test` of the resourceVersion
//! dropped). Intents of one object (its key: resource, namespace and name)
//! are paired in the order they come, one from each side; a pair counts as
//! `same` or `differs`, and an intent left without a partner for longer than
//! the window counts as `only_live` or `only_shadow`. Events are not compared:
//! a shadow may not publish any.
//!
//! Invariants:
//! - The book never changes, delays or refuses a write: it only looks, and a
//!   live plugin's writes are looked at only while a shadow of it runs.
//! - Every intent is counted once: in one pair, or once its window passed.
//! - Memory is bounded: at most [`MAX_KEYS`] objects have a per-key view; the
//!   others are counted, not kept.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasm_informer_runtime::capability::kube::WriteIntents;
use wasm_informer_runtime::capability::request::ApiRequest;

/// How long an intent waits for its partner from the other side.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

/// Objects with a per-key view, at most (the counts go on past it).
pub const MAX_KEYS: usize = 10_000;

/// Resources whose writes are not compared (a shadow publishes no Events).
const NOT_COMPARED: [&str; 2] = ["events.k8s.io/v1/events", "v1/events"];

/// Metadata fields that differ between runs of the same intent.
const VOLATILE_METADATA: [&str; 6] = [
    "resourceVersion",
    "managedFields",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
];

/// One intended write, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// HTTP method.
    pub method: String,
    /// Resource id (`v1/pods`).
    pub resource: String,
    /// Namespace, for a namespaced object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name (a create's, from its body).
    pub name: String,
    /// `status`, `scale`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// `apply`, `merge`, `json`, `strategic-merge`, for a patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The body in canonical form (`null` for a delete).
    pub body: Value,
}

impl Intent {
    /// The normalised form of `request`; `None` for what is not compared.
    pub fn of(request: &ApiRequest) -> Option<Intent> {
        let t = &request.target;
        let resource = t.resource_id();
        if NOT_COMPARED.contains(&resource.as_str()) {
            return None;
        }
        let body = request
            .body
            .as_deref()
            .and_then(|b| serde_json::from_str::<Value>(b).ok())
            .map(|v| canonical(v, request.patch.map(|p| p.as_str()) == Some("json")))
            .unwrap_or(Value::Null);
        let name = match t.name() {
            Some(n) => n.to_string(),
            None => body["metadata"]["name"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_default(),
        };
        Some(Intent {
            method: request.verb.method().to_string(),
            resource,
            namespace: t.namespace().map(|n| n.to_string()),
            name,
            subresource: t.subresource().map(|s| s.as_str().to_string()),
            patch: request.patch.map(|p| p.as_str().to_string()),
            body,
        })
    }

    /// The object the intent is about: `resource namespace/name`.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.resource, self.name),
            None => format!("{} {}", self.resource, self.name),
        }
    }
}

/// `v` with object keys sorted and the volatile fields cut out; for a JSON
/// patch, without its `test` of the resourceVersion.
fn canonical(v: Value, json_patch: bool) -> Value {
    match v {
        Value::Array(ops) if json_patch => Value::Array(
            ops.into_iter()
                .filter(|op| {
                    !(op["op"] == "test"
                        && op["path"].as_str().is_some_and(|p| {
                            p == "/metadata/resourceVersion" || p == "/metadata/uid"
                        }))
                })
                .map(|op| canonical(op, false))
                .collect(),
        ),
        other => strip(other, 0),
    }
}

fn strip(v: Value, depth: usize) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<String, Value> = m
                .into_iter()
                .filter(|(k, _)| !is_timestamp(k))
                .map(|(k, v)| {
                    let v = if k == "metadata" && depth == 0 {
                        strip_metadata(v)
                    } else {
                        strip(v, depth + 1)
                    };
                    (k, v)
                })
                .collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(|x| strip(x, depth + 1)).collect()),
        other => other,
    }
}

fn strip_metadata(v: Value) -> Value {
    match v {
        Value::Object(mut m) => {
            for k in VOLATILE_METADATA {
                m.remove(k);
            }
            strip(Value::Object(m), 1)
        }
        other => other,
    }
}

/// Fields that hold a time: `...Timestamp`, `...Time`, and `time`.
fn is_timestamp(key: &str) -> bool {
    key.ends_with("Timestamp") || key.ends_with("Time") || key == "time"
}

/// Which side an intent comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The live plugin.
    Live,
    /// Its shadow.
    Shadow,
}

/// How one intent (or pair) was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Both sides intended the same write.
    Same,
    /// Only the live plugin wrote, within the window.
    OnlyLive,
    /// Only the shadow wrote, within the window.
    OnlyShadow,
    /// Both wrote, differently.
    Differs,
}

impl Outcome {
    /// The label of the metric.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Same => "same",
            Outcome::OnlyLive => "only_live",
            Outcome::OnlyShadow => "only_shadow",
            Outcome::Differs => "differs",
        }
    }

    /// Every outcome, in the order of the metric's series.
    pub const ALL: [Outcome; 4] = [
        Outcome::Same,
        Outcome::Differs,
        Outcome::OnlyLive,
        Outcome::OnlyShadow,
    ];
}

/// Comparisons by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Pairs that were the same.
    pub same: u64,
    /// Pairs that differed.
    pub differs: u64,
    /// Live intents with no shadow partner within the window.
    pub only_live: u64,
    /// Shadow intents with no live partner within the window.
    pub only_shadow: u64,
}

impl Counts {
    fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Same => self.same += 1,
            Outcome::Differs => self.differs += 1,
            Outcome::OnlyLive => self.only_live += 1,
            Outcome::OnlyShadow => self.only_shadow += 1,
        }
    }

    /// The count of `o`.
    pub fn get(&self, o: Outcome) -> u64 {
        match o {
            Outcome::Same => self.same,
            Outcome::Differs => self.differs,
            Outcome::OnlyLive => self.only_live,
            Outcome::OnlyShadow => self.only_shadow,
        }
    }
}

/// What is known of one object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyView {
    /// The worst outcome seen for the object (`differs` over `only_*` over
    /// `same`).
    pub verdict: Outcome,
    /// Its comparisons by outcome.
    pub counts: Counts,
    /// The live plugin's last intent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<Intent>,
    /// The shadow's last intent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Intent>,
}

/// One shadow's comparison, as the report, `/shadow` and the metrics show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShadowReport {
    /// The shadow plugin.
    pub shadow: String,
    /// The live plugin it shadows.
    pub live: String,
    /// The pairing window, in milliseconds.
    pub window_ms: u64,
    /// Comparisons by outcome.
    pub counts: Counts,
    /// Intents still waiting for a partner.
    pub waiting: u64,
    /// Objects compared, with a per-key view (at most [`MAX_KEYS`]).
    pub objects: u64,
    /// Per object (`resource namespace/name`), when asked for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, KeyView>,
}

#[derive(Default)]
struct Waiting {
    live: VecDeque<(Intent, Instant)>,
    shadow: VecDeque<(Intent, Instant)>,
}

#[derive(Default)]
struct Inner {
    shadow: Option<String>,
    waiting: HashMap<String, Waiting>,
    counts: Counts,
    views: BTreeMap<String, KeyView>,
    last_sweep: Option<Instant>,
}

/// The comparison of one live plugin with its shadow (see the module doc).
pub struct ShadowBook {
    live: String,
    window: Duration,
    /// A shadow runs: read without the lock on every write of the live
    /// plugin, which most of the time has no shadow.
    active: std::sync::atomic::AtomicBool,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for ShadowBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowBook")
            .field("live", &self.live)
            .finish()
    }
}

impl ShadowBook {
    /// The book of live plugin `live`, pairing within `window`.
    pub fn new(live: &str, window: Duration) -> Arc<Self> {
        Arc::new(Self {
            live: live.to_string(),
            window,
            active: std::sync::atomic::AtomicBool::new(false),
            inner: Mutex::new(Inner::default()),
        })
    }

    /// A shadow of this plugin runs now (a new one starts a new comparison).
    pub fn attach(&self, shadow: &str) {
        let mut i = self.inner.lock();
        if i.shadow.as_deref() != Some(shadow) {
            *i = Inner {
                shadow: Some(shadow.to_string()),
                ..Inner::default()
            };
        }
        self.active
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The shadow `shadow` stopped: nothing more is compared.
    pub fn detach(&self, shadow: &str) {
        let mut i = self.inner.lock();
        if i.shadow.as_deref() == Some(shadow) {
            i.shadow = None;
            i.waiting.clear();
            self.active
                .store(false, std::sync::atomic::Ordering::Release);
        }
    }

    /// The shadow that runs, if any.
    pub fn shadow(&self) -> Option<String> {
        self.inner.lock().shadow.clone()
    }

    /// The hook for one side's plugin.
    pub fn sink(self: &Arc<Self>, side: Side) -> Arc<dyn WriteIntents> {
        Arc::new(Sink {
            book: self.clone(),
            side,
        })
    }

    /// Records one side's intent, pairing it with the other side's oldest
    /// waiting intent for the same object.
    pub fn record(&self, side: Side, intent: Intent, now: Instant) {
        let mut guard = self.inner.lock();
        let i = &mut *guard;
        if i.shadow.is_none() {
            return;
        }
        let key = intent.key();
        let w = i.waiting.entry(key.clone()).or_default();
        let (mine, theirs) = match side {
            Side::Live => (&mut w.live, &mut w.shadow),
            Side::Shadow => (&mut w.shadow, &mut w.live),
        };
        let judged = match theirs.pop_front() {
            Some((other, _)) => {
                let outcome = if other == intent {
                    Outcome::Same
                } else {
                    Outcome::Differs
                };
                let (live, shadow) = match side {
                    Side::Live => (intent, other),
                    Side::Shadow => (other, intent),
                };
                Some((outcome, Some(live), Some(shadow)))
            }
            None => {
                mine.push_back((intent, now));
                None
            }
        };
        if w.live.is_empty() && w.shadow.is_empty() {
            i.waiting.remove(&key);
        }
        if let Some((outcome, live, shadow)) = judged {
            judge(i, &key, outcome, live, shadow);
        }
        if i.last_sweep
            .is_none_or(|t| now.duration_since(t) >= self.window / 4)
        {
            self.sweep_locked(i, now);
        }
    }

    /// Counts every intent that waited longer than the window.
    fn sweep_locked(&self, i: &mut Inner, now: Instant) {
        i.last_sweep = Some(now);
        let window = self.window;
        let mut expired = Vec::new();
        i.waiting.retain(|key, w| {
            for (q, outcome) in [
                (&mut w.live, Outcome::OnlyLive),
                (&mut w.shadow, Outcome::OnlyShadow),
            ] {
                while q
                    .front()
                    .is_some_and(|(_, at)| now.duration_since(*at) >= window)
                {
                    let (intent, _) = q.pop_front().expect("checked");
                    expired.push((key.clone(), outcome, intent));
                }
            }
            !(w.live.is_empty() && w.shadow.is_empty())
        });
        for (key, outcome, intent) in expired {
            let (live, shadow) = match outcome {
                Outcome::OnlyLive => (Some(intent), None),
                _ => (None, Some(intent)),
            };
            judge(i, &key, outcome, live, shadow);
        }
    }

    /// The comparison so far (with the per-key views when `keys`).
    pub fn report(&self, keys: bool, now: Instant) -> Option<ShadowReport> {
        let mut guard = self.inner.lock();
        let i = &mut *guard;
        let shadow = i.shadow.clone()?;
        self.sweep_locked(i, now);
        Some(ShadowReport {
            shadow,
            live: self.live.clone(),
            window_ms: self.window.as_millis() as u64,
            counts: i.counts,
            waiting: i
                .waiting
                .values()
                .map(|w| (w.live.len() + w.shadow.len()) as u64)
                .sum(),
            objects: i.views.len() as u64,
            keys: if keys {
                i.views.clone()
            } else {
                BTreeMap::new()
            },
        })
    }
}

fn judge(i: &mut Inner, key: &str, outcome: Outcome, live: Option<Intent>, shadow: Option<Intent>) {
    i.counts.add(outcome);
    let full = i.views.len() >= MAX_KEYS;
    let view = match i.views.get_mut(key) {
        Some(v) => v,
        None if full => return,
        None => i.views.entry(key.to_string()).or_insert(KeyView {
            verdict: outcome,
            counts: Counts::default(),
            live: None,
            shadow: None,
        }),
    };
    view.verdict = view.verdict.max(outcome);
    view.counts.add(outcome);
    if live.is_some() {
        view.live = live;
    }
    if shadow.is_some() {
        view.shadow = shadow;
    }
}

struct Sink {
    book: Arc<ShadowBook>,
    side: Side,
}

impl WriteIntents for Sink {
    fn intended(&self, request: &ApiRequest) {
        if !self.book.active.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        if let Some(intent) = Intent::of(request) {
            self.book.record(self.side, intent, Instant::now());
        }
    }
}

/// A readable diff of one object's two intents, as `kubectl diff` prints
/// one: `-` lines are the live plugin's, `+` lines the shadow's.
pub fn render_key(key: &str, view: &KeyView) -> String {
    let pretty = |i: &Option<Intent>| {
        i.as_ref()
            .map(|i| serde_json::to_string_pretty(i).unwrap_or_default())
            .unwrap_or_default()
    };
    let mut out = format!(
        "--- live/{key}\n+++ shadow/{key}\n# {} ({} same, {} differs, {} only live, {} only shadow)\n",
        view.verdict.as_str(),
        view.counts.same,
        view.counts.differs,
        view.counts.only_live,
        view.counts.only_shadow
    );
    for line in line_diff(&pretty(&view.live), &pretty(&view.shadow)) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A line diff (longest common subsequence): ` `, `-` and `+` lines.
pub fn line_diff(a: &str, b: &str) -> Vec<String> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(format!(" {}", a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("-{}", a[i]));
            i += 1;
        } else {
            out.push(format!("+{}", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(name: &str, label: &str) -> Intent {
        Intent {
            method: "PATCH".into(),
            resource: "v1/pods".into(),
            namespace: Some("ns".into()),
            name: name.into(),
            subresource: None,
            patch: Some("apply".into()),
            body: serde_json::json!({"metadata": {"labels": {"team": label}}}),
        }
    }

    #[test]
    fn volatile_fields_and_key_order_do_not_make_a_difference() {
        let a = canonical(
            serde_json::json!({"metadata": {"name": "p", "resourceVersion": "7",
                "managedFields": [{}], "labels": {"a": "1"}},
                "status": {"conditions": [{"type": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
            false,
        );
        let b = canonical(
            serde_json::json!({"status": {"conditions": [{"lastTransitionTime": "2027-01-01T00:00:00Z", "type": "Ready"}]},
                "metadata": {"labels": {"a": "1"}, "resourceVersion": "9", "name": "p"}}),
            false,
        );
        assert_eq!(a, b);
        let p = canonical(
            serde_json::json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "x"}]),
            true,
        );
        assert_eq!(
            p,
            serde_json::json!([{"op": "add", "path": "/metadata/finalizers/-", "value": "x"}])
        );
    }

    #[test]
    fn intents_pair_by_object_and_expire_alone_after_the_window() {
        let book = ShadowBook::new("live", Duration::from_secs(10));
        book.attach("next");
        let t0 = Instant::now();
        book.record(Side::Live, intent("a", "x"), t0);
        book.record(Side::Shadow, intent("a", "x"), t0);
        book.record(Side::Shadow, intent("b", "y"), t0);
        book.record(Side::Live, intent("b", "x"), t0);
        book.record(Side::Live, intent("c", "x"), t0);
        let r = book.report(true, t0 + Duration::from_secs(1)).unwrap();
        assert_eq!((r.counts.same, r.counts.differs, r.waiting), (1, 1, 1));
        book.record(Side::Shadow, intent("d", "x"), t0 + Duration::from_secs(5));
        let r = book.report(true, t0 + Duration::from_secs(11)).unwrap();
        assert_eq!(r.counts.only_live, 1, "c waited past the window");
        assert_eq!(r.counts.only_shadow, 0, "d is still within its window");
        assert_eq!(r.keys["v1/pods ns/b"].verdict, Outcome::Differs);
        assert_eq!(r.keys["v1/pods ns/a"].verdict, Outcome::Same);
        let r = book.report(false, t0 + Duration::from_secs(16)).unwrap();
        assert_eq!(r.counts.only_shadow, 1);
        assert_eq!(r.waiting, 0);
    }

    #[test]
    fn a_live_plugin_without_a_shadow_is_not_looked_at() {
        let book = ShadowBook::new("live", Duration::from_secs(10));
        book.record(Side::Live, intent("a", "x"), Instant::now());
        assert!(book.report(true, Instant::now()).is_none());
        book.attach("next");
        book.detach("next");
        assert!(book.report(true, Instant::now()).is_none());
    }

    #[test]
    fn the_diff_marks_the_live_and_shadow_lines() {
        let d = line_diff("a\nb\nc", "a\nx\nc");
        assert_eq!(d, vec![" a", "-b", "+x", " c"]);
    }
}
