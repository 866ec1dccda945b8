//! The objects a plugin may reference during one call into it: the event's
//! objects, what its cache queries returned, and what the API server answered.
//!
//! Job: hand out `object-ref`s (plain `u32`s) for shared objects, resolve them
//! for the `objects` getters, and forget them all when the call returns. No
//! object is copied: an entry is a pointer to the cached object (or to the
//! parsed answer) and its resource id.
//!
//! Invariants: a reference is valid exactly during the call that produced it:
//! references are numbered from a running base, so one from an earlier call
//! (or a made-up one) never resolves; every reference is below 2^31 (some
//! guest toolchains corrupt larger `u32` arguments); at most
//! [`MAX_OBJECTS_PER_CALL`] objects are referenced in one call, so a plugin
//! cannot grow the host's memory without bound.

use std::sync::Arc;

use kube_informer::object::ObjectRef;

/// Most objects one call may reference (cache queries beyond this fail with
/// `too-many-objects`).
pub const MAX_OBJECTS_PER_CALL: u32 = 1 << 20;

/// Where references wrap: below 2^31, leaving room for one call's worth.
const WRAP: u32 = (1 << 31) - MAX_OBJECTS_PER_CALL;

/// What a reference stands for.
#[derive(Debug, Clone)]
pub struct ObjectHandle {
    /// Resource id, for example `v1/pods`.
    pub resource: Arc<str>,
    /// The object.
    pub object: ObjectRef,
}

/// The references of the call in progress.
#[derive(Debug, Default)]
pub struct ObjectTable {
    base: u32,
    items: Vec<ObjectHandle>,
    /// Bytes of API answers referenced in this call (cached objects are
    /// shared with the cache and cost nothing here).
    answer_bytes: usize,
}

/// The call already references [`MAX_OBJECTS_PER_CALL`] objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a call may reference at most {MAX_OBJECTS_PER_CALL} objects")]
pub struct TooManyObjects;

impl ObjectTable {
    /// References an API answer of `bytes` bytes for the rest of the call.
    pub fn push_answer(
        &mut self,
        resource: &Arc<str>,
        object: ObjectRef,
        bytes: usize,
    ) -> Result<u32, TooManyObjects> {
        let r = self.push(resource, object)?;
        self.answer_bytes += bytes;
        Ok(r)
    }

    /// Bytes of API answers this call holds.
    pub fn answer_bytes(&self) -> usize {
        self.answer_bytes
    }

    /// References `object` for the rest of the call.
    pub fn push(&mut self, resource: &Arc<str>, object: ObjectRef) -> Result<u32, TooManyObjects> {
        let n = self.items.len() as u32;
        if n >= MAX_OBJECTS_PER_CALL {
            return Err(TooManyObjects);
        }
        self.items.push(ObjectHandle {
            resource: resource.clone(),
            object,
        });
        Ok(self.base + n)
    }

    /// References every object of `objects`, or none of them.
    pub fn push_all(
        &mut self,
        resource: &str,
        objects: Vec<ObjectRef>,
    ) -> Result<Vec<u32>, TooManyObjects> {
        if self.items.len() + objects.len() > MAX_OBJECTS_PER_CALL as usize {
            return Err(TooManyObjects);
        }
        let resource: Arc<str> = resource.into();
        Ok(objects
            .into_iter()
            .map(|o| self.push(&resource, o).expect("room checked above"))
            .collect())
    }

    /// The object behind `r`, if `r` was handed out in this call.
    pub fn get(&self, r: u32) -> Option<&ObjectHandle> {
        r.checked_sub(self.base)
            .and_then(|i| self.items.get(i as usize))
    }

    /// Forgets every reference (the call returned). Later references never
    /// equal these.
    pub fn clear(&mut self) {
        let next = self.base + self.items.len() as u32;
        self.base = if next >= WRAP { 0 } else { next };
        self.items.clear();
        self.answer_bytes = 0;
    }

    /// Objects referenced in the call in progress.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the call references no object.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_informer::object::{Object, Transform};

    fn obj(name: &str) -> ObjectRef {
        let raw = format!(r#"{{"metadata":{{"name":"{name}"}}}}"#);
        Arc::new(Object::from_json(raw.as_bytes(), &Transform::default()).unwrap())
    }

    #[test]
    fn references_last_exactly_one_call() {
        let mut t = ObjectTable::default();
        let res: Arc<str> = "v1/pods".into();
        let a = t.push(&res, obj("a")).unwrap();
        let b = t.push(&res, obj("b")).unwrap();
        assert_eq!(t.get(a).unwrap().object.meta.name, "a");
        assert_eq!(t.get(b).unwrap().object.meta.name, "b");
        assert!(t.get(b + 1).is_none(), "a made-up reference");
        t.clear();
        assert!(
            t.get(a).is_none() && t.get(b).is_none(),
            "forgotten after the call"
        );
        let c = t.push(&res, obj("c")).unwrap();
        assert!(c != a && c != b, "never reused by the next call");
        assert_eq!(t.get(c).unwrap().object.meta.name, "c");
    }

    #[test]
    fn references_stay_below_2_31_and_wrap() {
        let mut t = ObjectTable {
            base: WRAP - 1,
            ..ObjectTable::default()
        };
        let res: Arc<str> = "v1/pods".into();
        let r = t.push(&res, obj("a")).unwrap();
        assert!(r < (1 << 31));
        t.push(&res, obj("b")).unwrap();
        t.clear();
        assert_eq!(t.base, 0);
        assert!(t.get(r).is_none());
    }

    #[test]
    fn a_call_references_at_most_the_cap() {
        let mut t = ObjectTable::default();
        let many = vec![obj("x"); MAX_OBJECTS_PER_CALL as usize + 1];
        assert_eq!(t.push_all("v1/pods", many), Err(TooManyObjects));
        assert!(t.is_empty(), "all or nothing");
    }
}
