//! A TCP proxy between one replica and the simulator that can freeze that
//! replica's traffic and resume it.
//!
//! Frozen, no byte moves in either direction: what either side sends is held
//! (new connections are accepted and held too). Thawed, the held bytes of
//! every connection whose two ends are still open are delivered, late, as a
//! network that stalled would deliver them; a connection the replica closed
//! while frozen (it gave up on the request, at the deadline its fence gave
//! it) is dropped with what it held, so a request its sender abandoned never
//! reaches the server. That is the precondition under which the fence's
//! guarantee is stated (a request reaches the server before its sender's
//! deadline, or never).
//!
//! Invariant: while frozen, nothing is forwarded; after a thaw, bytes of one
//! connection are forwarded in the order they were sent.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy; dropping it stops it.
pub struct Proxy {
    pub addr: SocketAddr,
    frozen: watch::Sender<bool>,
    /// Connections dropped because their sender closed them while frozen.
    pub abandoned: Arc<AtomicU64>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    /// A proxy to `upstream`, on its own runtime.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (frozen, rx) = watch::channel(false);
        let abandoned = Arc::new(AtomicU64::new(0));
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind the proxy");
        let addr = listener.local_addr().unwrap();
        let ab = abandoned.clone();
        rt.spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let (rx, ab) = (rx.clone(), ab.clone());
                tokio::spawn(async move {
                    // Connected at once: the pumps hold the bytes while frozen.
                    let Ok(up) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    let (gone_tx, gone_rx) = watch::channel(false);
                    let a = tokio::spawn(pump(dr, uw, rx.clone(), Some(gone_tx), ab));
                    let b = tokio::spawn(pump_back(ur, dw, rx, gone_rx));
                    let _ = a.await;
                    let _ = b.await;
                });
            }
        });
        Proxy {
            addr,
            frozen,
            abandoned,
            rt: Some(rt),
        }
    }

    /// Holds every byte from now on.
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// Delivers what was held and lets traffic flow again.
    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }

    pub fn is_frozen(&self) -> bool {
        *self.frozen.borrow()
    }

    /// A copy of `kubeconfig` whose server is this proxy, written to `to`.
    pub fn kubeconfig(
        &self,
        kubeconfig: &std::path::Path,
        upstream: SocketAddr,
        to: &std::path::Path,
    ) {
        let text = std::fs::read_to_string(kubeconfig).unwrap();
        assert!(
            text.contains(&upstream.to_string()),
            "the kubeconfig does not name {upstream}: {text}"
        );
        std::fs::write(
            to,
            text.replace(&upstream.to_string(), &self.addr.to_string()),
        )
        .unwrap();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Replica to server. A close by the replica while frozen abandons what is
/// held: the connection is dropped without delivering it.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
    gone: Option<watch::Sender<bool>>,
    abandoned: Arc<AtomicU64>,
) {
    let mut held: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if held.is_empty() {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => held.extend_from_slice(&buf[..n]),
            }
        }
        // Hold while frozen, still reading, to see the sender give up.
        while *frozen.borrow() {
            tokio::select! {
                r = from.read(&mut buf) => match r {
                    Ok(0) | Err(_) => {
                        abandoned.fetch_add(1, Ordering::SeqCst);
                        if let Some(g) = &gone { g.send_replace(true); }
                        return;
                    }
                    Ok(n) => held.extend_from_slice(&buf[..n]),
                },
                _ = frozen.changed() => {}
            }
        }
        if to.write_all(&held).await.is_err() {
            break;
        }
        held.clear();
    }
    let _ = to.shutdown().await;
    if let Some(g) = &gone {
        g.send_replace(true);
    }
}

/// Server to replica: held while frozen; stops when the replica's side is
/// gone.
async fn pump_back(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
    mut gone: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = gone.wait_for(|g| *g) => return,
        };
        while *frozen.borrow() {
            tokio::select! {
                _ = frozen.changed() => {}
                _ = gone.wait_for(|g| *g) => return,
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
