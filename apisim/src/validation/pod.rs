//! Pods and pod templates, as `pkg/apis/core/validation/validation.go` checks them:
//! `ValidatePodCreate`, `ValidatePodUpdate` (only images, `activeDeadlineSeconds`, added
//! tolerations, removed scheduling gates and the negative-grace-period relaxation may change),
//! `ValidatePodSpec`, `validateContainers` / `validateInitContainers` / `validateContainerCommon`,
//! `validateContainerPorts`, `ValidateVolumes` (names), `ValidateTolerations` and
//! `ValidatePodTemplateSpec`.
//!
//! Invariant: a field the apiserver would have defaulted before validating (restartPolicy,
//! dnsPolicy, terminationGracePeriodSeconds, imagePullPolicy, terminationMessagePolicy, port
//! protocols) is only checked when present, since apisim does not default pods; every other rule
//! gives the apiserver's error at the apiserver's path.

use serde_json::{Map, Value};

use super::field::{self, Bad, ErrorList};
use super::labels::{validate_annotations, validate_label_name, validate_labels};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names::{self, inclusive_range_error};

const MAX_INT32: i64 = i32::MAX as i64;
const PORT_PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// `updatablePodSpecFields`, joined as the apiserver joins them in the Forbidden message.
pub const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn st<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

fn push_names(errs: &mut ErrorList, path: &str, value: &str, msgs: Vec<String>) {
    for m in msgs {
        errs.push(field::invalid(path, Bad::str(value), m));
    }
}

/// `ValidateDNS1123Label(value, path)`.
fn dns_label(errs: &mut ErrorList, path: &str, value: &str) {
    push_names(errs, path, value, names::is_dns1123_label(value));
}

/// An enumerated string that the apiserver defaults: checked only when set.
fn defaulted_enum(errs: &mut ErrorList, v: &Value, path: &str, valid: &[&str]) {
    if let Some(s) = v.as_str() {
        if s.is_empty() {
            errs.push(field::required(path, ""));
        } else if !valid.contains(&s) {
            errs.push(field::not_supported(path, Bad::str(s), valid));
        }
    }
}

/// `validateContainerPorts`.
fn validate_container_ports(ports: &Value, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut names_seen: Vec<&str> = Vec::new();
    for (i, p) in arr(ports).iter().enumerate() {
        let ip = field::index(path, i);
        let name = st(p, "name");
        if !name.is_empty() {
            let msgs = names::is_valid_port_name(name);
            if !msgs.is_empty() {
                push_names(&mut errs, &field::child(&ip, "name"), name, msgs);
            } else if names_seen.contains(&name) {
                errs.push(field::duplicate(&field::child(&ip, "name"), Bad::str(name)));
            } else {
                names_seen.push(name);
            }
        }
        match p["containerPort"].as_i64().unwrap_or(0) {
            0 => errs.push(field::required(&field::child(&ip, "containerPort"), "")),
            n => {
                for m in names::is_valid_port_num(n) {
                    errs.push(field::invalid(
                        &field::child(&ip, "containerPort"),
                        Bad::num(n),
                        m,
                    ));
                }
            }
        }
        if let Some(h) = p["hostPort"].as_i64().filter(|h| *h != 0) {
            for m in names::is_valid_port_num(h) {
                errs.push(field::invalid(
                    &field::child(&ip, "hostPort"),
                    Bad::num(h),
                    m,
                ));
            }
        }
        defaulted_enum(
            &mut errs,
            &p["protocol"],
            &field::child(&ip, "protocol"),
            &PORT_PROTOCOLS,
        );
    }
    errs
}

/// `validateContainerCommon`: name, image, termination message policy, ports, env names, volume
/// mounts, pull policy.
fn validate_container_common(c: &Value, volumes: &[&str], path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = st(c, "name");
    let name_path = field::child(path, "name");
    if name.is_empty() {
        errs.push(field::required(&name_path, ""));
    } else {
        dns_label(&mut errs, &name_path, name);
    }
    if st(c, "image").is_empty() {
        errs.push(field::required(&field::child(path, "image"), ""));
    }
    defaulted_enum(
        &mut errs,
        &c["terminationMessagePolicy"],
        &field::child(path, "terminationMessagePolicy"),
        &["File", "FallbackToLogsOnError"],
    );
    errs.extend(validate_container_ports(
        &c["ports"],
        &field::child(path, "ports"),
    ));
    for (i, e) in arr(&c["env"]).iter().enumerate() {
        if st(e, "name").is_empty() {
            errs.push(field::required(
                &field::child(&field::index(&field::child(path, "env"), i), "name"),
                "",
            ));
        }
    }
    for (i, m) in arr(&c["volumeMounts"]).iter().enumerate() {
        let mp = field::index(&field::child(path, "volumeMounts"), i);
        let n = st(m, "name");
        if n.is_empty() {
            errs.push(field::required(&field::child(&mp, "name"), ""));
        } else if !volumes.contains(&n) {
            errs.push(field::not_found(&field::child(&mp, "name"), Bad::str(n)));
        }
        if st(m, "mountPath").is_empty() {
            errs.push(field::required(&field::child(&mp, "mountPath"), ""));
        }
    }
    defaulted_enum(
        &mut errs,
        &c["imagePullPolicy"],
        &field::child(path, "imagePullPolicy"),
        &["Always", "IfNotPresent", "Never"],
    );
    errs
}

/// `validateContainers`: at least one, each valid, names unique.
fn validate_containers(containers: &Value, volumes: &[&str], path: &str) -> ErrorList {
    let items = arr(containers);
    if items.is_empty() {
        return vec![field::required(path, "")];
    }
    let mut errs = ErrorList::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in items.iter().enumerate() {
        let p = field::index(path, i);
        errs.extend(validate_container_common(c, volumes, &p));
        let name = st(c, "name");
        if seen.contains(&name) {
            errs.push(field::duplicate(&field::child(&p, "name"), Bad::str(name)));
        } else {
            seen.push(name);
        }
        if !c["restartPolicy"].is_null() {
            errs.push(field::forbidden(
                &field::child(&p, "restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    errs
}

/// `validateInitContainers`: each valid, names unique across init and regular containers,
/// `restartPolicy` only `Always`, probes and lifecycle only for restartable ones.
fn validate_init_containers(
    inits: &Value,
    containers: &Value,
    volumes: &[&str],
    path: &str,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut seen: Vec<&str> = arr(containers).iter().map(|c| st(c, "name")).collect();
    for (i, c) in arr(inits).iter().enumerate() {
        let p = field::index(path, i);
        errs.extend(validate_container_common(c, volumes, &p));
        let mut restart_always = false;
        if let Some(rp) = c["restartPolicy"].as_str() {
            if rp == "Always" {
                restart_always = true;
            } else if rp.is_empty() {
                errs.push(field::required(&field::child(&p, "restartPolicy"), ""));
            } else {
                errs.push(field::not_supported(
                    &field::child(&p, "restartPolicy"),
                    Bad::str(rp),
                    &["Always"],
                ));
            }
        }
        let name = st(c, "name");
        if seen.contains(&name) {
            errs.push(field::duplicate(&field::child(&p, "name"), Bad::str(name)));
        } else if !name.is_empty() {
            seen.push(name);
        }
        if !restart_always {
            for f in [
                "lifecycle",
                "livenessProbe",
                "readinessProbe",
                "startupProbe",
            ] {
                if !c[f].is_null() {
                    errs.push(field::forbidden(
                        &field::child(&p, f),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
    }
    errs
}

/// `ValidateTolerations`.
fn validate_tolerations(tolerations: &Value, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, t) in arr(tolerations).iter().enumerate() {
        let p = field::index(path, i);
        let key = st(t, "key");
        let op = st(t, "operator");
        if !key.is_empty() {
            errs.extend(validate_label_name(key, &field::child(&p, "key")));
        }
        if key.is_empty() && op != "Exists" {
            errs.push(field::invalid(
                &field::child(&p, "operator"),
                Bad::str(op),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if !t["tolerationSeconds"].is_null() && st(t, "effect") != "NoExecute" {
            errs.push(field::invalid(
                &field::child(&p, "effect"),
                Bad::str(st(t, "effect")),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        let value = st(t, "value");
        match op {
            "Equal" | "" => {
                let msgs = names::is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(field::invalid(
                        &field::child(&p, "operator"),
                        Bad::str(value),
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(field::invalid(
                        &field::child(&p, "operator"),
                        Bad::str(value),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(field::not_supported(
                &field::child(&p, "operator"),
                Bad::str(other),
                &["Equal", "Exists"],
            )),
        }
        let effect = st(t, "effect");
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
        {
            errs.push(field::not_supported(
                &field::child(&p, "effect"),
                Bad::str(effect),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
    errs
}

/// `ValidateVolumes`, for the names (a volume without a source is defaulted to `emptyDir`).
fn validate_volumes<'a>(volumes: &'a Value, path: &str, errs: &mut ErrorList) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in arr(volumes).iter().enumerate() {
        let name_path = field::child(&field::index(path, i), "name");
        let name = st(v, "name");
        if name.is_empty() {
            errs.push(field::required(&name_path, ""));
        } else {
            dns_label(errs, &name_path, name);
        }
        if seen.contains(&name) {
            errs.push(field::duplicate(&name_path, Bad::str(name)));
        } else {
            seen.push(name);
        }
    }
    seen
}

fn subdomain_field(errs: &mut ErrorList, spec: &Value, k: &str, path: &str) {
    let v = st(spec, k);
    if !v.is_empty() {
        push_names(
            errs,
            &field::child(path, k),
            v,
            names::name_is_dns_subdomain(v, false),
        );
    }
}

/// `ValidatePodSpec(spec, path)`.
pub fn validate_pod_spec(spec: &Value, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let vols = validate_volumes(&spec["volumes"], &field::child(path, "volumes"), &mut errs);
    errs.extend(validate_containers(
        &spec["containers"],
        &vols,
        &field::child(path, "containers"),
    ));
    errs.extend(validate_init_containers(
        &spec["initContainers"],
        &spec["containers"],
        &vols,
        &field::child(path, "initContainers"),
    ));
    defaulted_enum(
        &mut errs,
        &spec["restartPolicy"],
        &field::child(path, "restartPolicy"),
        &["Always", "OnFailure", "Never"],
    );
    defaulted_enum(
        &mut errs,
        &spec["dnsPolicy"],
        &field::child(path, "dnsPolicy"),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    errs.extend(validate_labels(
        spec["nodeSelector"].as_object(),
        &field::child(path, "nodeSelector"),
    ));
    subdomain_field(&mut errs, spec, "serviceAccountName", path);
    subdomain_field(&mut errs, spec, "nodeName", path);
    if let Some(d) = spec["activeDeadlineSeconds"].as_i64() {
        if !(1..=MAX_INT32).contains(&d) {
            errs.push(field::invalid(
                &field::child(path, "activeDeadlineSeconds"),
                Bad::num(d),
                inclusive_range_error(1, MAX_INT32),
            ));
        }
    }
    for k in ["hostname", "subdomain"] {
        let v = st(spec, k);
        if !v.is_empty() {
            dns_label(&mut errs, &field::child(path, k), v);
        }
    }
    errs.extend(validate_tolerations(
        &spec["tolerations"],
        &field::child(path, "tolerations"),
    ));
    subdomain_field(&mut errs, spec, "priorityClassName", path);
    errs
}

/// `validateContainersOnlyForPod`: images without surrounding whitespace.
fn validate_images_trimmed(containers: &Value, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, c) in arr(containers).iter().enumerate() {
        let image = st(c, "image");
        if image.trim() != image {
            errs.push(field::invalid(
                &field::child(&field::index(path, i), "image"),
                Bad::str(image),
                "must not have leading or trailing whitespace",
            ));
        }
    }
    errs
}

/// `validatePodMetadataAndSpec`.
fn validate_pod_metadata_and_spec(pod: &Value) -> ErrorList {
    let mut errs = validate_object_meta(pod, true, &names::name_is_dns_subdomain);
    errs.extend(validate_pod_spec(&pod["spec"], "spec"));
    errs.extend(validate_images_trimmed(
        &pod["spec"]["containers"],
        "spec.containers",
    ));
    errs.extend(validate_images_trimmed(
        &pod["spec"]["initContainers"],
        "spec.initContainers",
    ));
    errs
}

/// `ValidatePodCreate`.
pub fn validate_pod_create(pod: &Value) -> ErrorList {
    let mut errs = validate_pod_metadata_and_spec(pod);
    let spec = &pod["spec"];
    if !arr(&spec["ephemeralContainers"]).is_empty() {
        errs.push(field::forbidden(
            "spec.ephemeralContainers",
            "cannot be set on create",
        ));
    }
    if !st(spec, "nodeName").is_empty() && !arr(&spec["schedulingGates"]).is_empty() {
        errs.push(field::forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
    errs
}

/// `ValidateContainerUpdates`: the same number of containers, each with an image; true when the
/// rest of the update check stops.
fn validate_container_updates(new: &Value, old: &Value, path: &str, errs: &mut ErrorList) -> bool {
    if arr(new).len() != arr(old).len() {
        errs.push(field::forbidden(
            path,
            "pod updates may not add or remove containers",
        ));
        return true;
    }
    for (i, c) in arr(new).iter().enumerate() {
        let image = st(c, "image");
        let p = field::child(&field::index(path, i), "image");
        if image.is_empty() {
            errs.push(field::required(&p, ""));
        }
        if image.trim() != image {
            errs.push(field::invalid(
                &p,
                Bad::str(image),
                "must not have leading or trailing whitespace",
            ));
        }
    }
    false
}

/// A JSON value as Go's semantic equality sees it: absent, `null`, `[]` and `{}` are all the
/// zero value.
fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), semantic(v)))
                .filter(|(_, v)| !is_zero(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// `validateOnlyAddedTolerations`: every old toleration is still there (its
/// `tolerationSeconds` may change).
fn validate_only_added_tolerations(new: &Value, old: &Value, errs: &mut ErrorList) {
    let strip = |t: &Value| {
        let mut t = semantic(t);
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let news: Vec<Value> = arr(new).iter().map(strip).collect();
    for o in arr(old) {
        if !news.contains(&strip(o)) {
            errs.push(field::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            return;
        }
    }
    errs.extend(validate_tolerations(new, "spec.tolerations"));
}

/// A go-cmp-like description of how the specs differ (top-level fields only). The apiserver
/// appends `cmp.Diff(oldPod.Spec, mungedPodSpec)` of its internal types, which go-cmp
/// deliberately does not keep stable, so only its shape is imitated.
fn spec_diff(old: &Map<String, Value>, new: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::from("  core.PodSpec{\n");
    let mut same = 0;
    for k in keys {
        let (o, n) = (old.get(k), new.get(k));
        if o == n {
            same += 1;
            continue;
        }
        let go_name = {
            let mut c = k.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        };
        if let Some(o) = o {
            out.push_str(&format!("- \t{go_name}: {o},\n"));
        }
        if let Some(n) = n {
            out.push_str(&format!("+ \t{go_name}: {n},\n"));
        }
    }
    if same > 0 {
        out.push_str(&format!("  \t... // {same} identical fields\n"));
    }
    out.push_str("  }\n");
    out
}

/// `ValidatePodUpdate(new, old)`.
pub fn validate_pod_update(new: &Value, old: &Value) -> ErrorList {
    let mut errs = validate_object_meta_update(new, old);
    errs.extend(validate_pod_metadata_and_spec(new));
    let (ns, os) = (&new["spec"], &old["spec"]);
    if validate_container_updates(
        &ns["containers"],
        &os["containers"],
        "spec.containers",
        &mut errs,
    ) || validate_container_updates(
        &ns["initContainers"],
        &os["initContainers"],
        "spec.initContainers",
        &mut errs,
    ) {
        return errs;
    }
    match (
        ns["activeDeadlineSeconds"].as_i64(),
        os["activeDeadlineSeconds"].as_i64(),
    ) {
        (Some(n), _) if !(0..=MAX_INT32).contains(&n) => {
            errs.push(field::invalid(
                "spec.activeDeadlineSeconds",
                Bad::num(n),
                inclusive_range_error(0, MAX_INT32),
            ));
            return errs;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(field::invalid(
                "spec.activeDeadlineSeconds",
                Bad::num(n),
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (None, Some(_)) => errs.push(field::invalid(
            "spec.activeDeadlineSeconds",
            Bad::Raw("null".into()),
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    validate_only_added_tolerations(&ns["tolerations"], &os["tolerations"], &mut errs);
    let old_gates: Vec<&str> = arr(&os["schedulingGates"])
        .iter()
        .map(|g| st(g, "name"))
        .collect();
    for (i, g) in arr(&ns["schedulingGates"]).iter().enumerate() {
        if !old_gates.contains(&st(g, "name")) {
            errs.push(field::forbidden(
                &field::child(&field::index("spec.schedulingGates", i), "name"),
                format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    st(g, "name")
                ),
            ));
        }
    }
    let old_spec = semantic(os);
    let mut munged = semantic(ns);
    if old_spec == munged {
        return errs;
    }
    for list in ["containers", "initContainers"] {
        if let Some(cs) = munged.get_mut(list).and_then(Value::as_array_mut) {
            for (i, c) in cs.iter_mut().enumerate() {
                match old_spec[list][i].get("image") {
                    Some(img) => c["image"] = img.clone(),
                    None => {
                        if let Some(m) = c.as_object_mut() {
                            m.remove("image");
                        }
                    }
                }
            }
        }
    }
    if let Some(m) = munged.as_object_mut() {
        for k in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
            match old_spec.get(k) {
                Some(v) => m.insert(k.to_string(), v.clone()),
                None => m.remove(k),
            };
        }
        let negative_before = old_spec["terminationGracePeriodSeconds"]
            .as_i64()
            .is_some_and(|g| g < 0);
        if negative_before && m.get("terminationGracePeriodSeconds") == Some(&Value::from(1)) {
            m.insert(
                "terminationGracePeriodSeconds".into(),
                old_spec["terminationGracePeriodSeconds"].clone(),
            );
        }
    }
    if munged != old_spec {
        let empty = Map::new();
        let diff = spec_diff(
            old_spec.as_object().unwrap_or(&empty),
            munged.as_object().unwrap_or(&empty),
        );
        errs.push(field::forbidden(
            "spec",
            format!(
                "pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n{diff}"
            ),
        ));
    }
    errs
}

/// `ValidatePodTemplateSpec(template, path)`: labels and annotations (at `<path>.labels` and
/// `<path>.annotations`, as the apiserver names them) and the pod spec.
pub fn validate_pod_template_spec(template: &Value, path: &str) -> ErrorList {
    let meta = &template["metadata"];
    let mut errs = validate_labels(meta["labels"].as_object(), &field::child(path, "labels"));
    errs.extend(validate_annotations(
        meta["annotations"].as_object(),
        &field::child(path, "annotations"),
    ));
    errs.extend(validate_pod_spec(
        &template["spec"],
        &field::child(path, "spec"),
    ));
    if !arr(&template["spec"]["ephemeralContainers"]).is_empty() {
        errs.push(field::forbidden(
            &field::child(&field::child(path, "spec"), "ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn a_pod_needs_named_containers_with_images() {
        let errs = validate_pod_create(&pod(json!({})));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].message(), "spec.containers: Required value");
        let errs = validate_pod_create(&pod(
            json!({"containers": [{"name": "A"}, {"name": "A", "image": "x"}]}),
        ));
        let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
        assert!(msgs[0].starts_with(
            "spec.containers[0].name: Invalid value: \"A\": a lowercase RFC 1123 label"
        ));
        assert_eq!(msgs[1], "spec.containers[0].image: Required value");
        assert_eq!(msgs[3], "spec.containers[1].name: Duplicate value: \"A\"");
        assert!(
            validate_pod_create(&pod(json!({"containers": [{"name": "a", "image": "x"}]})))
                .is_empty()
        );
    }

    #[test]
    fn only_mutable_fields_may_change() {
        let old = json!({"metadata": {"name": "p", "namespace": "default", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "a", "image": "x:1"}], "nodeName": "n1",
                     "tolerations": [{"key": "k", "operator": "Exists"}]}});
        let mut ok = old.clone();
        ok["spec"]["containers"][0]["image"] = json!("x:2");
        ok["spec"]["activeDeadlineSeconds"] = json!(30);
        ok["spec"]["tolerations"] =
            json!([{"key": "k", "operator": "Exists"}, {"key": "j", "operator": "Exists"}]);
        let errs = validate_pod_update(&ok, &old);
        assert!(errs.is_empty(), "{errs:?}");
        let mut bad = old.clone();
        bad["spec"]["nodeName"] = json!("n2");
        let errs = validate_pod_update(&bad, &old);
        assert_eq!(errs.len(), 1);
        assert!(errs[0]
            .message()
            .starts_with(&format!("spec: Forbidden: pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n")));
        let mut removed = old.clone();
        removed["spec"]["tolerations"] = json!([]);
        assert_eq!(
            validate_pod_update(&removed, &old)[0].message(),
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
        );
    }
}
