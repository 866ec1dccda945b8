//! The raw cached type of the kube-runtime side: a pod's `ObjectMeta` parsed,
//! and its `spec` and `status` kept as the JSON received (`Box<RawValue>`).
//! It is what a kube-runtime user who cares about memory and decode cost
//! caches when the controller reads only metadata, or parses the body on
//! demand, like for like with our cache (metadata parsed plus the JSON).
//!
//! `metadata_watcher` would be the other choice, but it asks the server for
//! `PartialObjectMetadata`, which the simulator does not serve: it would send
//! whole pods, so that row would not measure what a real API server costs.
//!
//! Invariant: the type implements k8s-openapi's `Resource` and `Metadata` with
//! `Pod`'s identity, so kube's `Api`, watcher, reflector and `Controller` treat
//! it exactly as they treat `Pod`.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::value::RawValue;

/// A pod with only its metadata decoded. The body is held, not read: it is
/// what the store keeps for a controller that would parse it on demand.
#[derive(Clone, Debug, Deserialize)]
#[allow(dead_code)]
pub struct RawPod {
    /// Decoded, as kube-runtime's store and `.modify()` need it.
    pub metadata: ObjectMeta,
    /// `spec` as received.
    #[serde(default)]
    pub spec: Option<Box<RawValue>>,
    /// `status` as received.
    #[serde(default)]
    pub status: Option<Box<RawValue>>,
}

impl k8s_openapi::Resource for RawPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for RawPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::RawPod;

    #[test]
    fn keeps_the_body_raw_inside_a_watch_event() {
        let line = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","managedFields":[{"manager":"m"}]},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running"}}}"#;
        let ev: kube::api::WatchEvent<RawPod> = serde_json::from_str(line).unwrap();
        let kube::api::WatchEvent::Added(p) = ev else {
            panic!("not an ADDED event")
        };
        assert_eq!(p.metadata.resource_version.as_deref(), Some("7"));
        assert!(p.metadata.managed_fields.is_some());
        assert_eq!(p.spec.unwrap().get(), r#"{"containers":[{"name":"c"}]}"#);
        assert_eq!(
            <RawPod as kube::Resource>::url_path(&(), None),
            "/api/v1/pods"
        );
    }
}
