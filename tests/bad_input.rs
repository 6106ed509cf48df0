//! Bad input and faults (issue 16): what a security reviewer would try, each case with a
//! probe client that PINGs every few milliseconds on its own connection. Every case
//! ends with a clear error (or a clean disconnect) for the offender, the server up, the
//! seeded keys intact, and the probe's worst PING printed and asserted loosely (the
//! machine running the suite is shared; the numbers in the output are what to read).
//!
//! Cases covered elsewhere: a client that never reads (tests/integrations/protocol.rs), a subscriber
//! that never reads (tests/integrations/pubsub.rs), scripts that loop, crafted hash collisions,
//! 50,000 distinct scripts, pre-AUTH limits and connection storms (tests/hostile.rs).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The loose bound on the probe's worst PING: far above what a quiet machine shows
/// (a few ms; the output has the numbers) and what a loaded CI machine's scheduler adds,
/// and below a wedged server (which never answers: the probe's read would hang).
const PING_BOUND: Duration = Duration::from_secs(2);

/// The bound on a bulk load or a huge reply (a million keys), in a debug build on a
/// loaded machine.
const BULK_BOUND: Duration = Duration::from_secs(180);

/// A client that PINGs every 5 ms until `finish`.
struct Probe {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Duration>,
}

impl Probe {
    async fn start(node: &impl Addressed) -> Probe {
        Probe::run(Raw::to(node).await)
    }

    async fn start_authed(node: &impl Addressed, password: &str) -> Probe {
        let mut c = Raw::to(node).await;
        assert_eq!(c.cmd(&["AUTH", password]).await, OK);
        Probe::run(c)
    }

    fn run(mut c: Raw) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut worst = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
                worst = worst.max(t.elapsed());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            worst
        });
        Probe { stop, task }
    }

    /// Stops the probe; prints and returns its worst PING.
    async fn finish(self, case: &str) -> Duration {
        self.stop.store(true, Ordering::Relaxed);
        let worst = self.task.await.expect("the probe's PINGs were answered");
        println!("{case}: worst PING {worst:?}");
        worst
    }
}

/// Used memory is the whole test process's (one allocator), so the cases that measure
/// it, or allocate hundreds of MB, take turns.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A node with a few keys that must survive every case.
async fn seeded(change: impl FnOnce(&mut Config)) -> (TestServer, Raw) {
    let server = start_with(change).await;
    let c = seed(&server).await;
    (server, c)
}

/// The binary in a process of its own, seeded: for the cases that read INFO
/// used_memory, which in-process would count the test's own buffers too.
async fn seeded_process() -> (process::Node, Raw) {
    let node = tokio::task::spawn_blocking(|| process::Node::spawn(&["--restart-delay", "0"]))
        .await
        .unwrap();
    let c = seed(&node).await;
    (node, c)
}

async fn seed(node: &impl Addressed) -> Raw {
    let mut c = Raw::to(node).await;
    for i in 0..10 {
        let key = format!("lock:{i}");
        assert_eq!(c.cmd(&["SET", &key, "owner", "PX", "30000"]).await, OK);
    }
    c
}

async fn assert_seeded_intact(c: &mut Raw) {
    for i in 0..10 {
        assert_eq!(c.cmd(&["GET", &format!("lock:{i}")]).await, bulk("owner"));
    }
}

/// Waits (bounded) until the server has read every byte sent on `conns`: the kernel
/// holds no unread byte on the server's end of any of them (`/proc/net/tcp`'s
/// rx_queue, for the server's port and each client port), so a memory sample after
/// it sees what the server made of the input, however slow the machine.
async fn wait_read_by_server(server_port: u16, conns: &[TcpStream]) {
    let ports: std::collections::HashSet<u16> = conns
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect();
    let hex_port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap(), 16).unwrap();
    wait_until("the server read every connection's bytes", TIMEOUT, || {
        let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
        let drained = table
            .lines()
            .skip(1)
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .filter(|f| hex_port(f[1]) == server_port && ports.contains(&hex_port(f[2])))
            .filter(|f| f[4].split(':').nth(1) == Some("00000000"))
            .count();
        drained == ports.len()
    })
    .await;
}

async fn used_memory(c: &mut Raw) -> u64 {
    let info = c.cmd(&["INFO", "memory"]).await;
    info.split("\r\n")
        .find_map(|l| l.strip_prefix("used_memory:"))
        .expect("INFO used_memory")
        .parse()
        .unwrap()
}

/// Headers that announce far more than is sent, then silence: nothing is allocated for
/// the announced sizes (the server reads what arrives), others are served.
#[tokio::test(flavor = "multi_thread")]
async fn announced_lengths_far_beyond_the_data_allocate_nothing() {
    let _turn = HEAVY.lock().await;
    let (server, mut c) = seeded_process().await;
    let before = used_memory(&mut c).await;
    let probe = Probe::start(&server).await;
    let headers: [&[u8]; 4] = [
        b"*1048576\r\n",
        b"*2\r\n$4\r\nECHO\r\n$536870912\r\nabc",
        b"$536870912\r\n0123456789",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000000\r\n",
    ];
    let mut held = Vec::new();
    for i in 0..100 {
        let mut s = TcpStream::connect(server.addr()).await.unwrap();
        s.write_all(headers[i % headers.len()]).await.unwrap();
        held.push(s);
    }
    wait_read_by_server(server.addr().port(), &held).await;
    let grown = used_memory(&mut c).await.saturating_sub(before);
    // 100 connections announcing up to 512 MB each: a few buffers, not gigabytes.
    assert!(grown < 16 << 20, "memory grew by {grown} bytes");
    // A bulk above proto-max-bulk-len is refused at once, as Redis does.
    let mut big = Raw::to(&server).await;
    big.send(b"*2\r\n$4\r\nECHO\r\n$536870913\r\n").await;
    assert_eq!(
        big.reply().await,
        err("ERR Protocol error: invalid bulk length")
    );
    assert!(big.closed().await);
    drop(held);
    assert!(probe.finish("announced lengths").await < PING_BOUND);
    assert_seeded_intact(&mut c).await;
}

/// Slowloris: 200 connections each trickling a command a byte at a time, interleaved.
/// Each gets its reply when its command is complete; nobody waits for them.
#[tokio::test(flavor = "multi_thread")]
async fn slowloris_connections_do_not_hold_up_others() {
    let (server, mut c) = seeded(|_| {}).await;
    let probe = Probe::start(&server).await;
    let mut slow = Vec::new();
    for _ in 0..200 {
        slow.push(Raw::to(&server).await);
    }
    let request = resp(&["SET", "slow", "loris"]);
    for byte in &request {
        for s in slow.iter_mut() {
            s.send(&[*byte]).await;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for s in slow.iter_mut() {
        assert_eq!(s.reply().await, OK);
    }
    assert!(probe.finish("slowloris").await < PING_BOUND);
    assert_seeded_intact(&mut c).await;
}

/// A client pipelines 2,000 GETs of a 1 MB value and never reads: the server writes
/// each megabyte of replies before it runs more of the pipeline and stops reading the
/// client once its socket is full, instead of buffering 2 GB of replies (Redis's
/// default for normal clients is an unlimited output buffer: Redis would), and others
/// are served.
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_that_never_reads_big_replies_is_not_buffered_without_bound() {
    let _turn = HEAVY.lock().await;
    let (server, mut c) = seeded_process().await;
    let value = "v".repeat(1 << 20);
    assert_eq!(c.cmd(&["SET", "big", &value]).await, OK);
    let before = used_memory(&mut c).await;
    let probe = Probe::start(&server).await;
    let mut hog = TcpStream::connect(server.addr()).await.unwrap();
    let gets = resp(&["GET", "big"]).repeat(2_000);
    // The server stops reading this client while its replies are not read, so the
    // write of the whole pipeline may never finish: bounded.
    let _ = tokio::time::timeout(Duration::from_millis(500), hog.write_all(&gets)).await;
    let grown = used_memory(&mut c).await.saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "memory grew by {grown} bytes for an unread pipeline"
    );
    assert!(probe.finish("reader that never reads").await < PING_BOUND);
    drop(hog);
    assert_seeded_intact(&mut c).await;
}

/// 2,000 clients block in BLPOP and hang up. (The issue says 10,000: 2,000 keep this
/// test's file descriptors, both ends in one process, under common limits.) Nobody is
/// left waiting: the next push stays in the list.
#[tokio::test(flavor = "multi_thread")]
async fn blpop_waiters_that_disconnect_leave_nothing_behind() {
    let (server, mut c) = seeded(|_| {}).await;
    let probe = Probe::start(&server).await;
    let mut waiters = Vec::new();
    for _ in 0..2_000 {
        let mut w = Raw::to(&server).await;
        w.send_cmd(&["BLPOP", "queue", "0"]).await;
        waiters.push(w);
    }
    wait_blocked(&server, 2_000).await;
    drop(waiters);
    wait_until("the waiters are gone", Duration::from_secs(10), || {
        server.blocked_clients() == 0
    })
    .await;
    assert_eq!(c.cmd(&["LPUSH", "queue", "x"]).await, int(1));
    assert_eq!(c.cmd(&["LLEN", "queue"]).await, int(1));
    assert!(probe.finish("BLPOP waiters that disconnect").await < PING_BOUND);
    assert_seeded_intact(&mut c).await;
}

/// KEYS over a million keys runs while others PING. Redis has the same limit and worse:
/// its KEYS blocks every client until it ends; here PING does not wait for the keyspace,
/// so the probe is not held up (its worst is printed for the record).
#[tokio::test(flavor = "multi_thread")]
async fn keys_over_a_million_keys_does_not_stop_ping() {
    let _turn = HEAVY.lock().await;
    let (server, mut c) = seeded(|_| {}).await;
    let mut fill = Raw::to(&server).await;
    let mut load = Vec::new();
    for batch in 0..1_000 {
        let mut cmd = vec!["MSET".to_string()];
        for i in 0..1_000 {
            cmd.push(format!("k:{batch}:{i}"));
            cmd.push("v".to_string());
        }
        load.extend(resp(&cmd));
    }
    // The fill and KEYS's reply take ~10 s and ~3 s in a debug build on a quiet machine,
    // several times that with both cores busy: bounded as a whole (a write bounded by
    // TIMEOUT failed under load while the server was inserting).
    let replies = fill.exchange_within(BULK_BOUND, &load, 1_000).await;
    assert!(replies.iter().all(|r| r == OK), "MSETs failed");
    let probe = Probe::start(&server).await;
    let t = Instant::now();
    let reply = c
        .exchange_within(BULK_BOUND, &resp(&["KEYS", "k:*"]), 1)
        .await;
    println!("KEYS over 1,000,000 keys: {:?}", t.elapsed());
    assert!(reply[0].starts_with("*1000000\r\n"));
    assert!(probe.finish("KEYS over a million keys").await < PING_BOUND);
    assert_seeded_intact(&mut c).await;
}

/// A big value is stored, read back whole and deleted, and the memory goes back. (64 MB
/// rather than the 500 MB, so the suite stays fast; the sizes are bounded by
/// proto-max-bulk-len, 512 MB, as in Redis.)
#[tokio::test(flavor = "multi_thread")]
async fn a_big_value_round_trips_and_its_memory_is_returned() {
    let _turn = HEAVY.lock().await;
    let (server, mut c) = seeded_process().await;
    let before = used_memory(&mut c).await;
    let probe = Probe::start(&server).await;
    let value = vec![b'x'; 64 << 20];
    assert_eq!(
        String::from_utf8(c.cmd_bytes(&[b"SET", b"huge", &value]).await).unwrap(),
        OK
    );
    let got = c.cmd_bytes(&[b"GET", b"huge"]).await;
    assert_eq!(got.len(), (64 << 20) + "$67108864\r\n\r\n".len());
    assert_eq!(c.cmd(&["DEL", "huge"]).await, int(1));
    let after = used_memory(&mut c).await;
    assert!(
        after < before + (8 << 20),
        "used_memory {before} -> {after} after DEL"
    );
    assert!(probe.finish("a 64 MB value").await < PING_BOUND);
    assert_seeded_intact(&mut c).await;
}

/// Lua memory bombs, deep recursion and deep nesting get errors; the next script runs.
#[tokio::test(flavor = "multi_thread")]
async fn lua_bombs_and_deep_recursion_get_errors() {
    let _turn = HEAVY.lock().await;
    // The probe expects PONG: a busy threshold above any bomb's run time keeps BUSY out
    // of it (a debug build with both cores busy ran the 1e8-element table past 5 s).
    let (server, mut c) = seeded(|c| c.busy_script_time = Duration::from_secs(60)).await;
    let probe = Probe::start(&server).await;
    let bombs = [
        "local t = {} for i = 1, 1e8 do t[i] = i end return #t",
        "local s = string.rep('x', 1024) while true do s = s .. s end",
        "local function f(n) return f(n + 1) + 1 end return f(1)",
        "return cjson.decode(string.rep('[', 100000) .. string.rep(']', 100000))",
        "return cmsgpack.unpack(string.rep(string.char(0x91), 100000) .. string.char(0))",
        "local t = {} for i = 1, 100000 do t = {t} end return cjson.encode(t)",
    ];
    for bomb in bombs {
        let reply = c.cmd(&["EVAL", bomb, "0"]).await;
        assert!(reply.starts_with("-ERR"), "{bomb}: {reply}");
        assert_eq!(c.cmd(&["EVAL", "return 1 + 1", "0"]).await, int(2));
    }
    // A script holds every client while it runs, here as in Redis (until the busy
    // threshold, after which others get BUSY): each bomb ends with an error on its
    // own, within about a second in a release build (1.5 s worst PING in a debug one).
    assert!(probe.finish("Lua bombs").await < Duration::from_secs(30));
    assert_seeded_intact(&mut c).await;
}

/// The sandbox: no way out to the process, the file system or the globals.
#[tokio::test(flavor = "multi_thread")]
async fn sandbox_escapes_are_errors() {
    let (_server, mut c) = seeded(|_| {}).await;
    let escapes = [
        "return os.execute('true')",
        "return io.open('/etc/passwd')",
        "return require('os')",
        "return dofile('/etc/passwd')",
        "return loadfile('/etc/passwd')",
        "return package.loadlib('libc.so.6', 'system')",
        "escaped = 1",
        "setmetatable(_G, nil) escaped = 1",
        "rawset(_G, 'escaped', 1)",
    ];
    for escape in escapes {
        let reply = c.cmd(&["EVAL", escape, "0"]).await;
        assert!(reply.starts_with("-ERR"), "{escape}: {reply}");
    }
    let check = "return type(escaped)";
    let sha = sha1_smol::Sha1::from(check).digest().to_string();
    assert_eq!(
        c.cmd(&["EVAL", check, "0"]).await,
        err(&format!("ERR user_script:1: Script attempted to access nonexistent global variable 'escaped' script: {sha}, on @user_script:1."))
    );
    assert_seeded_intact(&mut c).await;
}

/// Brute-force AUTH: thousands of wrong passwords, pipelined and from many clients, are
/// each WRONGPASS and counted; the right one still works and others are served.
#[tokio::test(flavor = "multi_thread")]
async fn brute_force_auth_is_refused_counted_and_harmless() {
    let server = start_with_password("s3cret").await;
    let mut admin = Raw::to(&server).await;
    assert_eq!(admin.cmd(&["AUTH", "s3cret"]).await, OK);
    let probe = Probe::start_authed(&server, "s3cret").await;
    let mut pipelined = TcpStream::connect(server.addr()).await.unwrap();
    let mut guesses = Vec::new();
    for i in 0..2_000 {
        guesses.extend(resp(&["AUTH", &format!("guess{i}")]));
    }
    pipelined.write_all(&guesses).await.unwrap();
    let mut raw = Raw::from_stream(pipelined);
    for _ in 0..2_000 {
        assert_eq!(
            raw.reply().await,
            err("WRONGPASS invalid username-password pair or user is disabled.")
        );
    }
    let mut clients = Vec::new();
    for _ in 0..50 {
        clients.push(Raw::to(&server).await);
    }
    for c in clients.iter_mut() {
        for i in 0..20 {
            assert!(c
                .cmd(&["AUTH", &format!("x{i}")])
                .await
                .starts_with("-WRONGPASS"));
        }
    }
    let info = admin.cmd(&["INFO", "stats"]).await;
    assert!(info.contains("acl_access_denied_auth:3000\r\n"), "{info}");
    assert_eq!(raw.cmd(&["AUTH", "s3cret"]).await, OK);
    assert_eq!(raw.cmd(&["PING"]).await, "+PONG\r\n");
    assert!(probe.finish("brute-force AUTH").await < PING_BOUND);
}
