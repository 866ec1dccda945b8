//! I9 end to end: with one good plugin running against the embedded simulator,
//! each bad manifest dropped into the config directory is rejected with an exact
//! message naming the file and the reason, and the running set is unchanged.
//! Cases: bad TOML, an unknown key, an unknown resource, a duplicate name, a
//! missing wasm, a component of the wrong world, and a garbage .wasm.

use crate::host_support;

use std::time::Duration;

use host_support::*;

struct Case {
    name: &'static str,
    manifest: String,
    /// The exact error, with `{dir}` standing for the config directory.
    expected: String,
}

#[test]
fn bad_configs_are_rejected_with_exact_messages_and_running_set_unchanged() {
    let fx = Fixture::new("");
    let good_wasm = fx.copy_wasm(plugin_artifacts::POD_READY_COUNTER, "good");
    fx.copy_wasm(plugin_artifacts::FIXTURE_WRONG_WORLD, "wrong-world");
    fx.write("wasm/garbage.wasm", b"\0asm garbage");
    fx.write(
        "plugins/good.toml",
        "name = \"good\"\nwasm = \"../wasm/good.wasm\"\nresources = [\"v1/pods\"]\n",
    );
    let mut host = HostProc::run_sim(fx.dir().to_str().unwrap(), &[]);
    let addr = host.metrics_addr();
    host.wait_line(&["running 1 plugin(s): good"], LONG);
    let baseline = wait_metrics(addr, LONG, "good running", |t| {
        running_plugins(t) == vec!["good".to_string()]
    });
    assert_eq!(sample(&baseline, "wasm_informer_config_errors"), Some(0.0));

    let dir = fx.dir().display().to_string();
    let ok_head = "wasm = \"../wasm/good.wasm\"\nresources = [\"v1/pods\"]\n";
    let cases = vec![
        Case {
            name: "bad TOML",
            manifest: "name = \"bad\"\nwasm = \"../wasm/good.wasm\nresources = [\"v1/pods\"]\n".into(),
            expected: "config rejected: {dir}/plugins/bad.toml:2:26: invalid TOML: invalid basic string, expected `\"`".into(),
        },
        Case {
            name: "unknown key",
            manifest: format!("name = \"bad\"\n{ok_head}fuel = 10\n"),
            expected: "config rejected: {dir}/plugins/bad.toml:4:1: key `fuel`: unknown key (expected one of `name`, `wasm`, `resources`, `for`, `owns`, `watches`, `workers`, `retry_base_delay_ms`, `retry_max_delay_ms`, `retry_qps`, `retry_burst`, `max_low_priority_wait_ms`, `namespace`, `label_selector`, `read`, `queue_capacity`, `fuel_per_event`, `timeout_ms`, `memory_mb`, `resync_seconds`, `quarantine_seconds`, `config`, `write`, `events`, `dry_run`, `write_qps`, `write_burst`, `write_timeout_ms`, `api_time_per_event_ms`, `max_request_bytes`, `max_answer_bytes`, `shadow_of`)".into(),
        },
        Case {
            name: "unknown resource",
            manifest: "name = \"bad\"\nwasm = \"../wasm/good.wasm\"\nresources = [\"v1/podz\"]\n".into(),
            expected: "plugin not loaded: {dir}/plugins/bad.toml:3:14: key `resources`: unknown resource \"v1/podz\": the API server does not serve \"podz\" in \"v1\"; did you mean \"v1/pods\"?".into(),
        },
        Case {
            name: "a key one letter off",
            manifest: format!("name = \"bad\"\n{ok_head}timout_ms = 10\n"),
            expected: "config rejected: {dir}/plugins/bad.toml:4:1: key `timout_ms`: unknown key; did you mean \"timeout_ms\"? (expected one of `name`, `wasm`, `resources`, `for`, `owns`, `watches`, `workers`, `retry_base_delay_ms`, `retry_max_delay_ms`, `retry_qps`, `retry_burst`, `max_low_priority_wait_ms`, `namespace`, `label_selector`, `read`, `queue_capacity`, `fuel_per_event`, `timeout_ms`, `memory_mb`, `resync_seconds`, `quarantine_seconds`, `config`, `write`, `events`, `dry_run`, `write_qps`, `write_burst`, `write_timeout_ms`, `api_time_per_event_ms`, `max_request_bytes`, `max_answer_bytes`, `shadow_of`)".into(),
        },
        Case {
            name: "the RBAC verb update",
            manifest: format!("name = \"bad\"\n{ok_head}[[write]]\nresource = \"v1/pods\"\nverbs = [\"update\"]\n"),
            expected: "config rejected: {dir}/plugins/bad.toml:6:9: key `write[0].verbs`: unknown verb \"update\"; the RBAC verb update is \"replace\" here: expected get, create, replace, patch or delete".into(),
        },
        Case {
            name: "duplicate name",
            manifest: format!("name = \"good\"\n{ok_head}"),
            expected: "config rejected: {dir}/plugins/bad.toml:1:8: key `name`: duplicate plugin name \"good\": already defined in {dir}/plugins/good.toml:1:8".into(),
        },
        Case {
            name: "missing wasm",
            manifest: "name = \"bad\"\nwasm = \"../wasm/nope.wasm\"\nresources = [\"v1/pods\"]\n".into(),
            expected: "config rejected: {dir}/plugins/bad.toml:2:8: key `wasm`: file not found: {dir}/wasm/nope.wasm: build the plugin first (a project made by `wasm-informer new` says how in its README: `cargo build --release`, `npm run build`, `python3 build.py` or `make`)".into(),
        },
        Case {
            name: "wrong world",
            manifest: "name = \"bad\"\nwasm = \"../wasm/wrong-world.wasm\"\nresources = [\"v1/pods\"]\n".into(),
            expected: "plugin not loaded: {dir}/wasm/wrong-world.wasm: plugin bad: component does not fit the host: it exports none of wasm-informer:plugin/handler@0.2.1, wasm-informer:plugin/reconciler@0.2.1, wasm-informer:plugin/handler@0.1.0 (its exports: run)".into(),
        },
        Case {
            name: "garbage wasm",
            manifest: "name = \"bad\"\nwasm = \"../wasm/garbage.wasm\"\nresources = [\"v1/pods\"]\n".into(),
            expected: "plugin not loaded: {dir}/wasm/garbage.wasm: plugin bad: cannot compile component: failed to parse WebAssembly module Caused by: unknown binary version: 0x72616720 (at offset 0x4)".into(),
        },
    ];

    for case in &cases {
        let expected = case.expected.replace("{dir}", &dir);
        fx.write("plugins/bad.toml", &case.manifest);
        let got = host.wait_line_any(&["config rejected: ", "plugin not loaded: "], LONG);
        let at = got
            .find(&expected)
            .unwrap_or_else(|| panic!("{}: expected {expected:?} in {got:?}", case.name));
        let msg = &got[at..];
        // The log line ends with the `plugin=` field when the name is known.
        assert!(
            msg == expected || msg == format!("{expected} plugin=bad"),
            "{}: message {msg:?} is not exactly {expected:?}",
            case.name
        );
        let m = wait_metrics(addr, LONG, "the rejection counted", |t| {
            sample(t, "wasm_informer_config_errors") == Some(1.0)
        });
        assert_eq!(
            running_plugins(&m),
            vec!["good"],
            "{}: running set changed",
            case.name
        );
        let (code, body) = http_get(addr, "/readyz");
        assert_eq!(code, 503, "{}: {body}", case.name);
        fx.remove("plugins/bad.toml");
        wait_metrics(addr, LONG, "the rejection cleared", |t| {
            sample(t, "wasm_informer_config_errors") == Some(0.0)
        });
    }
    // The good plugin was never reloaded.
    assert!(!host.log().iter().any(|l| l.contains("plugin reloaded")));
    assert!(good_wasm.is_file());
    host.terminate();
    assert!(host.wait_exit(Duration::from_secs(120)).success());
}
