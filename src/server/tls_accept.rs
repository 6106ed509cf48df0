//! The TLS port (`--tls-port`): the certificates are read once, at start, into one
//! rustls config; each accepted connection does its handshake in its own task and is
//! then served by the same connection loop as plain TCP.

use crate::config::{AuthClients, ConfigError, TlsConfig};
use crate::node::Shared;
use crate::tls::{load_certs, load_key, load_roots, provider};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// A client that has not finished its handshake by then is dropped: a connection that
/// never speaks must not hold a task and a socket forever (a plain connection costs
/// nothing until it sends; a half-done handshake holds rustls state).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS port: the acceptor and the handshakes in progress on it.
#[derive(Clone)]
pub(super) struct Tls {
    acceptor: TlsAcceptor,
    /// Handshakes count toward maxclients: connections that never finish one cannot
    /// pile up past the limit (each holds a socket and rustls state until the timeout).
    handshakes: Arc<AtomicUsize>,
}

/// Counts one handshake in progress until dropped.
struct Pending(Arc<AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reads the certificate, key and CA files and builds the TLS port's state. Every
/// error names the file and what is wrong with it.
pub(super) fn load(tls: &TlsConfig) -> Result<Tls, ConfigError> {
    Ok(Tls {
        acceptor: acceptor(tls)?,
        handshakes: Arc::new(AtomicUsize::new(0)),
    })
}

fn acceptor(tls: &TlsConfig) -> Result<TlsAcceptor, ConfigError> {
    let certs = load_certs(&tls.cert_file).map_err(ConfigError::Tls)?;
    let key = load_key(&tls.key_file).map_err(ConfigError::Tls)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls(format!("TLS setup: {e}")))?;
    let builder = match tls.auth_clients {
        AuthClients::No => builder.with_no_client_auth(),
        auth => {
            let ca = tls.ca_cert_file.as_deref().ok_or_else(|| {
                ConfigError::Tls("tls-auth-clients needs tls-ca-cert-file".into())
            })?;
            let roots = Arc::new(load_roots(ca).map_err(ConfigError::Tls)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let verifier = if auth == AuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| ConfigError::Tls(format!("{}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        ConfigError::Tls(format!(
            "{} with {}: {e}",
            tls.cert_file.display(),
            tls.key_file.display()
        ))
    })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Completes the handshake, then serves the connection. A failed handshake (no client
/// certificate under mutual TLS, an untrusted one, plain text on the TLS port) is
/// logged as Redis does ("Error accepting a client connection") and the socket closed.
/// Past maxclients (clients plus handshakes in progress) the socket is closed at once:
/// before a handshake there is no way to send Redis's error.
pub(super) async fn serve(
    shared: Arc<Shared>,
    tls: Tls,
    stream: TcpStream,
    peer: SocketAddr,
    laddr: SocketAddr,
) {
    let pending = Pending(tls.handshakes.clone());
    let in_progress = tls.handshakes.fetch_add(1, Ordering::SeqCst) + 1;
    if shared.clients.len() + in_progress > shared.maxclients() {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%peer, "TLS connection refused: max number of clients reached");
        return;
    }
    let stream = {
        let stop = shared.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if shared.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream));
        tokio::select! {
        done = handshake => match done {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                tracing::warn!(%peer, "Error accepting a client connection: {e}");
                return;
            }
            Err(_) => {
                tracing::warn!(%peer, "Error accepting a client connection: TLS handshake timed out");
                return;
            }
        },
        // Shutting down: a half-done handshake must not delay the clean-shutdown snapshot.
        _ = stop => return,
        }
    };
    drop(pending);
    super::connection::serve(shared, stream, peer, laddr).await;
}
