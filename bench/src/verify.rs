//! Checks that a side runs the configuration its spec claims, from two
//! independent sources: the requests the simulator received while the side
//! started (a streaming or a paged first list, and how many reflectors made
//! one) and what the side reports about itself (whether its cache holds
//! managedFields, how many subscribers and controllers it attached, which of
//! our APIs built it).
//!
//! Invariant: a benchmark never reports a number for a side whose observed
//! configuration differs from its spec; [`side`] returns the difference as an
//! error instead, and the benchmark's rows become `failed` with it.

use anyhow::{bail, Result};
use apisim::RequestRecord;

use crate::spec::{
    HandlerKind, InitialList, ManagedFields, OursApi, PeerAttach, PeerFanout, Side, SideFacts,
    SideSpec,
};

/// First lists the simulator served on `path`: (streaming lists, paged lists).
fn first_lists(requests: &[RequestRecord], path: &str) -> (usize, usize) {
    let on_path = requests
        .iter()
        .filter(|r| r.method == "GET" && r.path == path);
    let (mut streaming, mut paged) = (0, 0);
    for r in on_path {
        if r.is_watch() {
            if r.param("sendInitialEvents").as_deref() == Some("true") {
                streaming += 1;
            }
        } else if r.param("continue").is_none_or(|c| c.is_empty()) {
            paged += 1;
        }
    }
    (streaming, paged)
}

fn path_of(resource: &str) -> Result<&'static str> {
    match resource {
        "v1/pods" => Ok("/api/v1/pods"),
        "apps/v1/deployments" => Ok("/apis/apps/v1/deployments"),
        other => bail!("verify: no request path known for {other}"),
    }
}

/// Checks `spec` against the `requests` made while the side started and the
/// `facts` it reported.
pub fn side(spec: &SideSpec, requests: &[RequestRecord], facts: &SideFacts) -> Result<()> {
    if spec.side == Side::Raw {
        return Ok(());
    }
    let who = spec.side.label();
    let reflectors = match (spec.side, spec.peer.fanout) {
        (Side::Peer, PeerFanout::Separate) => spec.handlers.len(),
        _ => 1,
    };
    let (streaming, paged) = first_lists(requests, path_of(&spec.resource)?);
    let want = match spec.initial_list {
        InitialList::Streaming => (reflectors, 0),
        InitialList::Paged => (0, reflectors),
    };
    if (streaming, paged) != want {
        bail!(
            "{who}: expected {reflectors} {:?} first list(s), the simulator served {streaming} streaming and {paged} paged",
            spec.initial_list
        );
    }
    let keep = spec.managed_fields == ManagedFields::Keep;
    if facts.managed_fields_cached != Some(keep) {
        bail!(
            "{who}: managedFields should be {} but the cache {}",
            if keep { "kept" } else { "stripped" },
            match facts.managed_fields_cached {
                Some(true) => "holds them",
                Some(false) => "holds none",
                None => "was not inspected",
            }
        );
    }
    match spec.side {
        Side::Ours => {
            let api = match spec.ours.api {
                OursApi::Registry => "registry",
                OursApi::Informer => "informer",
            };
            if facts.ours_api.as_deref() != Some(api) {
                bail!("{who}: built through {:?}, expected {api}", facts.ours_api);
            }
            let streamed = facts.streaming_lists.unwrap_or(0) > 0;
            if streamed != (spec.initial_list == InitialList::Streaming) {
                bail!(
                    "{who}: the Reflector completed {:?} streaming lists, expected {:?}",
                    facts.streaming_lists,
                    spec.initial_list
                );
            }
            let controllers = spec
                .handlers
                .iter()
                .filter(|h| matches!(h.kind, HandlerKind::WasmController { .. }))
                .count() as u64;
            if facts.controllers != controllers {
                bail!(
                    "{who}: runs {} controller(s), expected {controllers}",
                    facts.controllers
                );
            }
        }
        Side::Peer => {
            let count =
                |a: PeerAttach| spec.handlers.iter().filter(|h| h.peer_attach == a).count() as u64;
            let want = match spec.peer.fanout {
                PeerFanout::Separate => (spec.handlers.len() as u64, 0, 0),
                PeerFanout::Controller => (1, 0, 1),
                PeerFanout::Shared { .. } => (
                    1,
                    count(PeerAttach::Subscriber),
                    count(PeerAttach::Controller),
                ),
            };
            let got = (facts.reflectors, facts.subscribers, facts.controllers);
            if got != want {
                bail!("{who}: (reflectors, subscribers, controllers) = {got:?}, expected {want:?}");
            }
        }
        Side::Raw => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(query: &str) -> RequestRecord {
        RequestRecord {
            method: "GET".into(),
            path: "/api/v1/pods".into(),
            query: query.into(),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn tells_streaming_from_paged_first_lists() {
        let reqs = vec![
            get("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
            get("limit=500"),
            get("limit=500&continue=abc"),
            get("watch=true&resourceVersion=12"),
        ];
        assert_eq!(first_lists(&reqs, "/api/v1/pods"), (1, 1));
    }
}
