//! A component for another world (`fixture:other/other`): `check` must reject it
//! for not exporting `wasm-informer:plugin/handler`.
//!
//! Invariant: exports only `run`.

wit_bindgen::generate!({ path: "wit", world: "other" });

struct Other;

impl Guest for Other {
    fn run() -> u32 {
        42
    }
}

export!(Other);
