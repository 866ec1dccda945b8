//! A property of the host's request builder: for arbitrary strings as the
//! resource, namespace, name and subresource of a plugin's call, the request
//! the host would send is either refused before sending, or, parsed back by
//! the simulator's own router (the parse its authorizer and request log
//! use, after percent-decoding as Go's net/http does), names exactly the
//! granted resource, namespace, name and subresource, with no query
//! parameter the host did not put there. Nothing else can pass.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube_informer::names::Subresource;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use wasm_informer_runtime::capability::api::{
    ApiRequest, ClusterApi, Exchange, PatchType, Target, Tenure, Verb,
};
use wasm_informer_runtime::capability::kube::{KubeSettings, WriteGrant};

/// Resolves the built-in table only and sends nothing.
struct Builtin;

impl ClusterApi for Builtin {
    fn call(
        &self,
        _: &ApiRequest,
        _: Instant,
        _: Option<Tenure>,
        _: &wasm_informer_runtime::Stop,
    ) -> Exchange {
        unreachable!("the property only builds requests")
    }
}

fn grants() -> KubeSettings {
    let g = |r: &str, sub: Option<&str>, verbs: &[&str], ns: Option<&[&str]>| {
        let verbs: Vec<String> = verbs.iter().map(|s| s.to_string()).collect();
        let ns: Option<Vec<String>> = ns.map(|n| n.iter().map(|s| s.to_string()).collect());
        WriteGrant::new(r, sub, &verbs, ns.as_deref()).unwrap()
    };
    KubeSettings {
        grants: vec![
            g(
                "v1/pods",
                None,
                &["patch", "delete", "get"],
                Some(&["team-a"]),
            ),
            g("v1/pods", Some("status"), &["patch"], Some(&["team-a"])),
            g("v1/configmaps", None, &["patch", "create"], None),
            g("v1/namespaces", None, &["patch"], None),
            g("rbac.authorization.k8s.io/v1/roles", None, &["patch"], None),
        ],
        ..KubeSettings::default()
    }
}

/// Strings a hostile plugin would try: path and query syntax, percent
/// escapes, dots, control characters, unicode, and the valid names they hide
/// among.
fn hostile() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("team-a".to_string()),
        Just("team-b".to_string()),
        Just("web".to_string()),
        Just("wb".to_string()),
        Just("pods".to_string()),
        Just("status".to_string()),
        Just("system:admin".to_string()),
        Just("/".to_string()),
        Just("?".to_string()),
        Just("#".to_string()),
        Just("%".to_string()),
        Just("%2F".to_string()),
        Just("%2e".to_string()),
        Just(".".to_string()),
        Just("..".to_string()),
        Just("&dryRun=None".to_string()),
        Just("=".to_string()),
        Just("\n".to_string()),
        Just(" ".to_string()),
        Just("é".to_string()),
        Just("-".to_string()),
        "[a-z0-9.-]{0,8}",
        any::<char>().prop_map(|c| c.to_string()),
    ];
    proptest::collection::vec(pieces, 0..5).prop_map(|v| v.concat())
}

/// Half the time one of `valid`, half the time a hostile string: so that
/// many calls get past the checks and are compared with the server's parse.
fn mostly(valid: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(valid).prop_map(str::to_string),
        hostile(),
    ]
}

fn resource() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just("v1/pods".to_string()),
        3 => Just("v1/configmaps".to_string()),
        2 => Just("v1/namespaces".to_string()),
        2 => Just("rbac.authorization.k8s.io/v1/roles".to_string()),
        1 => Just("v1/secrets".to_string()),
        1 => hostile(),
        1 => hostile().prop_map(|s| format!("v1/{s}")),
    ]
}

fn verb() -> impl Strategy<Value = (Verb, Option<PatchType>)> {
    prop_oneof![
        Just((Verb::Patch, Some(PatchType::Merge))),
        Just((Verb::Patch, Some(PatchType::Apply))),
        Just((Verb::Delete, None)),
        Just((Verb::Get, None)),
        Just((Verb::Create, None)),
    ]
}

/// How many generated calls passed every check and were compared with the
/// server's parse (so the property is not vacuous).
static COMPARED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_request_is_refused_or_names_exactly_what_is_granted() {
    let strategy = (
        resource(),
        proptest::option::of(mostly(&["team-a", "team-b", "wa"])),
        proptest::option::of(mostly(&["web", "wb", "cfg", "system:x", "a.b"])),
        proptest::option::weighted(0.3, mostly(&["status"])),
        verb(),
        any::<bool>(),
    );
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 50_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &strategy,
            |(resource, namespace, name, subresource, (verb, patch), dry_run)| {
                check(resource, namespace, name, subresource, verb, patch, dry_run)
            },
        )
        .unwrap();
    let compared = COMPARED.load(Ordering::Relaxed);
    assert!(
        compared >= 400,
        "only {compared} of 50000 calls were granted and compared"
    );
}

#[allow(clippy::too_many_arguments)]
fn check(
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
    verb: Verb,
    patch: Option<PatchType>,
    dry_run: bool,
) -> Result<(), TestCaseError> {
    let settings = grants();
    // The subresource is typed before anything else sees it.
    let sub = match subresource.as_deref().map(Subresource::parse) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(_)) => return Ok(()),
    };
    let Ok(target) = Target::parse(
        &Builtin,
        &resource,
        namespace.as_deref(),
        name.as_deref(),
        sub,
    ) else {
        return Ok(());
    };
    let Ok(mut r) = ApiRequest::new(verb, target) else {
        return Ok(());
    };
    r.patch = patch;
    r.dry_run = dry_run;
    r.field_manager = Some("wasm-informer/probe".into());
    let Some(grant) = settings.allowing(&r) else {
        return Ok(());
    };
    let line = r.line(Some(Duration::from_millis(1500)));
    let parsed = apisim::parse_request_path(line.method, &line.uri()).map_err(|e| {
        TestCaseError::fail(format!(
            "{} {}: the server refuses the path: {e:?}",
            line.method,
            line.uri()
        ))
    })?;
    let id = kube_informer::resource::ResourceId::parse(&grant.resource).unwrap();
    prop_assert_eq!(parsed.group.as_deref(), Some(id.group.as_str()));
    prop_assert_eq!(parsed.version.as_deref(), Some(id.version.as_str()));
    prop_assert_eq!(parsed.resource.as_deref(), Some(id.plural.as_str()));
    prop_assert_eq!(
        parsed.subresource.as_deref(),
        grant.subresource.map(|s| s.as_str())
    );
    prop_assert_eq!(
        parsed.subresource.as_deref(),
        r.target.subresource().map(|s| s.as_str())
    );
    prop_assert_eq!(parsed.name.as_deref(), r.target.name().map(|n| n.as_str()));
    if id.plural == "namespaces" {
        // The server names a Namespace's own namespace after it.
        prop_assert_eq!(
            parsed.namespace.as_deref(),
            r.target.name().map(|n| n.as_str())
        );
    } else {
        prop_assert_eq!(
            parsed.namespace.as_deref(),
            r.target.namespace().map(|n| n.as_str())
        );
        if let (Some(allowed), Some(ns)) = (&grant.namespaces, &parsed.namespace) {
            prop_assert!(
                allowed.iter().any(|a| a.as_str() == ns),
                "{ns} outside the grant"
            );
        }
    }
    prop_assert_eq!(parsed.verb.as_str(), verb.rbac());
    // The query holds exactly what the host put there.
    let query = line.query_string();
    let keys: Vec<&str> = query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| kv.split('=').next().unwrap())
        .collect();
    for k in &keys {
        prop_assert!(
            ["dryRun", "fieldManager", "force", "timeout"].contains(k),
            "{k} in {query}"
        );
    }
    prop_assert_eq!(keys.contains(&"dryRun"), dry_run && verb.writes());
    COMPARED.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
