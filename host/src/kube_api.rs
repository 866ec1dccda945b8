//! The host's side of the runtime's [`ClusterApi`]: plugin API calls sent
//! through kube-client, with the host's credentials.
//!
//! Job: turn an [`ApiRequest`] (already checked against the plugin's grants by
//! the runtime) into an HTTP request on the right path, with `dryRun`,
//! `fieldManager`, `force` and the delete options, send it, and hand back the
//! status, `Retry-After` and body. The plugin's thread blocks on the answer;
//! the request itself runs on the host's Tokio runtime.
//!
//! Invariants: every request this sends was checked by the runtime against the
//! calling plugin's grants (this type is only reachable through the
//! capability); in leader or sharded mode it is sent only while the
//! replica's fence is open, with a deadline no later than the fence's, so no
//! write of a replica that lost its lease can reach the server after another
//! replica could have taken over (I10); a call returns by its deadline; a
//! resource's scope and path come from the built-in table or discovery, once
//! per resource.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use kube::client::Body;
use kube_informer::reflector::read_all;
use kube_informer::resource::{encode_query_value, ResourceSpec};
use parking_lot::Mutex;

use crate::cluster::fence::Fence;
use wasm_informer_runtime::capability::api::{
    ApiRequest, ApiResponse, ClusterApi, Transport, Verb,
};

/// Largest body read back from the server for one call.
const MAX_BODY: usize = 16 << 20;

/// Plugin API calls over kube-client.
pub struct KubeApi {
    client: kube::Client,
    rt: tokio::runtime::Handle,
    specs: Mutex<HashMap<String, ResourceSpec>>,
    fence: Option<Arc<Fence>>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi").finish()
    }
}

impl KubeApi {
    /// Calls through `client`, with requests run on `rt`.
    pub fn new(client: kube::Client, rt: tokio::runtime::Handle) -> Arc<Self> {
        Self::fenced(client, rt, None)
    }

    /// Calls that are sent only while `fence` is open (leader or sharded mode).
    pub fn fenced(
        client: kube::Client,
        rt: tokio::runtime::Handle,
        fence: Option<Arc<Fence>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            rt,
            specs: Mutex::new(HashMap::new()),
            fence,
        })
    }

    async fn spec(&self, resource: &str) -> Result<ResourceSpec, Transport> {
        if let Some(s) = self.specs.lock().get(resource) {
            return Ok(s.clone());
        }
        let spec = ResourceSpec::resolve(&self.client, resource)
            .await
            .map_err(|e| Transport::Failed(e.to_string()))?;
        self.specs.lock().insert(resource.to_string(), spec.clone());
        Ok(spec)
    }

    async fn send(&self, r: &ApiRequest) -> Result<ApiResponse, Transport> {
        let spec = self.spec(&r.resource).await?;
        let ns = if spec.namespaced {
            r.namespace.as_deref()
        } else {
            None
        };
        let mut path = match (&r.name, r.verb) {
            (None, Verb::Create) | (None, _) => match ns {
                Some(ns) => spec.namespaced_path(ns),
                None => spec.collection_path(),
            },
            (Some(name), _) => spec.object_path(ns, name, r.subresource.as_deref()),
        };
        let mut query: Vec<(&str, String)> = Vec::new();
        if r.dry_run {
            query.push(("dryRun", "All".into()));
        }
        if let Some(fm) = &r.field_manager {
            if r.verb != Verb::Delete {
                query.push(("fieldManager", fm.clone()));
            }
        }
        if r.force {
            query.push(("force", "true".into()));
        }
        for (i, (k, v)) in query.iter().enumerate() {
            path.push(if i == 0 { '?' } else { '&' });
            path.push_str(k);
            path.push('=');
            path.push_str(&encode_query_value(v));
        }
        let method = match r.verb {
            Verb::Get => http::Method::GET,
            Verb::Create => http::Method::POST,
            Verb::Replace => http::Method::PUT,
            Verb::Patch => http::Method::PATCH,
            Verb::Delete => http::Method::DELETE,
        };
        let content_type = match (r.verb, r.patch) {
            (Verb::Patch, Some(p)) => p.content_type(),
            _ => "application/json",
        };
        let body = match r.verb {
            Verb::Delete => Some(delete_body(r)),
            _ => r.body.clone(),
        };
        let req = http::Request::builder()
            .method(method)
            .uri(&path)
            .header(http::header::ACCEPT, "application/json")
            .header(CONTENT_TYPE, content_type)
            .body(Body::from(body.unwrap_or_default().into_bytes()))
            .map_err(|e| Transport::Failed(format!("cannot build request for {path}: {e}")))?;
        let resp = self
            .client
            .send(req)
            .await
            .map_err(|e| Transport::Failed(format!("{path}: {e}")))?;
        let code = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = read_all(resp.into_body(), MAX_BODY)
            .await
            .map_err(|e| Transport::Failed(format!("{path}: reading the answer: {e}")))?;
        Ok(ApiResponse {
            code,
            retry_after,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

/// The `DeleteOptions` body of a delete.
fn delete_body(r: &ApiRequest) -> String {
    let mut o = serde_json::json!({ "kind": "DeleteOptions", "apiVersion": "v1" });
    if let Some(p) = r.delete.propagation {
        o["propagationPolicy"] = p.as_str().into();
    }
    let mut pre = serde_json::Map::new();
    if let Some(uid) = &r.delete.uid {
        pre.insert("uid".into(), uid.clone().into());
    }
    if let Some(rv) = &r.delete.resource_version {
        pre.insert("resourceVersion".into(), rv.clone().into());
    }
    if !pre.is_empty() {
        o["preconditions"] = pre.into();
    }
    if r.dry_run {
        o["dryRun"] = serde_json::json!(["All"]);
    }
    o.to_string()
}

impl ClusterApi for KubeApi {
    fn call(&self, request: &ApiRequest, deadline: Instant) -> Result<ApiResponse, Transport> {
        let mut deadline = deadline;
        if let Some(fence) = &self.fence {
            // A request never outlives the lease it is sent under.
            if let Some(closes) = fence.deadline() {
                deadline = deadline.min(closes);
            }
            fence
                .check(deadline.saturating_duration_since(Instant::now()))
                .map_err(|e| Transport::Failed(format!("not sent: {e}")))?;
        }
        let at = tokio::time::Instant::from_std(deadline);
        self.rt
            .block_on(async { tokio::time::timeout_at(at, self.send(request)).await })
            .unwrap_or(Err(Transport::Timeout))
    }
}
