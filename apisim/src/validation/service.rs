//! Services, as `pkg/apis/core/validation/validation.go` checks them: `ValidateService` (ports
//! unless headless or ExternalName, `validateServicePort`, the external name, selector labels,
//! type, node ports, duplicate ports) and `ValidateServiceUpdate`
//! (`validateUpgradeDowngradeClusterIPs`: the cluster IPs may not change once set).
//!
//! Invariant: fields the apiserver defaults (type, sessionAffinity, port protocol and
//! targetPort, internalTrafficPolicy) are checked only when present; the cluster IPs compared on
//! update are those the apiserver's strategy would see (`clusterIPs`, else `[clusterIP]`; an
//! update that omits both keeps the allocated ones).

use serde_json::Value;

use super::field::{self, Bad, ErrorList};
use super::labels::validate_labels;
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names;

const PORT_PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

fn st<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// The cluster IPs as the internal Service holds them (`clusterIPs`, else `[clusterIP]`).
fn cluster_ips(spec: &Value) -> Vec<String> {
    let listed: Vec<String> = spec["clusterIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    match spec["clusterIP"].as_str() {
        Some(ip) if !ip.is_empty() => vec![ip.to_string()],
        _ => vec![],
    }
}

fn is_headless(spec: &Value) -> bool {
    cluster_ips(spec) == ["None"]
}

/// `ValidatePortNumOrName` for a `targetPort`.
fn validate_target_port(v: &Value, path: &str, errs: &mut ErrorList) {
    match v {
        Value::Number(n) => {
            let n = n.as_i64().unwrap_or(0);
            for m in names::is_valid_port_num(n) {
                errs.push(field::invalid(path, Bad::num(n), m));
            }
        }
        Value::String(s) => {
            for m in names::is_valid_port_name(s) {
                errs.push(field::invalid(path, Bad::str(s), m));
            }
        }
        _ => {}
    }
}

/// `validateServicePort`.
fn validate_service_port(
    p: &Value,
    require_name: bool,
    seen: &mut Vec<String>,
    path: &str,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = st(p, "name");
    let name_path = field::child(path, "name");
    if require_name && name.is_empty() {
        errs.push(field::required(&name_path, ""));
    } else if !name.is_empty() {
        for m in names::is_dns1123_label(name) {
            errs.push(field::invalid(&name_path, Bad::str(name), m));
        }
        if seen.iter().any(|s| s == name) {
            errs.push(field::duplicate(&name_path, Bad::str(name)));
        } else {
            seen.push(name.to_string());
        }
    }
    let port = p["port"].as_i64().unwrap_or(0);
    for m in names::is_valid_port_num(port) {
        errs.push(field::invalid(
            &field::child(path, "port"),
            Bad::num(port),
            m,
        ));
    }
    if let Some(proto) = p["protocol"].as_str() {
        if proto.is_empty() {
            errs.push(field::required(&field::child(path, "protocol"), ""));
        } else if !PORT_PROTOCOLS.contains(&proto) {
            errs.push(field::not_supported(
                &field::child(path, "protocol"),
                Bad::str(proto),
                &PORT_PROTOCOLS,
            ));
        }
    }
    validate_target_port(
        &p["targetPort"],
        &field::child(path, "targetPort"),
        &mut errs,
    );
    errs
}

/// Go's `%#v` of the `core.ServicePort{Protocol, Port}` key of a duplicate port.
fn go_port_key(protocol: &str, port: i64) -> String {
    format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        field::go_quote(protocol)
    )
}

/// `ValidateService`.
pub fn validate_service(svc: &Value) -> ErrorList {
    let mut errs = validate_object_meta(svc, true, &names::name_is_dns1035_label);
    let spec = &svc["spec"];
    let ports = spec["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let ty = spec["type"].as_str();
    let headless = is_headless(spec);
    if ports.is_empty() && !headless && ty != Some("ExternalName") {
        errs.push(field::required("spec.ports", ""));
    }
    match ty {
        Some("LoadBalancer") | Some("NodePort") if headless => errs.push(field::invalid(
            "spec.clusterIPs[0]",
            Bad::str("None"),
            format!(
                "may not be set to 'None' for {} services",
                ty.unwrap_or_default()
            ),
        )),
        Some("ExternalName") => {
            if !cluster_ips(spec).is_empty() {
                errs.push(field::forbidden(
                    "spec.clusterIPs",
                    "may not be set for ExternalName services",
                ));
            }
            let cname = st(spec, "externalName").trim_end_matches('.');
            if cname.is_empty() {
                errs.push(field::required("spec.externalName", ""));
            } else {
                for m in names::is_dns1123_subdomain(cname) {
                    errs.push(field::invalid("spec.externalName", Bad::str(cname), m));
                }
            }
        }
        _ => {}
    }
    let mut seen = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        errs.extend(validate_service_port(
            p,
            ports.len() > 1,
            &mut seen,
            &field::index("spec.ports", i),
        ));
    }
    errs.extend(validate_labels(
        spec["selector"].as_object(),
        "spec.selector",
    ));
    if let Some(sa) = spec["sessionAffinity"].as_str() {
        if sa.is_empty() {
            errs.push(field::required("spec.sessionAffinity", ""));
        } else if !["ClientIP", "None"].contains(&sa) {
            errs.push(field::not_supported(
                "spec.sessionAffinity",
                Bad::str(sa),
                &["ClientIP", "None"],
            ));
        }
    }
    const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if let Some(t) = ty {
        if t.is_empty() {
            errs.push(field::required("spec.type", ""));
        } else if !TYPES.contains(&t) {
            errs.push(field::not_supported("spec.type", Bad::str(t), &TYPES));
        }
    }
    if ty.is_none_or(|t| t == "ClusterIP") {
        for (i, p) in ports.iter().enumerate() {
            if p["nodePort"].as_i64().is_some_and(|n| n != 0) {
                errs.push(field::forbidden(
                    &field::child(&field::index("spec.ports", i), "nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut node_ports: Vec<(String, i64)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let np = p["nodePort"].as_i64().unwrap_or(0);
        if np == 0 {
            continue;
        }
        let key = (st(p, "protocol").to_string(), np);
        if node_ports.contains(&key) {
            errs.push(field::duplicate(
                &field::child(&field::index("spec.ports", i), "nodePort"),
                Bad::num(np),
            ));
        }
        node_ports.push(key);
    }
    let mut keys: Vec<(String, i64)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let proto = p["protocol"].as_str().unwrap_or("TCP").to_string();
        let key = (proto, p["port"].as_i64().unwrap_or(0));
        if keys.contains(&key) {
            errs.push(field::duplicate(
                &field::index("spec.ports", i),
                Bad::Raw(go_port_key(&key.0, key.1)),
            ));
        }
        keys.push(key);
    }
    if let Some(p) = spec["internalTrafficPolicy"].as_str() {
        if !["Cluster", "Local"].contains(&p) {
            errs.push(field::not_supported(
                "spec.internalTrafficPolicy",
                Bad::str(p),
                &["Cluster", "Local"],
            ));
        }
    }
    errs
}

/// `ValidateServiceUpdate`: metadata, cluster IPs that may not change once set (outside
/// ExternalName and headless-to-headless changes), then `ValidateService`.
pub fn validate_service_update(new: &Value, old: &Value) -> ErrorList {
    let mut errs = validate_object_meta_update(new, old);
    let (ns, os) = (&new["spec"], &old["spec"]);
    let external = |s: &Value| s["type"] == "ExternalName";
    let exempt = external(ns) || external(os) || (is_headless(ns) && is_headless(os));
    if !exempt {
        let (old_ips, mut new_ips) = (cluster_ips(os), cluster_ips(ns));
        if new_ips.is_empty() && ns["clusterIP"].is_null() && ns["clusterIPs"].is_null() {
            // The registry keeps allocated values a client left out.
            new_ips = old_ips.clone();
        }
        let shown = Bad::Raw(field::go_string_slice(Some(
            &new_ips
                .iter()
                .map(|s| Value::from(s.as_str()))
                .collect::<Vec<_>>(),
        )));
        if old_ips.len() == new_ips.len() {
            for (i, ip) in old_ips.iter().enumerate() {
                if *ip != new_ips[i] {
                    errs.push(field::invalid(
                        &field::index("spec.clusterIPs", i),
                        shown.clone(),
                        "may not change once set",
                    ));
                }
            }
        } else if old_ips.len() > new_ips.len() {
            if new_ips.is_empty() {
                errs.push(field::invalid(
                    "spec.clusterIPs[0]",
                    shown.clone(),
                    "primary clusterIP can not be unset",
                ));
            } else if new_ips[0] != old_ips[0] {
                errs.push(field::invalid(
                    "spec.clusterIPs[0]",
                    shown.clone(),
                    "may not change once set",
                ));
            }
        } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
            errs.push(field::invalid(
                "spec.clusterIPs[0]",
                shown,
                "may not change once set",
            ));
        }
    }
    errs.extend(validate_service(new));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "resourceVersion": "1"}, "spec": spec})
    }

    #[test]
    fn ports_are_required_unless_headless_or_external() {
        assert_eq!(
            validate_service(&svc(json!({})))[0].message(),
            "spec.ports: Required value"
        );
        assert!(validate_service(&svc(json!({"clusterIP": "None"}))).is_empty());
        assert!(validate_service(&svc(
            json!({"type": "ExternalName", "externalName": "example.com"})
        ))
        .is_empty());
        let errs = validate_service(&svc(json!({"ports": [{"port": 0, "protocol": "HTTP"}]})));
        let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
        assert_eq!(
            msgs[0],
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        assert_eq!(msgs[1], "spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"");
    }

    #[test]
    fn the_cluster_ip_may_not_change() {
        let old = svc(json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}));
        let new = svc(json!({"clusterIP": "10.96.0.11", "ports": [{"port": 80}]}));
        assert_eq!(
            validate_service_update(&new, &old)[0].message(),
            "spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.11\"}: may not change once set"
        );
        let kept = svc(json!({"ports": [{"port": 81}]}));
        assert!(validate_service_update(&kept, &old).is_empty());
    }
}
