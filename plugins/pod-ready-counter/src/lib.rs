//! Counts Ready pods per namespace and logs a summary whenever a count changes.
//!
//! Level-triggered, as the informer pattern intends: on every event for a pod it
//! recounts that pod's namespace from the host's cache (which is updated before
//! the event is delivered), so replays, resyncs and missed intermediate events
//! all converge to the right count. The manifest's `read` list must include
//! `v1/pods`.
//!
//! Invariant: after any event, the count for the event's namespace equals the
//! number of Ready pods the cache holds in that namespace.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use wasm_informer_sdk::{export_plugin, info, typed, Config, Event, Handler, Result};

struct PodReadyCounter {
    ready: BTreeMap<String, u64>,
}

/// Whether a pod's `Ready` condition is `True`.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Handler for PodReadyCounter {
    fn init(_config: &Config) -> Result<Self> {
        Ok(PodReadyCounter {
            ready: BTreeMap::new(),
        })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.recount(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.recount(event)
    }

    fn on_delete(&mut self, event: &Event) -> Result<()> {
        self.recount(event)
    }

    fn on_sync(&mut self, event: &Event) -> Result<()> {
        self.recount(event)
    }
}

impl PodReadyCounter {
    fn recount(&mut self, event: &Event) -> Result<()> {
        // Decoding the event proves it is a pod before trusting the cache.
        let pod: Pod = event.decode()?;
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let pods: Vec<Pod> = typed::list(Some(&ns), None)?;
        let ready = pods.iter().filter(|p| is_ready(p)).count() as u64;
        let before = self.ready.insert(ns.clone(), ready);
        if before != Some(ready) {
            let total: u64 = self.ready.values().sum();
            info!(
                "ready pods: namespace {ns} {ready}/{} ; all namespaces {total}",
                pods.len()
            );
        }
        Ok(())
    }
}

export_plugin!(PodReadyCounter);
