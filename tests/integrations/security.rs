//! Exposure and secrets, each case compared with redis-server 7.0 on the same input:
//! protected mode (a client from another network, made in a namespace), channel
//! rights taken from live subscribers, passwords kept out of SLOWLOG, failed AUTHs
//! that cannot forge or flood the log, a metrics port that cannot starve the lock
//! port, redis.call replies counted against the Lua memory limit, and ACL SAVE.

use crate::support;
use redis::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::process::{free_ports, wait_for_pong, BIN};
use support::redis_server::RedisNode;
use support::*;

/// Redis 7.0's answer to a client from another network while the default user has
/// no password (its text, typo included).
const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

// ---------------------------------------------------------------------------------
// Protected mode

/// A network namespace joined to this one by a veth pair: this side has `host_ip`,
/// the namespace `peer_ip`. Removed on drop.
struct Netns {
    name: String,
    veth: String,
    host_ip: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    /// Or why it cannot be made here (not root, no `ip`, no namespaces).
    fn make() -> Result<Netns, String> {
        let tag = std::process::id() % 60_000;
        let (a, b) = (tag / 250 % 250 + 1, tag % 250 + 1);
        let ns = Netns {
            name: format!("rlsec{tag}"),
            veth: format!("rlsec{tag}a"),
            host_ip: format!("10.{}.{}.1", 200 + a % 50, b),
        };
        let peer = format!("rlsec{tag}b");
        let peer_ip = format!("10.{}.{}.2", 200 + a % 50, b);
        ip(&["netns", "add", &ns.name])?;
        // From here on, drop removes what was made.
        ip(&[
            "link", "add", &ns.veth, "type", "veth", "peer", "name", &peer,
        ])?;
        ip(&["link", "set", &peer, "netns", &ns.name])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", ns.host_ip),
            "dev",
            &ns.veth,
        ])?;
        ip(&["link", "set", &ns.veth, "up"])?;
        ip(&[
            "-n",
            &ns.name,
            "addr",
            "add",
            &format!("{peer_ip}/24"),
            "dev",
            &peer,
        ])?;
        ip(&["-n", &ns.name, "link", "set", &peer, "up"])?;
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Sends `request` to `host_ip:port` from inside the namespace and returns every
    /// byte read until the server closes (or 1 s passes: then "(still open)" is added).
    async fn exchange(&self, port: u16, request: &[u8]) -> String {
        let (name, host_ip, request) = (self.name.clone(), self.host_ip.clone(), request.to_vec());
        tokio::task::spawn_blocking(move || exchange(&name, &host_ip, port, &request))
            .await
            .unwrap()
    }
}

/// `Netns::exchange`, blocking.
fn exchange(ns: &str, host_ip: &str, port: u16, request: &[u8]) -> String {
    let script = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(bytes.fromhex(sys.argv[3]))
s.settimeout(1)
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    out += b"(still open)"
except ConnectionResetError:
    out += b"(reset)"
sys.stdout.buffer.write(out)
"#;
    let hex: String = request.iter().map(|b| format!("{b:02x}")).collect();
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", script])
        .args([host_ip, &port.to_string(), &hex])
        .stdin(Stdio::null())
        .output()
        .expect("run python3 in the namespace");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.veth]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// The namespace, or None after saying why the test cannot run here.
fn netns_or_skip(test: &str) -> Option<Netns> {
    match Netns::make() {
        Ok(ns) => Some(ns),
        Err(e) => {
            // Straight to the process's stderr: the harness's capture (which hides what
            // a passing test prints) would make the skip silent.
            let line =
                format!("skipped: {test}: cannot make a network namespace and veth pair ({e})\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn protected_mode_denies_clients_from_another_network() {
    let Some(ns) = netns_or_skip("protected mode") else {
        return;
    };
    // Every address: loopback clients (the admin here) and the namespace's.
    let node = start_with(|c| c.bind = std::net::Ipv4Addr::UNSPECIFIED.into()).await;
    let port = node.addr().port();
    let ping = resp(&["PING"]);
    // From another network while the default user has no password: Redis's text, then
    // the connection is closed.
    let answer = ns.exchange(port, &ping).await;
    assert_eq!(answer, DENIED);
    let mut local = connect_url(&format!("redis://127.0.0.1:{port}/")).await;
    let info: String = q(&mut local, &["INFO", "stats"]).await.unwrap();
    assert!(info.contains("rejected_connections:1\r\n"), "{info}");
    assert_eq!(
        query(&mut local, &["CONFIG", "GET", "protected-mode"])
            .await
            .unwrap(),
        Value::Array(vec![bulk_value("protected-mode"), bulk_value("yes")])
    );
    // Off: served.
    let _: () = q(&mut local, &["CONFIG", "SET", "protected-mode", "no"])
        .await
        .unwrap();
    assert_eq!(ns.exchange(port, &ping).await, "+PONG\r\n(still open)");
    // On again, but the default user has a password: served (and asked for it).
    let _: () = q(&mut local, &["CONFIG", "SET", "protected-mode", "yes"])
        .await
        .unwrap();
    assert_eq!(ns.exchange(port, &ping).await, DENIED);
    let _: () = q(&mut local, &["ACL", "SETUSER", "default", ">pw"])
        .await
        .unwrap();
    assert_eq!(
        ns.exchange(port, &resp(&["AUTH", "pw"])).await,
        "+OK\r\n(still open)"
    );
    assert_eq!(
        query_err(&mut local, &["CONFIG", "SET", "protected-mode", "maybe"]).await,
        "ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'"
    );
    node.shutdown().await;

    // Redis 7.0 on the same input, bound to the same address.
    if cfg!(have_redis_server) {
        let redis = RedisNode::start_with_args(None, &["--bind", "127.0.0.1", &ns.host_ip]);
        // Nothing sent: Redis closes with the client's input unread, so a request
        // sent at once can turn its close into a reset (redlockd reads it first).
        assert_eq!(ns.exchange(redis.port, b"").await, DENIED);
    }
}

#[test]
fn protected_mode_flag_and_config_file() {
    // `--protected-mode no` on a loopback node: CONFIG GET shows it.
    let node = support::process::Node::spawn(&["--protected-mode", "no"]);
    let reply = support::process::call(node.port, &["CONFIG", "GET", "protected-mode"]);
    assert_eq!(reply.as_deref(), Some("*2"));
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", node.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("protected-mode")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["protected-mode", "no"]);
    let bad = Command::new(BIN)
        .args(["--protected-mode", "maybe"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

fn bulk_value(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

// ---------------------------------------------------------------------------------
// Channel rights taken from live subscribers

const PUBSUB_USERS: &str = "\
user default on nopass ~* &* +@all
user ps on >p ~* &notify:* +@all
user other on >o ~* &* +@all
";

/// A subscriber as `user`: its connection, after its SUBSCRIBE (or PSUBSCRIBE) replies.
async fn subscriber(
    addr: std::net::SocketAddr,
    user: &str,
    pass: &str,
    cmd: &str,
    channel: &str,
) -> Raw {
    let mut c = Raw::connect(addr).await;
    c.check(&["AUTH", user, pass], OK).await;
    c.send(&resp(&[cmd, channel])).await;
    let _confirmation = c.reply().await;
    c
}

async fn publish(addr: std::net::SocketAddr) -> String {
    let mut c = Raw::connect(addr).await;
    c.send(&resp(&["PUBLISH", "notify:x", "m"])).await;
    c.reply().await
}

/// The same session on redlockd and on redis-server: what PUBLISH counts after each
/// change of channel rights.
async fn revocation_session(addr: std::net::SocketAddr, aclfile: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut admin = Raw::connect(addr).await;
    let mut ps = subscriber(addr, "ps", "p", "SUBSCRIBE", "notify:x").await;
    let _other = subscriber(addr, "other", "o", "SUBSCRIBE", "notify:x").await;
    out.push(publish(addr).await);
    let _ = ps.reply().await; // the message
                              // Rights that still cover the channel: nothing happens.
    admin
        .check(&["ACL", "SETUSER", "ps", "&notify:x"], OK)
        .await;
    out.push(publish(addr).await);
    let _ = ps.reply().await;
    // Revoked: the subscriber is gone before the next PUBLISH.
    admin
        .check(&["ACL", "SETUSER", "ps", "resetchannels"], OK)
        .await;
    out.push(publish(addr).await);
    out.push(ps.closed().await.to_string());
    // A pattern is allowed only by the same pattern, as written.
    let mut pat = subscriber(addr, "other", "o", "PSUBSCRIBE", "no*").await;
    admin
        .check(&["ACL", "SETUSER", "other", "resetchannels", "&no*"], OK)
        .await;
    out.push(publish(addr).await);
    let _ = pat.reply().await;
    admin
        .check(
            &["ACL", "SETUSER", "other", "resetchannels", "&notify:*"],
            OK,
        )
        .await;
    out.push(publish(addr).await);
    out.push(pat.closed().await.to_string());
    // ACL LOAD with a file that takes the channel away.
    std::fs::write(aclfile, PUBSUB_USERS).unwrap();
    admin.check(&["ACL", "LOAD"], OK).await;
    let mut ps = subscriber(addr, "ps", "p", "SUBSCRIBE", "notify:x").await;
    out.push(publish(addr).await);
    let _ = ps.reply().await;
    std::fs::write(aclfile, PUBSUB_USERS.replace("&notify:*", "resetchannels")).unwrap();
    admin.check(&["ACL", "LOAD"], OK).await;
    out.push(publish(addr).await);
    out.push(ps.closed().await.to_string());
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn revoked_channel_rights_disconnect_live_subscribers() {
    let file = TempPath::new("pubsub-acl");
    std::fs::write(&file.0, PUBSUB_USERS).unwrap();
    let path = file.0.clone();
    let node = start_with(move |c| c.aclfile = Some(path)).await;
    let ours = revocation_session(node.addr(), &file.0).await;
    let expected = [
        ":2", ":2", ":1", "true", ":2", ":1", "true", ":2", ":1", "true",
    ];
    assert_eq!(
        ours,
        expected.map(|s| if s == "true" {
            s.to_string()
        } else {
            format!("{s}\r\n")
        })
    );
    if cfg!(have_redis_server) {
        let file = TempPath::new("pubsub-acl-redis");
        std::fs::write(&file.0, PUBSUB_USERS).unwrap();
        let redis = RedisNode::start_with_args(None, &["--aclfile", file.0.to_str().unwrap()]);
        let theirs = revocation_session(redis.addr(), &file.0).await;
        // ACL LOAD: Redis 7.0 disconnects every client of every user but `default`
        // (the other subscriber too: 1 then 0); Redis 7.2, whose behaviour redlockd
        // reports, only those who lost a right, as here.
        assert_eq!(ours[..7], theirs[..7]);
        assert_eq!(theirs[7..], [":1\r\n", ":0\r\n", "true"]);
    }
}

// ---------------------------------------------------------------------------------
// SLOWLOG keeps no secret

/// Commands with secrets, as a client sends them; then every SLOWLOG entry's
/// arguments, oldest first.
async fn slowlog_session(addr: std::net::SocketAddr) -> Vec<Vec<String>> {
    let mut c = Raw::connect(addr).await;
    c.send(&resp(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]))
        .await;
    c.reply().await;
    c.send(&resp(&["SLOWLOG", "RESET"])).await;
    c.reply().await;
    let session: &[&[&str]] = &[
        &["ACL", "SETUSER", "u", "on", ">TOPSECRETPW", "~*", "+@all"],
        &["CONFIG", "SET", "requirepass", "X", "maxmemory", "bogus"],
        &["CONFIG", "SET", "maxmemory", "bogus", "requirepass", "X"],
        &["AUTH", "u", "TOPSECRETPW"],
        &["AUTH", "u", "wrong"],
        &["AUTH", "onlypass"],
        &["AUTH", "a", "b", "c"],
        &["HELLO", "2", "AUTH", "u", "TOPSECRETPW", "SETNAME", "n"],
        &["HELLO", "4", "AUTH", "u", "TOPSECRETPW"],
        &["HELLO", "2", "AUTH", "u"],
        &["ACL", "SETUSER", "v", "on", "bogus"],
        &["ACL", "DRYRUN", "u", "GET", "k"],
    ];
    for cmd in session {
        c.send(&resp(cmd)).await;
        c.reply().await;
    }
    c.send(&resp(&["SLOWLOG", "GET", "100"])).await;
    let Value::Array(entries) = redis::parse_redis_value(&c.reply_bytes().await).unwrap() else {
        panic!("SLOWLOG GET is an array")
    };
    let mut out: Vec<Vec<String>> = entries
        .into_iter()
        .map(|e| {
            let Value::Array(fields) = e else {
                panic!("{e:?}")
            };
            let Value::Array(args) = &fields[3] else {
                panic!("{fields:?}")
            };
            args.iter()
                .map(|a| match a {
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => panic!("{other:?}"),
                })
                .collect()
        })
        .collect();
    out.reverse();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn slowlog_shows_secrets_as_redacted_as_redis_does() {
    let node = start().await;
    let ours = slowlog_session(node.addr()).await;
    let r = "(redacted)";
    let expected: Vec<Vec<&str>> = vec![
        vec!["SLOWLOG", "RESET"],
        vec!["ACL", "SETUSER", r, r, r, r, r],
        vec!["CONFIG", "SET", "requirepass", r, "maxmemory", "bogus"],
        vec!["CONFIG", "SET", "maxmemory", "bogus", "requirepass", r],
        vec!["AUTH", r, r],
        vec!["AUTH", r, r],
        vec!["AUTH", r],
        vec!["AUTH", "a", "b", "c"],
        vec!["HELLO", "2", "AUTH", r, r, "SETNAME", "n"],
        vec!["HELLO", "4", "AUTH", "u", "TOPSECRETPW"],
        vec!["HELLO", "2", "AUTH", "u"],
        vec!["ACL", "SETUSER", r, r, r],
        vec!["ACL", "DRYRUN", "u", "GET", "k"],
    ];
    assert_eq!(ours, expected);
    if cfg!(have_redis_server) {
        let redis = RedisNode::start(None);
        let theirs = slowlog_session(redis.addr()).await;
        assert_eq!(ours, theirs);
    }
}

// ---------------------------------------------------------------------------------
// Failed AUTH: no forged log lines, no flood, counted in ACL LOG

/// A node process whose log goes to a file; the file's path.
fn node_logging_to(log: &std::path::Path, args: &[&str]) -> support::process::Proc {
    let port = free_ports(1);
    let file = std::fs::File::create(log).unwrap();
    let mut all = vec!["--port".to_string(), port.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    let p = support::process::Proc::spawn(
        &support::process::os_args(&all.iter().map(String::as_str).collect::<Vec<_>>()),
        Stdio::from(file),
    );
    wait_for_pong(port).unwrap();
    PORTS.with(|m| m.borrow_mut().insert(p.child.id(), port));
    p
}

thread_local! {
    static PORTS: std::cell::RefCell<std::collections::HashMap<u32, u16>> = Default::default();
}

fn port_of(p: &support::process::Proc) -> u16 {
    PORTS.with(|m| m.borrow()[&p.child.id()])
}

/// Writes `bytes` on a fresh connection and reads `replies` lines back (each reply
/// of these commands is one line), within a bound.
fn pipeline(port: u16, bytes: &[u8], replies: usize) -> Vec<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let writer = {
        let mut w = s.try_clone().unwrap();
        let bytes = bytes.to_vec();
        std::thread::spawn(move || w.write_all(&bytes).unwrap())
    };
    let mut text = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while text.iter().filter(|&&b| b == b'\n').count() < replies {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        text.extend_from_slice(&buf[..n]);
    }
    writer.join().unwrap();
    String::from_utf8_lossy(&text)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn failed_auth_cannot_forge_or_flood_the_log() {
    let log = TempPath::new("auth-log");
    let node = node_logging_to(&log.0, &[]);
    let port = port_of(&node);
    let before = std::fs::metadata(&log.0).unwrap().len();
    // A user name that would start a forged line and drive a terminal.
    let forged = "x\n2026-01-01T00:00:00Z ERROR forged: all locks lost\x1b[2J";
    let reply = pipeline(port, &resp(&["AUTH", forged, "pw"]), 1);
    assert_eq!(
        reply,
        ["-WRONGPASS invalid username-password pair or user is disabled."]
    );
    // 2,000 pipelined AUTHs with 16 KB user names.
    let name = "n".repeat(16 * 1024);
    let one = resp(&["AUTH", &name, "pw"]);
    let flood: Vec<u8> = one.iter().copied().cycle().take(one.len() * 2000).collect();
    let replies = pipeline(port, &flood, 2000);
    assert!(
        replies.iter().all(|r| r.starts_with("-WRONGPASS")),
        "{:?}",
        &replies[..3]
    );
    // Every reply is in: the log lines were written before them.
    let text = std::fs::read(&log.0).unwrap();
    let grown = text.len() as u64 - before;
    assert!(grown < 8 * 1024, "the log grew by {grown} bytes");
    assert!(!text.contains(&0x1b), "an ESC byte reached the log");
    let text = String::from_utf8_lossy(&text);
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("2026-01-01T00:00:00Z ERROR forged")),
        "{text}"
    );
    assert!(
        text.contains("x\\n2026-01-01T00:00:00Z ERROR forged: all locks lost\\x1b[2J"),
        "{text}"
    );
    // Counted where Redis counts them: INFO and ACL LOG (one entry, grouped).
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("acl_access_denied_auth:2001\r\n"), "{info}");
    let entries: Vec<Vec<Value>> = redis::cmd("ACL").arg("LOG").query(&mut c).unwrap();
    assert_eq!(entries.len(), 2);
    let field = |e: &[Value], name: &str| -> Value {
        let i = e
            .iter()
            .position(|v| *v == bulk_value(name))
            .unwrap_or_else(|| panic!("no {name} in {e:?}"));
        e[i + 1].clone()
    };
    let newest = &entries[0];
    assert_eq!(field(newest, "count"), Value::Int(2000));
    assert_eq!(field(newest, "reason"), bulk_value("auth"));
    assert_eq!(field(newest, "context"), bulk_value("toplevel"));
    assert_eq!(field(newest, "object"), bulk_value("AUTH"));
    assert_eq!(field(newest, "username"), bulk_value(&name));
    assert_eq!(field(&entries[1], "username"), bulk_value(forged));
}

// ---------------------------------------------------------------------------------
// The metrics port

/// A node with a metrics port, run under a descriptor limit of `nofile` (a shell's
/// `ulimit -n`, then exec).
struct MetricsNode {
    child: std::process::Child,
    dir: std::path::PathBuf,
    port: u16,
    metrics: u16,
}

impl MetricsNode {
    fn spawn(nofile: u32, extra: &[&str]) -> MetricsNode {
        let base = free_ports(2);
        let dir = support::process::data_dir("metrics");
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(BIN)
            .args(["--port", &base.to_string()])
            .args(["--metrics-addr", &format!("127.0.0.1:{}", base + 1)])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let node = MetricsNode {
            child,
            dir,
            port: base,
            metrics: base + 1,
        };
        wait_for_pong(base).unwrap();
        node
    }
}

impl Drop for MetricsNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// PING on a fresh connection, answered within `bound`.
fn ping_within(port: u16, bound: Duration) -> Result<(), String> {
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), bound)
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(bound)).unwrap();
    s.write_all(b"PING\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf)
        .map_err(|e| format!("no answer within {:?}: {e}", started.elapsed()))?;
    if &buf == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(format!("answered {buf:?}"))
    }
}

#[test]
fn idle_metrics_connections_cannot_starve_the_lock_port() {
    let node = MetricsNode::spawn(64, &[]);
    // Many more idle connections than the node has descriptors, held open.
    let idle: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", node.metrics)).ok())
        .collect();
    assert!(idle.len() > 100, "only {} metrics connections", idle.len());
    for _ in 0..3 {
        ping_within(node.port, Duration::from_secs(2)).expect("the lock port answers");
    }
    // Idle ones are dropped fast (a scrape sends its request at once).
    let mut first = &idle[0];
    first
        .set_read_timeout(Some(Duration::from_secs(4)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 256];
    let n = first.read(&mut buf).unwrap_or(0);
    assert!(
        n == 0 || buf.starts_with(b"HTTP/1.1 503"),
        "{:?}",
        &buf[..n]
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "held {:?}",
        started.elapsed()
    );
    drop(idle);
    // And a scrape works again.
    let body = http_get(node.metrics, None);
    assert!(body.starts_with("HTTP/1.1 200 OK\r\n"), "{body}");
}

fn http_get(port: u16, auth: Option<&str>) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn metrics_basic_auth() {
    let node = MetricsNode::spawn(1024, &["--metrics-auth", "scraper:s3cret"]);
    let denied = http_get(node.metrics, None);
    assert!(
        denied.starts_with("HTTP/1.1 401 Unauthorized\r\n"),
        "{denied}"
    );
    assert!(denied.contains("WWW-Authenticate: Basic realm=\"redlockd metrics\"\r\n"));
    let wrong = http_get(node.metrics, Some("Basic c2NyYXBlcjp3cm9uZw=="));
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    // base64("scraper:s3cret")
    let ok = http_get(node.metrics, Some("Basic c2NyYXBlcjpzM2NyZXQ="));
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(ok.contains("redlockd_lock_grants_total"));
}

// ---------------------------------------------------------------------------------
// Lua: redis.call replies count against the memory limit

#[tokio::test(flavor = "multi_thread")]
async fn redis_call_replies_count_against_the_lua_memory_limit() {
    let node = start().await;
    let mut con = conn(&node).await;
    // A list of 100,000 elements: each LRANGE of it is ~1.6 MB of Lua table slots (the
    // strings are interned once).
    for chunk in 0..100 {
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg("big");
        for i in 0..1000 {
            cmd.arg(chunk * 1000 + i);
        }
        let _: i64 = cmd.query_async(&mut con).await.unwrap();
    }
    // The script takes 200 MB of the 256 MB limit itself, makes the table for its
    // copies up front (so that nothing of its own allocates afterwards), then keeps 40
    // LRANGE replies: ~64 MB more, which only the replies' conversion allocates.
    let zeros = vec!["0"; 40].join(",");
    let script = format!(
        "local base = string.rep('x', 1048000) local pad = {{}} \
         for i = 1, 200 do pad[i] = base .. i end \
         local t = {{{zeros}}} \
         for i = 1, 40 do t[i] = redis.call('lrange', KEYS[1], 0, -1) end \
         return #t"
    );
    let e = redis::cmd("EVAL")
        .arg(&script)
        .arg(1)
        .arg("big")
        .query_async::<Value>(&mut con)
        .await
        .expect_err("the script must hit the memory limit");
    let text = error_text(&e);
    assert!(text.starts_with("ERR Error running script "), "{text}");
    assert!(text.ends_with(", not enough memory"), "{text}");
    // The VM is usable afterwards, and a script that keeps one copy still runs.
    let n: i64 = redis::cmd("EVAL")
        .arg("return #redis.call('lrange', KEYS[1], 0, -1)")
        .arg(1)
        .arg("big")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(n, 100_000);
}

// ---------------------------------------------------------------------------------
// ACL SAVE

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn acl_save_keeps_the_mode_and_follows_no_planted_symlink() {
    use std::os::unix::fs::PermissionsExt;
    // Removed on drop, also when an assertion fails.
    let temp = TempPath::new("aclsave");
    let dir = temp.0.clone();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("users.acl");
    std::fs::write(&path, "user default on nopass ~* &* +@all\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    // What the old fixed temp name would have written through.
    let victim = dir.join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    std::os::unix::fs::symlink(&victim, path.with_extension("tmp-save")).unwrap();
    let p = path.clone();
    let node = start_with(move |c| c.aclfile = Some(p)).await;
    let mut con = conn(&node).await;
    let _: () = q(
        &mut con,
        &["ACL", "SETUSER", "alice", "on", ">pw", "~lock:*", "+get"],
    )
    .await
    .unwrap();
    let _: () = q(&mut con, &["ACL", "SAVE"]).await.unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("user alice on #"), "{saved}");
    // Nothing left behind but the file, the victim and the planted link.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["users.acl", "users.tmp-save", "victim"]);
    // ACL LOAD reads it back.
    let _: () = q(&mut con, &["ACL", "LOAD"]).await.unwrap();
    let users: Vec<String> = q(&mut con, &["ACL", "USERS"]).await.unwrap();
    assert_eq!(users, ["alice", "default"]);
    node.shutdown().await;
}
