//! Real redis-server processes on free ports (killed on drop), and tiny fake nodes that
//! misbehave on purpose.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One redis-server process. Killed (and reaped) on drop.
pub struct RedisNode {
    pub port: u16,
    password: Option<String>,
    /// More redis-server arguments (`--aclfile PATH`), kept for restarts.
    extra: Vec<String>,
    child: Option<Child>,
}

impl RedisNode {
    pub fn start(password: Option<&str>) -> RedisNode {
        Self::start_with_args(password, &[])
    }

    /// A server started with more arguments (e.g. `["--aclfile", path]`).
    pub fn start_with_args(password: Option<&str>, extra: &[&str]) -> RedisNode {
        // A port freed just now can be taken by a parallel test before redis binds it:
        // then redis exits, and we try another.
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for _ in 0..20 {
            if let Some(node) = Self::try_start(super::process::free_ports(1), password, &extra) {
                return node;
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// Kills this server and starts a fresh one (empty) on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(node) = Self::try_start(self.port, self.password.as_deref(), &self.extra) {
                self.child = node.child_taken();
                return;
            }
            assert!(
                Instant::now() < deadline,
                "could not restart on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn child_taken(mut self) -> Option<Child> {
        self.child.take()
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing until resumed.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status();
        }
    }

    fn try_start(port: u16, password: Option<&str>, extra: &[String]) -> Option<RedisNode> {
        {
            let mut cmd = Command::new("redis-server");
            cmd.args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--loglevel", "warning"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some(pw) = password {
                cmd.args(["--requirepass", pw]);
            }
            cmd.args(extra);
            let mut child = cmd.spawn().expect("spawn redis-server");
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    return None; // exited: port taken
                }
                if let Ok(conn) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                    // Whoever answers must be the server started here: a parallel test
                    // can take the port first (this one then exits), and a cluster node
                    // that cannot bind its bus port exits after listening.
                    if !answers_as(conn, child.id(), password) {
                        let _ = child.kill();
                        let _ = child.wait();
                        return None;
                    }
                    return Some(RedisNode {
                        port,
                        password: password.map(str::to_string),
                        extra: extra.to_vec(),
                        child: Some(child),
                    });
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("redis-server on port {port} did not start within 5 s");
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// Kills the server (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A plain synchronous connection (the `redis` crate) for checking what the nodes hold.
    pub fn conn(&self) -> redis::Connection {
        let url = match &self.password {
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{}/", self.port),
            None => format!("redis://127.0.0.1:{}/", self.port),
        };
        let client = redis::Client::open(url).expect("client");
        client.get_connection().expect("connect")
    }

    pub fn get(&self, key: &str) -> Option<String> {
        redis::cmd("GET")
            .arg(key)
            .query(&mut self.conn())
            .expect("GET")
    }

    pub fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query(&mut self.conn())
            .expect("PTTL")
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `n` redis-servers.
pub fn cluster(n: usize) -> Vec<RedisNode> {
    cluster_with_password(n, None)
}

pub fn cluster_with_password(n: usize, password: Option<&str>) -> Vec<RedisNode> {
    (0..n).map(|_| RedisNode::start(password)).collect()
}

pub fn addrs(nodes: &[RedisNode]) -> Vec<String> {
    nodes.iter().map(|n| n.addr().to_string()).collect()
}

/// How a fake node behaves.
#[derive(Clone, Copy)]
pub enum Fake {
    /// Replies `-TRYAGAIN ...` to every request, as redlockd does during its restart fence.
    TryAgain,
    /// Accepts connections and reads requests but never replies.
    BlackHole,
}

/// Starts a fake node on the current runtime and returns its address. It runs until the
/// runtime ends.
pub async fn fake_node(kind: Fake) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = BytesMut::new();
                loop {
                    match sock.read_buf(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    while let Ok(Some(_args)) =
                        redlockd::inmem::parse_request(&mut buf, &Default::default())
                    {
                        if let Fake::TryAgain = kind {
                            let reply = b"-TRYAGAIN fence: 900 ms left\r\n";
                            if sock.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

impl super::Addressed for RedisNode {
    fn addr(&self) -> std::net::SocketAddr {
        RedisNode::addr(self)
    }
}

/// The redlockd side of a differential run against a redis-server: the real clock (both
/// servers' TTLs run in real time), max-ttl 1 h, no fence, `seed` for SCAN and Lua.
async fn redlockd_like_redis(seed: u64) -> redlockd::testing::TestServer {
    super::start_with(|c| {
        c.clock = Some(redlockd::Clock::real());
        c.max_ttl = Duration::from_secs(3600);
        c.seed = Some(seed);
    })
    .await
}

/// Seeds every differential test runs, in CI and locally: a failure on one of them
/// reproduces on every machine.
pub const FIXED_SEEDS: [u64; 3] = [1, 2, 3];

/// A differential test's seeds: `DIFF_SEED` alone when set (to replay a run), else the
/// fixed seeds and one random seed. Each is printed before it runs and is in every
/// failure message (`seed=N`).
pub fn diff_seeds(name: &str) -> Vec<u64> {
    match std::env::var("DIFF_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let mut seeds = FIXED_SEEDS.to_vec();
            seeds.push(rand::random());
            eprintln!("{name}: seeds {seeds:?} (replay one with DIFF_SEED=n)");
            seeds
        }
    }
}

/// How many random ops a run has: `DIFF_OPS`, default 2000 per seed.
fn diff_ops() -> usize {
    std::env::var("DIFF_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// A differential run: a redis-server and redlockd (`redlockd_like_redis`) side by
/// side, the same commands sent to both and their replies compared. A mismatch panics
/// with the seed, the last ops and how to replay the run.
pub struct Differential {
    pub seed: u64,
    /// How many random ops to run (`DIFF_OPS`).
    pub ops: usize,
    redis: super::Raw,
    ours: super::Raw,
    /// Each op and redis-server's reply, for the failure message.
    history: Vec<String>,
    _redis_node: RedisNode,
    ours_node: redlockd::testing::TestServer,
}

impl Differential {
    /// Both servers, empty, for one run of `seed` (`name` is the test's, printed with
    /// the seed).
    pub async fn start(name: &str, seed: u64) -> Differential {
        let ops = diff_ops();
        eprintln!("{name}: seed={seed} ops={ops} (replay with DIFF_SEED={seed})");
        let redis_node = RedisNode::start(None);
        let ours_node = redlockd_like_redis(seed).await;
        let mut redis = super::Raw::to(&redis_node).await;
        let ours = super::Raw::to(&ours_node).await;
        assert_eq!(redis.cmd(&["FLUSHALL"]).await, super::OK);
        Differential {
            seed,
            ops,
            redis,
            ours,
            history: Vec::new(),
            _redis_node: redis_node,
            ours_node,
        }
    }

    /// Op `i`: `args` to both servers; their replies must be `equivalent(redis, ours)`.
    pub async fn step(
        &mut self,
        i: usize,
        args: &[String],
        equivalent: impl Fn(&str, &str) -> bool,
    ) {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ra, rb) = (self.redis.cmd(&refs).await, self.ours.cmd(&refs).await);
        self.history.push(format!("{args:?} -> {ra:?}"));
        if !equivalent(&ra, &rb) {
            let recent = self.history[self.history.len().saturating_sub(15)..].join("\n  ");
            let seed = self.seed;
            panic!(
                "seed={seed}: op {i} {args:?}\n  redis:    {ra:?}\n  redlockd: {rb:?}\nrecent ops:\n  {recent}\nreplay with DIFF_SEED={seed}"
            );
        }
    }

    /// `args` to both servers (not an op of the run): the replies must be identical.
    pub async fn same(&mut self, args: &[&str]) {
        let (ra, rb) = (self.redis.cmd(args).await, self.ours.cmd(args).await);
        assert_eq!(ra, rb, "seed={} {args:?}", self.seed);
    }

    /// `args` to both servers: their replies, redis-server's first.
    pub async fn both(&mut self, args: &[&str]) -> (String, String) {
        (self.redis.cmd(args).await, self.ours.cmd(args).await)
    }

    /// Waits (bounded, polling every millisecond) until `key` has expired on both
    /// servers (PTTL -2 on each). Both run on the real clock: redis-server has no
    /// other, and a manual clock on one side only would let every other TTL of the run
    /// drift apart by the run's duration; so expiry is compared once both are past it.
    pub async fn wait_expired(&mut self, key: &str) {
        let started = std::time::Instant::now();
        loop {
            let (ra, rb) = self.both(&["PTTL", key]).await;
            if ra == ":-2\r\n" && rb == ":-2\r\n" {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "seed={}: {key} not expired on both after 10 s: redis {ra:?}, redlockd {rb:?}",
                self.seed
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Stops both servers.
    pub async fn finish(self) {
        self.ours_node.shutdown().await;
    }
}

/// Whether the server on `conn` is process `pid` (INFO server's process_id).
fn answers_as(mut conn: std::net::TcpStream, pid: u32, password: Option<&str>) -> bool {
    use std::io::{Read, Write};
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut req = Vec::new();
    if let Some(pw) = password {
        req.extend_from_slice(format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{pw}\r\n", pw.len()).as_bytes());
    }
    req.extend_from_slice(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n");
    if conn.write_all(&req).is_err() {
        return false;
    }
    let want = format!("process_id:{pid}\r\n");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < 64 * 1024 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got);
        if text.contains(&want) {
            return true;
        }
        if text.contains("run_id:") {
            return false;
        }
    }
    false
}
