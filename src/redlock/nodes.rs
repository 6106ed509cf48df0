//! Node addresses (`host:port`, `redis://host:port`, `rediss://host:port`) and the TLS
//! settings of `rediss://` nodes.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::tls::{load_certs, load_key, load_roots, provider};

/// TLS for `rediss://` nodes (ignored when every node is plain).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// CA certificates (PEM) that sign the nodes' certificates. `None`: the system's
    /// trust store.
    pub ca_cert_file: Option<PathBuf>,
    /// A client certificate (PEM) for nodes that require one (mutual TLS,
    /// `tls-auth-clients yes`); give `key_file` with it.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key_file: Option<PathBuf>,
}

/// Where and how to reach one node.
pub(crate) struct Target {
    /// What to dial: `host:port`.
    pub(crate) dial: String,
    /// For `rediss://`: the connector and the name the certificate must carry.
    pub(crate) tls: Option<(TlsConnector, ServerName<'static>)>,
}

/// Splits a node address into its scheme's TLS flag and `host:port`.
pub(crate) fn parse(addr: &str) -> Result<(bool, String), String> {
    let (tls, rest) = if let Some(r) = addr.strip_prefix("rediss://") {
        (true, r)
    } else if let Some(r) = addr.strip_prefix("redis://") {
        (false, r)
    } else if addr.contains("://") {
        return Err(format!(
            "node address {addr:?}: only redis:// and rediss:// are known"
        ));
    } else {
        (false, addr)
    };
    let host_port = rest.strip_suffix('/').unwrap_or(rest);
    if host_port.contains('@') {
        return Err(format!(
            "node address {addr:?}: give the password as an option, not in the address"
        ));
    }
    if host_port.contains('/') || host_port.contains('?') {
        return Err(format!(
            "node address {addr:?}: a lock node takes no database or options (host:port only)"
        ));
    }
    let Some((host, port)) = host_port.rsplit_once(':') else {
        return Err(format!("node address {addr:?} is not host:port"));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("node address {addr:?} is not host:port"));
    }
    Ok((tls, host_port.to_string()))
}

/// The name a node's certificate must carry: its host, without IPv6 brackets.
fn server_name(host_port: &str) -> Result<ServerName<'static>, String> {
    let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host:?} is not a host name for TLS: {e}"))
}

impl Target {
    /// A target for `addr`; `tls` is built on first need by `connector`.
    pub(crate) fn new(
        addr: &str,
        connector: &mut impl FnMut() -> Result<TlsConnector, String>,
    ) -> Result<Target, String> {
        let (tls, dial) = parse(addr)?;
        let tls = if tls {
            Some((connector()?, server_name(&dial)?))
        } else {
            None
        };
        Ok(Target { dial, tls })
    }
}

/// The client side of TLS, from the files in `opts` (read once, here).
pub(crate) fn connector(opts: &TlsOptions) -> Result<TlsConnector, String> {
    let roots = match &opts.ca_cert_file {
        Some(ca) => load_roots(ca)?,
        None => {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(
                    "rediss:// node and no CA file given, and the system trust store is empty: give the CA that signs the nodes' certificates".into(),
                );
            }
            roots
        }
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots);
    let config = match (&opts.cert_file, &opts.key_file) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| format!("{} with {}: {e}", cert.display(), key.display()))?,
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("a client certificate needs both its cert file and its key file".into()),
    };
    Ok(TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_with_and_without_a_scheme() {
        assert_eq!(parse("h:1"), Ok((false, "h:1".into())));
        assert_eq!(parse("redis://h:1/"), Ok((false, "h:1".into())));
        assert_eq!(parse("rediss://h:1"), Ok((true, "h:1".into())));
        assert_eq!(
            parse("rediss://[::1]:7001"),
            Ok((true, "[::1]:7001".into()))
        );
        assert!(parse("http://h:1").is_err());
        assert!(parse("rediss://h").is_err());
        assert!(parse("rediss://h:x").is_err());
        assert!(parse("rediss://u:p@h:1").is_err());
        assert!(parse("redis://h:1/2").is_err());
        assert!(parse(":1").is_err());
    }

    #[test]
    fn the_certificate_name_is_the_host() {
        assert_eq!(
            server_name("[::1]:7001").unwrap(),
            ServerName::try_from("::1").unwrap()
        );
        assert_eq!(
            server_name("node1.example:7001").unwrap(),
            ServerName::try_from("node1.example").unwrap()
        );
    }
}
