//! What the server's TLS and the client's `rediss://` share: the crypto provider and
//! reading PEM files, with errors that name the file.

use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::RootCertStore;

/// ring, chosen explicitly rather than through rustls's process-wide default, so that
/// another crate in the same program enabling aws-lc-rs cannot make the choice
/// ambiguous (rustls panics then).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Every certificate in a PEM file, in file order (a chain: leaf first).
pub(crate) fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{shown}: not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{shown}: no certificate in it (expected -----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        format!("{shown}: no usable private key in it (expected a PEM PRIVATE KEY): {e}")
    })
}

/// The CA certificates in a PEM file, as trust anchors.
pub(crate) fn load_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| format!("{}: not a usable CA certificate: {e}", path.display()))?;
    }
    Ok(roots)
}
