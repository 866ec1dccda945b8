//! A plugin built against `wasm-informer:plugin@0.9.0`, a version this host does
//! not implement: `check` must name the version mismatch.
//!
//! Invariant: otherwise a valid handler.

wit_bindgen::generate!({ path: "wit", world: "event-handler" });

use exports::wasm_informer::plugin::handler::Guest;
use wasm_informer::plugin::types::Event;

struct V2;

impl Guest for V2 {
    fn init(_config: String) -> Result<(), String> {
        Ok(())
    }

    fn on_event(event: Event) -> Result<(), String> {
        wasm_informer::plugin::log::log(wasm_informer::plugin::log::Level::Info, &event.key);
        Ok(())
    }
}

export!(V2);
