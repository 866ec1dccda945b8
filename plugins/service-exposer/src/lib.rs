//! Controller example: for every Deployment labelled `expose: "true"`, keeps a
//! Service of the same name whose controller owner reference is the
//! Deployment, selecting its pods and exposing its containers' ports.
//!
//! One reconcile, level-triggered (it is never told what changed):
//! - Deployment labelled and with ports: apply the Service (server-side apply)
//!   unless the cached one already matches; a stale Service left by an
//!   earlier Deployment of the same name is deleted first.
//! - Deployment not labelled (any more), or without ports: delete the
//!   Service it controls, if any.
//! - Deployment gone: its Service is the garbage collector's (the owner
//!   reference); one it missed, controlled by a Deployment of that name that
//!   no longer exists, is deleted.
//! - A Service of that name that no Deployment controls (made by hand) is
//!   left alone: a terminal error, not retried until something changes.
//!
//! Its manifest (`config/plugins/service-exposer.toml`) declares
//! `for = "apps/v1/deployments"` and `owns = ["v1/services"]`, so a change
//! to a Service queues its Deployment, and grants create, patch and delete on
//! Services.
//!
//! Invariant: every write is conditional on what was read (apply owns only
//! its fields; deletes carry the uid and resourceVersion they saw), so a
//! stale cache gives a conflict and a retry, never a wrong Service.

use serde_json::{json, Map, Value};
use wasm_informer_sdk::kube::{self, ApplyParams, DeleteParams};
use wasm_informer_sdk::{
    cache, export_controller, info, Action, Config, Object, ReconcileError, Reconciler, Request,
    Result,
};

const SERVICES: &str = "v1/services";
const LABEL: &str = "expose";

struct Exposer {
    label: String,
}

/// The port list of the Service for a Deployment's pod template: one per
/// distinct (port, protocol), named after the container port (or
/// `port-N`), targeting the container port.
fn desired_ports(deployment: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in &containers {
        for p in c["ports"].as_array().into_iter().flatten() {
            let Some(port) = p["containerPort"].as_u64() else {
                continue;
            };
            let protocol = p["protocol"].as_str().unwrap_or("TCP").to_string();
            if out
                .iter()
                .any(|o| o["port"].as_u64() == Some(port) && o["protocol"] == protocol.as_str())
            {
                continue;
            }
            let mut name = p["name"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("port-{port}"));
            if out.iter().any(|o| o["name"] == name.as_str()) {
                name = format!("{name}-{port}");
            }
            out.push(json!({"name": name, "port": port, "targetPort": port, "protocol": protocol}));
        }
    }
    out
}

/// The pods a Deployment manages: its selector's `matchLabels`, else its
/// template's labels.
fn selector(deployment: &Value) -> Value {
    let m = &deployment["spec"]["selector"]["matchLabels"];
    if m.as_object().is_some_and(|m| !m.is_empty()) {
        m.clone()
    } else {
        deployment["spec"]["template"]["metadata"]["labels"].clone()
    }
}

/// The uid of the Deployment that controls `service`, if a Deployment does.
fn controlling_deployment(service: &Object) -> Option<(String, String)> {
    service
        .meta()
        .owner_references
        .into_iter()
        .find(|o| o.controller && o.kind == "Deployment" && o.api_version.starts_with("apps/"))
        .map(|o| (o.name, o.uid))
}

/// Whether the cached Service already is what we would apply.
fn matches(service: &Object, uid: &str, ports: &[Value], selector: &Value) -> Result<bool> {
    if controlling_deployment(service).map(|(_, u)| u).as_deref() != Some(uid) {
        return Ok(false);
    }
    let have: Value = service.decode()?;
    let have_ports: Vec<Value> = have["spec"]["ports"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            json!({"name": p["name"], "port": p["port"], "targetPort": p["targetPort"],
                   "protocol": p.get("protocol").cloned().unwrap_or(json!("TCP"))})
        })
        .collect();
    Ok(have_ports == ports && have["spec"]["selector"] == *selector)
}

fn delete_service(service: &Object, why: &str) -> std::result::Result<(), ReconcileError> {
    let ns = service.namespace();
    let params = DeleteParams::preconditions(service.uid(), service.resource_version());
    match kube::delete(SERVICES, ns.as_deref(), &service.name(), &params) {
        Ok(_) => {
            info!("deleted Service {} ({why})", service.key());
            Ok(())
        }
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl Reconciler for Exposer {
    fn init(config: &Config) -> Result<Self> {
        Ok(Exposer {
            label: config.get("label")?.unwrap_or_else(|| LABEL.to_string()),
        })
    }

    fn reconcile(&mut self, request: &Request) -> std::result::Result<Action, ReconcileError> {
        let ns = request.namespace.as_deref();
        let service = cache::get_object(SERVICES, &request.key)?;
        let Some(deployment) = request.object()? else {
            // Gone: the garbage collector deletes the Service through its
            // owner reference; delete one it could not know about.
            if let Some(s) = &service {
                if controlling_deployment(s).is_some_and(|(name, _)| name == request.name) {
                    delete_service(s, "its Deployment is gone")?;
                }
            }
            return Ok(Action::done());
        };
        let meta = deployment.meta();
        if meta.deletion_timestamp.is_some() {
            return Ok(Action::done());
        }
        let body: Value = deployment.decode()?;
        let ports = desired_ports(&body);
        let wanted = deployment.label(&self.label).as_deref() == Some("true") && !ports.is_empty();
        let owner = service.as_ref().and_then(controlling_deployment);
        if let (Some(s), Some((_, uid))) = (&service, &owner) {
            if *uid != meta.uid {
                // Left by an earlier Deployment of this name.
                delete_service(s, "left by an earlier Deployment of this name")?;
            } else if !wanted {
                delete_service(s, "the Deployment is no longer exposed")?;
                return Ok(Action::done());
            }
        }
        if !wanted {
            return Ok(Action::done());
        }
        if let (Some(s), None) = (&service, &owner) {
            return Err(ReconcileError::terminal(format!(
                "Service {} exists and no Deployment controls it; not taking it over",
                s.key()
            )));
        }
        let sel = selector(&body);
        if let Some(s) = &service {
            if owner.as_ref().is_some_and(|(_, u)| *u == meta.uid)
                && matches(s, &meta.uid, &ports, &sel)?
            {
                return Ok(Action::done());
            }
        }
        let mut labels = Map::new();
        labels.insert(
            "app.kubernetes.io/managed-by".into(),
            json!("service-exposer"),
        );
        let apply = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": request.name,
                "namespace": ns,
                "labels": labels,
                "ownerReferences": [{
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": request.name,
                    "uid": meta.uid,
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
            },
            "spec": {"selector": sel, "ports": ports},
        });
        // Creates the Service when there is none (an apply that may create:
        // the grant has `create` as well as `patch`), and takes over the
        // fields it applies.
        let params = ApplyParams {
            force: true,
            must_exist: false,
        };
        kube::apply(SERVICES, ns, &request.name, &apply, params)?;
        info!(
            "applied Service {} with {} port(s)",
            request.key,
            ports.len()
        );
        Ok(Action::done())
    }
}

export_controller!(Exposer);
