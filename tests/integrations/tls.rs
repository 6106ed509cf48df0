//! TLS (`--tls-port`): commands over TLS, mutual TLS, bad certificate files, a
//! TLS-only node, and the Redlock client and `redlockd lock` over `rediss://`.
//!
//! The CA and certificates are made at test time with rcgen (ECDSA P-256), written to
//! a temporary directory per test: nothing secret or expiring is checked in.

use crate::support;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use redlockd::config::{AuthClients, TlsConfig};
use redlockd::redlock::{Redlock, RedlockOptions, TlsOptions};
use redlockd::{Config, Server, ServerHandle};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use support::{frame_len, resp, TIMEOUT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

const BIN: &str = env!("CARGO_BIN_EXE_redlockd");

/// A CA, a server certificate for localhost / 127.0.0.1 and a client certificate, as
/// PEM files in a directory of their own (removed on drop).
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new() -> Pki {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redlockd-tls-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki { dir };
        let (ca, ca_key) = make_ca("redlockd test CA");
        pki.write("ca.crt", &ca.pem());
        let (cert, key) = make_leaf(
            &ca,
            &ca_key,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        pki.write("server.crt", &cert);
        pki.write("server.key", &key);
        let (cert, key) = make_leaf(&ca, &ca_key, &[], ExtendedKeyUsagePurpose::ClientAuth);
        pki.write("client.crt", &cert);
        pki.write("client.key", &key);
        // A client certificate from a CA the server does not trust.
        let (other, other_key) = make_ca("some other CA");
        let (cert, key) = make_leaf(&other, &other_key, &[], ExtendedKeyUsagePurpose::ClientAuth);
        pki.write("stranger.crt", &cert);
        pki.write("stranger.key", &key);
        pki
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.join(name), text).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// TLS on a free port, clients need a certificate (Redis's default).
    fn server_tls(&self) -> TlsConfig {
        TlsConfig::new(
            0,
            self.path("server.crt"),
            self.path("server.key"),
            Some(&self.path("ca.crt")),
        )
    }

    /// A client trusting the CA, with the named client certificate (or none).
    fn connector(&self, client_cert: Option<&str>) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(self.path("ca.crt")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client_cert {
            None => builder.with_no_client_auth(),
            Some(name) => {
                let certs = CertificateDer::pem_file_iter(self.path(&format!("{name}.crt")))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let key = PrivateKeyDer::from_pem_file(self.path(&format!("{name}.key"))).unwrap();
                builder.with_client_auth_cert(certs, key).unwrap()
            }
        };
        TlsConnector::from(Arc::new(config))
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn make_ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap(), key)
}

/// A certificate signed by `ca` and its key, both PEM.
fn make_leaf(
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "redlockd test");
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A raw RESP client over TLS: send a command, read one reply frame.
struct TlsClient {
    stream: tokio_rustls::client::TlsStream<TcpStream>,
    buf: Vec<u8>,
}

impl TlsClient {
    async fn connect(addr: SocketAddr, connector: &TlsConnector) -> std::io::Result<TlsClient> {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from("localhost").unwrap();
        let stream = tokio::time::timeout(TIMEOUT, connector.connect(name, tcp))
            .await
            .expect("handshake in time")?;
        Ok(TlsClient {
            stream,
            buf: Vec::new(),
        })
    }

    /// The reply to `args`, or the error that ended the connection instead.
    async fn call(&mut self, args: &[&str]) -> std::io::Result<String> {
        self.stream.write_all(&resp(args)).await?;
        self.stream.flush().await?;
        loop {
            if let Some(n) = frame_len(&self.buf) {
                let frame: Vec<u8> = self.buf.drain(..n).collect();
                return Ok(String::from_utf8(frame).unwrap());
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(TIMEOUT, self.stream.read(&mut chunk))
                .await
                .expect("reply in time")?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

async fn start(change: impl FnOnce(&mut Config)) -> ServerHandle {
    let mut config = Config::for_tests();
    change(&mut config);
    Server::start(config).await.expect("server starts")
}

#[tokio::test]
async fn commands_over_tls_and_plain_side_by_side() {
    let pki = Pki::new();
    let h = start(|c| c.tls = Some(pki.server_tls())).await;
    let tls_addr = h.tls_addr().expect("a TLS port");
    assert_ne!(tls_addr, h.addr());
    let mut c = TlsClient::connect(tls_addr, &pki.connector(Some("client")))
        .await
        .unwrap();
    assert_eq!(c.call(&["PING"]).await.unwrap(), "+PONG\r\n");
    assert_eq!(
        c.call(&["SET", "lock", "v1", "NX", "PX", "10000"])
            .await
            .unwrap(),
        "+OK\r\n"
    );
    assert_eq!(c.call(&["GET", "lock"]).await.unwrap(), "$2\r\nv1\r\n");
    // A large reply crosses many TLS records and must arrive whole (flushed).
    let big = "x".repeat(300_000);
    assert_eq!(c.call(&["SET", "big", &big]).await.unwrap(), "+OK\r\n");
    let got = c.call(&["GET", "big"]).await.unwrap();
    assert_eq!(got, format!("$300000\r\n{big}\r\n"));
    // The plain port sees the same keyspace.
    let mut plain = support::conn(&h).await;
    let v: Option<String> = redis::cmd("GET")
        .arg("lock")
        .query_async(&mut plain)
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("v1"));
    // INFO and CONFIG GET name both ports.
    let info = c.call(&["INFO", "server"]).await.unwrap();
    assert!(
        info.contains(&format!("tcp_port:{}\r\n", h.addr().port())),
        "{info}"
    );
    assert!(
        info.contains(&format!("tls_port:{}\r\n", tls_addr.port())),
        "{info}"
    );
    let got = c.call(&["CONFIG", "GET", "tls-port"]).await.unwrap();
    let port = tls_addr.port().to_string();
    assert_eq!(
        got,
        format!("*2\r\n$8\r\ntls-port\r\n${}\r\n{port}\r\n", port.len())
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "tls-port", "1"]).await.unwrap(),
        "-ERR CONFIG SET failed (possibly related to argument 'tls-port') - can't set immutable config\r\n"
    );
    h.shutdown().await;
}

/// With `tls-auth-clients yes` a client without a certificate, or with one from
/// another CA, gets no reply: the handshake fails (TLS 1.3: at the client's first
/// read, when the server's alert arrives).
#[tokio::test]
async fn mutual_tls_refuses_a_client_without_a_certificate() {
    let pki = Pki::new();
    let h = start(|c| c.tls = Some(pki.server_tls())).await;
    let addr = h.tls_addr().unwrap();
    for cert in [None, Some("stranger")] {
        let refused = match TlsClient::connect(addr, &pki.connector(cert)).await {
            Err(_) => true,
            Ok(mut c) => c.call(&["PING"]).await.is_err(),
        };
        assert!(refused, "a client with {cert:?} was served");
    }
    // The server is unharmed: a client with a good certificate is served.
    let mut c = TlsClient::connect(addr, &pki.connector(Some("client")))
        .await
        .unwrap();
    assert_eq!(c.call(&["PING"]).await.unwrap(), "+PONG\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn tls_auth_clients_optional_and_no() {
    let pki = Pki::new();
    for auth in [AuthClients::Optional, AuthClients::No] {
        let h = start(|c| {
            let mut tls = pki.server_tls();
            tls.auth_clients = auth;
            c.tls = Some(tls);
        })
        .await;
        let addr = h.tls_addr().unwrap();
        let mut c = TlsClient::connect(addr, &pki.connector(None))
            .await
            .unwrap();
        assert_eq!(c.call(&["PING"]).await.unwrap(), "+PONG\r\n", "{auth:?}");
        let mut c = TlsClient::connect(addr, &pki.connector(Some("client")))
            .await
            .unwrap();
        assert_eq!(c.call(&["PING"]).await.unwrap(), "+PONG\r\n", "{auth:?}");
        if auth == AuthClients::Optional {
            // Optional still checks a certificate that is presented.
            let refused = match TlsClient::connect(addr, &pki.connector(Some("stranger"))).await {
                Err(_) => true,
                Ok(mut c) => c.call(&["PING"]).await.is_err(),
            };
            assert!(refused, "an untrusted client certificate was accepted");
        }
        h.shutdown().await;
    }
}

/// Every bad TLS setting stops the start with an error that names the file.
#[tokio::test]
async fn a_bad_certificate_file_is_a_startup_error() {
    let pki = Pki::new();
    pki.write("garbage.pem", "this is not PEM\n");
    let missing = pki.path("missing.crt");
    let cases: Vec<(TlsConfig, String)> = vec![
        (
            TlsConfig {
                cert_file: missing.clone(),
                ..pki.server_tls()
            },
            format!("cannot read {}", missing.display()),
        ),
        (
            TlsConfig {
                cert_file: pki.path("garbage.pem"),
                ..pki.server_tls()
            },
            format!(
                "{}: no certificate in it",
                pki.path("garbage.pem").display()
            ),
        ),
        (
            TlsConfig {
                key_file: pki.path("server.crt"),
                ..pki.server_tls()
            },
            format!(
                "{}: no usable private key",
                pki.path("server.crt").display()
            ),
        ),
        (
            TlsConfig {
                key_file: pki.path("client.key"),
                ..pki.server_tls()
            },
            format!(
                "{} with {}",
                pki.path("server.crt").display(),
                pki.path("client.key").display()
            ),
        ),
        (
            TlsConfig {
                ca_cert_file: Some(pki.path("garbage.pem")),
                ..pki.server_tls()
            },
            format!(
                "{}: no certificate in it",
                pki.path("garbage.pem").display()
            ),
        ),
        (
            TlsConfig {
                ca_cert_file: None,
                ..pki.server_tls()
            },
            "needs tls-ca-cert-file".to_string(),
        ),
    ];
    for (tls, want) in cases {
        let mut config = Config::for_tests();
        config.tls = Some(tls);
        let err = Server::start(config)
            .await
            .err()
            .expect("the start must fail");
        assert!(matches!(err, redlockd::StartError::Config(_)), "{err:?}");
        assert!(err.to_string().contains(&want), "{err} lacks {want:?}");
    }
    // The binary: a clear message and exit 64, as for any bad setting.
    let out = std::process::Command::new(BIN)
        .args(["--port", "0", "--tls-port", "1", "--log", "off"])
        .arg("--tls-cert-file")
        .arg(&missing)
        .arg("--tls-key-file")
        .arg(pki.path("server.key"))
        .arg("--tls-ca-cert-file")
        .arg(pki.path("ca.crt"))
        .arg("--dir")
        .arg(pki.path("data"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{text}");
    assert!(
        text.contains(&format!("cannot read {}", missing.display())),
        "{text}"
    );
    let out = std::process::Command::new(BIN)
        .args(["--port", "0", "--tls-port", "1", "--log", "off"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{text}");
    assert!(
        text.contains("tls-port needs tls-cert-file and tls-key-file"),
        "{text}"
    );
}

/// `plain: false` (the CLI's `--port 0` with `--tls-port`): nothing listens on the
/// plain port, the TLS port serves, and INFO / CONFIG GET say so as Redis does.
#[tokio::test]
async fn plain_tcp_off_serves_tls_only() {
    let pki = Pki::new();
    // A port that is free now: the node is told to use it but must not listen on it.
    let plain_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = start(|c| {
        c.port = plain_port;
        c.plain = false;
        c.tls = Some(pki.server_tls());
    })
    .await;
    let tls_addr = h.tls_addr().unwrap();
    assert_eq!(h.addr(), tls_addr);
    let refused = TcpStream::connect(("127.0.0.1", plain_port)).await;
    assert!(refused.is_err(), "something listens on the plain port");
    let mut c = TlsClient::connect(tls_addr, &pki.connector(Some("client")))
        .await
        .unwrap();
    assert_eq!(c.call(&["PING"]).await.unwrap(), "+PONG\r\n");
    let info = c.call(&["INFO", "server"]).await.unwrap();
    assert!(
        info.contains(&format!("tcp_port:{}\r\n", tls_addr.port())),
        "{info}"
    );
    assert_eq!(
        c.call(&["CONFIG", "GET", "port"]).await.unwrap(),
        "*2\r\n$4\r\nport\r\n$1\r\n0\r\n"
    );
    h.shutdown().await;
    // Neither plain nor TLS: a node that listens nowhere is refused.
    let mut config = Config::for_tests();
    config.plain = false;
    let err = Server::start(config).await.err().expect("refused");
    assert!(err.to_string().contains("no port to listen on"), "{err}");
}

/// The Redlock client over `rediss://` to five mutual-TLS nodes, and what it says when
/// the client certificate is missing.
#[tokio::test]
async fn redlock_over_tls_to_five_nodes() {
    let pki = Pki::new();
    let mut nodes = Vec::new();
    for _ in 0..5 {
        nodes.push(
            start(|c| {
                c.plain = false;
                c.tls = Some(pki.server_tls());
            })
            .await,
        );
    }
    let addrs: Vec<String> = nodes
        .iter()
        .map(|h| format!("rediss://localhost:{}", h.tls_addr().unwrap().port()))
        .collect();
    let tls = TlsOptions {
        ca_cert_file: Some(pki.path("ca.crt")),
        cert_file: Some(pki.path("client.crt")),
        key_file: Some(pki.path("client.key")),
    };
    let opts = RedlockOptions {
        tls: tls.clone(),
        node_timeout: Some(Duration::from_secs(2)),
        ..Default::default()
    };
    let redlock = Redlock::new(addrs.clone(), opts).unwrap();
    let lock = redlock
        .try_acquire(b"job", Duration::from_secs(10))
        .await
        .unwrap();
    // Held on every node: a second client is refused.
    let other = Redlock::new(
        addrs.clone(),
        RedlockOptions {
            tls: tls.clone(),
            node_timeout: Some(Duration::from_secs(2)),
            retry_count: 0,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(other
        .try_acquire(b"job", Duration::from_secs(10))
        .await
        .is_err());
    assert_eq!(redlock.release(&lock).await, 5);

    // Without a client certificate every node refuses: "too few nodes reachable".
    let no_cert = Redlock::new(
        addrs.clone(),
        RedlockOptions {
            tls: TlsOptions {
                cert_file: None,
                key_file: None,
                ..tls.clone()
            },
            node_timeout: Some(Duration::from_secs(2)),
            retry_count: 0,
            ..Default::default()
        },
    )
    .unwrap();
    let err = no_cert
        .try_acquire(b"job", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(err.nodes_unavailable(), "{err}");

    // A bad CA file is a configuration error at once.
    let err = Redlock::new(
        addrs.clone(),
        RedlockOptions {
            tls: TlsOptions {
                ca_cert_file: Some(pki.path("missing.crt")),
                ..tls.clone()
            },
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");

    // `redlockd lock` over TLS: the command runs while the lock is held.
    let out = tokio::process::Command::new(BIN)
        .arg("lock")
        .arg("--nodes")
        .arg(addrs.join(","))
        .arg("--tls-ca-cert-file")
        .arg(pki.path("ca.crt"))
        .env("REDLOCKD_TLS_CLIENT_CERT_FILE", pki.path("client.crt"))
        .env("REDLOCKD_TLS_CLIENT_KEY_FILE", pki.path("client.key"))
        .args(["--node-timeout", "2s", "job", "--", "echo", "ran"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    // Without the client certificate: 69, nodes unavailable.
    let out = tokio::process::Command::new(BIN)
        .arg("lock")
        .arg("--nodes")
        .arg(addrs.join(","))
        .arg("--tls-ca-cert-file")
        .arg(pki.path("ca.crt"))
        .args(["--node-timeout", "2s", "job", "--", "echo", "ran"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(69),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    for h in nodes {
        h.shutdown().await;
    }
}

/// A connection that never starts its handshake (or sends plain text) holds nothing
/// up: other clients are served, and shutdown does not wait for it.
#[tokio::test]
async fn a_silent_or_plain_text_connection_to_the_tls_port_blocks_nothing() {
    let pki = Pki::new();
    let h = start(|c| c.tls = Some(pki.server_tls())).await;
    let addr = h.tls_addr().unwrap();
    let _silent = TcpStream::connect(addr).await.unwrap();
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(&resp(&["PING"])).await.unwrap();
    let mut answer = Vec::new();
    // The server answers plain text with a TLS alert (or nothing) and closes.
    let _ = tokio::time::timeout(TIMEOUT, plain.read_to_end(&mut answer))
        .await
        .expect("the plain-text connection is closed in time");
    assert!(!answer.starts_with(b"+PONG"), "{answer:?}");
    let mut c = TlsClient::connect(addr, &pki.connector(Some("client")))
        .await
        .unwrap();
    assert_eq!(c.call(&["PING"]).await.unwrap(), "+PONG\r\n");
    let started = std::time::Instant::now();
    tokio::time::timeout(TIMEOUT, h.shutdown())
        .await
        .expect("shutdown in time");
    // The connection loop's drain bound is 300 ms; a waiting handshake must not use it.
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "shutdown took {:?}",
        started.elapsed()
    );
}

/// Handshakes in progress count toward maxclients: connections that never finish one
/// cannot crowd the node past its limit; once they go, clients are served again.
#[tokio::test]
async fn handshakes_in_progress_count_toward_maxclients() {
    let pki = Pki::new();
    let h = start(|c| {
        c.maxclients = 2;
        c.tls = Some(pki.server_tls());
    })
    .await;
    let addr = h.tls_addr().unwrap();
    let connector = pki.connector(Some("client"));
    let mut served = TlsClient::connect(addr, &connector).await.unwrap();
    assert_eq!(served.call(&["PING"]).await.unwrap(), "+PONG\r\n");
    let silent = TcpStream::connect(addr).await.unwrap();
    // One client and one handshake in progress: the limit (2) is reached.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let refused = match TlsClient::connect(addr, &connector).await {
            Err(_) => true,
            Ok(mut c) => c.call(&["PING"]).await.is_err(),
        };
        if refused {
            break;
        }
        // The silent connection's task may not have counted itself yet.
        assert!(tokio::time::Instant::now() < deadline, "never refused");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(silent);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        if let Ok(mut c) = TlsClient::connect(addr, &connector).await {
            if let Ok(reply) = c.call(&["PING"]).await {
                assert_eq!(reply, "+PONG\r\n");
                break;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "never served again");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(served.call(&["PING"]).await.unwrap(), "+PONG\r\n");
    let info = served.call(&["INFO", "stats"]).await.unwrap();
    assert!(
        info.contains("rejected_connections:") && !info.contains("rejected_connections:0\r\n"),
        "{info}"
    );
    h.shutdown().await;
}
