//! The `redlockd` binary as a child process: free ports, a node with its own data
//! directory (killed and removed on drop, restartable on the same port and directory),
//! and a blocking one-command probe for tests that run no tokio runtime.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_redlockd");

/// Bound on every wait for a process (start, answer, exit).
pub const BOUND: Duration = Duration::from_secs(10);

/// A fresh data directory path for one spawned process (not created).
pub fn data_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "redlockd-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

/// `n` consecutive ports that are free right now, taken below the kernel's ephemeral
/// range (32768 and up on Linux): a port picked from that range can be handed to one of
/// our own outgoing connections before the server binds it. Another process can still
/// take one before the server binds it: callers retry on a lost port.
pub fn free_ports(n: u16) -> u16 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let call = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = nanos ^ u64::from(std::process::id()) ^ (call * 104_729);
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

/// One command over a fresh blocking connection: the reply's first line without its
/// CRLF, or None if the port does not answer (refused, closed, timed out).
pub fn call(port: u16, args: &[&str]) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(BOUND)).ok()?;
    s.write_all(&super::resp(args)).ok()?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        line.push(byte[0]);
    }
    line.truncate(line.len() - 2);
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// Sends PING until the port answers +PONG, within `BOUND`.
pub fn wait_for_pong(port: u16) -> Result<(), String> {
    let deadline = Instant::now() + BOUND;
    loop {
        // A probe that is reset is tried again within the bound.
        match call(port, &["PING"]) {
            Some(reply) if reply == "+PONG" => return Ok(()),
            Some(other) => return Err(format!("port {port} answered {other:?} to PING")),
            None if Instant::now() > deadline => {
                return Err(format!("port {port} never answered PING"))
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Sends `sig` ("-TERM", "-INT", "-STOP"...) to a child.
pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} failed");
}

/// Waits for a child to exit, within `BOUND`.
pub fn wait_bounded(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "process did not stop in time");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A child process and its data directory: killed (if still running) and the
/// directory removed on drop, also when a test fails half-way.
pub struct Proc {
    pub child: Child,
    pub dir: PathBuf,
}

impl Proc {
    /// Runs `redlockd args --dir <fresh dir>` with stdin and stdout closed; stderr as
    /// given.
    pub fn spawn(args: &[OsString], stderr: Stdio) -> Proc {
        let dir = data_dir("proc");
        let child = Command::new(BIN)
            .args(args)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn redlockd");
        Proc { child, dir }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Turns string arguments into what `Proc::spawn` and `Node` take.
pub fn os_args(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// One `redlockd` node process on a fixed port and data directory: both outlive the
/// process, so a restart (after SIGKILL or SIGTERM) comes back on the same ones.
pub struct Node {
    pub port: u16,
    pub dir: PathBuf,
    args: Vec<OsString>,
    child: Option<Child>,
}

impl Node {
    /// A node on `port` run with `args` (plus `--port` and `--dir`), not started yet.
    pub fn new(port: u16, args: Vec<OsString>) -> Node {
        Node {
            port,
            dir: data_dir("node"),
            args,
            child: None,
        }
    }

    /// A started node on a free port, answering PING (another port is tried if one is
    /// lost to another process).
    pub fn spawn(args: &[&str]) -> Node {
        for _ in 0..20 {
            let mut node = Node::new(free_ports(1), os_args(args));
            if node.try_start().is_ok() {
                return node;
            }
        }
        panic!("no node started on a free port");
    }

    /// Starts the process and waits until it answers PING (panics if it does not).
    pub fn start(&mut self) {
        if let Err(e) = self.try_start() {
            panic!("{e}");
        }
    }

    /// Starts the process; an error if it exited (its port was taken) or never
    /// answered.
    pub fn try_start(&mut self) -> Result<(), String> {
        let child = Command::new(BIN)
            .args(&self.args)
            .args(["--port", &self.port.to_string()])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redlockd");
        self.child = Some(child);
        let deadline = Instant::now() + BOUND;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!("node on {} exited at start: {status}", self.port));
            }
            if call(self.port, &["PING"]).as_deref() == Some("+PONG") {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill9();
                return Err(format!("node on {} never answered PING", self.port));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `sig` ("-TERM", "-INT", ...) to the running process.
    pub fn signal(&self, sig: &str) {
        signal(self.child.as_ref().expect("running"), sig);
    }

    /// Waits (bounded) for the process to exit and returns its status.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        wait_bounded(&mut child)
    }

    /// SIGKILL: no snapshot, the next boot raises the fence.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and a clean exit (a clean shutdown saves a snapshot).
    pub fn terminate(&mut self) {
        self.signal("-TERM");
        let status = self.wait_exit();
        assert!(
            status.success(),
            "node on {} exited with {status}",
            self.port
        );
    }

    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl super::Addressed for Node {
    fn addr(&self) -> SocketAddr {
        Node::addr(self)
    }
}
