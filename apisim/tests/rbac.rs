//! Authentication, RBAC and impersonation when `SimConfig` asks for them: for each rule a
//! request it allows and one it refuses, the verdict taken from the HTTP answer (the exact
//! Status a real apiserver sends) and from the store (nothing changes on a refusal).

use crate::common;

use apisim::{RunningSim, SimConfig};
use common::*;
use serde_json::{json, Value};

/// (method, path, body (content type, text), expected code, expected refusal message).
type Case<'a> = (&'a str, &'a str, Option<(&'a str, &'a str)>, u16, String);

const SA: &str = "system:serviceaccount:wasm-informer:wasm-informer-p";

async fn rbac_sim() -> RunningSim {
    start(SimConfig {
        rbac: true,
        ..SimConfig::default()
    })
    .await
}

/// One request with optional bearer token, impersonated user and body.
async fn call(
    sim: &RunningSim,
    token: Option<&str>,
    as_user: Option<&str>,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> Raw {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut h: Vec<(&str, &str)> = Vec::new();
    if let Some(a) = &auth {
        h.push(("Authorization", a));
    }
    if let Some(u) = as_user {
        h.push(("Impersonate-User", u));
    }
    raw_with(sim.addr(), method, path, &h, body).await
}

fn create(sim: &RunningSim, api_version: &str, plural: &str, ns: Option<&str>, obj: Value) {
    let s = sim.store();
    s.create(s.rid(api_version, plural), ns, obj).unwrap();
}

fn role(sim: &RunningSim, ns: &str, name: &str, rules: Value) {
    create(
        sim,
        "rbac.authorization.k8s.io/v1",
        "roles",
        Some(ns),
        json!({"metadata": {"name": name, "namespace": ns}, "rules": rules}),
    );
}

fn cluster_role(sim: &RunningSim, name: &str, rules: Value) {
    create(
        sim,
        "rbac.authorization.k8s.io/v1",
        "clusterroles",
        None,
        json!({"metadata": {"name": name}, "rules": rules}),
    );
}

fn binding(
    sim: &RunningSim,
    ns: Option<&str>,
    name: &str,
    role_kind: &str,
    role: &str,
    subjects: Value,
) {
    let (plural, meta) = match ns {
        Some(ns) => ("rolebindings", json!({"name": name, "namespace": ns})),
        None => ("clusterrolebindings", json!({"name": name})),
    };
    create(
        sim,
        "rbac.authorization.k8s.io/v1",
        plural,
        ns,
        json!({"metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}, "subjects": subjects}),
    );
}

/// A Role and a RoleBinding of the same name granting it to `subjects`.
fn grant(sim: &RunningSim, ns: &str, name: &str, rules: Value, subjects: Value) {
    role(sim, ns, name, rules);
    binding(sim, Some(ns), name, "Role", name, subjects);
}

fn ns(sim: &RunningSim, name: &str) {
    sim.store().create_namespace(name).unwrap();
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"a": "b"}},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

/// The stored state of everything but the RBAC objects the test made: what a refusal must
/// leave exactly as it was.
fn state(sim: &RunningSim) -> u64 {
    sim.store().current_rv()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_allows_what_it_grants_and_refuses_the_rest_with_the_apiservers_403() {
    let sim = rbac_sim().await;
    for n in ["team-a", "team-b", "wasm-informer"] {
        ns(&sim, n);
    }
    let s = sim.store();
    for n in ["team-a", "team-b"] {
        s.create(s.rid("v1", "pods"), Some(n), pod("web")).unwrap();
        s.create(s.rid("v1", "pods"), Some(n), pod("db")).unwrap();
        s.create(
            s.rid("v1", "configmaps"),
            Some(n),
            configmap("cfg", n, json!({})),
        )
        .unwrap();
    }
    sim.tokens().add("sa-token", SA, &[]);
    let sa_subject = json!([{"kind": "ServiceAccount", "name": "wasm-informer-p", "namespace": "wasm-informer"}]);
    // Role in team-a: patch pods named web; get/list configmaps; update pods/status.
    role(
        &sim,
        "team-a",
        "p",
        json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"], "resourceNames": ["web"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]}]),
    );
    binding(&sim, Some("team-a"), "p", "Role", "p", sa_subject.clone());
    // A ClusterRole granted only in team-b through a RoleBinding: delete configmaps (any verb
    // spelled '*' on leases).
    cluster_role(
        &sim,
        "cm-deleter",
        json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["*"], "verbs": ["*"]}]),
    );
    binding(
        &sim,
        Some("team-b"),
        "del",
        "ClusterRole",
        "cm-deleter",
        sa_subject.clone(),
    );
    // Group subject, cluster-wide: list namespaces for everyone in system:serviceaccounts.
    cluster_role(
        &sim,
        "ns-list",
        json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}]),
    );
    binding(
        &sim,
        None,
        "ns-list",
        "ClusterRole",
        "ns-list",
        json!([{"kind": "Group", "name": "system:serviceaccounts"}]),
    );

    let tok = Some("sa-token");
    let merge = "application/merge-patch+json";
    let p = r#"{"metadata":{"labels":{"x":"y"}}}"#;
    let u = r#"User "system:serviceaccount:wasm-informer:wasm-informer-p""#;
    // (method, path, body, expected code, expected message for a refusal)
    let cases: Vec<Case> = vec![
        (
            "PATCH",
            "/api/v1/namespaces/team-a/pods/web",
            Some((merge, p)),
            200,
            String::new(),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/team-a/pods/db",
            Some((merge, p)),
            403,
            format!(
                r#"pods "db" is forbidden: {u} cannot patch resource "pods" in API group "" in the namespace "team-a""#
            ),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/team-b/pods/web",
            Some((merge, p)),
            403,
            format!(
                r#"pods "web" is forbidden: {u} cannot patch resource "pods" in API group "" in the namespace "team-b""#
            ),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/team-a/pods/web",
            None,
            403,
            format!(
                r#"pods "web" is forbidden: {u} cannot delete resource "pods" in API group "" in the namespace "team-a""#
            ),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/team-a/pods/db/status",
            Some((merge, r#"{"status":{"phase":"Running"}}"#)),
            200,
            String::new(),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/team-a/pods/web%2Fstatus",
            Some((merge, r#"{"status":{"phase":"Failed"}}"#)),
            200,
            String::new(),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/team-b/pods/db/status",
            Some((merge, r#"{"status":{"phase":"Running"}}"#)),
            403,
            format!(
                r#"pods "db" is forbidden: {u} cannot patch resource "pods/status" in API group "" in the namespace "team-b""#
            ),
        ),
        (
            "GET",
            "/api/v1/namespaces/team-a/configmaps",
            None,
            200,
            String::new(),
        ),
        (
            "GET",
            "/api/v1/namespaces/team-a/configmaps?watch=true&timeoutSeconds=1",
            None,
            403,
            format!(
                r#"configmaps is forbidden: {u} cannot watch resource "configmaps" in API group "" in the namespace "team-a""#
            ),
        ),
        (
            "GET",
            "/api/v1/configmaps",
            None,
            403,
            format!(
                r#"configmaps is forbidden: {u} cannot list resource "configmaps" in API group "" at the cluster scope"#
            ),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/team-b/configmaps/cfg",
            None,
            200,
            String::new(),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/team-a/configmaps/cfg",
            None,
            403,
            format!(
                r#"configmaps "cfg" is forbidden: {u} cannot delete resource "configmaps" in API group "" in the namespace "team-a""#
            ),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/team-b/configmaps",
            None,
            403,
            format!(
                r#"configmaps is forbidden: {u} cannot deletecollection resource "configmaps" in API group "" in the namespace "team-b""#
            ),
        ),
        (
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/team-b/leases",
            Some(("application/json", r#"{"metadata":{"name":"l"}}"#)),
            201,
            String::new(),
        ),
        (
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/team-a/leases",
            Some(("application/json", r#"{"metadata":{"name":"l"}}"#)),
            403,
            format!(
                r#"leases.coordination.k8s.io is forbidden: {u} cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "team-a""#
            ),
        ),
        ("GET", "/api/v1/namespaces", None, 200, String::new()),
        (
            "GET",
            "/api/v1/namespaces/team-a",
            None,
            403,
            format!(
                r#"namespaces "team-a" is forbidden: {u} cannot get resource "namespaces" in API group "" in the namespace "team-a""#
            ),
        ),
        // Discovery: allowed to every authenticated user by the bootstrap system:discovery.
        ("GET", "/apis", None, 200, String::new()),
        ("GET", "/api/v1", None, 200, String::new()),
    ];
    for (method, path, body, code, msg) in &cases {
        let before = state(&sim);
        let r = call(&sim, tok, None, method, path, *body).await;
        assert_eq!(r.code, *code, "{method} {path}: {}", r.body);
        if *code == 403 {
            let st = r.json();
            assert_eq!(st["message"], msg.as_str(), "{method} {path}");
            assert_eq!(
                (st["reason"].as_str(), st["code"].as_u64()),
                (Some("Forbidden"), Some(403))
            );
            assert_eq!(
                state(&sim),
                before,
                "{method} {path}: a refusal changed the store"
            );
        }
    }
    let web = s.get(s.rid("v1", "pods"), "team-a", "web").unwrap().value();
    assert_eq!(web["metadata"]["labels"]["x"], "y");
    assert_eq!(
        web["status"]["phase"], "Failed",
        "web%2Fstatus reached pods/status"
    );
    assert!(
        s.get(s.rid("v1", "pods"), "team-b", "web").unwrap().value()["metadata"]["labels"]["x"]
            .is_null()
    );
    assert!(s.get(s.rid("v1", "configmaps"), "team-a", "cfg").is_ok());
    assert!(s.get(s.rid("v1", "configmaps"), "team-b", "cfg").is_err());
    // The 403 body is exactly the apiserver's Status, details included.
    let r = call(
        &sim,
        tok,
        None,
        "DELETE",
        "/api/v1/namespaces/team-a/pods/web",
        None,
    )
    .await;
    assert_eq!(
        r.body,
        format!(
            r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"pods \"web\" is forbidden: User \"{SA}\" cannot delete resource \"pods\" in API group \"\" in the namespace \"team-a\"","reason":"Forbidden","details":{{"kind":"pods","name":"web"}},"code":403}}"#
        )
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_that_creates_also_needs_create() {
    let sim = rbac_sim().await;
    ns(&sim, "team-a");
    sim.tokens().add("t", "alice", &[]);
    grant(
        &sim,
        "team-a",
        "patcher",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}]),
        json!([{"kind": "User", "name": "alice"}]),
    );
    let apply =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"},"data":{"a":"1"}}"#;
    let path = "/api/v1/namespaces/team-a/configmaps/new?fieldManager=m";
    let before = state(&sim);
    let r = call(
        &sim,
        Some("t"),
        None,
        "PATCH",
        path,
        Some(("application/apply-patch+yaml", apply)),
    )
    .await;
    assert_eq!(r.code, 403, "{}", r.body);
    assert_eq!(
        r.json()["message"],
        r#"configmaps "new" is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "team-a""#
    );
    assert_eq!(state(&sim), before);
    // With create as well, the same apply creates; and patch alone then updates it.
    grant(
        &sim,
        "team-a",
        "creator",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
        json!([{"kind": "User", "name": "alice"}]),
    );
    let r = call(
        &sim,
        Some("t"),
        None,
        "PATCH",
        path,
        Some(("application/apply-patch+yaml", apply)),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    sim.store()
        .delete(
            sim.store()
                .rid("rbac.authorization.k8s.io/v1", "rolebindings"),
            "team-a",
            "creator",
            None,
        )
        .unwrap();
    let apply2 = apply.replace("\"1\"", "\"2\"");
    let r = call(
        &sim,
        Some("t"),
        None,
        "PATCH",
        path,
        Some(("application/apply-patch+yaml", &apply2)),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let s = sim.store();
    assert_eq!(
        s.get(s.rid("v1", "configmaps"), "team-a", "new")
            .unwrap()
            .value()["data"]["a"],
        "2"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_names_every_user_and_refuses_unknown_tokens() {
    let sim = start(SimConfig {
        authentication: true,
        ..SimConfig::default()
    })
    .await;
    sim.tokens().add("t", "bob", &["dev"]);
    let r = call(&sim, Some("nope"), None, "GET", "/api/v1/namespaces", None).await;
    assert_eq!(
        (r.code, r.body.as_str()),
        (
            401,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        )
    );
    // Authentication without RBAC allows everyone, anonymous included.
    assert_eq!(
        call(&sim, None, None, "GET", "/api/v1/namespaces", None)
            .await
            .code,
        200
    );
    assert_eq!(
        call(&sim, Some("t"), None, "GET", "/api/v1/namespaces", None)
            .await
            .code,
        200
    );
    let users: Vec<String> = sim
        .request_log()
        .entries()
        .iter()
        .map(|r| r.user.clone())
        .collect();
    assert_eq!(users, vec!["", "system:anonymous", "bob"]);
    sim.shutdown().await;
    // With RBAC, the anonymous user may not even discover the API, but may read /version.
    let sim = rbac_sim().await;
    let r = call(&sim, None, None, "GET", "/api", None).await;
    assert_eq!(r.code, 403);
    assert_eq!(
        r.json()["message"],
        r#"forbidden: User "system:anonymous" cannot get path "/api""#
    );
    assert_eq!(
        call(&sim, None, None, "GET", "/version", None).await.code,
        200
    );
    // The admin token is in system:masters.
    let admin = sim.config().admin_token.clone();
    assert_eq!(
        call(&sim, Some(&admin), None, "GET", "/api/v1/secrets", None)
            .await
            .code,
        200
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_needs_the_impersonate_permission_and_then_acts_as_the_account() {
    let sim = rbac_sim().await;
    for n in ["team-a", "wasm-informer"] {
        ns(&sim, n);
    }
    let s = sim.store();
    s.create(s.rid("v1", "pods"), Some("team-a"), pod("web"))
        .unwrap();
    sim.tokens().add("host", "wasm-informer-host", &[]);
    // The host may impersonate exactly the plugin's service account.
    grant(
        &sim,
        "wasm-informer",
        "imp",
        json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"], "resourceNames": ["wasm-informer-p"]}]),
        json!([{"kind": "User", "name": "wasm-informer-host"}]),
    );
    // The plugin's account may patch pods in team-a, the host itself may not.
    grant(
        &sim,
        "team-a",
        "p",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]),
        json!([{"kind": "Group", "name": "system:serviceaccounts:wasm-informer"}]),
    );
    let p = Some((
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    ));
    let path = "/api/v1/namespaces/team-a/pods/web";
    let r = call(&sim, Some("host"), None, "PATCH", path, p).await;
    assert_eq!(r.code, 403);
    let before = state(&sim);
    let other = "system:serviceaccount:wasm-informer:wasm-informer-q";
    let r = call(&sim, Some("host"), Some(other), "PATCH", path, p).await;
    assert_eq!(r.code, 403);
    assert_eq!(
        r.json()["message"],
        r#"serviceaccounts "wasm-informer-q" is forbidden: User "wasm-informer-host" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "wasm-informer""#
    );
    let r = call(&sim, Some("host"), Some("alice"), "PATCH", path, p).await;
    assert_eq!(
        r.json()["message"],
        r#"users "alice" is forbidden: User "wasm-informer-host" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    assert_eq!(state(&sim), before, "refused impersonation changed nothing");
    // Impersonating the allowed account, the request acts with the account's groups.
    let r = call(&sim, Some("host"), Some(SA), "PATCH", path, p).await;
    assert_eq!(r.code, 200, "{}", r.body);
    let rec = sim.request_log().entries().pop().unwrap();
    assert_eq!(
        (rec.user.as_str(), rec.impersonated_user.as_str()),
        ("wasm-informer-host", SA)
    );
    // ... and is refused what the account may not do, in the account's name.
    let r = call(&sim, Some("host"), Some(SA), "DELETE", path, None).await;
    assert_eq!(
        r.json()["message"],
        format!(
            r#"pods "web" is forbidden: User "{SA}" cannot delete resource "pods" in API group "" in the namespace "team-a""#
        )
    );
    assert!(s.get(s.rid("v1", "pods"), "team-a", "web").is_ok());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_to_a_missing_role_says_so_in_the_refusal() {
    let sim = rbac_sim().await;
    ns(&sim, "team-a");
    sim.tokens().add("t", "carol", &[]);
    binding(
        &sim,
        Some("team-a"),
        "b",
        "ClusterRole",
        "gone",
        json!([{"kind": "User", "name": "carol"}]),
    );
    let r = call(
        &sim,
        Some("t"),
        None,
        "GET",
        "/api/v1/namespaces/team-a/pods",
        None,
    )
    .await;
    assert_eq!(
        r.json()["message"],
        r#"pods is forbidden: User "carol" cannot list resource "pods" in API group "" in the namespace "team-a": RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_subject_access_review_answers_as_the_authorizer_decides() {
    let sim = rbac_sim().await;
    ns(&sim, "team-a");
    sim.tokens().add("t", "dave", &[]);
    role(
        &sim,
        "team-a",
        "r",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]),
    );
    binding(
        &sim,
        Some("team-a"),
        "rb",
        "Role",
        "r",
        json!([{"kind": "User", "name": "dave"}]),
    );
    let review = |verb: &str, ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"namespace": ns, "verb": verb, "resource": "pods"}}})
        .to_string()
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let r = call(
        &sim,
        Some("t"),
        None,
        "POST",
        path,
        Some(("application/json", &review("patch", "team-a"))),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        r.json()["status"],
        json!({"allowed": true, "reason": r#"RBAC: allowed by RoleBinding "rb/team-a" of Role "r" to User "dave""#})
    );
    let r = call(
        &sim,
        Some("t"),
        None,
        "POST",
        path,
        Some(("application/json", &review("delete", "team-a"))),
    )
    .await;
    assert_eq!(r.json()["status"], json!({"allowed": false}));
    let d = call(
        &sim,
        Some("t"),
        None,
        "GET",
        "/apis/authorization.k8s.io/v1",
        None,
    )
    .await;
    assert!(d.json()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["name"] == "selfsubjectaccessreviews"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonated_groups_are_checked_and_then_authorize_the_request() {
    let sim = rbac_sim().await;
    ns(&sim, "team-a");
    sim.tokens().add("host", "wasm-informer-host", &[]);
    grant(
        &sim,
        "team-a",
        "devs",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
        json!([{"kind": "Group", "name": "devs"}]),
    );
    let admin = format!("Bearer {}", sim.config().admin_token);
    let pods = "/api/v1/namespaces/team-a/pods";
    let with = |h: Vec<(&'static str, String)>| {
        let sim = &sim;
        async move {
            let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            raw_with(sim.addr(), "GET", pods, &h, None).await
        }
    };
    // As eve alone: no binding names her.
    let r = with(vec![
        ("Authorization", admin.clone()),
        ("Impersonate-User", "eve".into()),
    ])
    .await;
    assert_eq!(r.code, 403);
    assert_eq!(
        r.json()["message"],
        r#"pods is forbidden: User "eve" cannot list resource "pods" in API group "" in the namespace "team-a""#
    );
    // As eve in group devs: the group's binding allows the list.
    let r = with(vec![
        ("Authorization", admin.clone()),
        ("Impersonate-User", "eve".into()),
        ("Impersonate-Group", "devs".into()),
    ])
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    // The host may impersonate neither the user nor the group.
    let r = with(vec![
        ("Authorization", "Bearer host".into()),
        ("Impersonate-User", "eve".into()),
        ("Impersonate-Group", "devs".into()),
    ])
    .await;
    assert_eq!(
        r.json()["message"],
        r#"users "eve" is forbidden: User "wasm-informer-host" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    // A group without a user is the impersonation filter's internal error.
    let r = with(vec![
        ("Authorization", admin.clone()),
        ("Impersonate-Group", "devs".into()),
    ])
    .await;
    assert_eq!(r.code, 500);
    assert_eq!(
        r.body,
        format!("Internal Server Error: \"{pods}\": requested [{{Group  devs    }}] without impersonating a user\n")
    );
    sim.shutdown().await;
}
