//! HTTPS for the simulator (`SimConfig::tls`): kubectl's client configuration sends bearer
//! tokens and impersonation headers only to an `https` server (client-go's `clientcmd` reads
//! the user's credentials only when `IsConfigTransportTLS`), so an authenticating simulator
//! that kubectl drives serves TLS. The certificate is a fixed self-signed one for `127.0.0.1`,
//! `::1` and `localhost` (valid until 2126), committed with its key: it protects nothing, it
//! only makes the transport TLS. Kubeconfigs carry it as `certificate-authority-data`.
//!
//! Invariant: every accepted connection is served by the same router as plain HTTP, over
//! HTTP/1.1 after a TLS handshake; a failed handshake drops that connection only.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The server certificate (PEM).
pub const CERT_PEM: &str = include_str!("tls/cert.pem");
const KEY_PEM: &str = include_str!("tls/key.pem");

/// The rustls server configuration with the built-in certificate.
pub fn server_config() -> Arc<rustls::ServerConfig> {
    let certs = vec![CertificateDer::from_pem_slice(CERT_PEM.as_bytes()).expect("built-in cert")];
    let key = PrivateKeyDer::from_pem_slice(KEY_PEM.as_bytes()).expect("built-in key");
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("built-in cert and key match");
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// Serves `router` over TLS on `listener` until `stop` fires; open connections end with the
/// process or when their client closes them.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(server_config());
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, "apisim: accept failed");
                    continue;
                }
            },
            _ = &mut stop => return,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(error = %e, "apisim: TLS handshake failed");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "apisim: TLS connection ended with an error");
            }
        });
    }
}
