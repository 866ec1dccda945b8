//! Plugins from an OCI registry, against a real one: Debian's
//! `docker-registry` (the CNCF distribution registry), started here on a
//! free loopback port. The oracle is what the registry holds, read back
//! through its HTTP API (`/v2/...`), and the component file itself:
//! `push` must store the Wasm artifact media types and the file's bytes; the
//! host must pull exactly those by tag and by digest, report the manifest's
//! digest, load from its cache with the registry gone, and refuse a registry
//! that is down, an unknown tag, a digest mismatch and a manifest without a
//! Wasm layer while the running version keeps serving (I9).

use crate::host_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use host_support::{HostProc, LONG};
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

fn sha256(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// A registry on loopback, stopped on drop.
struct Registry {
    child: Child,
    addr: SocketAddr,
    root: PathBuf,
    _dir: tempfile::TempDir,
}

/// The registry binary must be here: a test that needs it fails, naming it,
/// rather than pass without running.
fn require_registry() {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("docker-registry").is_file()));
    assert!(
        found,
        "this test needs docker-registry: apt-get install docker-registry (scripts/setup.sh installs it)"
    );
}

impl Registry {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let root = dir.path().join("storage");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
                root.display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "docker-registry is missing: apt-get install docker-registry (scripts/setup.sh)",
            );
        let r = Registry {
            child,
            addr,
            root,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while get(addr, "/v2/", "").map(|(c, _)| c) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "registry did not answer /v2/ on {addr}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET with an Accept header; (status, body bytes). None when nothing
/// answers.
fn get(addr: SocketAddr, path: &str, accept: &str) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = raw[split + 4..].to_vec();
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "chunked answer from the registry"
    );
    Some((code, body))
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn push(file: &str, reference: &str) -> String {
    let out = Command::new(BIN)
        .args(["push", file, reference])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "push failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.strip_prefix("digest: "))
        .expect("push prints the digest")
        .to_string()
}

fn config_dir(cache: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("plugins")).unwrap();
    std::fs::write(
        d.path().join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\n[sim]\npods = 20\nnamespaces = 2\nchurn_per_second = 0\n",
            cache.join("wasm").display()
        ),
    )
    .unwrap();
    d
}

fn manifest(dir: &Path, name: &str, wasm: &str) {
    std::fs::write(
        dir.join(format!("plugins/{name}.toml")),
        format!("name = \"{name}\"\nwasm = \"{wasm}\"\nresources = [\"v1/pods\"]\n"),
    )
    .unwrap();
}

/// Runs the host for a few seconds and returns its report.
fn run_host(dir: &Path) -> (serde_json::Value, Vec<String>) {
    let report = dir.join("report.json");
    let mut host = HostProc::run_sim(
        dir.to_str().unwrap(),
        &["--duration", "2", "--report", report.to_str().unwrap()],
    );
    let status = host.wait_exit(LONG);
    assert!(status.success(), "{status}: {}", host.log().join("\n"));
    let r = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    (r, host.log())
}

#[test]
fn push_then_pull_by_tag_and_by_digest_and_load_from_the_cache_without_the_registry() {
    require_registry();
    let reg = Registry::start();
    let file = plugin_artifacts::NOOP;
    let bytes = std::fs::read(file).unwrap();
    let reference = format!("oci://{}/plugins/noop:v1", reg.host());
    let digest = push(file, &reference);

    // What the registry holds.
    let (code, raw) = get(reg.addr, "/v2/plugins/noop/manifests/v1", OCI_MANIFEST).unwrap();
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&raw));
    assert_eq!(sha256(&raw), digest, "the printed digest is the manifest's");
    let m: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = m["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    assert_eq!(layers[0]["digest"], sha256(&bytes).as_str());
    let blob_path = format!("/v2/plugins/noop/blobs/{}", sha256(&bytes));
    let (code, blob) = get(reg.addr, &blob_path, "*/*").unwrap();
    assert_eq!(code, 200);
    assert_eq!(blob, bytes, "the registry holds the component's bytes");

    // The host pulls by tag and by digest, and reports the digest.
    let cache = tempfile::tempdir().unwrap();
    let cfg = config_dir(cache.path());
    manifest(cfg.path(), "by-tag", &reference);
    let pinned = format!("oci://{}/plugins/noop@{digest}", reg.host());
    manifest(cfg.path(), "by-digest", &pinned);
    let (r, _) = run_host(cfg.path());
    for name in ["by-tag", "by-digest"] {
        let p = &r["plugins"][name];
        assert_eq!(p["digest"], digest.as_str(), "{name}: {p}");
        assert!(p["delivered"]["added"].as_u64().unwrap() > 0, "{name}: {p}");
    }
    let hex = &sha256(&bytes)["sha256:".len()..];
    // Beside the compilation cache (`cache_dir` is CACHE/wasm).
    let cached = cache.path().join("wasm-oci/blobs/sha256").join(hex);
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        bytes,
        "kept in the cache by digest"
    );

    // A restart with the registry gone: the pinned reference loads from the
    // cache; the tag cannot be resolved.
    drop(reg);
    let (r, _) = run_host(cfg.path());
    let p = &r["plugins"]["by-digest"];
    assert_eq!(p["digest"], digest.as_str(), "{p}");
    assert!(p["delivered"]["added"].as_u64().unwrap() > 0, "{p}");
    let t = &r["plugins"]["by-tag"];
    assert_eq!(t["state"], "failed", "{t}");
    assert!(
        t["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot reach the registry"),
        "{t}"
    );
}

#[test]
fn registry_failures_are_clear_errors_and_the_running_version_keeps_serving() {
    require_registry();
    let reg = Registry::start();
    let noop = plugin_artifacts::NOOP;
    let bytes = std::fs::read(noop).unwrap();
    let good = push(noop, &format!("oci://{}/plugins/good:v1", reg.host()));
    let _ = good;

    // A manifest whose only layer is a tarball, pushed with the client crate.
    {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = oci_client::Client::new(oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::Http,
            ..Default::default()
        });
        let layer = oci_client::client::ImageLayer::new(
            b"not a component".to_vec(),
            "application/vnd.oci.image.layer.v1.tar".into(),
            None,
        );
        let config = oci_client::client::Config::new(
            b"{}".to_vec(),
            "application/vnd.oci.image.config.v1+json".into(),
            None,
        );
        let r: oci_client::Reference = format!("{}/plugins/image:v1", reg.host()).parse().unwrap();
        rt.block_on(client.push(
            &r,
            &[layer],
            config,
            &oci_client::secrets::RegistryAuth::Anonymous,
            None,
        ))
        .unwrap();
    }
    // A component whose stored bytes were damaged in the registry's storage.
    push(noop, &format!("oci://{}/plugins/damaged:v1", reg.host()));
    let hex = &sha256(&bytes)["sha256:".len()..];
    let data = reg
        .root
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    let mut damaged = bytes.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    std::fs::write(&data, &damaged).unwrap();

    let cache = tempfile::tempdir().unwrap();
    let cfg = config_dir(cache.path());
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    manifest(cfg.path(), "down", &format!("oci://{down}/plugins/good:v1"));
    manifest(
        cfg.path(),
        "unknown",
        &format!("oci://{}/plugins/good:v9", reg.host()),
    );
    manifest(
        cfg.path(),
        "no-layer",
        &format!("oci://{}/plugins/image:v1", reg.host()),
    );
    manifest(
        cfg.path(),
        "mismatch",
        &format!("oci://{}/plugins/damaged:v1", reg.host()),
    );
    let wrong = format!("sha256:{}", "0".repeat(64));
    manifest(
        cfg.path(),
        "wrong-digest",
        &format!("oci://{}/plugins/good@{wrong}", reg.host()),
    );
    // A reference that is not one.
    manifest(
        cfg.path(),
        "bad-ref",
        &format!("oci://{}/Plugins/good", reg.host()),
    );
    // A plugin running from a file, whose manifest then names an unknown tag.
    std::fs::copy(noop, cfg.path().join("keep.wasm")).unwrap();
    manifest(
        cfg.path(),
        "keep",
        &cfg.path().join("keep.wasm").display().to_string(),
    );

    let report = cfg.path().join("report.json");
    let mut host = HostProc::run_sim(
        cfg.path().to_str().unwrap(),
        &["--duration", "6", "--report", report.to_str().unwrap()],
    );
    host.wait_line(&["plugin loaded", "plugin=keep"], LONG);
    manifest(
        cfg.path(),
        "keep",
        &format!("oci://{}/plugins/good:v404", reg.host()),
    );
    host.wait_line(&["previous version keeps running", "plugin=keep"], LONG);
    assert!(host.wait_exit(LONG).success());

    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    // Each error names the manifest file, the `wasm` key and the reference.
    let error = |name: &str| {
        let p = &r["plugins"][name];
        assert_eq!(p["state"], "failed", "{name}: {p}");
        let e = p["last_error"].as_str().unwrap().to_string();
        let file = cfg.path().join(format!("plugins/{name}.toml"));
        assert!(
            e.contains(&format!("{}:2:8: key `wasm`: oci://", file.display())),
            "{name}: {e}"
        );
        e
    };
    assert!(
        error("down").contains("cannot reach the registry"),
        "{}",
        error("down")
    );
    assert!(
        error("unknown").contains("not found in the registry"),
        "{}",
        error("unknown")
    );
    assert!(
        error("no-layer").contains("no Wasm layer"),
        "{}",
        error("no-layer")
    );
    assert!(
        error("mismatch").contains("digest mismatch"),
        "{}",
        error("mismatch")
    );
    assert!(
        error("wrong-digest").contains("not found in the registry"),
        "{}",
        error("wrong-digest")
    );
    let keep = &r["plugins"]["keep"];
    assert_eq!(
        keep["state"], "stopped",
        "the file version ran to the end: {keep}"
    );
    assert_eq!(keep["versions"], 1);
    assert!(keep["delivered"]["added"].as_u64().unwrap() > 0);
    let config_errors: Vec<&str> = r["config_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        config_errors.iter().any(|e| e.contains("v404")),
        "{config_errors:?}"
    );
    let bad = cfg.path().join("plugins/bad-ref.toml");
    assert!(
        config_errors.iter().any(|e| e.contains(&format!(
            "{}:2:8: key `wasm`: \"oci://{}/Plugins/good\"",
            bad.display(),
            reg.host()
        )) && e.contains("name a tag")),
        "{config_errors:?}"
    );
}
