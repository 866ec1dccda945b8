//! Deployments, as `pkg/apis/apps/validation/validation.go` checks them (`ValidateDeployment`,
//! `ValidateDeploymentSpec`, `ValidatePodTemplateSpecForReplicaSet`,
//! `ValidateDeploymentStrategy`, `ValidateRollingUpdateDeployment`) and as
//! `pkg/registry/apps/deployment/strategy.go` (`ValidateUpdate`) adds the immutable
//! `spec.selector` for apps/v1.
//!
//! Invariant: the object checked is the defaulted one (replicas, strategy, revision history and
//! progress deadline are set by `crate::deployment::set_defaults` before validation, as the
//! apiserver defaults before validating).

use serde_json::Value;

use super::field::{self, Bad, ErrorList};
use super::labels::{
    go_label_selector, selector_is_empty, selector_matches, validate_label_selector,
};
use super::meta::{validate_object_meta, validate_object_meta_update, FIELD_IMMUTABLE};
use super::names;
use super::pod::validate_pod_template_spec;

fn nonnegative(errs: &mut ErrorList, v: &Value, path: &str) {
    if let Some(n) = v.as_i64().filter(|n| *n < 0) {
        errs.push(field::invalid(
            path,
            Bad::num(n),
            "must be greater than or equal to 0",
        ));
    }
}

/// An `intstr.IntOrString` as `%#v` prints it.
fn go_int_or_string(v: &Value) -> String {
    match v {
        Value::Number(n) => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            field::go_number(n)
        ),
        other => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            field::go_quote(other.as_str().unwrap_or(""))
        ),
    }
}

/// `getIntOrPercentValue` and whether it is a valid percent.
fn percent(v: &Value) -> Option<i64> {
    let s = v.as_str()?;
    let digits = s.strip_suffix('%')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().unwrap_or(i64::MAX))
}

/// `ValidatePositiveIntOrPercent`.
fn positive_int_or_percent(errs: &mut ErrorList, v: &Value, path: &str) {
    match v {
        Value::String(_) if percent(v).is_none() => errs.push(field::invalid(
            path,
            Bad::Raw(go_int_or_string(v)),
            names::regex_error(
                "a valid percent string must be a numeric string followed by an ending '%'",
                "[0-9]+%",
                &["1%", "93%"],
            ),
        )),
        Value::Number(_) => nonnegative(errs, v, path),
        _ => {}
    }
}

fn validate_strategy(strategy: &Value, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    match strategy["type"].as_str().unwrap_or("") {
        "Recreate" => {
            if !strategy["rollingUpdate"].is_null() {
                errs.push(field::forbidden(
                    &field::child(path, "rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let ru = &strategy["rollingUpdate"];
            let rp = field::child(path, "rollingUpdate");
            let (mu, ms) = (&ru["maxUnavailable"], &ru["maxSurge"]);
            positive_int_or_percent(&mut errs, mu, &field::child(&rp, "maxUnavailable"));
            positive_int_or_percent(&mut errs, ms, &field::child(&rp, "maxSurge"));
            let value = |v: &Value| percent(v).or_else(|| v.as_i64()).unwrap_or(0);
            if value(mu) == 0 && value(ms) == 0 {
                errs.push(field::invalid(
                    &field::child(&rp, "maxUnavailable"),
                    Bad::Raw(go_int_or_string(mu)),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            if percent(mu).is_some_and(|p| p > 100) {
                errs.push(field::invalid(
                    &field::child(&rp, "maxUnavailable"),
                    Bad::Raw(go_int_or_string(mu)),
                    "must not be greater than 100%",
                ));
            }
        }
        other => errs.push(field::not_supported(
            path,
            Bad::Raw(format!(
                "apps.DeploymentStrategy{{Type:{}, RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}}",
                field::go_quote(other)
            )),
            &["Recreate", "RollingUpdate"],
        )),
    }
    errs
}

/// `ValidateDeploymentSpec(spec, "spec")`.
fn validate_deployment_spec(spec: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    nonnegative(&mut errs, &spec["replicas"], "spec.replicas");
    let selector = spec.get("selector").filter(|s| s.is_object());
    match selector {
        None => errs.push(field::required("spec.selector", "")),
        Some(s) => {
            errs.extend(validate_label_selector(s, "spec.selector"));
            if selector_is_empty(s) {
                errs.push(field::invalid(
                    "spec.selector",
                    Bad::Raw(go_label_selector(s)),
                    "empty selector is invalid for deployment",
                ));
            }
        }
    }
    // ValidatePodTemplateSpecForReplicaSet: a missing selector matches nothing, an empty one
    // everything (and an empty one is not compared).
    let template = &spec["template"];
    let template_labels = template["metadata"]["labels"].as_object();
    if !selector.is_some_and(selector_is_empty) && !selector_matches(selector, template_labels) {
        errs.push(field::invalid(
            "spec.template.metadata.labels",
            Bad::Raw(field::go_string_map(template_labels)),
            "`selector` does not match template `labels`",
        ));
    }
    errs.extend(validate_pod_template_spec(template, "spec.template"));
    if let Some(rp) = template["spec"]["restartPolicy"].as_str() {
        if rp != "Always" {
            errs.push(field::not_supported(
                "spec.template.spec.restartPolicy",
                Bad::str(rp),
                &["Always"],
            ));
        }
    }
    if !template["spec"]["activeDeadlineSeconds"].is_null() {
        errs.push(field::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        ));
    }
    errs.extend(validate_strategy(&spec["strategy"], "spec.strategy"));
    nonnegative(&mut errs, &spec["minReadySeconds"], "spec.minReadySeconds");
    nonnegative(
        &mut errs,
        &spec["revisionHistoryLimit"],
        "spec.revisionHistoryLimit",
    );
    if let Some(p) = spec["progressDeadlineSeconds"].as_i64() {
        nonnegative(
            &mut errs,
            &spec["progressDeadlineSeconds"],
            "spec.progressDeadlineSeconds",
        );
        if p <= spec["minReadySeconds"].as_i64().unwrap_or(0) {
            errs.push(field::invalid(
                "spec.progressDeadlineSeconds",
                Bad::num(p),
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}

/// `ValidateDeployment`.
pub fn validate_deployment(d: &Value) -> ErrorList {
    let mut errs = validate_object_meta(d, true, &names::name_is_dns_subdomain);
    errs.extend(validate_deployment_spec(&d["spec"]));
    errs
}

/// The deployment strategy's `ValidateUpdate`: `ValidateDeploymentUpdate` plus the immutable
/// selector (apps/v1).
pub fn validate_deployment_update(new: &Value, old: &Value) -> ErrorList {
    let mut errs = validate_object_meta_update(new, old);
    errs.extend(validate_deployment_spec(&new["spec"]));
    let (ns, os) = (&new["spec"]["selector"], &old["spec"]["selector"]);
    if ns != os {
        errs.push(field::invalid(
            "spec.selector",
            Bad::Raw(if ns.is_object() {
                go_label_selector(ns)
            } else {
                "null".into()
            }),
            FIELD_IMMUTABLE,
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dep(selector: Value, labels: Value) -> Value {
        let mut d = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": selector,
                "template": {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        crate::deployment::set_defaults(&mut d);
        d
    }

    #[test]
    fn selector_required_and_matching() {
        assert!(validate_deployment(&dep(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"})
        ))
        .is_empty());
        let errs = validate_deployment(&dep(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "api"}),
        ));
        assert_eq!(
            errs[0].message(),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`"
        );
        let mut d = dep(json!({}), json!({"app": "web"}));
        d["spec"].as_object_mut().unwrap().remove("selector");
        let msgs: Vec<String> = validate_deployment(&d)
            .iter()
            .map(|e| e.message())
            .collect();
        assert_eq!(msgs[0], "spec.selector: Required value");
        assert!(msgs[1].contains("`selector` does not match template `labels`"));
    }

    #[test]
    fn the_selector_is_immutable() {
        let mut old = dep(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web", "v": "2"}),
        );
        old["metadata"]["resourceVersion"] = json!("1");
        let mut new = dep(
            json!({"matchLabels": {"app": "web", "v": "2"}}),
            json!({"app": "web", "v": "2"}),
        );
        new["metadata"]["resourceVersion"] = json!("1");
        let errs = validate_deployment_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].message(),
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"v\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        );
    }
}
