//! Served types stored as another type, as the apiserver serves one storage through several API
//! groups: events.k8s.io/v1 Events are stored as core v1 Events (see [`crate::events`]).
//!
//! Invariant: a view has no storage of its own. Every read of it converts the stored object,
//! every write converts the request's object before it is validated and stored, and both APIs
//! share one resourceVersion sequence and one watch stream.

use serde_json::Value;
use wasm_informer_selector::FieldSelector;

use crate::resource::ResourceType;
use crate::status::ApiError;

/// How one served type maps onto its storage.
#[derive(Debug)]
pub struct View {
    /// (group, version, plural) of the storage type.
    pub storage: (&'static str, &'static str, &'static str),
    /// The request's object in storage form.
    pub to_storage: fn(Value) -> Value,
    /// A stored object as this type serves it.
    pub present: fn(&Value) -> Value,
    /// A field selector label of this type as the storage type's label.
    pub field_label: fn(&str) -> Option<&'static str>,
}

static EVENTS: View = View {
    storage: ("", "v1", "events"),
    to_storage: crate::events::to_core,
    present: crate::events::from_core,
    field_label: crate::events::core_field_label,
};

/// The view `rt` is, if it is one.
pub fn of(rt: &ResourceType) -> Option<&'static View> {
    (rt.group == "events.k8s.io" && rt.plural == "events").then_some(&EVENTS)
}

impl View {
    /// `fields` in the storage type's labels (after checking them against the served type's
    /// selectable fields, so an unsupported label is the same 400 as without a view).
    pub fn translate_fields(&self, fields: &FieldSelector) -> Result<FieldSelector, ApiError> {
        let mut out = fields.clone();
        for r in out.requirements.iter_mut() {
            let Some(label) = (self.field_label)(&r.field) else {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {}",
                    r.field
                )));
            };
            r.field = label.to_string();
        }
        Ok(out)
    }
}
