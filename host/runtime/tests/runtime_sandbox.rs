//! The sandbox, from inside: a plugin cannot read files, the environment or
//! its arguments, cannot open sockets or resolve names, and a cache read of a
//! resource outside its manifest's `read` list is `forbidden` (an error result,
//! never a trap). Its stdout and stderr reach the host log tagged with its name.

use crate::runtime_support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use kube_informer::handler::{Delivery, Handler};
use runtime_support::*;
use serde_json::{json, Value};
use wasm_informer_runtime::PluginLimits;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_cannot_reach_files_env_or_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();

    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 1);
    let mut r = start(
        &engine,
        cache,
        "probe",
        plugin_artifacts::SANDBOX_PROBE,
        json!({"tcp_port": port, "allowed": "v1/pods", "denied": "v1/secrets"}),
        &["v1/pods"],
        PluginLimits::default(),
    )
    .await;
    let report = match r.handle(added(&pods[0])).await {
        Delivery::HandlerError(m) => m,
        other => panic!("the probe reports through its error result, got {other:?}"),
    };
    let v: Value = serde_json::from_str(&report).unwrap();
    for probe in [
        "read_file",
        "read_file_relative",
        "read_dir",
        "write_file",
        "env_home",
        "tcp_connect",
        "udp_bind",
        "dns",
        "cache_denied",
    ] {
        assert!(
            v[probe].get("err").is_some(),
            "probe {probe} should have failed: {report}"
        );
    }
    assert_eq!(v["env_count"], 0, "{report}");
    assert_eq!(v["args_count"], 0, "{report}");
    assert!(
        v["cache_denied"]["err"]
            .as_str()
            .unwrap()
            .contains("orbidden"),
        "{report}"
    );
    assert_eq!(v["cache_allowed"]["ok"], "true", "{report}");
    // Nothing reached the host's listener.
    assert_eq!(
        listener.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    // The probe ran in a live instance: no trap, one handler error.
    let snap = r.status().snapshot();
    assert_eq!(snap.traps, 0);
    assert_eq!(snap.errors, 1);
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture() -> &'static Captured {
    static C: OnceLock<Captured> = OnceLock::new();
    C.get_or_init(|| {
        let c = Captured::default();
        let w = c.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || w.clone())
            .init();
        c
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_stderr_and_log_lines_are_tagged_with_the_plugin_name() {
    let captured = capture();
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 1);
    let mut r = start(
        &engine,
        cache,
        "flood-3",
        plugin_artifacts::LOG_FLOOD,
        json!({"lines": 3}),
        &[],
        PluginLimits::default(),
    )
    .await;
    assert_eq!(r.handle(added(&pods[0])).await, Delivery::Ok);
    let snap = r.status().snapshot();
    assert_eq!(snap.log_lines, 9, "{snap:?}");
    assert_eq!(snap.log_dropped, 0);
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    for needle in [
        "flood default/p0 line 2",
        "stdout flood default/p0 line 2",
        "stderr flood default/p0 line 2",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no log line with {needle:?} in:\n{text}"));
        assert!(line.contains("plugin=flood-3"), "{line}");
    }
    assert!(text
        .lines()
        .any(|l| l.contains("stream=\"stdout\"") || l.contains("stream=stdout")));
}
