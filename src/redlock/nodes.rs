//! Node addresses (`host:port`, `redis://[user[:password]@]host:port`, `rediss://...`),
//! their credentials and the TLS settings of `rediss://` nodes.

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

/// What a connection sends with AUTH: `AUTH user password`, or `AUTH password` for the
/// default user.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Auth {
    pub(crate) user: Option<String>,
    pub(crate) password: String,
}

impl Auth {
    /// The credentials a node uses: its address's, else the options' (a user from the
    /// address takes the options' password when the address has none).
    pub(crate) fn pick(
        from_addr: Option<(Option<String>, Option<String>)>,
        user: Option<&str>,
        password: Option<&str>,
    ) -> Result<Option<Auth>, String> {
        let (user, password) = match from_addr {
            Some((u, p)) => (u, p.or(password.map(str::to_string))),
            None => (user.map(str::to_string), password.map(str::to_string)),
        };
        match (user, password) {
            (user, Some(password)) => Ok(Some(Auth { user, password })),
            (None, None) => Ok(None),
            (Some(u), None) => Err(format!(
                "user {u:?} has no password: give one (a nopass user accepts any)"
            )),
        }
    }
}

/// Where and how to reach one node.
#[derive(Clone)]
pub(crate) struct Target {
    /// What to dial: `host:port`.
    pub(crate) dial: String,
    /// For `rediss://`: the connector and the name the certificate must carry.
    pub(crate) tls: Option<(TlsConnector, ServerName<'static>)>,
    /// AUTH on every new connection.
    pub(crate) auth: Option<Auth>,
}

/// A node address, taken apart.
#[derive(Debug, PartialEq)]
pub(crate) struct Parsed {
    pub(crate) tls: bool,
    /// `host:port`.
    pub(crate) dial: String,
    /// `user:password@` from a URL: the user (none when empty) and the password.
    pub(crate) credentials: Option<(Option<String>, Option<String>)>,
}

/// Decodes `%XX` escapes, as a URL's user and password carry reserved characters.
fn percent_decode(text: &str, addr: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("node address {addr:?}: a bad %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("node address {addr:?}: credentials are not UTF-8"))
}

/// Splits a node address into its scheme's TLS flag, `host:port` and the URL's
/// credentials.
pub(crate) fn parse(addr: &str) -> Result<Parsed, String> {
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
    let (credentials, host_port) = match host_port.rsplit_once('@') {
        Some(_) if !addr.contains("://") => {
            return Err(format!(
                "node address {addr:?}: credentials go in a URL (redis://user:password@host:port)"
            ))
        }
        Some((creds, host_port)) => {
            let (user, password) = match creds.split_once(':') {
                Some((u, p)) => (u, Some(percent_decode(p, addr)?)),
                None => (creds, None),
            };
            let user = (!user.is_empty())
                .then(|| percent_decode(user, addr))
                .transpose()?;
            (Some((user, password)), host_port)
        }
        None => (None, host_port),
    };
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
    Ok(Parsed {
        tls,
        dial: host_port.to_string(),
        credentials,
    })
}

/// The name a node's certificate must carry: its host, without IPv6 brackets.
fn server_name(host_port: &str) -> Result<ServerName<'static>, String> {
    let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host:?} is not a host name for TLS: {e}"))
}

impl Target {
    /// A target for `addr`; `tls` is built on first need by `connector`. The
    /// address's credentials win over `user` / `password` (the options').
    pub(crate) fn new(
        addr: &str,
        connector: &mut impl FnMut() -> Result<TlsConnector, String>,
        user: Option<&str>,
        password: Option<&str>,
    ) -> Result<Target, String> {
        let Parsed {
            tls,
            dial,
            credentials,
        } = parse(addr)?;
        let auth = Auth::pick(credentials, user, password)
            .map_err(|e| format!("node address {addr:?}: {e}"))?;
        let tls = if tls {
            Some((connector()?, server_name(&dial)?))
        } else {
            None
        };
        Ok(Target { dial, tls, auth })
    }
}

impl Target {
    /// Another node of the same cluster, at `dial` (`host:port`): the same TLS setting
    /// and credentials, the certificate name of its own host.
    pub(crate) fn sibling(&self, dial: String) -> Result<Target, String> {
        let tls = match &self.tls {
            Some((connector, _)) => Some((connector.clone(), server_name(&dial)?)),
            None => None,
        };
        Ok(Target {
            dial,
            tls,
            auth: self.auth.clone(),
        })
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

    fn parsed(tls: bool, dial: &str, credentials: Option<(Option<&str>, Option<&str>)>) -> Parsed {
        Parsed {
            tls,
            dial: dial.into(),
            credentials: credentials.map(|(u, p)| (u.map(Into::into), p.map(Into::into))),
        }
    }

    #[test]
    fn addresses_with_and_without_a_scheme() {
        assert_eq!(parse("h:1"), Ok(parsed(false, "h:1", None)));
        assert_eq!(parse("redis://h:1/"), Ok(parsed(false, "h:1", None)));
        assert_eq!(parse("rediss://h:1"), Ok(parsed(true, "h:1", None)));
        assert_eq!(
            parse("rediss://[::1]:7001"),
            Ok(parsed(true, "[::1]:7001", None))
        );
        assert!(parse("http://h:1").is_err());
        assert!(parse("rediss://h").is_err());
        assert!(parse("rediss://h:x").is_err());
        assert!(parse("u:p@h:1").is_err());
        assert!(parse("redis://h:1/2").is_err());
        assert!(parse(":1").is_err());
    }

    #[test]
    fn credentials_come_from_the_url_or_the_options() {
        assert_eq!(
            parse("rediss://alice:p%40ss@h:1"),
            Ok(parsed(true, "h:1", Some((Some("alice"), Some("p@ss")))))
        );
        assert_eq!(
            parse("redis://:pw@h:1/"),
            Ok(parsed(false, "h:1", Some((None, Some("pw")))))
        );
        assert_eq!(
            parse("redis://bob@h:1"),
            Ok(parsed(false, "h:1", Some((Some("bob"), None))))
        );
        assert!(parse("redis://a:%zz@h:1").is_err());
        let auth = |user: Option<&str>, password: &str| {
            Ok(Some(Auth {
                user: user.map(Into::into),
                password: password.into(),
            }))
        };
        assert_eq!(Auth::pick(None, Some("u"), Some("p")), auth(Some("u"), "p"));
        assert_eq!(Auth::pick(None, None, Some("p")), auth(None, "p"));
        assert_eq!(Auth::pick(None, None, None), Ok(None));
        assert!(Auth::pick(None, Some("u"), None).is_err());
        let url = |u: &str, p: Option<&str>| Some((Some(u.to_string()), p.map(Into::into)));
        assert_eq!(
            Auth::pick(url("a", Some("x")), Some("u"), Some("p")),
            auth(Some("a"), "x")
        );
        assert_eq!(
            Auth::pick(url("a", None), Some("u"), Some("p")),
            auth(Some("a"), "p")
        );
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
