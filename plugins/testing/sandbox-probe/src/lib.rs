//! Probes the sandbox from inside: on every event it tries to read files, list
//! directories, write a file, read the environment and arguments, open TCP and
//! UDP sockets, resolve a name, and read the cache with and without permission.
//! It returns the findings as a JSON object in its `err` result so a test can
//! inspect them (`[config] tcp_port` names a listener to try to reach,
//! `[config] allowed` and `[config] denied` name the resources to read).
//!
//! Invariant: every probe is caught; `on-event` always returns the report.

use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};

use serde_json::{json, Map, Value};
use wasm_informer_sdk::{cache, export_plugin, Config, Event, Handler, Result};

struct Probe {
    tcp_port: u16,
    allowed: String,
    denied: String,
}

impl Handler for Probe {
    fn init(config: &Config) -> Result<Self> {
        Ok(Probe {
            tcp_port: config.get("tcp_port")?.unwrap_or(80),
            allowed: config
                .get("allowed")?
                .unwrap_or_else(|| "v1/pods".to_string()),
            denied: config
                .get("denied")?
                .unwrap_or_else(|| "v1/secrets".to_string()),
        })
    }

    fn on_add(&mut self, _event: &Event) -> Result<()> {
        Err(self.report().to_string().into())
    }
}

fn outcome<T: std::fmt::Debug, E: std::fmt::Display>(r: std::result::Result<T, E>) -> Value {
    match r {
        Ok(v) => json!({"ok": format!("{v:?}")}),
        Err(e) => json!({"err": e.to_string()}),
    }
}

impl Probe {
    fn report(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "read_file".into(),
            outcome(std::fs::read("/etc/passwd").map(|b| b.len())),
        );
        m.insert(
            "read_file_relative".into(),
            outcome(std::fs::File::open("Cargo.toml").and_then(|mut f| {
                let mut s = String::new();
                f.read_to_string(&mut s).map(|_| s.len())
            })),
        );
        m.insert(
            "read_dir".into(),
            outcome(std::fs::read_dir("/").map(|d| d.count())),
        );
        m.insert(
            "write_file".into(),
            outcome(std::fs::write("/tmp/wasm-informer-probe", b"x")),
        );
        m.insert("env_count".into(), json!(std::env::vars().count()));
        m.insert("env_home".into(), outcome(std::env::var("HOME")));
        m.insert("args_count".into(), json!(std::env::args().count()));
        m.insert(
            "tcp_connect".into(),
            outcome(TcpStream::connect(("127.0.0.1", self.tcp_port)).map(|_| "connected")),
        );
        m.insert(
            "udp_bind".into(),
            outcome(UdpSocket::bind("127.0.0.1:0").map(|_| "bound")),
        );
        m.insert(
            "dns".into(),
            outcome(("localhost", 80).to_socket_addrs().map(|a| a.count())),
        );
        m.insert(
            "cache_allowed".into(),
            outcome(cache::has_synced(&self.allowed)),
        );
        m.insert(
            "cache_denied".into(),
            outcome(cache::list_objects(&self.denied, None, None).map(|v| v.len())),
        );
        Value::Object(m)
    }
}

export_plugin!(Probe);
