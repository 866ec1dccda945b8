//! Validation as the apiserver does it, rule by rule: for each rule a request that breaks it
//! gets HTTP 422 with reason `Invalid`, the cause (field and reason) and the message the
//! Kubernetes 1.33 sources give, and a request that just passes is accepted. The expected
//! values are taken from the sources named in each row (paths relative to kubernetes/kubernetes,
//! `staging/src/k8s.io/apimachinery/...` written `apimachinery/...`), not from apisim.

use crate::common;

use apisim::{RunningSim, SimConfig};
use common::*;
use serde_json::{json, Value};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// One request.
struct Req {
    method: &'static str,
    path: String,
    ct: &'static str,
    body: Value,
}

fn post(path: &str, body: Value) -> Req {
    Req {
        method: "POST",
        path: path.to_string(),
        ct: JSON,
        body,
    }
}

fn put(path: &str, body: Value) -> Req {
    Req {
        method: "PUT",
        path: path.to_string(),
        ct: JSON,
        body,
    }
}

fn patch(path: &str, ct: &'static str, body: Value) -> Req {
    Req {
        method: "PATCH",
        path: path.to_string(),
        ct,
        body,
    }
}

/// How the expected message is compared.
enum Msg {
    /// The whole `Status.message`.
    Exact(String),
    /// Its beginning (for messages that end in a long regex or a spec diff).
    Prefix(String),
}

/// One rule: objects to create first, the request that breaks the rule, the request that just
/// passes, and what the apiserver answers to the first.
struct Case {
    rule: &'static str,
    setup: Vec<Req>,
    bad: Req,
    good: Req,
    field: &'static str,
    cause: &'static str,
    message: Msg,
}

/// A body short enough for a failure message.
fn short(body: &str) -> String {
    body.chars().take(600).collect()
}

async fn send(sim: &RunningSim, r: &Req) -> Raw {
    let body = r.body.to_string();
    raw(sim.addr(), r.method, &r.path, Some((r.ct, &body))).await
}

fn s(text: &str) -> String {
    text.to_string()
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn container(name: &str, image: &str) -> Value {
    json!({"name": name, "image": image})
}

fn deployment(name: &str, selector: Value, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": selector, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [container("c", "nginx:1")]}}}})
}

fn event_v1(name: &str, note: &str) -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1", "action": "Reconcile", "reason": "Synced", "type": "Normal",
        "note": note, "regarding": {"kind": "Pod", "name": "web", "namespace": "val"}})
}

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn cases() -> Vec<Case> {
    let ns = "/api/v1/namespaces/val";
    let apps = "/apis/apps/v1/namespaces/val/deployments";
    let events = "/apis/events.k8s.io/v1/namespaces/val/events";
    let crs = "/apis/example.com/v1/namespaces/val/widgets";
    vec![
        // apimachinery/pkg/api/validation/objectmeta.go ValidateObjectMetaAccessor with
        // NameIsDNSSubdomain (pkg/apis/core/validation ValidateConfigMapName);
        // apimachinery/pkg/util/validation/validation.go IsDNS1123Subdomain.
        Case {
            rule: "a ConfigMap name is an RFC 1123 subdomain",
            setup: vec![],
            bad: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "Bad_Name"}})),
            good: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "good.name-1"}})),
            field: "metadata.name",
            cause: "FieldValueInvalid",
            message: Msg::Exact(format!("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {DNS1123_SUBDOMAIN}")),
        },
        // apimachinery/pkg/api/validation/generic.go ValidateNamespaceName = NameIsDNSLabel;
        // validation.go IsDNS1123Label ("must not contain dots").
        Case {
            rule: "a Namespace name is an RFC 1123 label",
            setup: vec![],
            bad: post("/api/v1/namespaces", json!({"metadata": {"name": "team.a"}})),
            good: post("/api/v1/namespaces", json!({"metadata": {"name": "team-a"}})),
            field: "metadata.name",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Namespace \"team.a\" is invalid: metadata.name: Invalid value: \"team.a\": must not contain dots")),
        },
        // pkg/apis/core/validation/validation.go ValidateServiceName = NameIsDNS1035Label;
        // validation.go IsDNS1035Label.
        Case {
            rule: "a Service name is an RFC 1035 label",
            setup: vec![],
            bad: post(&format!("{ns}/services"), json!({"metadata": {"name": "1web"}, "spec": {"ports": [{"port": 80}]}})),
            good: post(&format!("{ns}/services"), json!({"metadata": {"name": "web1"}, "spec": {"ports": [{"port": 80}]}})),
            field: "metadata.name",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Service \"1web\" is invalid: metadata.name: Invalid value: \"1web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")),
        },
        // objectmeta.go ValidateObjectMetaAccessor (generateName with prefix=true);
        // generic.go maskTrailingDash (a prefix may end in '-').
        Case {
            rule: "generateName is a name prefix",
            setup: vec![],
            bad: post(&format!("{ns}/configmaps"), json!({"metadata": {"generateName": "Web-"}})),
            good: post(&format!("{ns}/configmaps"), json!({"metadata": {"generateName": "web-"}})),
            field: "metadata.generateName",
            cause: "FieldValueInvalid",
            message: Msg::Prefix(s("ConfigMap \"Web-")),
        },
        // pkg/apis/rbac/validation/validation.go minimalNameRequirements =
        // apimachinery/pkg/api/validation/path/name.go IsValidPathSegmentName.
        Case {
            rule: "an RBAC name is a path segment",
            setup: vec![],
            bad: post("/apis/rbac.authorization.k8s.io/v1/namespaces/val/roles", json!({"metadata": {"name": "a%b"}})),
            good: post("/apis/rbac.authorization.k8s.io/v1/namespaces/val/roles", json!({"metadata": {"name": "system:Reader"}})),
            field: "metadata.name",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Role.rbac.authorization.k8s.io \"a%b\" is invalid: metadata.name: Invalid value: \"a%b\": may not contain '%'")),
        },
        // apimachinery/pkg/apis/meta/v1/validation/validation.go ValidateLabels;
        // validation.go IsValidLabelValue. Through a merge patch.
        Case {
            rule: "a label value is at most 63 characters of the label-value format",
            setup: vec![post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "labelled"}}))],
            bad: patch(&format!("{ns}/configmaps/labelled"), MERGE, json!({"metadata": {"labels": {"team": "platform team!"}}})),
            good: patch(&format!("{ns}/configmaps/labelled"), MERGE, json!({"metadata": {"labels": {"team": "platform-team"}}})),
            field: "metadata.labels",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("ConfigMap \"labelled\" is invalid: metadata.labels: Invalid value: \"platform team!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")),
        },
        // meta/v1/validation ValidateLabelName; validation.go IsQualifiedName (prefix must be
        // a DNS subdomain). Through a strategic merge patch.
        Case {
            rule: "a label key is a qualified name with a DNS-subdomain prefix",
            setup: vec![post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "keyed"}}))],
            bad: patch(&format!("{ns}/configmaps/keyed"), STRATEGIC, json!({"metadata": {"labels": {"Example_Com/x": "1"}}})),
            good: patch(&format!("{ns}/configmaps/keyed"), STRATEGIC, json!({"metadata": {"labels": {"example.com/x": "1"}}})),
            field: "metadata.labels",
            cause: "FieldValueInvalid",
            message: Msg::Exact(format!("ConfigMap \"keyed\" is invalid: metadata.labels: Invalid value: \"Example_Com/x\": prefix part {DNS1123_SUBDOMAIN}")),
        },
        // objectmeta.go ValidateAnnotations (keys are qualified names, case-insensitive).
        Case {
            rule: "an annotation key is a qualified name",
            setup: vec![],
            bad: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "ann1", "annotations": {"a b": "x"}}})),
            good: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "ann1", "annotations": {"Example.com/A_b": "x"}}})),
            field: "metadata.annotations",
            cause: "FieldValueInvalid",
            message: Msg::Prefix(s("ConfigMap \"ann1\" is invalid: metadata.annotations: Invalid value: \"a b\": name part must consist of alphanumeric characters")),
        },
        // objectmeta.go ValidateAnnotations / ValidateAnnotationsSize: TotalAnnotationSizeLimitB
        // = 256 KiB of keys and values; field.TooLong. Through PUT.
        Case {
            rule: "annotations total at most 256 KiB",
            setup: vec![post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "big-ann"}}))],
            bad: put(&format!("{ns}/configmaps/big-ann"), json!({"metadata": {"name": "big-ann", "annotations": {"k": "x".repeat(256 * 1024)}}})),
            good: put(&format!("{ns}/configmaps/big-ann"), json!({"metadata": {"name": "big-ann", "annotations": {"k": "x".repeat(256 * 1024 - 1)}}})),
            field: "metadata.annotations",
            cause: "FieldValueTooLong",
            message: Msg::Exact(s("ConfigMap \"big-ann\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes")),
        },
        // pkg/apis/core/validation/validation.go validateContainers: at least one container.
        Case {
            rule: "a Pod has containers",
            setup: vec![],
            bad: post(&format!("{ns}/pods"), pod("empty", json!({}))),
            good: post(&format!("{ns}/pods"), pod("empty", json!({"containers": [container("c", "nginx:1")]}))),
            field: "spec.containers",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Pod \"empty\" is invalid: spec.containers: Required value")),
        },
        // The same rule through server-side apply of labels only to a Pod that does not exist
        // (the apply creates it, and the created object is validated).
        Case {
            rule: "an apply that creates a Pod needs its containers",
            setup: vec![],
            bad: patch(&format!("{ns}/pods/applied?fieldManager=test"), APPLY, json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "applied", "labels": {"app": "web"}}})),
            good: patch(&format!("{ns}/pods/applied?fieldManager=test"), APPLY, json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "applied", "labels": {"app": "web"}}, "spec": {"containers": [container("c", "nginx:1")]}})),
            field: "spec.containers",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Pod \"applied\" is invalid: spec.containers: Required value")),
        },
        // validateContainerCommon: the container name is an RFC 1123 label.
        Case {
            rule: "a container name is an RFC 1123 label",
            setup: vec![],
            bad: post(&format!("{ns}/pods"), pod("named", json!({"containers": [container("Main", "nginx:1")]}))),
            good: post(&format!("{ns}/pods"), pod("named", json!({"containers": [container("main", "nginx:1")]}))),
            field: "spec.containers[0].name",
            cause: "FieldValueInvalid",
            message: Msg::Prefix(s("Pod \"named\" is invalid: spec.containers[0].name: Invalid value: \"Main\": a lowercase RFC 1123 label must consist of")),
        },
        // validateContainerCommon: an image is required.
        Case {
            rule: "a container has an image",
            setup: vec![],
            bad: post(&format!("{ns}/pods"), pod("imageless", json!({"containers": [{"name": "c"}]}))),
            good: post(&format!("{ns}/pods"), pod("imageless", json!({"containers": [container("c", "nginx:1")]}))),
            field: "spec.containers[0].image",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Pod \"imageless\" is invalid: spec.containers[0].image: Required value")),
        },
        // validateContainers: names are unique (field.Duplicate).
        Case {
            rule: "container names are unique",
            setup: vec![],
            bad: post(&format!("{ns}/pods"), pod("twins", json!({"containers": [container("c", "a:1"), container("c", "b:1")]}))),
            good: post(&format!("{ns}/pods"), pod("twins", json!({"containers": [container("c", "a:1"), container("d", "b:1")]}))),
            field: "spec.containers[1].name",
            cause: "FieldValueDuplicate",
            message: Msg::Exact(s("Pod \"twins\" is invalid: spec.containers[1].name: Duplicate value: \"c\"")),
        },
        // pkg/apis/apps/validation/validation.go ValidateDeploymentSpec: the selector is
        // required, and a missing selector matches no template labels.
        Case {
            rule: "a Deployment has a selector",
            setup: vec![],
            bad: post(apps, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nosel"},
                "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container("c", "nginx:1")]}}}})),
            good: post(apps, deployment("nosel", json!({"matchLabels": {"app": "web"}}), json!({"app": "web"}))),
            field: "spec.selector",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Deployment.apps \"nosel\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`]")),
        },
        // ValidatePodTemplateSpecForReplicaSet: the selector matches the template labels.
        Case {
            rule: "a Deployment's selector matches its template labels",
            setup: vec![],
            bad: post(apps, deployment("mismatch", json!({"matchLabels": {"app": "web"}}), json!({"app": "api"}))),
            good: post(apps, deployment("mismatch", json!({"matchLabels": {"app": "web"}}), json!({"app": "web", "tier": "x"}))),
            field: "spec.template.metadata.labels",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Deployment.apps \"mismatch\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`")),
        },
        // pkg/apis/core/validation/validation.go ValidateService: ports unless headless or
        // ExternalName (the passing request is headless, without ports).
        Case {
            rule: "a Service has ports unless headless or ExternalName",
            setup: vec![],
            bad: post(&format!("{ns}/services"), json!({"metadata": {"name": "portless"}, "spec": {"selector": {"app": "web"}}})),
            good: post(&format!("{ns}/services"), json!({"metadata": {"name": "portless"}, "spec": {"clusterIP": "None", "selector": {"app": "web"}}})),
            field: "spec.ports",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Service \"portless\" is invalid: spec.ports: Required value")),
        },
        // validateServicePort: IsValidPortNum.
        Case {
            rule: "a Service port is between 1 and 65535",
            setup: vec![],
            bad: post(&format!("{ns}/services"), json!({"metadata": {"name": "port0"}, "spec": {"ports": [{"port": 65536}]}})),
            good: post(&format!("{ns}/services"), json!({"metadata": {"name": "port0"}, "spec": {"ports": [{"port": 65535}]}})),
            field: "spec.ports[0].port",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Service \"port0\" is invalid: spec.ports[0].port: Invalid value: 65536: must be between 1 and 65535, inclusive")),
        },
        // validateServicePort: supportedPortProtocols (field.NotSupported, sorted).
        Case {
            rule: "a Service port protocol is TCP, UDP or SCTP",
            setup: vec![],
            bad: post(&format!("{ns}/services"), json!({"metadata": {"name": "proto"}, "spec": {"ports": [{"port": 80, "protocol": "HTTP"}]}})),
            good: post(&format!("{ns}/services"), json!({"metadata": {"name": "proto"}, "spec": {"ports": [{"port": 80, "protocol": "SCTP"}]}})),
            field: "spec.ports[0].protocol",
            cause: "FieldValueNotSupported",
            message: Msg::Exact(s("Service \"proto\" is invalid: spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"")),
        },
        // ValidatePodUpdate: only images, activeDeadlineSeconds, added tolerations (and the
        // grace-period relaxation) may change. Through a strategic merge patch.
        Case {
            rule: "a Pod's spec is immutable but for its images and a few fields",
            setup: vec![post(&format!("{ns}/pods"), pod("fixed", json!({"containers": [container("c", "nginx:1")], "nodeName": "node-a"})))],
            bad: patch(&format!("{ns}/pods/fixed"), STRATEGIC, json!({"spec": {"nodeName": "node-b"}})),
            good: patch(&format!("{ns}/pods/fixed"), STRATEGIC, json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}], "activeDeadlineSeconds": 60}})),
            field: "spec",
            cause: "FieldValueForbidden",
            message: Msg::Prefix(s("Pod \"fixed\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n")),
        },
        // pkg/registry/apps/deployment/strategy.go ValidateUpdate: ValidateImmutableField on
        // spec.selector for apps/v1. Through PUT.
        Case {
            rule: "a Deployment's selector is immutable",
            setup: vec![post(apps, deployment("pinned", json!({"matchLabels": {"app": "web"}}), json!({"app": "web", "v": "1"})))],
            bad: put(&format!("{apps}/pinned"), deployment("pinned", json!({"matchLabels": {"app": "web", "v": "1"}}), json!({"app": "web", "v": "1"}))),
            good: put(&format!("{apps}/pinned"), deployment("pinned", json!({"matchLabels": {"app": "web"}}), json!({"app": "web", "v": "2"}))),
            field: "spec.selector",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Deployment.apps \"pinned\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"v\":\"1\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable")),
        },
        // ValidateServiceUpdate / validateUpgradeDowngradeClusterIPs. Through a JSON patch.
        Case {
            rule: "a Service's clusterIP may not change once set",
            setup: vec![post(&format!("{ns}/services"), json!({"metadata": {"name": "ip"}, "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}}))],
            bad: patch(&format!("{ns}/services/ip"), JSON_PATCH, json!([{"op": "replace", "path": "/spec/clusterIP", "value": "10.96.0.11"}])),
            good: patch(&format!("{ns}/services/ip"), JSON_PATCH, json!([{"op": "replace", "path": "/spec/ports/0/port", "value": 81}])),
            field: "spec.clusterIPs[0]",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Service \"ip\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.11\"}: may not change once set")),
        },
        // objectmeta.go ValidateObjectMetaAccessorUpdate: metadata.uid is immutable (a patch;
        // a PUT naming another uid fails its uid precondition instead). The message shows it
        // once although validateCommonFields and ValidateConfigMapUpdate both report it.
        Case {
            rule: "metadata.uid is immutable",
            setup: vec![post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "uid"}}))],
            bad: patch(&format!("{ns}/configmaps/uid"), MERGE, json!({"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}})),
            good: patch(&format!("{ns}/configmaps/uid"), MERGE, json!({"metadata": {"labels": {"a": "b"}}})),
            field: "metadata.uid",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("ConfigMap \"uid\" is invalid: metadata.uid: Invalid value: \"00000000-0000-0000-0000-000000000000\": field is immutable")),
        },
        // ValidateConfigMap: keys are IsConfigMapKey.
        Case {
            rule: "a ConfigMap key is a config key",
            setup: vec![],
            bad: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "keys"}, "data": {"my key": "v"}})),
            good: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "keys"}, "data": {"my-key.conf": "v"}})),
            field: "data[my key]",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("ConfigMap \"keys\" is invalid: data[my key]: Invalid value: \"my key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")),
        },
        // ValidateConfigMap: at most core.MaxSecretSize (1 MiB) of data, reported on the whole
        // object (field.NewPath(""), printed "[]").
        Case {
            rule: "a ConfigMap holds at most 1 MiB",
            setup: vec![],
            bad: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "huge"}, "data": {"a": "x".repeat(1024 * 1024 + 1)}})),
            good: post(&format!("{ns}/configmaps"), json!({"metadata": {"name": "huge"}, "data": {"a": "x".repeat(1024 * 1024)}})),
            field: "[]",
            cause: "FieldValueTooLong",
            message: Msg::Exact(s("ConfigMap \"huge\" is invalid: []: Too long: may not be more than 1048576 bytes")),
        },
        // ValidateSecret: keys are IsConfigMapKey.
        Case {
            rule: "a Secret key is a config key",
            setup: vec![],
            bad: post(&format!("{ns}/secrets"), json!({"metadata": {"name": "sec"}, "data": {"..x": "eA=="}})),
            good: post(&format!("{ns}/secrets"), json!({"metadata": {"name": "sec"}, "data": {"x..": "eA=="}})),
            field: "data[..x]",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Secret \"sec\" is invalid: data[..x]: Invalid value: \"..x\": must not start with '..'")),
        },
        // ValidateSecret: at most 1 MiB of decoded data, reported on `data`.
        Case {
            rule: "a Secret holds at most 1 MiB",
            setup: vec![],
            bad: post(&format!("{ns}/secrets"), json!({"metadata": {"name": "huge"}, "stringData": {"a": "x".repeat(1024 * 1024 + 1)}})),
            good: post(&format!("{ns}/secrets"), json!({"metadata": {"name": "huge"}, "stringData": {"a": "x".repeat(1024 * 1024)}})),
            field: "data",
            cause: "FieldValueTooLong",
            message: Msg::Exact(s("Secret \"huge\" is invalid: data: Too long: may not be more than 1048576 bytes")),
        },
        // pkg/apis/core/validation/events.go legacyValidateEvent: NoteLengthLimit 1024 on the
        // internal `message` (events.k8s.io's `note`); the kind is the internal Event's.
        Case {
            rule: "an events.k8s.io note is at most 1 kB",
            setup: vec![],
            bad: post(events, event_v1("long-note", &"n".repeat(5000))),
            good: post(events, event_v1("long-note", &"n".repeat(1024))),
            field: "message",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Event \"long-note\" is invalid: message: Invalid value: \"\": can have at most 1024 characters")),
        },
        // events.go legacyValidateEvent (an event with eventTime needs reportingController,
        // which must be a qualified name).
        Case {
            rule: "a new Event names its reporting controller",
            setup: vec![],
            bad: post(events, {
                let mut e = event_v1("unreported", "n");
                e.as_object_mut().unwrap().remove("reportingController");
                e
            }),
            good: post(events, event_v1("unreported", "n")),
            field: "reportingController",
            cause: "FieldValueRequired",
            message: Msg::Prefix(s("Event \"unreported\" is invalid: [reportingController: Required value, reportingController: Invalid value: \"\": name part must be non-empty, ")),
        },
        // events.go ValidateEventCreate: events.k8s.io/v1 requires eventTime.
        Case {
            rule: "an events.k8s.io Event has an eventTime",
            setup: vec![],
            bad: post(events, json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "timeless"},
                "reason": "Synced", "type": "Normal", "regarding": {"kind": "Pod", "name": "web", "namespace": "val"}})),
            good: post(events, event_v1("timeless", "n")),
            field: "eventTime",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Event \"timeless\" is invalid: eventTime: Required value")),
        },
        // events.go legacyValidateEvent through core v1: an eventTime makes action required.
        Case {
            rule: "a core Event with an eventTime has an action",
            setup: vec![],
            bad: post(&format!("{ns}/events"), json!({"metadata": {"name": "actionless"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingComponent": "ctl", "reportingInstance": "i", "reason": "R",
                "involvedObject": {"kind": "Pod", "name": "web", "namespace": "val"}})),
            good: post(&format!("{ns}/events"), json!({"metadata": {"name": "actionless"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingComponent": "ctl", "reportingInstance": "i", "reason": "R", "action": "A",
                "involvedObject": {"kind": "Pod", "name": "web", "namespace": "val"}})),
            field: "action",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Event \"actionless\" is invalid: action: Required value")),
        },
        // apiextensions-apiserver pkg/apiserver/validation/validation.go
        // kubeOpenAPIResultToFieldErrors (InvalidTypeCode -> field.TypeInvalid) over
        // kube-openapi pkg/validation/errors/schema.go InvalidType.
        Case {
            rule: "a custom resource field has its schema type",
            setup: vec![],
            bad: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "3"}})),
            good: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}})),
            field: "spec.size",
            cause: "FieldValueTypeInvalid",
            message: Msg::Exact(s("Widget.example.com \"w1\" is invalid: spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"")),
        },
        // kube-openapi object_validator.go (required -> RequiredFailCode -> field.Required).
        Case {
            rule: "a custom resource has its required fields",
            setup: vec![],
            bad: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"color": "red"}})),
            good: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 1, "color": "red"}})),
            field: "spec.size",
            cause: "FieldValueRequired",
            message: Msg::Exact(s("Widget.example.com \"w2\" is invalid: spec.size: Required value")),
        },
        // kube-openapi values.go Enum -> EnumFailCode -> field.NotSupported. Through apply.
        Case {
            rule: "a custom resource enum holds one of its values",
            setup: vec![],
            bad: patch(&format!("{crs}/w3?fieldManager=test"), APPLY, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w3"}, "spec": {"size": 1, "color": "pink"}})),
            good: patch(&format!("{crs}/w3?fieldManager=test"), APPLY, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w3"}, "spec": {"size": 1, "color": "blue"}})),
            field: "spec.color",
            cause: "FieldValueNotSupported",
            message: Msg::Exact(s("Widget.example.com \"w3\" is invalid: spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\"")),
        },
        // kube-openapi values.go MinimumInt -> errors.ExceedsMinimumInt (default -> Invalid).
        Case {
            rule: "a custom resource number respects its minimum",
            setup: vec![],
            bad: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w4"}, "spec": {"size": 0}})),
            good: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w4"}, "spec": {"size": 1}})),
            field: "spec.size",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Widget.example.com \"w4\" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1")),
        },
        // kube-openapi values.go Pattern -> errors.FailedPattern.
        Case {
            rule: "a custom resource string matches its pattern",
            setup: vec![],
            bad: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w5"}, "spec": {"size": 1, "owner": "Team A"}})),
            good: post(crs, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w5"}, "spec": {"size": 1, "owner": "team-a"}})),
            field: "spec.owner",
            cause: "FieldValueInvalid",
            message: Msg::Exact(s("Widget.example.com \"w5\" is invalid: spec.owner: Invalid value: \"Team A\": spec.owner in body should match '^[a-z-]+$'")),
        },
        // A dry run is validated like a write (apiserver handlers run admission and validation
        // before the storage skips the write).
        Case {
            rule: "a dry-run create is validated",
            setup: vec![],
            bad: post(&format!("{ns}/configmaps?dryRun=All"), json!({"metadata": {"name": "Dry_Run"}})),
            good: post(&format!("{ns}/configmaps?dryRun=All"), json!({"metadata": {"name": "dry-run"}})),
            field: "metadata.name",
            cause: "FieldValueInvalid",
            message: Msg::Exact(format!("ConfigMap \"Dry_Run\" is invalid: metadata.name: Invalid value: \"Dry_Run\": {DNS1123_SUBDOMAIN}")),
        },
    ]
}

fn widget_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
                    "size": {"type": "integer", "minimum": 1},
                    "color": {"type": "string", "enum": ["red", "blue"]},
                    "owner": {"type": "string", "pattern": "^[a-z-]+$"}}}}}}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_refuses_what_the_apiserver_refuses_and_accepts_what_it_accepts() {
    let sim = start(SimConfig::default()).await;
    let setup = [
        post("/api/v1/namespaces", json!({"metadata": {"name": "val"}})),
        post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            widget_crd(),
        ),
    ];
    for r in &setup {
        let got = send(&sim, r).await;
        assert_eq!(got.code, 201, "setup {} {}: {}", r.method, r.path, got.body);
    }
    let mut failures = Vec::new();
    for case in cases() {
        for r in &case.setup {
            let got = send(&sim, r).await;
            assert!(
                got.code < 300,
                "{}: setup {} {} got {}: {}",
                case.rule,
                r.method,
                r.path,
                got.code,
                got.body
            );
        }
        let rv_before = sim.store().current_rv();
        let bad = send(&sim, &case.bad).await;
        let status = bad.json();
        let causes = status["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let message = status["message"].as_str().unwrap_or("");
        let message_ok = match &case.message {
            Msg::Exact(m) => message == m.as_str(),
            Msg::Prefix(p) => message.starts_with(p.as_str()),
        };
        let cause_ok = causes
            .iter()
            .any(|c| c["field"] == case.field && c["reason"] == case.cause);
        if bad.code != 422
            || status["reason"] != "Invalid"
            || status["status"] != "Failure"
            || status["code"] != 422
            || !cause_ok
            || !message_ok
        {
            failures.push(format!(
                "{}: {} {} answered {}: {}",
                case.rule,
                case.bad.method,
                case.bad.path,
                bad.code,
                short(&bad.body)
            ));
        }
        if sim.store().current_rv() != rv_before {
            failures.push(format!(
                "{}: the refused request changed the store",
                case.rule
            ));
        }
        let good = send(&sim, &case.good).await;
        if good.code >= 300 {
            failures.push(format!(
                "{}: the passing {} {} answered {}: {}",
                case.rule,
                case.good.method,
                case.good.path,
                good.code,
                short(&good.body)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_422_status_is_shaped_like_new_invalid() {
    let sim = start(SimConfig::default()).await;
    let got = raw(
        sim.addr(),
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some((
            JSON,
            &json!({"metadata": {"name": "shape"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                "template": {"metadata": {"labels": {"app": "b"}}, "spec": {}}}})
            .to_string(),
        )),
    )
    .await;
    assert_eq!(got.code, 422);
    // k8s.io/apimachinery/pkg/api/errors/errors.go NewInvalid: kind and group of the
    // GroupKind, the name, one cause per field error (reason, message without the field,
    // field), the aggregate message in brackets when there are several.
    assert_eq!(
        got.json(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Deployment.apps \"shape\" is invalid: [spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`, spec.template.spec.containers: Required value]",
            "reason": "Invalid",
            "details": {"name": "shape", "group": "apps", "kind": "Deployment", "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`", "field": "spec.template.metadata.labels"},
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template.spec.containers"}
            ]},
            "code": 422
        })
    );
    assert!(
        sim.store()
            .get(
                sim.store().rid("apps/v1", "deployments"),
                "default",
                "shape"
            )
            .is_err(),
        "nothing was stored"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_naming_another_uid_fails_its_precondition() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    store
        .create(cms, Some("default"), json!({"metadata": {"name": "u"}}))
        .unwrap();
    let uid = store.get(cms, "default", "u").unwrap().uid.clone();
    let got = raw(
        sim.addr(),
        "PUT",
        "/api/v1/namespaces/default/configmaps/u",
        Some((
            JSON,
            &json!({"metadata": {"name": "u", "uid": "other"}}).to_string(),
        )),
    )
    .await;
    // k8s.io/apiserver/pkg/registry/rest/update.go defaultUpdatedObjectInfo.Preconditions,
    // checked by the storage's GuaranteedUpdate and reported by InterpretUpdateError (Conflict).
    assert_eq!(got.code, 409, "{}", got.body);
    assert_eq!(
        got.json()["message"],
        format!("Operation cannot be fulfilled on configmaps \"u\": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/u, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: other, UID in object meta: {uid}")
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_store_writes_are_validated_too() {
    let store = apisim::Store::new(100);
    let pods = store.rid("v1", "pods");
    let e = store
        .create(pods, Some("default"), json!({"metadata": {"name": "p"}}))
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Pod \"p\" is invalid: spec.containers: Required value"
    );
    store
        .create(
            pods,
            Some("default"),
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        )
        .unwrap();
    let e = store
        .update_with(pods, "default", "p", apisim::Subresource::Main, |mut v| {
            v["metadata"]["labels"] = json!({"bad": "a b"});
            Ok(v)
        })
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(e.details.unwrap()["causes"][0]["field"], "metadata.labels");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_name_keeps_to_63_characters() {
    // k8s.io/apiserver/pkg/storage/names/generate.go: the prefix is cut to
    // MaxGeneratedNameLength (58) before the 5 random characters, so a Service (a DNS-1035
    // label, at most 63) may have a 60-character generateName.
    let sim = start(SimConfig::default()).await;
    let prefix = format!("{}-", "a".repeat(59));
    let got = raw(
        sim.addr(),
        "POST",
        "/api/v1/namespaces/default/services",
        Some((
            JSON,
            &json!({"metadata": {"generateName": prefix}, "spec": {"ports": [{"port": 80}]}})
                .to_string(),
        )),
    )
    .await;
    assert_eq!(got.code, 201, "{}", got.body);
    let name = got.json()["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(name.len(), 63);
    assert!(name.starts_with(&"a".repeat(58)), "{name}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_cannot_rename_or_move_an_object() {
    // k8s.io/apiserver/pkg/endpoints/handlers/rest.go checkName (PUT and patch) and
    // pkg/registry/rest/meta.go EnsureObjectNamespaceMatchesRequestNamespace (PUT): 400
    // BadRequest before validation.
    let sim = start(SimConfig::default()).await;
    sim.store()
        .create(
            sim.store().rid("v1", "configmaps"),
            Some("default"),
            json!({"metadata": {"name": "fixed"}}),
        )
        .unwrap();
    let path = "/api/v1/namespaces/default/configmaps/fixed";
    for (method, ct, body, message) in [
        ("PUT", JSON, json!({"metadata": {"name": "moved"}}), "the name of the object (moved) does not match the name on the URL (fixed)"),
        ("PUT", JSON, json!({"metadata": {}}), "the name of the object () does not match the name on the URL (fixed)"),
        ("PUT", JSON, json!({"metadata": {"name": "fixed", "namespace": "kube-system"}}), "the namespace of the provided object does not match the namespace sent on the request"),
        ("PATCH", MERGE, json!({"metadata": {"name": "moved"}}), "the name of the object (moved) does not match the name on the URL (fixed)"),
        ("PATCH", MERGE, json!({"metadata": {"namespace": "kube-system"}}), "the namespace of the object (kube-system) does not match the namespace on the request (default)"),
    ] {
        let got = raw(sim.addr(), method, path, Some((ct, &body.to_string()))).await;
        assert_eq!(got.code, 400, "{method} {body}: {}", got.body);
        assert_eq!(got.json()["reason"], "BadRequest");
        assert_eq!(got.json()["message"], message, "{method} {body}");
    }
    sim.shutdown().await;
}
