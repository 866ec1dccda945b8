//! A no-op plugin of the 0.1 world, built against `wit/v0.1` with wit-bindgen
//! alone: the baseline against which the 0.2 event encoding is measured (the
//! host lowers the whole event, two objects for an update, into its memory).
//!
//! Invariant: every call returns `ok` and reads nothing.

wit_bindgen::generate!({ path: "../../../wit/v0.1", world: "event-handler" });

use exports::wasm_informer::plugin::handler::Guest;
use wasm_informer::plugin::types::Event;

struct Noop;

impl Guest for Noop {
    fn init(_config: String) -> Result<(), String> {
        Ok(())
    }

    fn on_event(_event: Event) -> Result<(), String> {
        Ok(())
    }
}

export!(Noop);
