//! The test backend: TestServer / TestGroup, the manual clock, and fault controls.

use crate::support;

mod scoped_faults;

use redlockd::testing::{TestGroup, TestServer};
use std::time::{Duration, Instant};
use support::Raw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const STEP: Duration = Duration::from_secs(2);

#[tokio::test]
async fn test_server_starts_in_milliseconds_and_answers() {
    let started = Instant::now();
    let server = TestServer::start().await;
    let elapsed = started.elapsed();
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(
        c.try_cmd(STEP, &["PING"]).await.as_deref(),
        Some("+PONG\r\n")
    );
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn advance_expires_keys_and_reclaims_them_before_returning() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    c.try_cmd(STEP, &["SET", "lock", "me", "PX", "1000"]).await;
    server.advance(Duration::from_millis(1000));
    assert_eq!(
        c.try_cmd(STEP, &["PTTL", "lock"]).await.as_deref(),
        Some(":0\r\n")
    );
    server.advance(Duration::from_millis(1));
    // Gone from memory, not only hidden: DBSIZE counts unreclaimed keys, as in Redis.
    assert_eq!(
        c.try_cmd(STEP, &["DBSIZE"]).await.as_deref(),
        Some(":0\r\n")
    );
    assert_eq!(
        c.try_cmd(STEP, &["GET", "lock"]).await.as_deref(),
        Some("$-1\r\n")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn wall_jumps_move_time_but_not_ttls() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    c.try_cmd(STEP, &["SET", "lock", "me", "PX", "10000"]).await;
    let before = c.try_cmd(STEP, &["PEXPIRETIME", "lock"]).await.unwrap();
    server.jump_wall(3_600_000);
    assert_eq!(
        c.try_cmd(STEP, &["PTTL", "lock"]).await.as_deref(),
        Some(":10000\r\n")
    );
    let after = c.try_cmd(STEP, &["PEXPIRETIME", "lock"]).await.unwrap();
    let parse = |s: &str| s.trim_start_matches(':').trim().parse::<i64>().unwrap();
    assert_eq!(parse(&after) - parse(&before), 3_600_000);
    server.jump_wall(-7_200_000);
    assert_eq!(
        c.try_cmd(STEP, &["PTTL", "lock"]).await.as_deref(),
        Some(":10000\r\n")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn crash_restart_forgets_keys_and_raises_the_fence() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(
        c.try_cmd(STEP, &["SET", "lock", "me", "PX", "5000"])
            .await
            .as_deref(),
        Some("+OK\r\n")
    );
    server.crash_restart();
    // The old connection was dropped, as a crash would.
    assert_eq!(c.try_cmd(STEP, &["PING"]).await, None);
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(
        c.try_cmd(STEP, &["GET", "lock"]).await.as_deref(),
        Some("$-1\r\n")
    );
    let refused = c
        .try_cmd(STEP, &["SET", "lock", "other", "NX", "PX", "5000"])
        .await
        .unwrap();
    // The fence covers the 5 s lock granted before the crash: its recorded deadline,
    // reserved 1 s ahead, plus the 1 s margin.
    assert_eq!(
        refused,
        "-TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another 7000 ms\r\n"
    );
    server.advance(Duration::from_millis(6_999));
    let still = c
        .try_cmd(STEP, &["SET", "lock", "other", "NX", "PX", "5000"])
        .await
        .unwrap();
    assert!(still.ends_with("for another 1 ms\r\n"), "{still}");
    server.advance(Duration::from_millis(1));
    assert_eq!(
        c.try_cmd(STEP, &["SET", "lock", "other", "NX", "PX", "5000"])
            .await
            .as_deref(),
        Some("+OK\r\n")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn stop_refuses_connections_and_start_again_boots_fenced() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    c.try_cmd(STEP, &["SET", "k", "v"]).await;
    server.stop().await;
    assert_eq!(c.try_cmd(STEP, &["PING"]).await, None);
    // The listener closes asynchronously; refusal must follow within a bounded time.
    let deadline = Instant::now() + STEP;
    loop {
        if TcpStream::connect(server.addr()).await.is_err() {
            break;
        }
        assert!(Instant::now() < deadline, "port still accepting after stop");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.start_again().await;
    let deadline = Instant::now() + STEP;
    let mut c = loop {
        if let Ok(c) = TcpStream::connect(server.addr()).await {
            break Raw::from_stream(c);
        }
        assert!(Instant::now() < deadline, "port not back after start");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    assert_eq!(
        c.try_cmd(STEP, &["EXISTS", "k"]).await.as_deref(),
        Some(":0\r\n")
    );
    let refused = c.try_cmd(STEP, &["SET", "k", "v"]).await.unwrap();
    assert!(refused.starts_with("-TRYAGAIN "), "{refused}");
    server.shutdown().await;
}

#[tokio::test]
async fn pause_holds_replies_until_resume() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    server.pause();
    let mut req = &b"*1\r\n$4\r\nPING\r\n"[..];
    c.stream.write_all_buf(&mut req).await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(50), c.stream.read(&mut buf)).await;
    assert!(early.is_err(), "a paused node answered");
    server.resume().await;
    let n = tokio::time::timeout(STEP, c.stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf[..n], b"+PONG\r\n");
    server.shutdown().await;
}

#[tokio::test]
async fn isolate_drops_connections_but_keeps_memory() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    c.try_cmd(STEP, &["SET", "lock", "me", "PX", "5000"]).await;
    server.isolate().await;
    assert_eq!(c.try_cmd(STEP, &["PING"]).await, None);
    server.heal().await;
    let deadline = Instant::now() + STEP;
    let mut c = loop {
        if let Ok(c) = TcpStream::connect(server.addr()).await {
            break Raw::from_stream(c);
        }
        assert!(Instant::now() < deadline, "port not back after heal");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    assert_eq!(
        c.try_cmd(STEP, &["GET", "lock"]).await.as_deref(),
        Some("$2\r\nme\r\n")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn group_nodes_share_one_clock_but_nothing_else() {
    let started = Instant::now();
    let group = TestGroup::start(5).await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    let mut a = Raw::connect(group.node(0).addr()).await;
    let mut b = Raw::connect(group.node(1).addr()).await;
    a.try_cmd(STEP, &["SET", "lock", "a", "PX", "1000"]).await;
    assert_eq!(
        b.try_cmd(STEP, &["GET", "lock"]).await.as_deref(),
        Some("$-1\r\n")
    );
    group.advance(Duration::from_millis(1001));
    assert_eq!(
        a.try_cmd(STEP, &["GET", "lock"]).await.as_deref(),
        Some("$-1\r\n")
    );
    group.shutdown().await;
}

#[tokio::test]
async fn debug_clock_and_crash_restart_work_over_the_wire() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    c.try_cmd(STEP, &["SET", "lock", "me", "PX", "1000"]).await;
    assert_eq!(
        c.try_cmd(STEP, &["DEBUG", "CLOCK", "ADVANCE", "1001"])
            .await
            .as_deref(),
        Some("+OK\r\n")
    );
    assert_eq!(
        c.try_cmd(STEP, &["GET", "lock"]).await.as_deref(),
        Some("$-1\r\n")
    );
    let t0 = c.try_cmd(STEP, &["TIME"]).await.unwrap();
    assert_eq!(
        c.try_cmd(STEP, &["DEBUG", "CLOCK", "JUMP-WALL", "-60000"])
            .await
            .as_deref(),
        Some("+OK\r\n")
    );
    let t1 = c.try_cmd(STEP, &["TIME"]).await.unwrap();
    assert_ne!(t0, t1);
    assert_eq!(
        c.try_cmd(STEP, &["DEBUG", "CRASH-RESTART"])
            .await
            .as_deref(),
        Some("+OK\r\n")
    );
    assert_eq!(c.try_cmd(STEP, &["PING"]).await, None);
    server.shutdown().await;
}

#[tokio::test]
async fn crash_restart_forgets_loaded_scripts() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    let loaded = c
        .try_cmd(STEP, &["SCRIPT", "LOAD", "return 1"])
        .await
        .unwrap();
    let sha = loaded.lines().nth(1).unwrap().to_string();
    server.crash_restart();
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(
        c.try_cmd(STEP, &["EVALSHA", &sha, "0"]).await.as_deref(),
        Some("-NOSCRIPT No matching script. Please use EVAL.\r\n")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn requests_on_connections_made_during_a_pause_run_before_resume_returns() {
    let server = TestServer::start().await;
    server.pause();
    // A client dials the paused node, sends a lock request and gives up (as a client
    // whose per-node timeout fired would).
    let mut late = Raw::connect(server.addr()).await;
    let mut req =
        &b"*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$3\r\nold\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1000\r\n"[..];
    late.stream.write_all_buf(&mut req).await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(20), late.stream.read(&mut buf)).await;
    assert!(early.is_err(), "a paused node answered");
    drop(late);
    server.resume().await;
    // The late SET ran before resume returned, on the clock as it was: it expires with
    // this advance instead of running afterwards with a fresh TTL.
    server.advance(Duration::from_millis(1001));
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(
        c.try_cmd(STEP, &["SET", "lock", "new", "NX", "PX", "1000"])
            .await
            .as_deref(),
        Some("+OK\r\n")
    );
    server.shutdown().await;
}

/// A node taken off the network executes nothing more, not even a request sent on a
/// connection opened before: otherwise a Redlock client could be granted a lock by a
/// node the test believes is down (seen as 2-9 grants in 300 tries before the fix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_node_executes_nothing_sent_on_an_open_connection() {
    nothing_runs_once_down(Down::Isolate).await;
}

/// The same for `stop()` (the process died): no reply, and nothing executed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_executes_nothing_sent_on_an_open_connection() {
    nothing_runs_once_down(Down::Stop).await;
}

#[derive(Clone, Copy, PartialEq)]
enum Down {
    Stop,
    Isolate,
}

/// 300 tries: a connection is open, the node goes down, a SET is sent on it.
async fn nothing_runs_once_down(how: Down) {
    let server = TestServer::start().await;
    for i in 0..300 {
        let mut c = Raw::connect(server.addr()).await;
        assert_eq!(
            c.try_cmd(STEP, &["PING"]).await.as_deref(),
            Some("+PONG\r\n")
        );
        let before = executed(&server).await;
        match how {
            Down::Stop => server.stop().await,
            Down::Isolate => server.isolate().await,
        }
        let key = format!("k{i}");
        let reply = c.try_cmd(STEP, &["SET", &key, "v"]).await;
        assert_eq!(reply, None, "try {i}: a down node answered");
        match how {
            // A stopped node boots again with an empty keyspace: what it ran shows in
            // its command count only.
            Down::Stop => server.start_again().await,
            Down::Isolate => server.heal().await,
        }
        let mut probe = Raw::connect(server.addr()).await;
        assert_eq!(
            probe.try_cmd(STEP, &["EXISTS", &key]).await.as_deref(),
            Some(":0\r\n"),
            "try {i}: a down node executed the write"
        );
        assert_eq!(
            executed(&server).await,
            before + 2,
            "try {i}: a down node ran a command (only the first INFO and EXISTS count)"
        );
    }
    server.shutdown().await;
}

/// `total_commands_processed` from INFO, on a connection of its own.
async fn executed(server: &TestServer) -> u64 {
    let info = Raw::connect(server.addr())
        .await
        .cmd(&["INFO", "stats"])
        .await;
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO stats has total_commands_processed: {info}"))
}

/// The same for a pause: a request read before `pause()` returns is not executed
/// while paused (here the node is then isolated, which drops the backlog: the write
/// must never have happened).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_executes_nothing_until_resumed() {
    let server = TestServer::start().await;
    for i in 0..100 {
        let mut c = Raw::connect(server.addr()).await;
        assert_eq!(
            c.try_cmd(STEP, &["PING"]).await.as_deref(),
            Some("+PONG\r\n")
        );
        server.pause();
        let key = format!("k{i}");
        let req = format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nv\r\n", key.len());
        c.stream.write_all(req.as_bytes()).await.unwrap();
        let mut buf = [0u8; 64];
        let early = tokio::time::timeout(Duration::from_millis(5), c.stream.read(&mut buf)).await;
        assert!(early.is_err(), "try {i}: a paused node answered");
        server.isolate().await;
        server.heal().await;
        let mut probe = Raw::connect(server.addr()).await;
        assert_eq!(
            probe.try_cmd(STEP, &["EXISTS", &key]).await.as_deref(),
            Some(":0\r\n"),
            "try {i}: a paused node executed the write"
        );
    }
    server.shutdown().await;
}
