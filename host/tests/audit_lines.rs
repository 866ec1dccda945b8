//! The audit line is honest: for every write it is rendered from the request
//! the host sent, so its method, path and query are exactly what the server
//! received (the simulator's request log is the oracle), and `dry_run` is
//! read from that query; a refused call's line escapes and bounds whatever the
//! plugin passed, so no plugin can forge a line or flood the log with one.

mod probe_support;

use std::collections::BTreeMap;

use probe_support::*;
use serde_json::json;
use wasm_informer::commands::test::capture::{Effect, Effects};
use wasm_informer_runtime::capability::kube::KubeSettings;

fn audit_lines(effects: &Effects) -> Vec<BTreeMap<String, String>> {
    effects
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Audit(f) => Some(f),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_audit_line_says_what_the_server_received() {
    // Every thread of this test binary (the plugin's own among them) logs
    // into the capture.
    let effects = Effects::default();
    tracing::subscriber::set_global_default(effects.subscriber()).unwrap();
    let w = world().await;
    let web = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        grants: vec![grant(
            "v1/pods",
            None,
            &["patch", "delete"],
            Some(&["team-a"]),
        )],
        write_qps: 0.0,
        ..KubeSettings::default()
    };
    let forged = format!(
        "web\nINFO audit: write plugin=other outcome=\"ok\" {}",
        "x".repeat(500)
    );
    let ops = json!([
        label_patch("team-a", "web", "one"),
        { "call": "delete", "resource": "v1/pods", "namespace": "team-a", "name": "gone" },
        { "call": "patch", "resource": "v1/pods", "namespace": "team-b", "name": "web",
          "patch": "merge", "body": {} },
        { "call": "patch", "resource": "v1/pods", "namespace": "team-a", "name": forged,
          "patch": "merge", "body": {} },
    ]);
    let mut dry = settings.clone();
    dry.dry_run = true;
    for s in [settings, dry] {
        let (mut r, _) = w.probe(ops.clone(), s.clone()).await;
        effects.take();
        w.sim.request_log().clear();
        trigger(&mut r, &web).await;
        let lines = audit_lines(&effects);
        let seen = w.sim.request_log().entries();
        let sent: Vec<_> = lines.iter().filter(|l| l["sent"] == "true").collect();
        assert_eq!(sent.len(), seen.len(), "{lines:?}\n{seen:?}");
        for (line, rec) in sent.iter().zip(&seen) {
            assert_eq!(line["method"], rec.method, "{line:?}");
            assert_eq!(line["path"], rec.path, "{line:?}");
            assert_eq!(line["query"], rec.query, "{line:?}");
            let dry_run = rec.param("dryRun").as_deref() == Some("All");
            assert_eq!(line["dry_run"], dry_run.to_string(), "{line:?}");
            assert_eq!(dry_run, s.dry_run);
        }
        // The refused ones: the namespace outside the grant, the forged name.
        let refused: Vec<_> = lines.iter().filter(|l| l["sent"] == "false").collect();
        assert_eq!(refused.len(), 2, "{lines:?}");
        for l in &refused {
            for (k, v) in l.iter() {
                assert!(!v.contains('\n'), "{k} carries a newline: {v:?}");
                assert!(v.len() < 400, "{k} is not bounded: {} bytes", v.len());
            }
        }
        let forged_line = refused.iter().find(|l| l["outcome"] == "invalid").unwrap();
        assert!(forged_line["reason"].contains("\\n"), "{forged_line:?}");
        assert!(forged_line["reason"].contains("bytes)"), "{forged_line:?}");
    }
}
