//! A plugin that imports `wasi:keyvalue/store`, an interface the host does not
//! provide: `check` must reject it and name the import.
//!
//! Invariant: the import is really used, so it survives in the component.

wit_bindgen::generate!({ path: "wit", world: "extra-import-plugin", generate_all });

use exports::wasm_informer::plugin::handler::Guest;
use wasm_informer::plugin::objects;
use wasm_informer::plugin::types::EventInfo;

struct Extra;

impl Guest for Extra {
    fn init(_config: String) -> Result<(), String> {
        Ok(())
    }

    fn on_event(info: EventInfo) -> Result<(), String> {
        let key = objects::key(info.object);
        match wasi::keyvalue::store::get(&key) {
            Some(_) => Ok(()),
            None => Err(format!("no value for {key}")),
        }
    }
}

export!(Extra);
