//! apisim: an in-memory Kubernetes API server that real kube-client and kubectl can drive, with
//! fault injection, a request log and a deterministic workload generator.
//!
//! Invariant: the simulator speaks the apiserver's wire protocol as recorded in
//! `shared/apisim-protocol.md`; everything observable over HTTP is also reachable from Rust
//! ([`RunningSim::store`], [`RunningSim::faults`], [`RunningSim::request_log`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let sim = apisim::Sim::new(apisim::SimConfig::default())
//!     .start("127.0.0.1:0".parse()?)
//!     .await?;
//! sim.write_kubeconfig("/tmp/kubeconfig")?;
//! sim.faults().fail_next_500(2);
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

pub mod admin;
pub mod continue_token;
pub mod crd;
pub mod deployment;
pub mod discovery;
pub mod events;
pub mod faults;
pub mod managed;
pub mod object;
pub mod patch;
pub mod protobuf;
pub mod query;
pub mod request_log;
pub mod resource;
pub mod scale;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod timestamps;
pub mod validation;
pub mod views;
pub mod watch;
pub mod workload;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use faults::{FailMode, FaultStats, Faults, RequestMatch, WaitTimeout};
pub use object::{ObjectRef, StoredObject};
pub use request_log::{RequestLog, RequestRecord};
pub use resource::{ResourceId, ResourceType};
pub use status::ApiError;
pub use store::{
    ChangeType, DeleteOptions, ListRequest, ListVersion, Propagation, Store, Subresource,
    WriteOptions,
};

/// Simulator settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Number of changes kept for watches and consistent lists; older resourceVersions get 410.
    /// Memory grows with it (each kept change pins one object version). Default 100 000.
    pub history_window: usize,
    /// Interval between BOOKMARK events on watches with `allowWatchBookmarks=true`. Default 5 s.
    pub bookmark_interval: Duration,
    /// Watch duration when the client sends no `timeoutSeconds`. Default 30 min.
    pub default_watch_timeout: Duration,
    /// How long a list or watch at a resourceVersion newer than the store's waits for the store to
    /// catch up before it is answered "Too large resource version" (504). The apiserver's watch
    /// cache waits 3 s. Default 3 s.
    pub too_large_rv_wait: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            history_window: 100_000,
            bookmark_interval: Duration::from_secs(5),
            default_watch_timeout: Duration::from_secs(1800),
            too_large_rv_wait: Duration::from_secs(3),
        }
    }
}

/// A simulator that is not serving yet. Its store can be filled before [`Sim::start`].
#[derive(Debug, Clone)]
pub struct Sim {
    config: SimConfig,
    store: Arc<Store>,
    faults: Faults,
    log: RequestLog,
}

impl Sim {
    /// A fresh simulator with the default namespaces.
    pub fn new(config: SimConfig) -> Self {
        let store = Arc::new(Store::new(config.history_window));
        Sim {
            faults: Faults::new(store.clone()),
            store,
            log: RequestLog::default(),
            config,
        }
    }

    /// Direct access to the storage.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Binds `addr` (use port 0 for any free port) and serves until [`RunningSim::shutdown`].
    /// The socket is bound with `SO_REUSEADDR`, so a simulator can be started on the address of
    /// one just shut down (see [`RunningSim::replace`]).
    pub async fn start(self, addr: SocketAddr) -> anyhow::Result<RunningSim> {
        let listener = bind_reusable(addr)
            .map_err(|e| anyhow::anyhow!("apisim: cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr()?;
        let app = server::App {
            store: self.store.clone(),
            faults: self.faults.clone(),
            log: self.log.clone(),
            config: self.config.clone(),
            address: local.to_string(),
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let router = server::router(app);
        // Watch events are small writes: without TCP_NODELAY, Nagle's algorithm and the
        // client's delayed ACK hold some of them back by up to 40 ms.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let r = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(e) = r {
                tracing::error!(error = %e, "apisim server stopped with an error");
            }
        });
        tracing::info!(url = %format!("http://{local}"), "apisim listening");
        Ok(RunningSim {
            sim: self,
            addr: local,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }
}

fn bind_reusable(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// A serving simulator. Dropping it without [`RunningSim::shutdown`] leaves the server running
/// until the runtime stops.
#[derive(Debug)]
pub struct RunningSim {
    sim: Sim,
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningSim {
    /// Base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Storage, for direct create/update/delete/list from tests.
    pub fn store(&self) -> &Arc<Store> {
        &self.sim.store
    }

    /// Fault switches.
    pub fn faults(&self) -> &Faults {
        &self.sim.faults
    }

    /// Every API request received so far.
    pub fn request_log(&self) -> &RequestLog {
        &self.sim.log
    }

    /// The configuration in use.
    pub fn config(&self) -> &SimConfig {
        &self.sim.config
    }

    /// A kubeconfig whose current context points at this simulator over plain HTTP.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: apisim\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: apisim\n  context:\n    cluster: apisim\n    user: apisim\n    namespace: default\ncurrent-context: apisim\nusers:\n- name: apisim\n  user: {{}}\npreferences: {{}}\n",
            self.url()
        )
    }

    /// Writes [`RunningSim::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> anyhow::Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig_yaml())
            .map_err(|e| anyhow::anyhow!("cannot write kubeconfig {}: {e}", path.display()))
    }

    /// Shuts this simulator down and starts `next` on the same address: to a client this is
    /// the server restarting with different state (an etcd restore when `next` holds less).
    /// Retries the bind for up to 5 s while the old socket is released.
    pub async fn replace(self, next: Sim) -> anyhow::Result<RunningSim> {
        let addr = self.addr;
        self.shutdown().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            match next.clone().start(addr).await {
                Ok(r) => return Ok(r),
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Stops serving: closes open watches, stops accepting, and waits (at most 5 s) for in-flight
    /// requests.
    pub async fn shutdown(mut self) {
        self.sim.faults.drop_watches();
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}
