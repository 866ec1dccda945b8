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

pub mod access_review;
pub mod admin;
pub mod authn;
pub mod authz;
pub mod continue_token;
pub mod crd;
pub mod deadline;
pub mod deployment;
pub mod discovery;
pub mod events;
pub mod faults;
pub mod go_fmt;
pub mod managed;
pub mod object;
pub mod patch;
pub mod path_segment;
pub mod protobuf;
pub mod query;
pub mod rbac;
pub mod request_info;
pub mod request_log;
pub mod resource;
pub mod scale;
pub mod server;
pub mod shard;
pub mod status;
pub mod store;
pub mod table;
pub mod timestamps;
pub mod tls;
pub mod validation;
pub mod views;
pub mod watch;
pub mod workload;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use authn::{Tokens, UserInfo};
pub use faults::{FailMode, FaultStats, Faults, RequestMatch, WaitTimeout};
pub use object::{ObjectRef, StoredObject};
pub use request_info::{parse_request_path, BadPath, RequestTarget};
pub use request_log::{RequestLog, RequestRecord};
pub use resource::{ResourceId, ResourceType};
pub use shard::{fnv1a_64, ShardField, ShardRange, ShardSelector};
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
    /// The longest a request may take, and the deadline of one without `?timeout=` (the
    /// apiserver's `--request-timeout`). A write not done by its deadline is answered 504 and
    /// never applied. Default 60 s.
    pub request_timeout_max: Duration,
    /// Authenticate bearer tokens (`Authorization: Bearer T`, registered with [`Tokens::add`]):
    /// a request without one is `system:anonymous`, one with an unknown token gets 401. Off by
    /// default: every request is served, and a known token only names the user in the log.
    pub authentication: bool,
    /// Authorize every API request with RBAC over the stored Roles, ClusterRoles and bindings
    /// (`system:masters` bypasses it), and enforce impersonation; implies `authentication`.
    /// The bootstrap roles (`cluster-admin`, `system:discovery`, `system:basic-user`,
    /// `system:public-info-viewer`) and their bindings are stored at start. Off by default.
    pub rbac: bool,
    /// The token of the admin kubeconfig ([`RunningSim::kubeconfig_yaml`]): user
    /// `apisim-admin`, group `system:masters`. Default: a random UUID.
    pub admin_token: String,
    /// Serve HTTPS with the built-in self-signed certificate ([`tls`]): kubectl sends tokens
    /// and `--as` only to an https server. Kubeconfigs then carry the certificate. Default off.
    pub tls: bool,
    /// The apiserver's alpha feature gate `ShardedListAndWatch` (KEP-5866): list, watch and
    /// deletecollection honour the `shardSelector` query parameter (see [`shard`]), refuse a
    /// malformed one with 400, and lists carry `metadata.shardInfo.selector`. Off by default:
    /// the parameter is ignored, even when malformed, and no `shardInfo` appears, as on a
    /// server without the feature.
    pub sharded_list_and_watch: bool,
}

impl SimConfig {
    /// Whether requests are authenticated (`authentication` or `rbac`).
    pub fn authenticates(&self) -> bool {
        self.authentication || self.rbac
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            history_window: 100_000,
            bookmark_interval: Duration::from_secs(5),
            default_watch_timeout: Duration::from_secs(1800),
            too_large_rv_wait: Duration::from_secs(3),
            request_timeout_max: Duration::from_secs(60),
            authentication: false,
            rbac: false,
            admin_token: uuid::Uuid::new_v4().to_string(),
            tls: false,
            sharded_list_and_watch: false,
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
    tokens: Tokens,
}

impl Sim {
    /// A fresh simulator with the default namespaces.
    pub fn new(config: SimConfig) -> Self {
        let store = Arc::new(Store::new(config.history_window));
        if config.rbac {
            rbac::seed_bootstrap(&store);
        }
        let tokens = Tokens::default();
        tokens.add(&config.admin_token, authn::ADMIN_USER, &[authn::MASTERS]);
        Sim {
            faults: Faults::new(store.clone()),
            store,
            log: RequestLog::default(),
            tokens,
            config,
        }
    }

    /// The bearer tokens this simulator accepts (the admin token included).
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
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
            tokens: self.tokens.clone(),
            config: self.config.clone(),
            address: local.to_string(),
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let router = server::router(app);
        let tls = self.config.tls;
        let task = tokio::spawn(async move {
            if tls {
                return tls::serve(listener, router, stop_rx).await;
            }
            // Watch events are small writes: without TCP_NODELAY, Nagle's algorithm and the
            // client's delayed ACK hold some of them back by up to 40 ms.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let r = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(e) = r {
                tracing::error!(error = %e, "apisim server stopped with an error");
            }
        });
        tracing::info!(url = %format!("{}://{local}", if tls { "https" } else { "http" }), "apisim listening");
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
    /// Base URL, `http://127.0.0.1:PORT` (`https://` with `SimConfig::tls`).
    pub fn url(&self) -> String {
        let scheme = if self.sim.config.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
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

    /// The bearer tokens this simulator accepts; register more while it serves.
    pub fn tokens(&self) -> &Tokens {
        &self.sim.tokens
    }

    /// The admin kubeconfig: its current context points at this simulator over plain HTTP
    /// with the admin token (user `apisim-admin`, group `system:masters`).
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_yaml_for(&self.sim.config.admin_token)
    }

    /// A kubeconfig like [`RunningSim::kubeconfig_yaml`] that authenticates with `token`
    /// (register it with [`Tokens::add`] first).
    pub fn kubeconfig_yaml_for(&self, token: &str) -> String {
        // Over https the cluster trusts the built-in certificate; over http, client-node 1.x
        // needs insecure-skip-tls-verify to accept the server at all.
        let trust = if self.sim.config.tls {
            use base64::Engine;
            format!(
                "certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(tls::CERT_PEM)
            )
        } else {
            "insecure-skip-tls-verify: true".to_string()
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: apisim\n  cluster:\n    server: {}\n    {trust}\ncontexts:\n- name: apisim\n  context:\n    cluster: apisim\n    user: apisim\n    namespace: default\ncurrent-context: apisim\nusers:\n- name: apisim\n  user:\n    token: {}\npreferences: {{}}\n",
            self.url(),
            serde_json::Value::String(token.to_string())
        )
    }

    /// Writes [`RunningSim::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> anyhow::Result<()> {
        self.write_kubeconfig_for(path, &self.sim.config.admin_token)
    }

    /// Writes [`RunningSim::kubeconfig_yaml_for`] `token` to `path`.
    pub fn write_kubeconfig_for(&self, path: impl AsRef<Path>, token: &str) -> anyhow::Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig_yaml_for(token))
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
