//! Deployments: the defaults the apiserver fills in, and the status the deployment controller
//! reports once a rollout has completed (the simulator runs no controllers, so every rollout
//! completes at once).
//!
//! Invariant: after every write that creates a Deployment or changes its spec (including through
//! `/scale`), `status.observedGeneration` equals `metadata.generation` and `replicas`,
//! `updatedReplicas`, `readyReplicas` and `availableReplicas` equal `spec.replicas`, with the
//! Available and Progressing conditions true, so `kubectl rollout status` returns at once. Writes
//! to `/status` are kept until the next spec change.

use serde_json::{json, Value};

use crate::resource::ResourceType;

/// Whether `rt` is apps/v1 Deployment.
pub fn is_deployment(rt: &ResourceType) -> bool {
    rt.group == "apps" && rt.kind == "Deployment"
}

/// The apiserver's defaults for a Deployment spec (`SetDefaults_Deployment`).
pub fn set_defaults(obj: &mut Value) {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    if spec.get("replicas").is_none_or(Value::is_null) {
        spec["replicas"] = json!(1);
    }
    if spec.get("revisionHistoryLimit").is_none_or(Value::is_null) {
        spec["revisionHistoryLimit"] = json!(10);
    }
    if spec
        .get("progressDeadlineSeconds")
        .is_none_or(Value::is_null)
    {
        spec["progressDeadlineSeconds"] = json!(600);
    }
    if !spec["strategy"].is_object() {
        spec["strategy"] = json!({});
    }
    let strategy = &mut spec["strategy"];
    if strategy.get("type").is_none_or(Value::is_null) {
        strategy["type"] = json!("RollingUpdate");
    }
    if strategy["type"] == "RollingUpdate" {
        if !strategy["rollingUpdate"].is_object() {
            strategy["rollingUpdate"] = json!({});
        }
        let ru = &mut strategy["rollingUpdate"];
        for k in ["maxUnavailable", "maxSurge"] {
            if ru.get(k).is_none_or(Value::is_null) {
                ru[k] = json!("25%");
            }
        }
    }
}

/// Sets the status of a completed rollout of `obj`'s current generation.
pub fn complete_rollout(obj: &mut Value, now: &str) {
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    let mut status = json!({"observedGeneration": generation});
    // Zero counts are omitted, as the apiserver serializes them (omitempty).
    if replicas > 0 {
        for k in [
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
        ] {
            status[k] = json!(replicas);
        }
    }
    status["conditions"] = json!([
        {
            "type": "Available",
            "status": "True",
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability."
        },
        {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": "NewReplicaSetAvailable",
            "message": format!("ReplicaSet \"{name}-{}\" has successfully progressed.", template_hash(&obj["spec"]["template"]))
        }
    ]);
    obj["status"] = status;
}

/// A stable 10-character hash of a pod template, in the alphabet of `pod-template-hash`.
pub fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u64 = 0xcbf29ce484222325;
    for b in serde_json::to_vec(template).unwrap_or_default() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    (0..10)
        .map(|i| ALPHABET[((h >> (i * 6)) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_a_completed_rollout() {
        let mut d = json!({"metadata": {"name": "web", "generation": 3}, "spec": {"template": {}}});
        set_defaults(&mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        complete_rollout(&mut d, "2026-01-01T00:00:00Z");
        assert_eq!(d["status"]["observedGeneration"], 3);
        assert_eq!(d["status"]["availableReplicas"], 1);
        assert_eq!(d["status"]["conditions"][1]["type"], "Progressing");
        d["spec"]["replicas"] = json!(0);
        complete_rollout(&mut d, "2026-01-01T00:00:00Z");
        assert!(d["status"].get("replicas").is_none());
        assert_eq!(template_hash(&json!({"a": 1})).len(), 10);
    }
}
