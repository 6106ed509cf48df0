//! Fencing tokens over the wire: five `redlockd` processes, each with its own data
//! directory, killed with SIGKILL (one or all five) and restarted on the same port and
//! directory, or restarted cleanly with SIGTERM. Redlock clients with tokens write to a
//! storage that refuses stale tokens; the checker of `fenced_writes.rs` must find
//! nothing. Nodes run a manual clock (`DEBUG CLOCK ADVANCE`), so no test sleeps.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlockd::redlock::{Lock, Redlock, RedlockOptions};
use std::time::Duration;
use support::process::{call, free_ports, os_args, Node};

use crate::support;

const NODES: usize = 5;
const TTL: Duration = Duration::from_secs(10);

fn start_nodes() -> Vec<Node> {
    let base = free_ports(NODES as u16);
    let args = [
        "--max-ttl",
        "10s",
        "--clock",
        "manual",
        "--enable-debug-command",
        "--log",
        "warn",
    ];
    (0..NODES)
        .map(|i| {
            let mut n = Node::new(base + i as u16, os_args(&args));
            n.start();
            n
        })
        .collect()
}

/// Moves every running node's manual clock (the processes have one clock each).
fn advance(nodes: &[Node], ms: u64) {
    for n in nodes.iter().filter(|n| n.running()) {
        assert_eq!(
            call(n.port, &["DEBUG", "CLOCK", "ADVANCE", &ms.to_string()]).as_deref(),
            Some("+OK")
        );
    }
}

fn client(nodes: &[Node]) -> Redlock {
    Redlock::new(
        nodes.iter().map(|n| n.addr().to_string()),
        RedlockOptions {
            // Long enough for a node that is up, with both cores busy: every node here
            // is either up or refusing connections, so no round waits it out.
            node_timeout: Some(Duration::from_secs(2)),
            retry_count: 0,
            fencing_tokens: true,
            ..RedlockOptions::default()
        },
    )
    .expect("valid nodes")
}

struct Holder {
    lock: Lock,
    number: usize,
    token: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_stay_ordered_through_kill_9_and_clean_restarts() {
    let mut nodes = start_nodes();
    advance(&nodes, 11_001); // past the first start's fence
    let clients: Vec<Redlock> = (0..3).map(|_| client(&nodes)).collect();
    let mut rng = SmallRng::seed_from_u64(42);
    let mut held: Vec<Option<Holder>> = vec![None, None, None];
    let mut next = 0;
    let mut issued: Vec<(usize, u64)> = Vec::new();
    let mut highest: Option<u64> = None;
    let mut accepted: Vec<(usize, u64)> = Vec::new();
    let (mut refused, mut kills, mut clean) = (0, 0, 0);
    let mut history = Vec::new();
    for step in 0..240 {
        let c = rng.random_range(0..3);
        let n = rng.random_range(0..NODES);
        let event = match rng.random_range(0..95u32) {
            0..=29 if held[c].is_none() => match clients[c].try_acquire(b"res", TTL).await {
                Ok(lock) => {
                    let token = lock.token().expect("a token");
                    issued.push((next, token));
                    held[c] = Some(Holder {
                        lock,
                        number: next,
                        token,
                    });
                    next += 1;
                    format!("client {c} acquired, token {token}")
                }
                Err(e) => format!("client {c} denied: {e}"),
            },
            0..=49 => match &held[c] {
                Some(h) => {
                    if highest.is_none_or(|top| h.token >= top) {
                        highest = Some(h.token);
                        accepted.push((h.number, h.token));
                        format!("client {c} wrote with {}", h.token)
                    } else {
                        refused += 1;
                        format!("client {c} refused with {}", h.token)
                    }
                }
                None => "nothing to write".into(),
            },
            50..=64 => match held[c].take() {
                Some(h) => {
                    clients[c].release(&h.lock).await;
                    format!("client {c} released")
                }
                None => "nothing to release".into(),
            },
            65..=84 => {
                let ms = if rng.random_range(0..2) == 0 {
                    rng.random_range(10_000..15_000)
                } else {
                    rng.random_range(100..3_000)
                };
                advance(&nodes, ms);
                format!("advance {ms} ms")
            }
            85..=88 => {
                nodes[n].kill9();
                nodes[n].start();
                kills += 1;
                format!("kill -9 node {n}, restarted")
            }
            89 => {
                for node in nodes.iter_mut() {
                    node.kill9();
                }
                for node in nodes.iter_mut() {
                    node.start();
                }
                kills += NODES;
                "kill -9 all five, restarted".into()
            }
            _ => {
                nodes[n].terminate();
                nodes[n].start();
                clean += 1;
                let info = call(nodes[n].port, &["FENCING.MARK"]).unwrap_or_default();
                format!("SIGTERM node {n}, restarted clean (mark {info})")
            }
        };
        history.push(format!("{step:3} {event}"));
    }
    // Then the textbook pause, across a kill -9 of every node: A acquires and pauses
    // past its TTL, all five nodes die and come back, B acquires and writes, A writes.
    for slot in held.iter_mut() {
        if let Some(h) = slot.take() {
            clients[0].release(&h.lock).await;
        }
    }
    advance(&nodes, 11_001);
    let a = clients[0]
        .try_acquire(b"res", TTL)
        .await
        .expect("A acquires");
    advance(&nodes, 10_001);
    for node in nodes.iter_mut() {
        node.kill9();
        node.start();
    }
    advance(&nodes, 11_001);
    let b = clients[1]
        .try_acquire(b"res", TTL)
        .await
        .expect("B acquires");
    let (ta, tb) = (a.token().unwrap(), b.token().unwrap());
    issued.push((next, ta));
    issued.push((next + 1, tb));
    for (number, token) in [(next + 1, tb), (next, ta)] {
        if highest.is_none_or(|top| token >= top) {
            highest = Some(token);
            accepted.push((number, token));
        } else {
            refused += 1;
        }
    }
    history.push(format!("pause: A token {ta}, kill -9 all, B token {tb}"));
    let show = || history.join("\n");
    for pair in issued.windows(2) {
        assert!(
            pair[1].1 > pair[0].1,
            "tokens went backwards {pair:?}\n{}",
            show()
        );
    }
    for pair in accepted.windows(2) {
        assert!(
            pair[1].0 >= pair[0].0,
            "a stale holder's write landed {pair:?}\n{}",
            show()
        );
    }
    eprintln!(
        "{} holders, {} writes accepted, {refused} stale writes refused, {kills} kill -9s, {clean} clean restarts",
        issued.len(),
        accepted.len()
    );
    assert!(
        issued.len() >= 15,
        "too few holders: {}\n{}",
        issued.len(),
        show()
    );
    assert!(
        kills >= 5 && clean >= 1,
        "the schedule did too little\n{}",
        show()
    );
    assert!(refused >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_restart_keeps_locks_and_kill_9_brings_the_fence() {
    let mut nodes = start_nodes();
    let node = &mut nodes[0];
    // A first start is fenced (max-ttl 10 s + 1 s); let it pass.
    let fenced = call(node.port, &["SET", "k", "v", "PX", "5000"]).unwrap();
    assert!(fenced.starts_with("-TRYAGAIN"), "{fenced}");
    advance(std::slice::from_ref(node), 11_001);
    assert_eq!(
        call(node.port, &["SET", "lock", "me", "PX", "8000"]).as_deref(),
        Some("+OK")
    );
    node.terminate();
    node.start();
    assert_eq!(call(node.port, &["GET", "lock"]).as_deref(), Some("$2"));
    assert_eq!(call(node.port, &["PTTL", "lock"]).as_deref(), Some(":8000"));
    assert_eq!(
        call(node.port, &["SET", "new", "x", "PX", "100"]).as_deref(),
        Some("+OK")
    );
    node.kill9();
    node.start();
    assert_eq!(call(node.port, &["GET", "lock"]).as_deref(), Some("$-1"));
    let fenced = call(node.port, &["SET", "new", "x", "PX", "100"]).unwrap();
    assert!(fenced.starts_with("-TRYAGAIN"), "{fenced}");
}

/// `redlockd init --dir DIR`: declares a brand-new node.
fn init(dir: &std::path::Path) {
    let out = std::process::Command::new(support::process::BIN)
        .args(["init", "--dir"])
        .arg(dir)
        .output()
        .expect("run redlockd init");
    assert!(out.status.success(), "{out:?}");
}

/// INFO fence's rule and length of the node on `port`, as `rule/length`.
fn fence_rule(port: u16) -> String {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .expect("the node answers");
    let info: String = redis::cmd("INFO").arg("fence").query(&mut c).unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or("?")
            .to_string()
    };
    format!("{}/{}", field("fence_rule:"), field("fence_length_ms:"))
}

/// kill -9 of a node that granted only 1 s locks and an immediate restart: the real
/// clock's boot is the same, so the fence lasts until those locks' deadlines (+ up to
/// 1 s reserved + 1 s of margin), not max-ttl (5 minutes by default).
#[test]
fn kill_9_of_a_node_with_short_locks_serves_again_after_them() {
    let mut node = Node::new(free_ports(1), os_args(&["--log", "warn"]));
    init(&node.dir);
    node.start();
    assert_eq!(fence_rule(node.port), "declared-new/0");
    for i in 0..20 {
        let key = format!("lock{i}");
        assert_eq!(
            call(node.port, &["SET", &key, "A", "NX", "PX", "1000"]).as_deref(),
            Some("+OK")
        );
    }
    node.kill9();
    let restarted = std::time::Instant::now();
    node.start();
    let rule = fence_rule(node.port);
    let len: u64 = rule
        .strip_prefix("same-boot/")
        .unwrap_or_else(|| panic!("{rule}"))
        .parse()
        .unwrap();
    assert!((1_000..=3_000).contains(&len), "{rule}");
    let reply = call(node.port, &["SET", "lock0", "B", "NX", "PX", "1000"]).unwrap();
    assert!(reply.starts_with("-TRYAGAIN restart fence"), "{reply}");
    // Served again once the fence is over: polled, bounded.
    loop {
        let reply = call(node.port, &["SET", "lock0", "B", "NX", "PX", "1000"]).unwrap();
        if reply == "+OK" {
            break;
        }
        assert!(reply.starts_with("-TRYAGAIN"), "{reply}");
        assert!(
            restarted.elapsed() < Duration::from_millis(len + 1_000),
            "still fenced {:?} after the restart ({rule})",
            restarted.elapsed()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        restarted.elapsed() >= Duration::from_millis(len.saturating_sub(50)),
        "{rule}"
    );
}

/// A client holds a 20 s lock on a node that is killed and restarted: the node never
/// grants it to anyone else before the 20 s are over, on the same boot (real clock)
/// and after a reboot (a manual-clock process is a boot of its own).
#[test]
fn a_killed_node_never_grants_a_lock_still_held_there() {
    // Same boot.
    let mut node = Node::new(free_ports(1), os_args(&["--log", "warn"]));
    init(&node.dir);
    node.start();
    assert_eq!(
        call(node.port, &["SET", "lock", "A", "NX", "PX", "20000"]).as_deref(),
        Some("+OK")
    );
    let granted = std::time::Instant::now();
    node.kill9();
    node.start();
    let reply = call(node.port, &["SET", "lock", "B", "NX", "PX", "1000"]).unwrap();
    assert!(reply.starts_with("-TRYAGAIN restart fence"), "{reply}");
    let rule = fence_rule(node.port);
    let len: u64 = rule
        .strip_prefix("same-boot/")
        .expect(&rule)
        .parse()
        .unwrap();
    assert!(
        Duration::from_millis(len) + granted.elapsed() >= Duration::from_millis(21_000),
        "{rule}: the fence ends before the lock's deadline + margin"
    );
    drop(node);

    // After a reboot (manual clock: a new process is a new clock epoch).
    let args = [
        "--clock",
        "manual",
        "--enable-debug-command",
        "--log",
        "warn",
    ];
    let mut node = Node::new(free_ports(1), os_args(&args));
    init(&node.dir);
    node.start();
    assert_eq!(
        call(node.port, &["SET", "lock", "A", "NX", "PX", "20000"]).as_deref(),
        Some("+OK")
    );
    node.kill9();
    node.start();
    assert_eq!(fence_rule(node.port), "reboot/21000");
    advance(std::slice::from_ref(&node), 20_999);
    let reply = call(node.port, &["SET", "lock", "B", "NX", "PX", "1000"]).unwrap();
    assert!(reply.starts_with("-TRYAGAIN restart fence"), "{reply}");
    advance(std::slice::from_ref(&node), 1);
    assert_eq!(
        call(node.port, &["SET", "lock", "B", "NX", "PX", "1000"]).as_deref(),
        Some("+OK")
    );
}

/// A directory with no node in it and no declaration: the full fence (max-ttl + 1 s),
/// and the reply says how to declare a brand-new node.
#[test]
fn an_undeclared_empty_directory_gets_the_full_fence() {
    let node = Node::spawn(&["--max-ttl", "7s", "--log", "warn"]);
    assert_eq!(fence_rule(node.port), "no-history/8000");
    let reply = call(node.port, &["SET", "lock", "A", "NX", "PX", "1000"]).unwrap();
    assert!(reply.contains("redlockd init --dir"), "{reply}");
}

/// The first durable write of a start fails (an LD_PRELOAD shim makes the first
/// fsync or fdatasync fail with EIO): the node refuses to start, and its snapshot is never
/// trusted by a start that could not move the generation forward.
#[test]
fn a_failed_fsync_at_boot_stops_the_start() {
    let dir = support::process::data_dir("failsync");
    std::fs::create_dir_all(&dir).unwrap();
    let shim = dir.join("failsync.so");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/failsync.c"
        ))
        .arg("-ldl")
        .status();
    assert!(
        built.is_ok_and(|s| s.success()),
        "cc builds the fsync shim (needs a C compiler)"
    );
    let mut node = Node::new(free_ports(1), os_args(&["--log", "warn"]));
    init(&node.dir);
    node.start();
    assert_eq!(
        call(node.port, &["SET", "lock", "A", "NX", "PX", "20000"]).as_deref(),
        Some("+OK")
    );
    node.terminate();
    assert!(node.dir.join("snapshot.rdl").exists());
    let out = std::process::Command::new(support::process::BIN)
        .args(["--port", &node.port.to_string(), "--log", "warn", "--dir"])
        .arg(&node.dir)
        .env("LD_PRELOAD", &shim)
        .output()
        .expect("run redlockd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot record this start"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A node's directory put back from a copy taken after a clean shutdown: refused at
/// start (it could move the token mark back and hold a stale snapshot).
#[test]
fn a_restored_backup_is_refused() {
    let mut node = Node::new(free_ports(1), os_args(&["--log", "warn"]));
    init(&node.dir);
    node.start();
    assert_eq!(
        call(node.port, &["FENCING.GRANT", "t", "v", "PX", "5000"]).as_deref(),
        Some(":0")
    );
    assert_eq!(
        call(node.port, &["FENCING.COMMIT", "t", "v", "1"]).as_deref(),
        Some(":1")
    );
    node.terminate();
    let backup: Vec<(std::path::PathBuf, Vec<u8>)> = ["node.state", "snapshot.rdl"]
        .iter()
        .map(|f| (node.dir.join(f), std::fs::read(node.dir.join(f)).unwrap()))
        .collect();
    node.start();
    assert_eq!(
        call(node.port, &["FENCING.COMMIT", "t", "v", "10002"]).as_deref(),
        Some(":1")
    );
    node.kill9();
    std::fs::remove_dir_all(&node.dir).unwrap();
    std::fs::create_dir_all(&node.dir).unwrap();
    for (path, bytes) in &backup {
        std::fs::write(path, bytes).unwrap();
    }
    let e = node
        .try_start()
        .expect_err("a restored node.state is refused");
    assert!(e.contains("exited at start"), "{e}");
}

/// `redlockd group` declares the node directories it makes: locks at once.
#[test]
fn a_fresh_cluster_accepts_locks_at_once() {
    let base = free_ports(3);
    let dir = support::process::data_dir("cluster");
    let mut child = std::process::Command::new(support::process::BIN)
        .args(["group", "--nodes", "3", "--base-port", &base.to_string()])
        .args(["--log", "warn", "--dir"])
        .arg(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn redlockd group");
    // A fenced node answers TRYAGAIN for max-ttl + 1 s (31 s here) after it starts, so
    // a grant on each node's first answer means none raised a fence (how long the
    // processes took to start is the machine's business, not the fence's).
    for port in base..base + 3 {
        support::process::wait_for_pong(port).unwrap();
        assert_eq!(
            call(port, &["SET", "lock", "A", "NX", "PX", "300000"]).as_deref(),
            Some("+OK"),
            "node {port}"
        );
    }
    support::process::signal(&child, "-TERM");
    support::process::wait_bounded(&mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the node's binary on its port and directory, expecting it to refuse to start:
/// its stderr. A start that serves instead is stopped and fails the test.
fn refused_start(node: &Node) -> String {
    let mut child = std::process::Command::new(support::process::BIN)
        .args(["--port", &node.port.to_string(), "--log", "warn", "--dir"])
        .arg(&node.dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run redlockd");
    let deadline = std::time::Instant::now() + support::process::BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            assert!(!status.success(), "{stderr}");
            return stderr;
        }
        if std::time::Instant::now() > deadline || call(node.port, &["PING"]).is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the node started (or hung) instead of refusing its directory");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The wall-clock time a file was last modified.
fn mtime(path: &std::path::Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// A backup taken after a clean shutdown and put back by copying its files over the
/// directory's own (`cp -a backup/. dir/`: node.state keeps its inode) after the node
/// ran on, handed out token 10002 and granted a lock, then was killed: refused at
/// start (it used to be trusted: the stale snapshot restored, no fence, the token mark
/// back at 1 and the lock granted again). Adopted, it starts fenced for max-ttl + 1 s,
/// without the snapshot's keys, and with a token mark past the 10002 it handed out.
#[test]
fn a_backup_copied_back_over_the_directory_is_refused_and_adopting_it_never_lowers_the_mark() {
    let mut node = Node::new(
        free_ports(1),
        os_args(&["--max-ttl", "5s", "--log", "warn"]),
    );
    init(&node.dir);
    node.start();
    assert_eq!(
        call(node.port, &["FENCING.GRANT", "t1", "v1", "PX", "5000"]).as_deref(),
        Some(":0")
    );
    assert_eq!(
        call(node.port, &["FENCING.COMMIT", "t1", "v1", "1"]).as_deref(),
        Some(":1")
    );
    node.terminate();
    let backup = support::process::data_dir("backup");
    let cp = |from: &std::path::Path, to: &std::path::Path| {
        std::fs::create_dir_all(to).unwrap();
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(from.join("."))
            .arg(to)
            .status()
            .expect("run cp");
        assert!(status.success());
    };
    cp(&node.dir, &backup);
    node.start();
    assert_eq!(
        call(node.port, &["FENCING.GRANT", "t2", "v2", "PX", "5000"]).as_deref(),
        Some(":1")
    );
    assert_eq!(
        call(node.port, &["FENCING.COMMIT", "t2", "v2", "10002"]).as_deref(),
        Some(":1")
    );
    assert_eq!(
        call(node.port, &["SET", "job", "B", "NX", "PX", "5000"]).as_deref(),
        Some("+OK")
    );
    node.kill9();
    // A restore comes long after the backup's last write; here at least the 200 ms
    // (+ a coarse clock tick) within which a write is not told from a restore.
    let written = mtime(&backup.join("node.state"));
    let until = written + Duration::from_millis(250);
    for _ in 0..1000 {
        if std::time::SystemTime::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let ino = |dir: &std::path::Path| {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(dir.join("node.state")).unwrap())
    };
    let before = ino(&node.dir);
    cp(&backup, &node.dir);
    assert_eq!(ino(&node.dir), before, "cp over a file keeps its inode");
    let _ = std::fs::remove_dir_all(&backup);

    let stderr = refused_start(&node);
    assert!(
        stderr.contains("node.state was changed by something other than this node"),
        "{stderr}"
    );
    assert!(stderr.contains("--adopt"), "{stderr}");
    let out = std::process::Command::new(support::process::BIN)
        .args(["init", "--adopt", "--dir"])
        .arg(&node.dir)
        .output()
        .expect("run redlockd init --adopt");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("token mark jumps from 1 to "), "{said}");
    node.start();
    assert_eq!(fence_rule(node.port), "no-history/6000");
    let mark: u64 = call(node.port, &["FENCING.MARK"])
        .unwrap()
        .trim_start_matches(':')
        .parse()
        .unwrap();
    assert!(mark > 10_002 + (1 << 32), "the mark went back: {mark}");
    assert_eq!(call(node.port, &["GET", "t1"]).as_deref(), Some("$-1"));
    let reply = call(node.port, &["SET", "job", "C", "NX", "PX", "5000"]).unwrap();
    assert!(reply.starts_with("-TRYAGAIN restart fence"), "{reply}");
}

/// A node process under `unshare --time --monotonic SECS` (as a container's
/// checkpoint/restore puts one), with `--kill-child` so stopping it stops the node;
/// killed on drop.
struct InTimeNamespace {
    child: std::process::Child,
}

impl InTimeNamespace {
    /// Starts `node`'s binary on its port and directory, `secs` ahead on
    /// CLOCK_MONOTONIC, and waits for PING. Needs root and a kernel with time
    /// namespaces (CI runs as root): anything else fails the test, saying so.
    fn start(node: &Node, secs: u64) -> InTimeNamespace {
        let offset = secs.to_string();
        let unshare = ["--time", "--monotonic", &offset, "--fork", "--kill-child"];
        let probe = std::process::Command::new("unshare")
            .args(unshare)
            .args(["cat", "/proc/self/timens_offsets"])
            .output();
        let shown = format!("{probe:?}");
        assert!(
            probe.is_ok_and(|o| {
                o.status.success()
                    && String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .any(|l| l.split_whitespace().take(2).eq(["monotonic", &offset]))
            }),
            "this test needs `unshare --time` (root, a kernel with time namespaces): {shown}"
        );
        let child = std::process::Command::new("unshare")
            .args(unshare)
            .arg(support::process::BIN)
            .args(["--port", &node.port.to_string(), "--log", "warn", "--dir"])
            .arg(&node.dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run unshare");
        let started = InTimeNamespace { child };
        support::process::wait_for_pong(node.port).unwrap();
        started
    }
}

impl Drop for InTimeNamespace {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node killed while a 60 s lock is held there, restarted at once in a time
/// namespace whose CLOCK_MONOTONIC is an hour ahead (same kernel boot id): the fence
/// still lasts until that lock's deadline + margin. It used to read the recorded
/// deadline on the shifted clock, find it an hour past, and serve at once.
#[test]
fn a_restart_in_a_time_namespace_ahead_keeps_the_fence() {
    let mut node = Node::new(free_ports(1), os_args(&["--log", "warn"]));
    init(&node.dir);
    node.start();
    assert_eq!(
        call(node.port, &["SET", "job", "X", "NX", "PX", "60000"]).as_deref(),
        Some("+OK")
    );
    let granted = std::time::Instant::now();
    node.kill9();
    let restarted = InTimeNamespace::start(&node, 3600);
    let reply = call(node.port, &["SET", "job", "Y", "NX", "PX", "60000"]).unwrap();
    assert!(reply.starts_with("-TRYAGAIN restart fence"), "{reply}");
    let rule = fence_rule(node.port);
    let len: u64 = rule
        .strip_prefix("same-boot/")
        .unwrap_or_else(|| panic!("{rule}"))
        .parse()
        .unwrap();
    assert!(
        Duration::from_millis(len) + granted.elapsed() >= Duration::from_millis(61_000),
        "{rule}: the fence ends before the lock's deadline + margin"
    );
    drop(restarted);
}
