//! The binary: --help, one node, a local cluster, signals, and flag errors.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_redlockd");
const BOUND: Duration = Duration::from_secs(10);

/// Kills the child if a test fails before stopping it, and removes its data directory.
struct Guard(Child, PathBuf);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// A fresh data directory for one spawned process (removed by its `Guard`).
fn data_dir() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "redlockd-cli-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

fn spawn(args: &[&str]) -> Guard {
    let dir = data_dir();
    Guard(
        Command::new(BIN)
            .args(args)
            .args(["--log", "warn"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redlockd"),
        dir,
    )
}

/// Tests that pick free ports run one at a time, so one test's node cannot take a
/// port another test just found free.
static PORTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `n` consecutive ports that are free right now, taken below the kernel's ephemeral
/// range (32768 and up on Linux): a port picked from that range can be handed to one of
/// our own outgoing connections (the PING probes) before the server binds it.
fn free_ports(n: u16) -> u16 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64)
        ^ u64::from(std::process::id());
    for attempt in 0..200u64 {
        let base = 20_000 + ((seed + attempt * 7_919) % 12_000) as u16;
        let all: Vec<_> = (0..n)
            .map(|i| TcpListener::bind(("127.0.0.1", base + i)))
            .collect();
        if all.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

/// Sends PING until the node answers +PONG (bounded).
fn wait_for_pong(port: u16) {
    if let Err(e) = try_pong(port) {
        panic!("{e}");
    }
}

/// A probe connection that is reset is tried again within the bound: once seen in CI
/// on a loaded machine right after the nodes logged "listening", with the cluster
/// still running (cause not found; see the issue note).
fn try_pong(port: u16) -> Result<(), String> {
    let deadline = Instant::now() + BOUND;
    let mut last = String::from("never connected");
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(BOUND)).unwrap();
            let mut buf = [0u8; 7];
            let answered = s
                .write_all(b"*1\r\n$4\r\nPING\r\n")
                .and_then(|()| s.read_exact(&mut buf));
            match answered {
                Ok(()) => {
                    assert_eq!(&buf, b"+PONG\r\n");
                    return Ok(());
                }
                Err(e) => last = e.to_string(),
            }
        }
        if Instant::now() > deadline {
            return Err(format!("port {port} never answered: {last}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} failed");
}

fn wait_bounded(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "process did not stop in time");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn help_describes_the_flags() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--port",
        "--max-ttl",
        "--restart-delay",
        "--require-ttl",
        "cluster",
    ] {
        assert!(text.contains(flag), "{flag} missing from --help:\n{text}");
    }
}

#[test]
fn a_node_answers_ping_and_stops_on_sigterm() {
    let _ports = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_ports(1);
    let mut node = spawn(&["--port", &port.to_string(), "--restart-delay", "0"]);
    wait_for_pong(port);
    signal(&node.0, "-TERM");
    let status = wait_bounded(&mut node.0);
    assert!(status.success(), "{status:?}");
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn a_cluster_answers_on_consecutive_ports_and_stops_on_sigint() {
    let _ports = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let log = std::env::temp_dir().join(format!("redlockd-cli-cluster-{}.log", std::process::id()));
    // Another process may take one of the ports between the check and the bind; the
    // cluster then exits with "cannot start a node", and only then is it tried again.
    for attempt in 1..=3 {
        let base = free_ports(3);
        let dir = data_dir();
        let mut cluster = Guard(
            Command::new(BIN)
                .args(["cluster", "--nodes", "3", "--base-port", &base.to_string()])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("spawn redlockd"),
            dir,
        );
        let answered = (base..base + 3).try_for_each(try_pong);
        if let Err(e) = answered {
            // A cluster that failed to bind exits at once; give it a moment to.
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut exited = cluster.0.try_wait().ok().flatten();
            while exited.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
                exited = cluster.0.try_wait().ok().flatten();
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let bind_failed =
                exited.is_some_and(|s| !s.success()) && text.contains("cannot start a node");
            if attempt < 3 && bind_failed {
                continue;
            }
            panic!("{e}; cluster exit: {exited:?}; its log:\n{text}");
        }
        let _ = std::fs::remove_file(&log);
        signal(&cluster.0, "-INT");
        let status = wait_bounded(&mut cluster.0);
        assert!(status.success(), "{status:?}");
        return;
    }
}

#[test]
fn a_bad_duration_is_a_clear_error() {
    let out = Command::new(BIN)
        .args(["--max-ttl", "5d", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("invalid duration \"5d\": unknown unit \"d\" (use ms, s, m or h)"),
        "{text}"
    );
    let out = Command::new(BIN)
        .args(["--restart-delay", "soon"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid duration \"soon\""));
}

#[test]
fn a_restart_delay_shorter_than_max_ttl_is_refused_at_startup() {
    let out = Command::new(BIN)
        .args(["--port", "0", "--max-ttl", "10s", "--restart-delay", "5s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("restart-delay (5000 ms) is shorter than max-ttl"),
        "{text}"
    );
}

#[test]
fn bad_usage_exits_64_everywhere_and_help_exits_0() {
    for args in [
        &["lock", "--bogus"][..],
        &["lock", "--ttl", "10s"][..],
        &["cluster", "--port", "7000"][..],
        &["--max-ttl", "5d"][..],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}");
    }
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let dir = data_dir();
    let mut child = Guard(
        Command::new(BIN)
            .args(["--port", "0", "--restart-delay", "0", "--log", "info"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        dir,
    );
    // The first log line ("listening ...") is written at once; read it, then stop.
    let mut stderr = child.0.stderr.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\n") && stderr.read(&mut byte).unwrap() == 1 {
        line.push(byte[0]);
    }
    signal(&child.0, "-TERM");
    wait_bounded(&mut child.0);
    let text = String::from_utf8_lossy(&line);
    assert!(text.contains("listening"), "{text:?}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn a_config_file_in_redis_format_sets_flags_and_the_command_line_wins() {
    let dir = std::env::temp_dir().join(format!("redlockd-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("redlockd.conf");
    std::fs::write(
        &conf,
        "# lock node\nport 0\nmax-ttl 10s\nrestart-delay \"5s\"\n",
    )
    .unwrap();
    // The file's values are used: they are refused together at startup.
    let out = Command::new(BIN)
        .arg(&conf)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("restart-delay (5000 ms) is shorter than max-ttl (10000 ms)"),
        "{text}"
    );
    // Flags on the command line override the file: this one starts, on our port.
    let _ports = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_ports(1);
    let node_dir = data_dir();
    let mut node = Guard(
        Command::new(BIN)
            .arg(&conf)
            .args([
                "--restart-delay",
                "0",
                "--log",
                "warn",
                "--port",
                &port.to_string(),
            ])
            .arg("--dir")
            .arg(&node_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        node_dir,
    );
    wait_for_pong(port);
    signal(&node.0, "-TERM");
    assert!(wait_bounded(&mut node.0).success());
    // An unknown setting names its line and is bad usage.
    std::fs::write(&conf, "port 0\nmaxmemory-policy allkeys-lru\n").unwrap();
    let out = Command::new(BIN).arg(&conf).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2: unknown setting"));
    std::fs::remove_dir_all(&dir).unwrap();
}
