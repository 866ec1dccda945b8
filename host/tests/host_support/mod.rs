//! Shared helpers of the host's end-to-end tests: a config directory in a temp
//! dir, the `wasm-informer` binary as a child process whose stderr is collected
//! line by line, and a tiny HTTP GET for the metrics endpoint.

#![allow(dead_code)]

pub mod content;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generous: plugins may compile cold on a busy 2-core machine.
pub const LONG: Duration = Duration::from_secs(400);

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// A built example plugin; fails loudly when it has not been built.
pub fn plugin_wasm(name: &str) -> PathBuf {
    let p = repo_root()
        .join("target/plugins")
        .join(format!("{name}.wasm"));
    assert!(
        p.is_file(),
        "{} is missing: build the example plugins first with scripts/build-plugins.sh",
        p.display()
    );
    p
}

/// The shared compiled-component cache (keeps repeated runs fast).
pub fn cache_dir() -> PathBuf {
    repo_root().join("target/wasm-cache")
}

/// A config directory in a temp dir.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
}

impl Fixture {
    /// host.toml with a free metrics port, the shared cache, a small simulator,
    /// and `extra` appended; an empty plugins/ and a wasm/ directory.
    pub fn new(extra: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("plugins")).unwrap();
        std::fs::create_dir(tmp.path().join("wasm")).unwrap();
        let host = format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\nshutdown_grace_ms = 5000\n{extra}\n[sim]\npods = 120\nnamespaces = 3\nchurn_per_second = 10\n",
            cache_dir().display()
        );
        std::fs::write(tmp.path().join("host.toml"), host).unwrap();
        Self { tmp }
    }

    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// Writes a file atomically (temp + rename), as editors and deploy tools do,
    /// so the watcher never sees half a file.
    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        let tmp = p.with_file_name(format!(".{}.tmp", p.file_name().unwrap().to_string_lossy()));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        p
    }

    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.path(rel)).unwrap();
    }

    /// Copies a built example plugin into wasm/NAME.wasm.
    pub fn copy_plugin(&self, plugin: &str, as_name: &str) -> PathBuf {
        self.copy_wasm(plugin_wasm(plugin), as_name)
    }

    /// Copies a component (for example a `plugin_artifacts` path) into
    /// wasm/NAME.wasm.
    pub fn copy_wasm(&self, from: impl AsRef<Path>, as_name: &str) -> PathBuf {
        let bytes = std::fs::read(from).unwrap();
        self.write(&format!("wasm/{as_name}.wasm"), bytes)
    }
}

/// A running `wasm-informer` process.
pub struct HostProc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    seen: usize,
}

impl HostProc {
    /// Spawns `run --config CONFIG --sim --status never` plus `extra`, in the
    /// repository root.
    pub fn run_sim(config: &str, extra: &[&str]) -> Self {
        let mut args = vec!["run", "--config", config, "--sim", "--status", "never"];
        args.extend_from_slice(extra);
        Self::spawn(&args)
    }

    /// Spawns the binary with `args`, in the repository root.
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_in(&repo_root(), args, &[], &[])
    }

    /// Spawns the binary with `args` and extra environment variables, in the
    /// repository root.
    pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_in(&repo_root(), args, &[], env)
    }

    /// Spawns the binary with `args` in `dir`, without the environment
    /// variables `env_remove` and with `env` added.
    pub fn spawn_in(dir: &Path, args: &[&str], env_remove: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasm-informer"));
        for v in env_remove {
            cmd.env_remove(v);
        }
        let mut child = cmd
            .args(args)
            .current_dir(dir)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wasm-informer");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if std::env::var_os("HOST_TEST_ECHO").is_some() {
                    eprintln!("host| {line}");
                }
                l2.lock().unwrap().push(line);
            }
        });
        Self {
            child,
            lines,
            seen: 0,
        }
    }

    /// Every stderr line so far.
    pub fn log(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits for a stderr line (after the last one matched) containing every
    /// string of `parts`; panics with the log on timeout or exit.
    pub fn wait_line(&mut self, parts: &[&str], timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let lines = self.lines.lock().unwrap();
                for (i, l) in lines.iter().enumerate().skip(self.seen) {
                    if parts.iter().all(|p| l.contains(p)) {
                        self.seen = i + 1;
                        return l.clone();
                    }
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "host exited ({status}) before logging {parts:?}; log:\n{}",
                    self.log().join("\n")
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "no log line with {parts:?} within {timeout:?}; log:\n{}",
                    self.log().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for a stderr line (after the last one matched) containing any of
    /// `alternatives`.
    pub fn wait_line_any(&mut self, alternatives: &[&str], timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let lines = self.lines.lock().unwrap();
                for (i, l) in lines.iter().enumerate().skip(self.seen) {
                    if alternatives.iter().any(|p| l.contains(p)) {
                        self.seen = i + 1;
                        return l.clone();
                    }
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "no log line with any of {alternatives:?} within {timeout:?}; log:\n{}",
                    self.log().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The metrics address the host printed.
    pub fn metrics_addr(&mut self) -> SocketAddr {
        let line = self.wait_line(&["wasm-informer: metrics at http://"], LONG);
        let rest = line.split("http://").nth(1).unwrap();
        rest.trim_end_matches("/metrics").trim().parse().unwrap()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGKILL (`kill -9`): no shutdown code runs.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM failed");
    }

    /// Waits for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                // Let the reader thread drain the pipe.
                std::thread::sleep(Duration::from_millis(200));
                return s;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!(
                    "host did not exit within {timeout:?}; log:\n{}",
                    self.log().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for HostProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A standalone `wasm-informer sim` in `dir`, whose `host.toml` is
/// `host_toml` (its `[sim]` table), and the kubeconfig it wrote. The
/// simulator is killed when the returned process drops.
pub fn simulator(dir: &Path, host_toml: &str) -> (HostProc, PathBuf) {
    let config = dir.join("sim-config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("host.toml"), host_toml).unwrap();
    let kubeconfig = dir.join("kubeconfig.yaml");
    let sim = HostProc::spawn(&[
        "sim",
        "--listen",
        "127.0.0.1:0",
        "--duration",
        "600",
        "--config",
        config.to_str().unwrap(),
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
    ]);
    let started = Instant::now();
    while !kubeconfig.exists() {
        assert!(
            started.elapsed() < LONG,
            "the simulator wrote no kubeconfig"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    (sim, kubeconfig)
}

/// `wasm-informer run --config CONFIG --status never` against the cluster of
/// `kubeconfig`.
pub fn run_against(config: &Path, kubeconfig: &Path) -> HostProc {
    HostProc::spawn_env(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--status",
            "never",
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    )
}

/// A plain HTTP/1.1 GET; returns status code and body.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http_request(addr, "GET", path, None)
}

/// A plain HTTP/1.1 request with an optional body and its content type;
/// returns status code and body.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    match body {
        Some((content_type, b)) => write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: cluster-test\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ),
        None => write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: cluster-test\r\n\r\n"
        ),
    }
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (code, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n..];
        s = s.strip_prefix("\r\n").unwrap_or(s);
    }
    out
}

/// The value of one sample in Prometheus text, by exact series text
/// (`name{labels}`).
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
}

/// Plugin names whose `state="running"` series is 1.
pub fn running_plugins(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| {
            l.starts_with("wasm_informer_plugin_state{")
                && l.contains("state=\"running\"")
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(1.0)
        })
        .filter_map(|l| {
            l.split("plugin=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .map(str::to_string)
        })
        .collect();
    out.sort();
    out
}

/// Polls `/metrics` until `pred` holds.
pub fn wait_metrics(
    addr: SocketAddr,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let (code, body) = http_get(addr, "/metrics");
        if code == 200 && pred(&body) {
            return body;
        }
        if Instant::now() >= deadline {
            panic!("metrics never showed {what}; last scrape:\n{body}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `kubectl --kubeconfig KUBECONFIG ARGS...` as JSON (the server's answer).
pub fn kubectl_json(kubeconfig: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let out = kubectl_raw(kubeconfig, args, None);
    serde_json::from_slice(&out).unwrap()
}

/// `kubectl --kubeconfig KUBECONFIG ARGS...` with `stdin`; its stdout.
/// Panics with kubectl's stderr when it fails.
pub fn kubectl_raw(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Vec<u8> {
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl is installed (scripts/setup.sh)");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
