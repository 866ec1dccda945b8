//! What a request addresses, parsed as the apiserver's `RequestInfoFactory.NewRequestInfo`
//! (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go) parses it: the verb, API group and
//! version, namespace, resource, name and subresource. The router, the authorizer and the request
//! log all use this one parse.
//!
//! The path is percent-decoded first, as Go's net/http fills `URL.Path` before the apiserver
//! splits it on `/`: `web%2Fstatus` is two segments, `%2e%2e` is `..`.
//!
//! Invariant: the target of a request is computed once, from the decoded path the router routes
//! on, so what the request log records, what RBAC authorizes and what the store acts on cannot
//! disagree.

use crate::query::Query;

/// What the server understood a request to address, as recorded in the request log. Every field
/// is None when the request did not name it; non-resource requests (discovery, `/version`,
/// `/healthz`) have only a verb.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestTarget {
    /// The Kubernetes verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection` for resource requests, the lower-cased HTTP method otherwise.
    pub verb: String,
    /// API group; `Some("")` for the core group, None for non-resource requests.
    pub group: Option<String>,
    /// API version, e.g. `v1`.
    pub version: Option<String>,
    /// Resource plural, e.g. `pods`.
    pub resource: Option<String>,
    /// Namespace. For the `namespaces` resource itself this is the namespace's own name, as the
    /// apiserver reports it (RBAC evaluates a Namespace in its own namespace).
    pub namespace: Option<String>,
    /// Object name: from the path, or, for a list or watch, from a `metadata.name=X` field
    /// selector (as the apiserver derives it for authorization).
    pub name: Option<String>,
    /// Subresource, e.g. `status`.
    pub subresource: Option<String>,
}

impl RequestTarget {
    /// Whether this is a request for an API resource (as opposed to discovery and the like).
    pub fn is_resource_request(&self) -> bool {
        self.resource.is_some()
    }
}

/// The apiserver's `RequestInfo`, with the extra facts the router needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// The URL path the parse worked on.
    pub path: String,
    /// Kubernetes verb (see [`RequestTarget::verb`]).
    pub verb: String,
    /// Whether the path addresses an API resource.
    pub resource_request: bool,
    /// `api` or `apis`.
    pub api_prefix: String,
    /// API group (empty for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace (empty for cluster scope).
    pub namespace: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Object name (see [`RequestTarget::name`]).
    pub name: String,
    /// Path parts from the resource on: `resource/name/subresource/...`.
    pub parts: Vec<String>,
    /// Whether the path had the form `.../namespaces/{namespace}/{resource}...`.
    pub namespace_segment: bool,
    /// Whether the verb came from the path (`/api/v1/watch/...`).
    pub verb_via_path: bool,
}

impl RequestInfo {
    /// Parses `path` (split on `/` as the apiserver's `splitPath`: leading and trailing slashes
    /// trimmed, empty segments kept) with `method` and the query.
    pub fn parse(method: &str, path: &str, q: &Query) -> RequestInfo {
        let mut info = RequestInfo {
            path: path.to_string(),
            verb: method.to_ascii_lowercase(),
            ..RequestInfo::default()
        };
        let trimmed = path.trim_matches('/');
        let all: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        if all.len() < 3 || !(all[0] == "api" || all[0] == "apis") {
            return info;
        }
        info.api_prefix = all[0].to_string();
        let mut cur = &all[1..];
        if info.api_prefix == "apis" {
            if cur.len() < 3 {
                return info;
            }
            info.group = cur[0].to_string();
            cur = &cur[1..];
        }
        info.resource_request = true;
        info.version = cur[0].to_string();
        cur = &cur[1..];
        if cur[0] == "watch" || cur[0] == "proxy" {
            if cur.len() < 2 {
                // The apiserver fails such a request ("unable to determine kind and
                // namespace"); it addresses no resource.
                info.resource_request = false;
                return info;
            }
            info.verb = cur[0].to_string();
            info.verb_via_path = true;
            cur = &cur[1..];
        } else {
            info.verb = match method {
                "POST" => "create",
                "GET" | "HEAD" => "get",
                "PUT" => "update",
                "PATCH" => "patch",
                "DELETE" => "delete",
                _ => "",
            }
            .to_string();
        }
        if cur[0] == "namespaces" && cur.len() > 1 {
            info.namespace = cur[1].to_string();
            if cur.len() > 2 && !matches!(cur[2], "status" | "finalize") {
                cur = &cur[2..];
                info.namespace_segment = true;
            }
        }
        info.parts = cur.iter().map(|s| s.to_string()).collect();
        let n = info.parts.len();
        if n >= 3 && info.verb != "proxy" {
            info.subresource = info.parts[2].clone();
        }
        if n >= 2 {
            info.name = info.parts[1].clone();
        }
        if n >= 1 {
            info.resource = info.parts[0].clone();
        }
        if info.name.is_empty() && info.verb == "get" {
            info.verb = if q.flag("watch") { "watch" } else { "list" }.to_string();
            // As the apiserver: a field selector pinning metadata.name names the object, if
            // that name is a valid path segment.
            if let Ok(fs) = q.field_selector() {
                if let Some(r) = fs
                    .requirements
                    .iter()
                    .find(|r| r.field == "metadata.name" && !r.negated)
                {
                    if crate::path_segment::is_valid_name(&r.value).is_empty() {
                        info.name = r.value.clone();
                    }
                }
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".to_string();
        }
        info
    }

    /// Whether the name came from the path (not from a field selector).
    pub fn name_in_path(&self) -> bool {
        self.parts.len() >= 2
    }

    /// The public view of this parse.
    pub fn target(&self) -> RequestTarget {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        if !self.resource_request {
            return RequestTarget {
                verb: self.verb.clone(),
                ..RequestTarget::default()
            };
        }
        RequestTarget {
            verb: self.verb.clone(),
            group: Some(self.group.clone()),
            version: Some(self.version.clone()),
            resource: Some(self.resource.clone()),
            namespace: some(&self.namespace),
            name: some(&self.name),
            subresource: some(&self.subresource),
        }
    }
}

/// A URL path Go's `url.ParseRequestURI` refuses (net/http answers `400 Bad Request` before
/// any handler runs), or one that does not decode to UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPath(pub String);

/// Percent-decodes a URL path as Go's `url.unescape(s, encodePath)`: every `%XX` becomes its
/// byte (`%2F` included), `+` stays `+`, and a `%` not followed by two hex digits is an error
/// (`invalid URL escape "%zz"`). A result that is not UTF-8 is refused too: no object name can
/// hold it.
pub fn decode_path(raw: &str) -> Result<String, BadPath> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: Option<&u8>| c.and_then(|c| (*c as char).to_digit(16));
            match (hex(b.get(i + 1)), hex(b.get(i + 2))) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                }
                _ => {
                    let end = (i + 3).min(b.len());
                    let esc = String::from_utf8_lossy(&b[i..end]);
                    return Err(BadPath(format!("invalid URL escape {esc:?}")));
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| BadPath(format!("the path {raw:?} does not decode to UTF-8")))
}

/// What this server understands a request to address: `path` is a raw URL path (as sent, still
/// percent-encoded) with an optional `?query`; a `#fragment`, which an HTTP client never sends,
/// is cut off as a client would. This is exactly the parse the router, the authorizer and the
/// request log use. Err: the server answers 400 without routing (see [`decode_path`]). A target
/// this parse names may still be answered 404 when this server does not serve its resource.
pub fn parse_request_path(method: &str, path: &str) -> Result<RequestTarget, BadPath> {
    let path = path.split('#').next().unwrap_or("");
    let (p, q) = path.split_once('?').unwrap_or((path, ""));
    let decoded = decode_path(p)?;
    Ok(RequestInfo::parse(&method.to_ascii_uppercase(), &decoded, &Query::parse(q)).target())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(method: &str, path: &str) -> RequestTarget {
        parse_request_path(method, path).unwrap()
    }

    #[test]
    fn decodes_before_splitting_as_go_net_http() {
        let x = t("PATCH", "/api/v1/namespaces/a/pods/web%2Fstatus");
        assert_eq!(
            (x.name.as_deref(), x.subresource.as_deref()),
            (Some("web"), Some("status"))
        );
        let x = t("GET", "/api/v1/namespaces/a/pods/%2e%2e");
        assert_eq!(x.name.as_deref(), Some(".."));
        let x = t("GET", "/api/v1/namespaces/a%2Fpods/b");
        assert_eq!(
            (x.namespace.as_deref(), x.resource.as_deref()),
            (Some("a"), Some("pods"))
        );
        assert_eq!(
            t("GET", "/api/v1/namespaces/a/pods/a+b").name.as_deref(),
            Some("a+b")
        );
        assert_eq!(
            t("GET", "/api/v1/namespaces/a/pods/%25").name.as_deref(),
            Some("%")
        );
        for bad in ["/api/v1/pods/%zz", "/api/v1/pods/%4", "/api/v1/pods/%ff"] {
            assert!(parse_request_path("GET", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_like_request_info_factory() {
        let x = t("PATCH", "/api/v1/namespaces/team-a/pods/web/status");
        assert_eq!(x.verb, "patch");
        assert_eq!(x.group.as_deref(), Some(""));
        assert_eq!(x.resource.as_deref(), Some("pods"));
        assert_eq!(x.namespace.as_deref(), Some("team-a"));
        assert_eq!(x.name.as_deref(), Some("web"));
        assert_eq!(x.subresource.as_deref(), Some("status"));
        let x = t("GET", "/apis/apps/v1/deployments?watch=1");
        assert_eq!(
            (x.verb.as_str(), x.group.as_deref(), x.namespace),
            ("watch", Some("apps"), None)
        );
        let x = t(
            "GET",
            "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dx",
        );
        assert_eq!((x.verb.as_str(), x.name.as_deref()), ("list", Some("x")));
        let x = t("DELETE", "/api/v1/namespaces/a/configmaps");
        assert_eq!(x.verb, "deletecollection");
        let x = t("GET", "/api/v1/watch/namespaces/a/pods/web");
        assert_eq!((x.verb.as_str(), x.name.as_deref()), ("watch", Some("web")));
        // The namespaces resource: its namespace is its own name.
        let x = t("GET", "/api/v1/namespaces/foo");
        assert_eq!(
            (
                x.resource.as_deref(),
                x.namespace.as_deref(),
                x.name.as_deref()
            ),
            (Some("namespaces"), Some("foo"), Some("foo"))
        );
        let x = t("PUT", "/api/v1/namespaces/foo/finalize");
        assert_eq!(x.subresource.as_deref(), Some("finalize"));
        // Discovery is not a resource request.
        for p in [
            "/api",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/",
        ] {
            let x = t("GET", p);
            assert!(!x.is_resource_request(), "{p}");
            assert_eq!(x.verb, "get");
        }
        // A fragment never reaches the server.
        let x = t("PATCH", "/api/v1/namespaces/b/pods/web#?dryRun=All");
        assert_eq!(x.name.as_deref(), Some("web"));
    }
}
