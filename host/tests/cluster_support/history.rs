//! The history checker: judges a cluster run from the server's side only.
//!
//! Input: the simulator's request log (`/_sim/requests`). Every request
//! names its sender in its user agent (`wasm-informer/VERSION (IDENTITY)`),
//! and every write the server applied carries the resourceVersion it was
//! given. From the accepted writes of Leases (their bodies are what the
//! server stored) the checker rebuilds the Lease history in resourceVersion
//! order; nothing a replica reports about itself is read.
//!
//! The model of a tenure. A *claim* is a Lease version held by replica R
//! that gives R a key: in leader mode the election Lease held by R gives it
//! every key; in sharded mode R's own Lease gives it the keys its view
//! annotation (`wasm-informer.dev/view`, virtual nodes in
//! `wasm-informer.dev/virtual-nodes`) places on R, computed with the
//! independent [`super::ring_model`]. A claim ends, in resourceVersion
//! order, at the next write of that Lease (a renewal that still claims the
//! key continues it) or at its deletion by its holder (a release). A
//! deletion by anyone else (an operator, a peer) is nothing its holder can
//! know of: the claim stands until it expires or the Lease is written
//! again. For others a claim is live only while writes arrive within a
//! lease duration of the claim's own arrival (peers time a lease from when
//! they *saw* it, never before it arrived). R *acquires* a key within a claim at the first
//! resourceVersion at which no other replica's claim on the key is live.
//!
//! Rules (each violation is one line):
//! - every write of a key by R lies within a claim of R on that key, at or
//!   after R's acquisition in it (leader: inside a leadership; sharded:
//!   inside R's claimed arcs, once no one else held them);
//! - no write of a key by R after another replica's acquisition of that key
//!   that came after R's own (leader: after another's acquisition of the
//!   Lease; sharded: of the arc holding the key);
//! - no key written by two replicas in overlapping tenures (a tenure here:
//!   from the acquisition to the replica's last write of the key in it);
//! - no child created twice: two creates (201) of the same child for the
//!   same owner (by uid, from the create's controller reference) with no
//!   delete of the child between them, and no owner with two children alive
//!   at once. A child dies with a delete of it, or of its owner (the
//!   garbage collector's deletions are not in the log); a create for an
//!   owner already deleted is collected at once and not counted.
//!
//! Invariant: the checker reads only the log it is given; its verdict
//! depends on the server's order (resourceVersions) and, for expiries, on
//! the server's arrival times.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::ring_model::RingModel;
use super::Req;

/// The annotation a ring member claims under.
pub const VIEW_ANNOTATION: &str = "wasm-informer.dev/view";
/// The virtual nodes per member of that claim.
pub const VNODES_ANNOTATION: &str = "wasm-informer.dev/virtual-nodes";

/// One stored version of a Lease (or its deletion).
#[derive(Debug, Clone)]
pub struct LeaseVersion {
    pub rv: u64,
    pub at_micros: u64,
    pub holder: Option<String>,
    /// The view annotation, parsed; `None` when absent.
    pub view: Option<Vec<String>>,
    pub vnodes: Option<u32>,
    pub deleted: bool,
    /// The replica that wrote this version (its user agent), if one did.
    pub by: Option<String>,
}

/// One accepted write that is not a Lease write.
#[derive(Debug, Clone)]
pub struct Write {
    pub rv: u64,
    pub at_micros: u64,
    pub replica: Option<String>,
    pub method: String,
    pub path: String,
    pub status: u16,
    pub body: String,
}

/// How the replicas share the work.
pub enum Mode<'a> {
    /// One election Lease of this name: its holder may write every key.
    Leader { lease: &'a str },
    /// A ring of member Leases (every Lease with a view annotation is
    /// taken as a member); `key_of` gives the shard key a write touches
    /// (`None`: not judged).
    Sharded {
        key_of: &'a dyn Fn(&Write) -> Option<String>,
    },
}

/// Children the controller makes: one child per primary.
pub struct Children<'a> {
    /// The collection path of the children (`/api/v1/namespaces/ctl/services`).
    pub collection: &'a str,
    /// The collection path of the primaries.
    pub primaries: &'a str,
}

/// What to check.
pub struct Rules<'a> {
    pub mode: Mode<'a>,
    /// Which writes are judged by the tenure rules (e.g. a plugin's).
    pub judged: &'a dyn Fn(&Write) -> bool,
    pub children: Option<Children<'a>>,
}

/// Counts of a check, for the test's output.
#[derive(Debug, Default, Clone)]
pub struct Verdict {
    pub violations: Vec<String>,
    /// Judged writes.
    pub writes: usize,
    /// Claims of a key within which a replica acquired it (per key in
    /// sharded mode, of the Lease in leader mode).
    pub tenures: usize,
    /// Acquisitions of a key by a replica other than its previous owner.
    pub takeovers: usize,
    /// Keys that changed owner at least once.
    pub keys_moved: usize,
    /// Child creates seen.
    pub creates: usize,
}

/// The Lease history and the writes of a run.
#[derive(Debug, Default)]
pub struct History {
    /// Lease name to its versions, in resourceVersion order.
    pub leases: BTreeMap<String, Vec<LeaseVersion>>,
    /// Accepted writes other than of Leases, in resourceVersion order.
    pub writes: Vec<Write>,
    /// (arrival, the largest resourceVersion of the accepted writes arrived
    /// by then), sorted by arrival.
    arrivals: Vec<(u64, u64)>,
    lease_micros: u64,
}

fn parse_view(v: &str) -> Vec<String> {
    let mut out: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// An interval of resourceVersions `[start, end)`.
type Span = (u64, u64);

/// One claim of one replica on one key.
#[derive(Debug, Clone)]
struct Claim {
    replica: String,
    start: u64,
    /// Where the claim ends in resourceVersion order (next write, deletion).
    end: u64,
    /// The parts in which others must treat it as live.
    live: Vec<Span>,
}

impl History {
    /// The history of the Leases in namespace `lease_namespace` and of every
    /// other write in `reqs`, with leases of `lease_ms`.
    pub fn from_log(reqs: &[Req], lease_namespace: &str, lease_ms: u64) -> History {
        let collection =
            format!("/apis/coordination.k8s.io/v1/namespaces/{lease_namespace}/leases");
        let mut h = History {
            lease_micros: lease_ms * 1000,
            ..History::default()
        };
        for r in reqs {
            if r.method == "GET" || !(200..300).contains(&r.status) {
                continue;
            }
            let Some(rv) = r.written_rv else { continue };
            h.arrivals.push((r.at_micros, rv));
            let body: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
            let lease_name = if r.path == collection && r.method == "POST" {
                body["metadata"]["name"].as_str().map(str::to_string)
            } else {
                r.path
                    .strip_prefix(&format!("{collection}/"))
                    .filter(|n| !n.contains('/'))
                    .map(str::to_string)
            };
            if let Some(name) = lease_name {
                let deleted = r.method == "DELETE";
                let ann = &body["metadata"]["annotations"];
                h.leases.entry(name).or_default().push(LeaseVersion {
                    rv,
                    at_micros: r.at_micros,
                    holder: (!deleted)
                        .then(|| body["spec"]["holderIdentity"].as_str())
                        .flatten()
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                    view: ann[VIEW_ANNOTATION].as_str().map(parse_view),
                    vnodes: ann[VNODES_ANNOTATION]
                        .as_str()
                        .and_then(|v| v.trim().parse().ok())
                        .filter(|n| *n > 0),
                    deleted,
                    by: r.replica().map(str::to_string),
                });
                continue;
            }
            h.writes.push(Write {
                rv,
                at_micros: r.at_micros,
                replica: r.replica().map(str::to_string),
                method: r.method.clone(),
                path: r.path.clone(),
                status: r.status,
                body: r.body.clone(),
            });
        }
        for v in h.leases.values_mut() {
            v.sort_by_key(|l| l.rv);
        }
        h.writes.sort_by_key(|w| w.rv);
        // By arrival, each carrying the largest resourceVersion arrived so
        // far, so that `expiry` is a binary search.
        h.arrivals.sort();
        let mut max = 0;
        for a in h.arrivals.iter_mut() {
            max = max.max(a.1);
            a.1 = max;
        }
        h
    }

    /// The first resourceVersion no longer covered by a claim that arrived
    /// at `at`: one past the largest resourceVersion of the writes that
    /// arrived within a lease duration of it.
    fn expiry(&self, at: u64) -> u64 {
        let limit = at + self.lease_micros;
        let i = self.arrivals.partition_point(|(t, _)| *t < limit);
        i.checked_sub(1).map(|j| self.arrivals[j].1).unwrap_or(0) + 1
    }

    /// The claims on `key` of every replica: `gives(lease, version, key)`
    /// says whether a version claims it for its holder.
    ///
    /// A deletion by the holder itself ends its claim (it releases it); a
    /// deletion by anyone else does not tell the holder anything, so the
    /// claim stands until it expires or the Lease is written again.
    fn claims(&self, key: &str, gives: &dyn Fn(&str, &LeaseVersion, &str) -> bool) -> Vec<Claim> {
        let mut out = Vec::new();
        for (name, versions) in &self.leases {
            let mut open: Option<Claim> = None;
            for (i, v) in versions.iter().enumerate() {
                if v.deleted {
                    let released = open
                        .as_ref()
                        .is_some_and(|c| v.by.as_deref() == Some(c.replica.as_str()));
                    if !released {
                        continue;
                    }
                }
                let holds = v
                    .holder
                    .as_ref()
                    .filter(|_| !v.deleted && gives(name, v, key));
                // The next write of this Lease that is not someone else's
                // deletion; a deletion by another before it cuts the claim
                // at its expiry.
                let mut next = u64::MAX;
                let mut cut_by_delete = false;
                for n in &versions[i + 1..] {
                    if n.deleted && n.by.as_deref() != v.holder.as_deref() {
                        cut_by_delete = true;
                        continue;
                    }
                    next = n.rv;
                    break;
                }
                let expiry = self.expiry(v.at_micros);
                let end = if cut_by_delete {
                    next.min(expiry)
                } else {
                    next
                };
                let live = (v.rv, expiry.min(end));
                match (holds, open.as_mut()) {
                    (Some(h), Some(c)) if c.replica == *h && c.end == v.rv => {
                        c.end = end;
                        c.live.push(live);
                    }
                    (holds, _) => {
                        out.extend(open.take());
                        if let Some(h) = holds {
                            open = Some(Claim {
                                replica: h.clone(),
                                start: v.rv,
                                end,
                                live: vec![live],
                            });
                        }
                    }
                }
            }
            out.extend(open);
        }
        out
    }

    /// Takeovers of Lease `name` that came too early, in resourceVersion
    /// order: a version held by Y after one held by X (with no release by X
    /// between: a version without a holder, or X deleting it) that arrived
    /// less than a lease duration after X's last version arrived. Whoever
    /// takes a lease over must have seen it unchanged for a lease duration,
    /// which it cannot before the last change arrived.
    pub fn early_takeovers(&self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut prev: Option<(&str, u64, u64)> = None;
        for v in self.leases.get(name).into_iter().flatten() {
            if v.deleted {
                if prev.is_some_and(|(x, _, _)| v.by.as_deref() == Some(x)) {
                    prev = None;
                }
                continue;
            }
            let Some(y) = v.holder.as_deref() else {
                prev = None;
                continue;
            };
            if let Some((x, at, rv)) = prev {
                if x != y && v.at_micros < at + self.lease_micros {
                    out.push(format!(
                        "{name}: {y} took it over at rv {} only {} ms after {x}'s renewal at rv {rv}",
                        v.rv,
                        (v.at_micros - at) / 1000
                    ));
                }
            }
            prev = Some((y, v.at_micros, v.rv));
        }
        out
    }

    /// The holders of Lease `name` in the order they acquired it.
    pub fn acquisitions(&self, name: &str) -> Vec<(u64, String)> {
        let mut out: Vec<(u64, String)> = Vec::new();
        let mut last: Option<&str> = None;
        for v in self.leases.get(name).into_iter().flatten() {
            let h = v.holder.as_deref().filter(|_| !v.deleted);
            if let Some(h) = h {
                if last != Some(h) {
                    out.push((v.rv, h.to_string()));
                }
            }
            if !v.deleted || v.by.as_deref() == last {
                last = h;
            }
        }
        out
    }

    /// Checks `rules`; returns the violations and the counts.
    pub fn check(&self, rules: &Rules) -> Verdict {
        let mut verdict = Verdict::default();
        // Judged writes, by key.
        let mut by_key: BTreeMap<String, Vec<&Write>> = BTreeMap::new();
        for w in self.writes.iter().filter(|w| (rules.judged)(w)) {
            let key = match &rules.mode {
                Mode::Leader { .. } => Some("*".to_string()),
                Mode::Sharded { key_of } => key_of(w),
            };
            if let Some(k) = key {
                by_key.entry(k).or_default().push(w);
                verdict.writes += 1;
            }
        }
        let leader_gives = |lease: &str| {
            let lease = lease.to_string();
            move |name: &str, _: &LeaseVersion, _: &str| name == lease
        };
        // One ring per (view, virtual nodes), built once.
        let rings: RefCell<HashMap<(Vec<String>, u32), RingModel>> = RefCell::default();
        let sharded_gives = |name: &str, v: &LeaseVersion, key: &str| {
            let Some(view) = v.view.as_ref().filter(|v| !v.is_empty()) else {
                return false;
            };
            match v.vnodes {
                // The host takes a claim it cannot rebuild as the whole ring.
                None => true,
                Some(n) => {
                    let mut rings = rings.borrow_mut();
                    let ring = rings
                        .entry((view.clone(), n))
                        .or_insert_with(|| RingModel::new(view, n));
                    ring.owner(key) == Some(name)
                }
            }
        };
        let keys: BTreeSet<String> = match &rules.mode {
            Mode::Leader { .. } => BTreeSet::from(["*".to_string()]),
            Mode::Sharded { .. } => by_key.keys().cloned().collect(),
        };
        for key in keys {
            let claims = match &rules.mode {
                Mode::Leader { lease } => self.claims(&key, &leader_gives(lease)),
                Mode::Sharded { .. } => self.claims(&key, &sharded_gives),
            };
            let writes = by_key.get(&key).cloned().unwrap_or_default();
            self.judge_key(&key, &claims, &writes, &mut verdict);
        }
        if let Some(ch) = &rules.children {
            self.check_children(ch, &mut verdict);
        }
        verdict
    }

    fn judge_key(&self, key: &str, claims: &[Claim], writes: &[&Write], verdict: &mut Verdict) {
        // Acquisition of each claim: its first point outside every other
        // replica's live parts.
        let acquisition = |c: &Claim| -> Option<u64> {
            let mut spans: Vec<Span> = claims
                .iter()
                .filter(|o| o.replica != c.replica)
                .flat_map(|o| o.live.iter().copied())
                .collect();
            spans.sort();
            let mut x = c.start;
            for (s, e) in spans {
                if s <= x && x < e {
                    x = e;
                } else if s > x {
                    break;
                }
            }
            (x < c.end).then_some(x)
        };
        let mut acquired: Vec<(u64, &Claim)> = claims
            .iter()
            .filter_map(|c| acquisition(c).map(|a| (a, c)))
            .collect();
        acquired.sort_by_key(|(a, _)| *a);
        verdict.tenures += acquired.len();
        let mut moved = false;
        for w in acquired.windows(2) {
            if w[0].1.replica != w[1].1.replica {
                verdict.takeovers += 1;
                moved = true;
            }
        }
        if moved {
            verdict.keys_moved += 1;
        }
        // Per acquired claim: the last write of its replica in it.
        let mut tenures: Vec<(String, u64, u64)> = Vec::new();
        for w in writes {
            let Some(who) = w.replica.as_deref() else {
                continue;
            };
            let Some(c) = claims
                .iter()
                .find(|c| c.replica == who && c.start <= w.rv && w.rv < c.end)
            else {
                let holder = claims
                    .iter()
                    .filter(|c| c.replica != who && c.start <= w.rv)
                    .max_by_key(|c| c.start)
                    .map(|c| format!(" ({} claimed it at rv {})", c.replica, c.start))
                    .unwrap_or_default();
                verdict.violations.push(format!(
                    "{key}: {who} wrote {} {} at rv {} without a claim on it{holder}",
                    w.method, w.path, w.rv
                ));
                continue;
            };
            let mine = acquisition(c);
            match mine {
                Some(a) if a <= w.rv => {}
                _ => {
                    verdict.violations.push(format!(
                        "{key}: {who} wrote {} {} at rv {} while another replica's claim (since before rv {}) was live",
                        w.method, w.path, w.rv, c.start
                    ));
                    continue;
                }
            }
            let a = mine.unwrap();
            if let Some((b, other)) = acquired
                .iter()
                .find(|(b, o)| o.replica != who && a < *b && *b <= w.rv)
            {
                verdict.violations.push(format!(
                    "{key}: {who} wrote {} {} at rv {} after {} acquired it at rv {b} (its own acquisition: rv {a})",
                    w.method, w.path, w.rv, other.replica
                ));
            }
            match tenures.iter_mut().find(|(r, s, _)| r == who && *s == a) {
                Some(t) => t.2 = t.2.max(w.rv),
                None => tenures.push((who.to_string(), a, w.rv)),
            }
        }
        for (i, x) in tenures.iter().enumerate() {
            for y in &tenures[i + 1..] {
                if x.0 != y.0 && x.1 <= y.2 && y.1 <= x.2 {
                    verdict.violations.push(format!(
                        "{key}: written by {} in rv {}..={} and by {} in rv {}..={}: overlapping tenures",
                        x.0, x.1, x.2, y.0, y.1, y.2
                    ));
                }
            }
        }
    }

    fn check_children(&self, ch: &Children, verdict: &mut Verdict) {
        let child_of = |w: &Write| -> Option<String> {
            if w.method == "POST" && w.path == ch.collection {
                let b: Value = serde_json::from_str(&w.body).ok()?;
                return b["metadata"]["name"].as_str().map(str::to_string);
            }
            let name = w.path.strip_prefix(&format!("{}/", ch.collection))?;
            (!name.contains('/')).then(|| name.to_string())
        };
        let primary_of = |w: &Write| -> Option<String> {
            let name = w.path.strip_prefix(&format!("{}/", ch.primaries))?;
            (!name.contains('/')).then(|| name.to_string())
        };
        // Owner uid to its children alive (name, created at rv); owner
        // names to the uids seen under them; uids of deleted owners.
        let mut alive: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut uids_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut dead: BTreeSet<String> = BTreeSet::new();
        for w in &self.writes {
            if w.method == "DELETE" {
                if let Some(c) = child_of(w) {
                    for children in alive.values_mut() {
                        children.remove(&c);
                    }
                }
                if let Some(p) = primary_of(w) {
                    // The garbage collector deletes its children with it,
                    // and any child created for it later.
                    for uid in uids_of.remove(&p).unwrap_or_default() {
                        alive.remove(&uid);
                        dead.insert(uid);
                    }
                }
                continue;
            }
            let Some(c) = child_of(w) else { continue };
            if w.status != 201 {
                continue;
            }
            verdict.creates += 1;
            let b: Value = serde_json::from_str(&w.body).unwrap_or(Value::Null);
            let Some((owner, uid)) = b["metadata"]["ownerReferences"]
                .as_array()
                .and_then(|a| a.iter().find(|o| o["controller"] == true))
                .map(|o| {
                    (
                        o["name"].as_str().unwrap_or("").to_string(),
                        o["uid"].as_str().unwrap_or("").to_string(),
                    )
                })
            else {
                continue;
            };
            if dead.contains(&uid) {
                // Made from a stale cache for an owner already deleted: the
                // garbage collector takes it at once.
                continue;
            }
            let who = w.replica.as_deref().unwrap_or("(test)");
            // A create succeeded, so no child of that name was left: one of
            // another owner went with its owner (the garbage collector's
            // deletions are not in the log).
            for (u, children) in alive.iter_mut() {
                if *u != uid {
                    children.remove(&c);
                }
            }
            let children = alive.entry(uid.clone()).or_default();
            if let Some(rv) = children.get(&c) {
                verdict.violations.push(format!(
                    "child {c} of {owner} (uid {uid}) created twice: at rv {rv} and by {who} at rv {}, not deleted between",
                    w.rv
                ));
            }
            if let Some(other) = children.keys().find(|n| **n != c) {
                verdict.violations.push(format!(
                    "{owner} (uid {uid}) has two children alive: {other} and {c} (created by {who} at rv {})",
                    w.rv
                ));
            }
            children.insert(c, w.rv);
            uids_of.entry(owner).or_default().insert(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";

    /// An accepted write: `who` (a replica) or the test, at `ms`, given `rv`.
    fn w(who: Option<&str>, method: &str, path: &str, ms: u64, rv: u64, body: Value) -> Req {
        Req {
            method: method.into(),
            path: path.into(),
            user_agent: who
                .map(|w| format!("wasm-informer/0.1.0 ({w})"))
                .unwrap_or_else(|| "test".into()),
            at_micros: ms * 1000,
            status: if method == "POST" { 201 } else { 200 },
            body: body.to_string(),
            query: String::new(),
            written_rv: Some(rv),
        }
    }

    fn lease(name: &str, holder: &str, view: Option<&str>) -> Value {
        let mut ann = serde_json::Map::new();
        if let Some(v) = view {
            ann.insert(VIEW_ANNOTATION.into(), json!(v));
            ann.insert(VNODES_ANNOTATION.into(), json!("100"));
        }
        json!({"metadata": {"name": name, "annotations": ann},
               "spec": {"holderIdentity": holder}})
    }

    fn everything(_: &Write) -> bool {
        true
    }

    #[test]
    fn a_leaders_write_after_anothers_acquisition_is_a_violation_and_one_inside_its_own_is_not() {
        let l = format!("{LEASES}/el");
        let log = vec![
            w(Some("a"), "POST", LEASES, 0, 1, lease("el", "a", None)),
            w(
                Some("a"),
                "PATCH",
                "/api/v1/namespaces/x/pods/p",
                100,
                2,
                json!({}),
            ),
            w(Some("a"), "PUT", &l, 500, 3, lease("el", "a", None)),
            w(Some("b"), "PUT", &l, 4000, 4, lease("el", "b", None)),
            w(
                Some("a"),
                "PATCH",
                "/api/v1/namespaces/x/pods/p",
                4100,
                5,
                json!({}),
            ),
            w(
                Some("b"),
                "PATCH",
                "/api/v1/namespaces/x/pods/p",
                4200,
                6,
                json!({}),
            ),
        ];
        let h = History::from_log(&log, "ns", 3000);
        let v = h.check(&Rules {
            mode: Mode::Leader { lease: "el" },
            judged: &everything,
            children: None,
        });
        assert_eq!(v.writes, 3);
        assert_eq!(v.takeovers, 1);
        assert_eq!(v.violations.len(), 1, "{:?}", v.violations);
        assert!(
            v.violations[0].contains("a wrote PATCH"),
            "{:?}",
            v.violations
        );
        assert!(h.early_takeovers("el").is_empty());
        // The same takeover 1 s after the last renewal came too early.
        let mut early = log.clone();
        early[3].at_micros = 1_500_000;
        let h = History::from_log(&early, "ns", 3000);
        assert_eq!(h.early_takeovers("el").len(), 1);
        assert_eq!(
            h.acquisitions("el"),
            vec![(1, "a".to_string()), (4, "b".to_string())]
        );
    }

    #[test]
    fn a_members_lease_deleted_by_someone_else_keeps_its_claim_until_it_expires() {
        let ring = RingModel::new(&["a".to_string(), "b".to_string()], 100);
        let key = (0..100)
            .map(|i| format!("/Pod/x/p{i}"))
            .find(|k| ring.owner(k) == Some("a"))
            .unwrap();
        let pod = |k: &str| {
            format!(
                "/api/v1/namespaces/x/pods/{}",
                k.rsplit('/').next().unwrap()
            )
        };
        let path = pod(&key);
        let (la, lb) = (format!("{LEASES}/a"), format!("{LEASES}/b"));
        let log = vec![
            w(
                Some("a"),
                "POST",
                LEASES,
                0,
                1,
                lease("a", "a", Some("a,b")),
            ),
            w(
                Some("b"),
                "POST",
                LEASES,
                0,
                2,
                lease("b", "b", Some("a,b")),
            ),
            w(Some("a"), "PATCH", &path, 100, 3, json!({})),
            // An operator deletes a's Lease; b claims the whole ring at once.
            w(None, "DELETE", &la, 200, 4, json!({})),
            w(Some("b"), "PUT", &lb, 300, 5, lease("b", "b", Some("b"))),
            w(Some("b"), "PATCH", &path, 400, 6, json!({})),
            // a, unaware, writes: still its claim.
            w(Some("a"), "PATCH", &path, 500, 7, json!({})),
            // Once a's lease expired, b may write.
            w(Some("b"), "PUT", &lb, 3500, 8, lease("b", "b", Some("b"))),
            w(Some("b"), "PATCH", &path, 3600, 9, json!({})),
        ];
        let h = History::from_log(&log, "ns", 3000);
        let key_of = |w: &Write| -> Option<String> {
            let name = w.path.rsplit('/').next()?;
            Some(format!("/Pod/x/{name}"))
        };
        let judged = |w: &Write| w.path.contains("/pods/");
        let v = h.check(&Rules {
            mode: Mode::Sharded { key_of: &key_of },
            judged: &judged,
            children: None,
        });
        assert_eq!(v.writes, 4);
        assert_eq!(v.violations.len(), 1, "{:#?}", v.violations);
        assert!(
            v.violations[0].contains("b wrote") && v.violations[0].contains("rv 6"),
            "{:?}",
            v.violations
        );
        // Deleted by a itself, the claim ends there: b's write at rv 6 is fine.
        let mut released = log.clone();
        released[3].user_agent = "wasm-informer/0.1.0 (a)".into();
        released.remove(6);
        let h = History::from_log(&released, "ns", 3000);
        let v = h.check(&Rules {
            mode: Mode::Sharded { key_of: &key_of },
            judged: &judged,
            children: None,
        });
        assert!(v.violations.is_empty(), "{:#?}", v.violations);
    }

    #[test]
    fn a_child_created_twice_for_one_owner_is_a_violation_and_one_for_a_deleted_owner_is_not() {
        let svc = "/api/v1/namespaces/x/services";
        let dep = "/apis/apps/v1/namespaces/x/deployments";
        let child = |uid: &str| {
            json!({"metadata": {"name": "d", "ownerReferences": [
                {"kind": "Deployment", "name": "d", "uid": uid, "controller": true}]}})
        };
        let create = |ms, rv, uid: &str| {
            let mut r = w(Some("a"), "PATCH", &format!("{svc}/d"), ms, rv, child(uid));
            r.status = 201;
            r
        };
        let log = vec![
            create(0, 1, "u1"),
            create(10, 2, "u1"),
            w(None, "DELETE", &format!("{dep}/d"), 20, 3, json!({})),
            // From a stale cache: collected at once, not counted.
            create(30, 4, "u1"),
            create(40, 5, "u2"),
        ];
        let h = History::from_log(&log, "ns", 3000);
        let v = h.check(&Rules {
            mode: Mode::Leader { lease: "none" },
            judged: &|_: &Write| false,
            children: Some(Children {
                collection: svc,
                primaries: dep,
            }),
        });
        assert_eq!(v.creates, 4);
        assert_eq!(v.violations.len(), 1, "{:#?}", v.violations);
        assert!(
            v.violations[0].contains("created twice"),
            "{:?}",
            v.violations
        );
    }
}
