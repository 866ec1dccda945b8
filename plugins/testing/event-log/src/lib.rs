//! Test plugin: logs one line per event, so that a test reading the host's
//! stderr knows exactly what this instance handled, and when:
//! `event kind=K key=NS/NAME rv=RV initial=BOOL fsu=BOOL`. At `init` it logs
//! `init config=JSON`.
//!
//! Invariant: every event handled produces exactly one `event` line, and the
//! handler always returns `ok`.

use wasm_informer_sdk::{export_plugin, info, Config, Event, Handler, Result};

struct EventLog;

fn line(kind: &str, e: &Event) -> Result<()> {
    info!(
        "event kind={kind} key={} rv={} initial={} fsu={}",
        e.key(),
        e.object().resource_version(),
        e.is_in_initial_list(),
        e.final_state_unknown()
    );
    Ok(())
}

impl Handler for EventLog {
    fn init(config: &Config) -> Result<Self> {
        info!("init config={}", config.json());
        Ok(EventLog)
    }

    fn on_add(&mut self, e: &Event) -> Result<()> {
        line("added", e)
    }

    fn on_update(&mut self, e: &Event) -> Result<()> {
        line("updated", e)
    }

    fn on_delete(&mut self, e: &Event) -> Result<()> {
        line("deleted", e)
    }

    fn on_sync(&mut self, e: &Event) -> Result<()> {
        line("synced", e)
    }
}

export_plugin!(EventLog);
