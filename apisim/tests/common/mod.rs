//! Shared helpers for the integration tests: start a simulator, build a kube client for it, and
//! wait for conditions with generous timeouts.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use apisim::{RunningSim, Sim, SimConfig};
use serde_json::{json, Value};

/// Generous upper bound for anything that should happen "soon" on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub async fn start(config: SimConfig) -> RunningSim {
    Sim::new(config)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("simulator starts")
}

pub fn client(sim: &RunningSim) -> kube::Client {
    let cfg = kube::Config::new(sim.url().parse().unwrap());
    kube::Client::try_from(cfg).expect("client builds")
}

pub fn configmap(name: &str, ns: &str, labels: Value) -> Value {
    json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":ns,"labels":labels},"data":{"k":"v"}})
}

/// Polls `check` until it returns true, panicking with `what` after [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A raw HTTP/1.1 response: status code, lower-cased headers, de-chunked body.
#[derive(Debug)]
pub struct Raw {
    pub code: u16,
    pub headers: std::collections::BTreeMap<String, String>,
    pub body: String,
}

impl Raw {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }

    /// The body as watch events, one JSON object per line.
    pub fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line ({e}): {l}")))
            .collect()
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(i) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(std::str::from_utf8(&b[..i]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[i + 2..i + 2 + size]);
        b = &b[i + 2 + size + 2..];
    }
}

/// Sends one request over a fresh TCP connection (`Connection: close`) and reads the whole
/// response, waiting at most PATIENCE. Watches must end by themselves (timeoutSeconds, an error).
pub async fn raw(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> Raw {
    raw_with(addr, method, path, &[], body).await
}

/// [`raw`] with extra request headers (`Authorization`, `Impersonate-User`, ...).
pub async fn raw_with(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
) -> Raw {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (ct, payload) = body.unwrap_or(("", ""));
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: apisim\r\nConnection: close\r\nContent-Length: {}\r\n",
        payload.len()
    );
    if !ct.is_empty() {
        req.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(payload);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(PATIENCE, s.read_to_end(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no complete response in time"))
        .unwrap();
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response has a head");
    let head = String::from_utf8_lossy(&buf[..split]).to_string();
    let rest = &buf[split + 4..];
    let mut lines = head.lines();
    let code = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: std::collections::BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_lowercase(), v.to_string()))
        .collect();
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Raw {
        code,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// A kube client that does not retry (kube-client retries 429/503/504 on its own by default).
pub fn client_once(sim: &RunningSim) -> kube::Client {
    let mut cfg = kube::Config::new(sim.url().parse().unwrap());
    cfg.default_retry = false;
    kube::Client::try_from(cfg).expect("client builds")
}

/// The real kubectl; panics naming it when it is not installed (tests never skip).
pub fn kubectl_path() -> std::path::PathBuf {
    for p in ["/usr/bin/kubectl", "/usr/local/bin/kubectl"] {
        if std::path::Path::new(p).exists() {
            return std::path::PathBuf::from(p);
        }
    }
    panic!(
        "\n\n*** kubectl is NOT installed: these tests need the real kubectl. ***\n\
         *** Install it with: apt-get update && apt-get install -y kubectl ***\n\n"
    );
}

/// What one kubectl run printed.
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a prepared kubectl command (`args` name it in a timeout's panic) within PATIENCE.
pub async fn kubectl_output(mut cmd: tokio::process::Command, args: &[&str]) -> Out {
    let o = tokio::time::timeout(PATIENCE, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
        .expect("kubectl runs");
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}
