//! `/readyz` is never 200 before the host has synced: sampled every 10 ms from
//! process start, it answers 503 (with its reasons) until the config
//! directory is loaded, the informers have synced and every plugin has had its
//! replay. The oracle is the plugin's own log: the `echo` plugin (log mode)
//! logs each replayed object as it handles it, with the host's timestamp, and
//! every one of those lines is older than the first 200.

use crate::host_support;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use host_support::*;

/// Days from 1970-01-01 to a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The timestamp tracing's formatter starts a line with
/// (`2026-12-01T09:17:19.123456Z`), as a time.
fn line_time(line: &str) -> Option<SystemTime> {
    let ts = line.split_whitespace().next()?;
    let ts = ts.strip_suffix('Z')?;
    let (date, time) = ts.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let secs = days_from_civil(d[0], d[1], d[2]) * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    let nanos: u64 = format!("{frac:0<9}")[..9].parse().ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs as u64) + Duration::from_nanos(nanos))
}

fn try_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    Some(http_get(addr, path))
}

#[test]
fn readyz_is_never_200_before_sync_sampled_every_10ms_from_process_start() {
    let tmp = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    std::fs::create_dir(tmp.path().join("plugins")).unwrap();
    std::fs::create_dir(tmp.path().join("wasm")).unwrap();
    // No compilation cache: the component compiles at start, so the window
    // before the plugin is loaded is wide enough to be sampled.
    std::fs::write(
        tmp.path().join("host.toml"),
        format!(
            "metrics_addr = \"{addr}\"\n[sim]\npods = 120\nnamespaces = 3\nchurn_per_second = 10\n"
        ),
    )
    .unwrap();
    std::fs::copy(plugin_artifacts::ECHO, tmp.path().join("wasm/echo.wasm")).unwrap();
    std::fs::write(
        tmp.path().join("plugins/echo.toml"),
        "name = \"echo\"\nwasm = \"../wasm/echo.wasm\"\nresources = [\"v1/pods\"]\n[config]\nlog = true\ntag = \"ready\"\n",
    )
    .unwrap();
    let mut host = HostProc::run_sim(tmp.path().to_str().unwrap(), &[]);

    // Sample from the moment the process exists.
    let mut samples: Vec<(SystemTime, Option<(u16, String)>)> = Vec::new();
    let deadline = std::time::Instant::now() + LONG;
    let first_200 = loop {
        let r = try_get(addr, "/readyz");
        let at = SystemTime::now();
        let ok = r.as_ref().is_some_and(|(c, _)| *c == 200);
        samples.push((at, r));
        if ok {
            break at;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never ready; last: {:?}",
            samples.last()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    for (_, r) in &samples[..samples.len() - 1] {
        if let Some((code, body)) = r {
            assert_eq!(*code, 503, "before ready: {body}");
            assert!(body.starts_with("not ready:\n- "), "{body}");
        }
    }
    let not_ready: Vec<&String> = samples
        .iter()
        .filter_map(|(_, r)| r.as_ref().filter(|(c, _)| *c == 503).map(|(_, b)| b))
        .collect();
    assert!(
        !not_ready.is_empty(),
        "the metrics server answers before the plugins are loaded, so some sample is a 503"
    );
    assert!(
        not_ready.iter().any(|b| b.contains("has not been loaded")
            || b.contains("has not had its replay")
            || b.contains("has not synced")),
        "reasons: {not_ready:?}"
    );

    // Every replayed object was handled (and logged) before the first 200.
    // The replay is complete once a live event follows it (the simulator
    // churns); the replay is what the plugin logged before that.
    host.wait_line(&["running 1 plugin(s)"], LONG);
    host.wait_line(&["echo ready", "initial=false", "plugin=echo"], LONG);
    let log = host.log();
    let echo: Vec<&String> = log.iter().filter(|l| l.contains("echo ready ")).collect();
    let replay: Vec<&String> = echo
        .iter()
        .take_while(|l| l.contains("initial=true"))
        .copied()
        .collect();
    assert!(
        replay.len() >= 100,
        "a replay of the ~120 pods: {}",
        replay.len()
    );
    for l in &replay {
        let t = line_time(l).unwrap_or_else(|| panic!("no timestamp in {l}"));
        assert!(
            t <= first_200,
            "a replayed object was handled after /readyz said 200: {l}"
        );
    }
    eprintln!(
        "readyz: {} samples, {} refused, {} x 503, then 200",
        samples.len(),
        samples.iter().filter(|(_, r)| r.is_none()).count(),
        not_ready.len()
    );
    host.terminate();
    assert!(host.wait_exit(Duration::from_secs(120)).success());
}

#[test]
fn timestamps_parse() {
    let t = line_time("2026-12-01T09:17:19.5Z  INFO x").unwrap();
    assert_eq!(
        t.duration_since(UNIX_EPOCH).unwrap(),
        Duration::from_millis(1_796_116_639_500)
    );
}
