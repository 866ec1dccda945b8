//! Real clients against a simulator that enforces authentication, RBAC and impersonation:
//! kubectl (`auth can-i`, `--as`, a plain refused write) and kube-client (its own token, and
//! impersonation). Verdicts come from the clients' answers and the store's state.
//!
//! The simulator serves HTTPS here (`SimConfig::tls`): kubectl reads a kubeconfig's credentials
//! and impersonation only for an https server. kubectl must be installed; without it these
//! tests fail, naming it.

use crate::common;

use std::path::Path;
use std::process::Stdio;

use apisim::{RunningSim, SimConfig};
use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

const SA: &str = "system:serviceaccount:wasm-informer:wasm-informer-p";

async fn kubectl(dir: &Path, kubeconfig: &str, args: &[&str]) -> Out {
    let mut c = tokio::process::Command::new(kubectl_path());
    c.args(args)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .env("KUBECONFIG", dir.join(kubeconfig))
        .env("HOME", dir)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    kubectl_output(c, args).await
}

/// A simulator enforcing RBAC with namespaces team-a and wasm-informer, pod `web` in team-a,
/// and the plugin's service account allowed to get, list and patch pods in team-a; the host
/// user `wasm-informer-host` may only impersonate that account.
async fn cluster() -> RunningSim {
    // kubectl sends its token and `--as` only over https.
    let sim = start(SimConfig {
        rbac: true,
        tls: true,
        ..SimConfig::default()
    })
    .await;
    let s = sim.store();
    s.create_namespace("team-a").unwrap();
    s.create_namespace("wasm-informer").unwrap();
    s.create(
        s.rid("v1", "pods"),
        Some("team-a"),
        json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .unwrap();
    let rbac = |plural: &str, ns: &str, obj: serde_json::Value| {
        s.create(s.rid("rbac.authorization.k8s.io/v1", plural), Some(ns), obj)
            .unwrap();
    };
    rbac(
        "roles",
        "team-a",
        json!({"metadata": {"name": "p"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]}]}),
    );
    rbac(
        "rolebindings",
        "team-a",
        json!({"metadata": {"name": "p"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "p"},
        "subjects": [{"kind": "ServiceAccount", "name": "wasm-informer-p", "namespace": "wasm-informer"}]}),
    );
    rbac(
        "roles",
        "wasm-informer",
        json!({"metadata": {"name": "imp"}, "rules": [
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"], "resourceNames": ["wasm-informer-p"]}]}),
    );
    rbac(
        "rolebindings",
        "wasm-informer",
        json!({"metadata": {"name": "imp"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "imp"},
        "subjects": [{"kind": "User", "name": "wasm-informer-host"}]}),
    );
    sim.tokens().add("host-token", "wasm-informer-host", &[]);
    sim.tokens().add("sa-token", SA, &[]);
    sim
}

fn web_labels(sim: &RunningSim) -> serde_json::Value {
    let s = sim.store();
    s.get(s.rid("v1", "pods"), "team-a", "web").unwrap().value()["metadata"]["labels"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_answers_as_the_server_authorizes() {
    let sim = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    sim.write_kubeconfig(dir.path().join("admin")).unwrap();
    sim.write_kubeconfig_for(dir.path().join("host"), "host-token")
        .unwrap();
    let d = dir.path();
    // (kubeconfig, args, expected answer)
    let cases: &[(&str, &[&str], bool)] = &[
        (
            "admin",
            &["auth", "can-i", "patch", "pods", "-n", "team-a"],
            true,
        ),
        (
            "admin",
            &["auth", "can-i", "patch", "pods", "-n", "team-a", "--as", SA],
            true,
        ),
        (
            "admin",
            &[
                "auth", "can-i", "delete", "pods", "-n", "team-a", "--as", SA,
            ],
            false,
        ),
        (
            "admin",
            &[
                "auth", "can-i", "patch", "pods", "-n", "default", "--as", SA,
            ],
            false,
        ),
        (
            "admin",
            &[
                "auth",
                "can-i",
                "patch",
                "pods",
                "--subresource",
                "status",
                "-n",
                "team-a",
                "--as",
                SA,
            ],
            false,
        ),
        // `pods/web` names an object: the rule has no resourceNames, so any name is allowed.
        (
            "admin",
            &[
                "auth", "can-i", "patch", "pods/web", "-n", "team-a", "--as", SA,
            ],
            true,
        ),
        (
            "host",
            &["auth", "can-i", "patch", "pods", "-n", "team-a"],
            false,
        ),
        (
            "host",
            &[
                "auth",
                "can-i",
                "impersonate",
                "serviceaccounts/wasm-informer-p",
                "-n",
                "wasm-informer",
            ],
            true,
        ),
        (
            "host",
            &["auth", "can-i", "patch", "pods", "-n", "team-a", "--as", SA],
            true,
        ),
    ];
    for (kc, args, want) in cases {
        let o = kubectl(d, kc, args).await;
        let answer = o.stdout.trim();
        assert_eq!(
            (o.ok, answer.starts_with("yes")),
            (*want, *want),
            "{kc}: kubectl {args:?}: stdout {:?} stderr {:?}",
            o.stdout,
            o.stderr
        );
        if !want {
            assert!(answer.starts_with("no"), "{answer}");
        }
    }
    let o = kubectl(
        d,
        "admin",
        &["auth", "can-i", "--list", "-n", "team-a", "--as", SA],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("pods "))
        .unwrap_or_else(|| panic!("no pods rule listed:\n{}", o.stdout));
    assert!(line.contains("[get list patch]"), "{line}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_writes_are_enforced_for_as_and_for_a_token_of_its_own() {
    let sim = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sim.write_kubeconfig(d.join("admin")).unwrap();
    sim.write_kubeconfig_for(d.join("host"), "host-token")
        .unwrap();
    sim.write_kubeconfig_for(d.join("sa"), "sa-token").unwrap();
    let forbidden_delete = format!(
        r#"Error from server (Forbidden): pods "web" is forbidden: User "{SA}" cannot delete resource "pods" in API group "" in the namespace "team-a""#
    );
    // The account's own token and the admin impersonating it: delete refused, label allowed.
    for (kc, extra) in [
        ("sa", vec![]),
        ("admin", vec!["--as", SA]),
        ("host", vec!["--as", SA]),
    ] {
        let mut args = vec!["delete", "pod", "web", "-n", "team-a"];
        args.extend(&extra);
        let o = kubectl(d, kc, &args).await;
        assert!(!o.ok, "{kc}: delete must be refused: {}", o.stdout);
        assert!(o.stderr.contains(&forbidden_delete), "{kc}: {}", o.stderr);
        let mut args = vec!["label", "pod", "web", "-n", "team-a", "--overwrite"];
        let label = format!("by={kc}");
        args.push(&label);
        args.extend(&extra);
        let o = kubectl(d, kc, &args).await;
        assert!(o.ok, "{kc}: label: {}", o.stderr);
        assert_eq!(web_labels(&sim)["by"], kc, "{kc}");
    }
    // The host may impersonate only that account.
    let o = kubectl(
        d,
        "host",
        &[
            "get",
            "pods",
            "-n",
            "team-a",
            "--as",
            "system:serviceaccount:wasm-informer:other",
        ],
    )
    .await;
    assert!(!o.ok);
    assert!(
        o.stderr.contains(r#"serviceaccounts "other" is forbidden: User "wasm-informer-host" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "wasm-informer""#),
        "{}",
        o.stderr
    );
    let s = sim.store();
    assert!(
        s.get(s.rid("v1", "pods"), "team-a", "web").is_ok(),
        "no delete got through"
    );
    let impersonated: Vec<_> = sim
        .request_log()
        .entries()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.impersonated_user == SA)
        .map(|r| r.user)
        .collect();
    assert_eq!(impersonated, vec!["apisim-admin", "wasm-informer-host"]);
    sim.shutdown().await;
}

async fn kube_client(sim: &RunningSim, token: &str, as_user: Option<&str>) -> kube::Client {
    let mut kc = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml_for(token)).unwrap();
    if let Some(u) = as_user {
        kc.auth_infos[0].auth_info.as_mut().unwrap().impersonate = Some(u.to_string());
    }
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.default_retry = false;
    kube::Client::try_from(cfg).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_client_gets_the_servers_403_and_its_allowed_writes_land() {
    let sim = cluster().await;
    for (token, as_user) in [("sa-token", None), ("host-token", Some(SA))] {
        let pods: Api<Pod> = Api::namespaced(kube_client(&sim, token, as_user).await, "team-a");
        let who = format!("{token} as {as_user:?}");
        let p = json!({"metadata": {"labels": {"who": token}}});
        pods.patch("web", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_or_else(|e| panic!("{who}: {e}"));
        assert_eq!(web_labels(&sim)["who"], token);
        let e = pods
            .delete("web", &DeleteParams::default())
            .await
            .unwrap_err();
        match e {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 403, "{who}");
                assert_eq!(
                    s.message,
                    format!(
                        r#"pods "web" is forbidden: User "{SA}" cannot delete resource "pods" in API group "" in the namespace "team-a""#
                    )
                );
            }
            other => panic!("{who}: {other}"),
        }
        let other: Api<Pod> = Api::namespaced(kube_client(&sim, token, as_user).await, "default");
        assert!(other.list(&Default::default()).await.is_err(), "{who}");
    }
    // The host's own identity, without impersonation, may not even read the pods.
    let pods: Api<Pod> = Api::namespaced(kube_client(&sim, "host-token", None).await, "team-a");
    match pods.get("web").await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!(s.code, 403),
        other => panic!("{other}"),
    }
    let s = sim.store();
    assert!(s.get(s.rid("v1", "pods"), "team-a", "web").is_ok());
    sim.shutdown().await;
}
