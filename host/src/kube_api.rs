//! The host's side of the runtime's [`ClusterApi`]: plugin API calls sent
//! through kube-client, with the host's credentials.
//!
//! Job: send an [`ApiRequest`] (typed and checked against the plugin's
//! grants by the runtime) on the request line the runtime renders from it
//! ([`ApiRequest::line`]), with the delete options, the plugin's
//! `Impersonate-User` and a server-side `timeout`, and hand back the status,
//! `Retry-After`, the body (at most the plugin's `max_answer_bytes`) and the
//! line as sent. The plugin's thread blocks on the answer; the request itself
//! runs on the host's Tokio runtime. It also resolves resources for the
//! runtime (the built-in table, else discovery, once per resource).
//!
//! Invariants: every request this sends was checked by the runtime against the
//! calling plugin's grants (this type is only reachable through the
//! capability), and its URI is exactly the rendered line; in leader or
//! sharded mode it is sent only under the tenure its event began in, with a
//! deadline (and a server-side `timeout`) no later than the fence's, so no
//! write of a replica that lost its lease can reach the server after another
//! replica could have taken over (I10); a call returns by its deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use kube::client::Body;
use kube_informer::reflector::read_all;
use kube_informer::resource::{ResourceError, ResourceId, ResourceSpec};
use parking_lot::Mutex;

use crate::cluster::fence::Fence;
use wasm_informer_runtime::capability::api::{
    unknown_resource, ApiRequest, ApiResponse, ClusterApi, Exchange, RequestLine, Tenure,
    Transport, Verb,
};
use wasm_informer_runtime::Stop;

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

    async fn spec(&self, resource: &str) -> Result<ResourceSpec, String> {
        if let Some(s) = self.specs.lock().get(resource) {
            return Ok(s.clone());
        }
        let spec = ResourceSpec::resolve(&self.client, resource)
            .await
            .map_err(|e| match e {
                ResourceError::Unknown { .. } => {
                    unknown_resource(&ResourceId::parse(resource).expect("a parsed id"))
                }
                other => other.to_string(),
            })?;
        self.specs.lock().insert(resource.to_string(), spec.clone());
        Ok(spec)
    }

    /// The resource `id` as the server serves it, from an async context.
    pub async fn resolve_async(&self, id: &ResourceId) -> Result<ResourceSpec, String> {
        self.spec(&id.to_string()).await
    }

    /// Sends `r` with the request line `line`, which [`ApiRequest::line`]
    /// rendered from the typed request: nothing else goes into the URI.
    async fn send(&self, r: &ApiRequest, line: &RequestLine) -> Result<ApiResponse, Transport> {
        let uri = line.uri();
        let body = match r.verb {
            Verb::Delete => Some(delete_body(r)),
            _ => r.body.clone(),
        };
        let mut req = http::Request::builder()
            .method(line.method)
            .uri(&uri)
            .header(http::header::ACCEPT, "application/json")
            .header(CONTENT_TYPE, r.content_type());
        if let Some(user) = &r.impersonate {
            req = req.header("Impersonate-User", user);
        }
        let req = req
            .body(Body::from(body.unwrap_or_default().into_bytes()))
            .map_err(|e| Transport::Failed(format!("cannot build request for {uri}: {e}")))?;
        let resp = self
            .client
            .send(req)
            .await
            .map_err(|e| Transport::Failed(format!("{uri}: {e}")))?;
        let code = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = read_all(resp.into_body(), r.max_answer_bytes)
            .await
            .map_err(|e| {
                Transport::Failed(format!(
                    "{uri}: reading the answer (at most max_answer_bytes, {} bytes): {e}",
                    r.max_answer_bytes
                ))
            })?;
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
    fn call(
        &self,
        request: &ApiRequest,
        deadline: Instant,
        tenure: Option<Tenure>,
        stop: &Stop,
    ) -> Exchange {
        let mut deadline = deadline;
        if let Some(fence) = &self.fence {
            // A request never outlives the tenure it is sent under.
            deadline = match fence.admit(tenure, deadline) {
                Ok(d) => d,
                Err(e) => return Exchange::refused(format!("not sent: {e}")),
            };
        }
        // The server gives up on a write at the same deadline, so a write
        // it has not applied by then is never applied later.
        let line = request.line(Some(deadline.saturating_duration_since(Instant::now())));
        let at = tokio::time::Instant::from_std(deadline);
        // A stopping plugin gives up on the answer at once (the request is
        // dropped with its connection).
        let result = self.rt.block_on(async {
            tokio::select! {
                r = tokio::time::timeout_at(at, self.send(request, &line)) => {
                    r.unwrap_or(Err(Transport::Timeout))
                }
                () = stop.raised() => Err(Transport::Cancelled),
            }
        });
        Exchange {
            sent: Some(line),
            result,
        }
    }

    fn tenure(&self) -> Option<Tenure> {
        match &self.fence {
            Some(f) => f.tenure(),
            None => Some(Tenure(0)),
        }
    }

    fn resolve(&self, id: &ResourceId) -> Result<ResourceSpec, String> {
        if let Some(s) = self.specs.lock().get(&id.to_string()) {
            return Ok(s.clone());
        }
        if let Ok(Some(spec)) = ResourceSpec::builtin(&id.to_string()) {
            return Ok(spec);
        }
        // Called on a plugin's own thread, never on an async worker.
        self.rt.block_on(self.spec(&id.to_string()))
    }
}
