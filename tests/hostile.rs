//! Hostile input (issue 15): what an attacker can send must not wedge the server. Each
//! test is one case of the issue, bounded and on loopback only.

mod support;

use std::time::{Duration, Instant};
use support::redis_server::RedisNode;
use support::*;

fn sha1hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// INFO's `field` value.
async fn info_field(c: &mut Raw, field: &str) -> String {
    let info = c.cmd(&["INFO", "everything"]).await;
    let prefix = format!("{field}:");
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{field} missing from INFO"))
        .to_string()
}

const KILLED: &str = "-ERR Script killed by user with SCRIPT KILL...";

/// Loops that run inside coroutines: Lua 5.1 keeps the instruction hook per coroutine,
/// so each must still reach the kill check.
const COROUTINE_LOOPS: &[&str] = &[
    "coroutine.wrap(function() while true do end end)()",
    "local co = coroutine.create(function() while true do end end) return coroutine.resume(co)",
    "coroutine.wrap(function() coroutine.wrap(function() while true do end end)() end)()",
    "coroutine.wrap(function() while true do pcall(function() while true do end end) end end)()",
    "local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do co() end",
];

#[tokio::test(flavor = "multi_thread")]
async fn a_loop_inside_a_coroutine_is_killed_by_script_kill_within_100_ms() {
    let server = start().await;
    let mut admin = Raw::to(&server).await;
    for script in COROUTINE_LOOPS {
        let mut looping = Raw::to(&server).await;
        looping.send(&resp(&["EVAL", script, "0"])).await;
        wait_until("script starts", Duration::from_secs(10), || {
            server.script_running()
        })
        .await;
        assert_eq!(admin.cmd(&["SCRIPT", "KILL"]).await, "+OK\r\n", "{script}");
        let took = wait_until("script stops", Duration::from_secs(10), || {
            !server.script_running()
        })
        .await;
        let reply = looping.reply().await;
        assert!(reply.starts_with(KILLED), "{script}: {reply}");
        assert!(took < Duration::from_millis(100), "{script}: took {took:?}");
        assert_eq!(admin.cmd(&["PING"]).await, "+PONG\r\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_nosave_stops_a_server_whose_script_loops_in_a_coroutine() {
    let mut server = start().await;
    let mut looping = Raw::to(&server).await;
    looping
        .send(&resp(&["EVAL", COROUTINE_LOOPS[0], "0"]))
        .await;
    wait_until("script starts", Duration::from_secs(10), || {
        server.script_running()
    })
    .await;
    // Past busy_script_time (manual clock): SHUTDOWN NOSAVE is one of the two commands
    // still served.
    server.clock().advance(Duration::from_secs(6));
    let mut admin = Raw::to(&server).await;
    assert!(admin.cmd(&["GET", "k"]).await.starts_with("-BUSY "));
    let sent = Instant::now();
    admin.send(&resp(&["SHUTDOWN", "NOSAVE"])).await;
    tokio::time::timeout(Duration::from_secs(1), server.stopped())
        .await
        .expect("the server stops within 1 s");
    assert!(sent.elapsed() < Duration::from_secs(1));
}

/// 50,000 distinct scripts (clients that inline values into the script text): no
/// panic, and the cache keeps only the 500 most recently used EVAL scripts.
#[tokio::test(flavor = "multi_thread")]
async fn fifty_thousand_distinct_scripts_run_and_the_cache_stays_bounded() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    const N: usize = 50_000;
    const BATCH: usize = 500;
    for start in (0..N).step_by(BATCH) {
        let mut out = Vec::new();
        for i in start..start + BATCH {
            out.extend(resp(&["EVAL", &format!("return {i}"), "0"]));
        }
        c.send(&out).await;
        for i in start..start + BATCH {
            assert_eq!(c.reply().await, format!(":{i}\r\n"));
        }
    }
    assert_eq!(info_field(&mut c, "number_of_cached_scripts").await, "500");
    assert_eq!(
        info_field(&mut c, "evicted_scripts").await,
        (N - 500).to_string()
    );
    let first = sha1hex(b"return 0");
    let last = sha1hex(format!("return {}", N - 1).as_bytes());
    assert_eq!(
        c.cmd(&["SCRIPT", "EXISTS", &first, &last]).await,
        "*2\r\n:0\r\n:1\r\n"
    );
    assert_eq!(
        c.cmd(&["EVALSHA", &first, "0"]).await,
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    assert_eq!(
        c.cmd(&["EVALSHA", &last, "0"]).await,
        format!(":{}\r\n", N - 1)
    );
    // SCRIPT LOAD keeps every script (as Redis): past the ~8,000 values mlua can hold
    // from Rust, which is where the old cache panicked.
    let mut out = Vec::new();
    for i in 0..10_000 {
        out.extend(resp(&["SCRIPT", "LOAD", &format!("return 'l{i}'")]));
    }
    c.send(&out).await;
    for _ in 0..10_000 {
        assert!(c.reply().await.starts_with("$40\r\n"));
    }
    let loaded = sha1hex(b"return 'l0'");
    assert_eq!(c.cmd(&["EVALSHA", &loaded, "0"]).await, "$2\r\nl0\r\n");
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]).await, "+OK\r\n");
    assert_eq!(info_field(&mut c, "number_of_cached_scripts").await, "0");
    assert_eq!(c.cmd(&["EVAL", "return 7", "0"]).await, ":7\r\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_scripts_are_evicted_least_recently_used_first() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    let body = |i: usize| format!("return {i}");
    let sha = |i: usize| sha1hex(body(i).as_bytes());
    assert_eq!(
        c.cmd(&["SCRIPT", "LOAD", "return 'kept'"]).await,
        redlockd_bulk(&sha1hex(b"return 'kept'"))
    );
    for i in 0..500 {
        assert_eq!(c.cmd(&["EVAL", &body(i), "0"]).await, format!(":{i}\r\n"));
    }
    // Script 0 is used again (by EVALSHA), so 1 is now the least recently used.
    assert_eq!(c.cmd(&["EVALSHA", &sha(0), "0"]).await, ":0\r\n");
    assert_eq!(c.cmd(&["EVAL", &body(500), "0"]).await, ":500\r\n");
    assert_eq!(
        c.cmd(&["SCRIPT", "EXISTS", &sha(0), &sha(1), &sha(2), &sha(500)])
            .await,
        "*4\r\n:1\r\n:0\r\n:1\r\n:1\r\n"
    );
    // SCRIPT LOAD of an EVAL script makes it permanent.
    assert_eq!(
        c.cmd(&["SCRIPT", "LOAD", &body(2)]).await,
        redlockd_bulk(&sha(2))
    );
    for i in 1000..1600 {
        assert_eq!(c.cmd(&["EVAL", &body(i), "0"]).await, format!(":{i}\r\n"));
    }
    assert_eq!(
        c.cmd(&[
            "SCRIPT",
            "EXISTS",
            &sha(2),
            &sha1hex(b"return 'kept'"),
            &sha(0)
        ])
        .await,
        "*3\r\n:1\r\n:1\r\n:0\r\n"
    );
}

fn redlockd_bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// The script: a table of ten million tables dies at the memory limit, and
/// every script after it must still compile and run.
#[tokio::test(flavor = "multi_thread")]
async fn after_a_script_hits_the_memory_limit_the_next_script_compiles_and_runs() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    for round in 0..3 {
        let reply = c
            .cmd(&[
                "EVAL",
                "local t = {} for i = 1, 1e7 do t[i] = {} end return #t",
                "0",
            ])
            .await;
        assert!(reply.contains("not enough memory"), "{reply}");
        let fresh = format!("return {round} + 1");
        assert_eq!(
            c.cmd(&["EVAL", &fresh, "0"]).await,
            format!(":{}\r\n", round + 1)
        );
        let loaded = format!("return 'loaded {round}'");
        assert_eq!(
            c.cmd(&["SCRIPT", "LOAD", &loaded]).await,
            redlockd_bulk(&sha1hex(loaded.as_bytes()))
        );
    }
}

// The real binary: SIGTERM and SHUTDOWN NOSAVE end the process within 1 s even while a
// script runs, one that loops in a coroutine or one stuck in a single long C call.

mod binary {
    use super::support::process::{call, Node};
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    fn spawn_node() -> Node {
        Node::spawn(&[
            "--restart-delay",
            "0",
            "--busy-script-time",
            "50ms",
            "--log",
            "error",
        ])
    }

    /// Starts `script` on its own connection and waits until others get BUSY.
    fn start_script(node: &Node, script: &str) -> TcpStream {
        let mut looping = TcpStream::connect(node.addr()).unwrap();
        looping
            .write_all(&super::resp(&["EVAL", script, "0"]))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let reply = call(node.port, &["GET", "k"]).unwrap_or_default();
            if reply.starts_with("-BUSY") {
                return looping;
            }
            assert!(Instant::now() < deadline, "never BUSY: {reply}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits (bounded) for a clean exit.
    fn wait_exit(node: &mut Node) {
        let status = node.wait_exit();
        assert!(status.success(), "{status:?}");
    }

    fn sigterm(node: &Node) {
        node.signal("-TERM");
    }

    /// Exponential backtracking inside one call of Lua's C matcher.
    const BACKTRACKING: &str =
        "return string.find(string.rep('a', 40), string.rep('a*', 40) .. 'b')";

    #[test]
    fn sigterm_ends_the_process_within_1s_while_a_coroutine_loops() {
        let mut node = spawn_node();
        let _looping = start_script(&node, super::COROUTINE_LOOPS[0]);
        let sent = Instant::now();
        sigterm(&node);
        wait_exit(&mut node);
        let took = sent.elapsed();
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }

    #[test]
    fn sigterm_ends_the_process_within_1s_during_a_long_c_call() {
        let mut node = spawn_node();
        let _looping = start_script(&node, BACKTRACKING);
        let sent = Instant::now();
        sigterm(&node);
        wait_exit(&mut node);
        let took = sent.elapsed();
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }

    #[test]
    fn shutdown_nosave_ends_the_process_within_1s_while_scripts_run() {
        for script in [super::COROUTINE_LOOPS[0], BACKTRACKING] {
            let mut node = spawn_node();
            let _looping = start_script(&node, script);
            let mut admin = TcpStream::connect(node.addr()).unwrap();
            let sent = Instant::now();
            admin
                .write_all(&super::resp(&["SHUTDOWN", "NOSAVE"]))
                .unwrap();
            wait_exit(&mut node);
            let took = sent.elapsed();
            assert!(took < Duration::from_secs(1), "{script}: took {took:?}");
        }
    }
}

// Before AUTH (with --requirepass): at most 10 arguments of at most 16 KB each, refused
// from the header, before the bytes are buffered (Redis's fix for CVE-2021-32675).

#[tokio::test(flavor = "multi_thread")]
async fn unauthenticated_clients_are_limited_to_10_arguments_of_16_kb() {
    let server = start_with_password("pw").await;
    // The header alone is enough: no reply is waited for the million arguments.
    let mut c = Raw::to(&server).await;
    c.send(b"*1000000\r\n").await;
    assert_eq!(
        c.reply().await,
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert!(c.closed().await);
    // A 100 MB bulk is refused from its header; the body is never sent.
    let mut c = Raw::to(&server).await;
    c.send(b"*2\r\n$4\r\nAUTH\r\n$100000000\r\n").await;
    assert_eq!(
        c.reply().await,
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    assert!(c.closed().await);
    // Exactly at the limits: an ordinary NOAUTH.
    let mut c = Raw::to(&server).await;
    let big = "x".repeat(16 * 1024);
    let ten: Vec<&str> = std::iter::once("SET")
        .chain(std::iter::repeat_n(big.as_str(), 9))
        .collect();
    assert_eq!(c.cmd(&ten).await, "-NOAUTH Authentication required.\r\n");
    // After AUTH (even in the same batch) the limits are gone.
    let mut batch = resp(&["AUTH", "pw"]);
    batch.extend(resp(&["SET", "k", &"y".repeat(100_000)]));
    c.send(&batch).await;
    assert_eq!(c.reply().await, "+OK\r\n");
    assert_eq!(c.reply().await, "+OK\r\n");
    let many: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
    let mut args = vec!["DEL"];
    args.extend(many.iter().map(String::as_str));
    assert_eq!(c.cmd(&args).await, ":0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, ":1\r\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_password_there_is_no_pre_auth_limit() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    let args: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let mut cmd = vec!["DEL"];
    cmd.extend(args.iter().map(String::as_str));
    assert_eq!(c.cmd(&cmd).await, ":0\r\n");
    assert_eq!(c.cmd(&["SET", "k", &"z".repeat(20_000)]).await, "+OK\r\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_auth_attempts_are_counted_in_info() {
    let server = start_with_password("pw").await;
    let mut c = Raw::to(&server).await;
    let wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    assert_eq!(c.cmd(&["AUTH", "nope"]).await, wrongpass);
    assert_eq!(c.cmd(&["AUTH", "default", "pW"]).await, wrongpass);
    assert_eq!(
        c.cmd(&["HELLO", "3", "AUTH", "default", "p"]).await,
        wrongpass
    );
    assert_eq!(c.cmd(&["AUTH", "pw"]).await, "+OK\r\n");
    assert_eq!(info_field(&mut c, "acl_access_denied_auth").await, "3");
}

/// `n` sequential connect-and-hang-up cycles to `addr`: (time taken, how many waited
/// more than 900 ms, which is a SYN the kernel dropped and the client resent after 1 s).
fn connect_in_a_loop(addr: std::net::SocketAddr, n: usize) -> (Duration, usize) {
    let started = Instant::now();
    let mut stalls = 0;
    for _ in 0..n {
        let t = Instant::now();
        let s =
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
        if t.elapsed() > Duration::from_millis(900) {
            stalls += 1;
        }
        drop(s);
    }
    (started.elapsed(), stalls)
}

/// A client that connects and hangs up in a loop: 10,000 connects without the stall
/// that wedged it before the fix. A stall is a SYN the kernel dropped because the
/// accept queue was full (the backlog was 128 and the accept loop took one connection
/// per wakeup): this machine then saw one every ~130 connects, 75 or more per 10,000
/// (40 s for 9,000). Sequential connects queue up whenever the server is not scheduled
/// (the client does not wait for the accept), so on a loaded machine even redis-server
/// (backlog 511) overflows now and then, and so does this server in the test's own
/// process: a few stalls are tolerated, far from the dozens before the fix. The
/// comparison with Redis is the next test.
#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_sequential_connects_do_not_stall() {
    let server = start().await;
    let addr = server.addr();
    let (total, stalls) = tokio::task::spawn_blocking(move || connect_in_a_loop(addr, 10_000))
        .await
        .unwrap();
    println!("10,000 connects in-process: {total:?}, {stalls} stalls");
    assert!(
        stalls <= 15 && total < Duration::from_secs(30),
        "{stalls} connects waited a SYN retransmit; all took {total:?}"
    );
}

/// The bar: 10,000 sequential connects within 2x Redis's time, both servers in
/// processes of their own on this machine, interleaved in blocks of 500 so that load
/// from elsewhere falls on both alike. One SYN retransmit (1 s) of slack on top: a
/// single dropped SYN is the kernel's doing, not the server's.
#[test]
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
fn ten_thousand_sequential_connects_within_twice_redis_time() {
    let redis = RedisNode::start(None);
    let ours = process::Node::spawn(&["--restart-delay", "0"]);
    let (mut redis_total, mut ours_total) = (Duration::ZERO, Duration::ZERO);
    let (mut redis_stalls, mut ours_stalls) = (0, 0);
    for _ in 0..10 {
        let (t, s) = connect_in_a_loop(redis.addr(), 500);
        redis_total += t;
        redis_stalls += s;
        let (t, s) = connect_in_a_loop(ours.addr(), 500);
        ours_total += t;
        ours_stalls += s;
    }
    println!(
        "10,000 connects: redlockd {ours_total:?} ({ours_stalls} stalls), redis-server {redis_total:?} ({redis_stalls} stalls)"
    );
    assert!(
        ours_total <= redis_total * 2 + Duration::from_secs(1),
        "redlockd {ours_total:?} ({ours_stalls} stalls) vs redis-server {redis_total:?} ({redis_stalls} stalls)"
    );
}

/// 64-byte strings that differ only in bytes stock Lua 5.1's sampled hash skips
/// (it hashes every third byte of a 64-byte string): all in one hash chain there.
fn colliding_args(n: usize) -> Vec<Vec<u8>> {
    let varied: Vec<usize> = (0..64).filter(|p| p % 3 != 0).take(20).collect();
    (0..n)
        .map(|i| {
            let mut b = vec![b'a'; 64];
            let mut x = i;
            for &p in &varied {
                b[p] = b'a' + (x % 26) as u8;
                x /= 26;
            }
            b
        })
        .collect()
}

/// The crafted input: 100,000 colliding 64-byte arguments. With the sampled
/// hash this was quadratic (11-16 s on a release build, about a minute here); with
/// every byte hashed (vendor/lua-5.1.5) it is linear.
#[tokio::test(flavor = "multi_thread")]
async fn crafted_colliding_arguments_are_hashed_in_linear_time() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    let args = colliding_args(100_000);
    let mut cmd: Vec<&[u8]> = vec![b"EVAL", b"return #ARGV", b"0"];
    cmd.extend(args.iter().map(Vec::as_slice));
    let started = Instant::now();
    c.send(&resp(&cmd)).await;
    assert_eq!(c.reply().await, ":100000\r\n");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// One backtracking pattern match runs inside a single C call; the patched matcher
/// calls the hook, so SCRIPT KILL stops it (Redis cannot).
#[tokio::test(flavor = "multi_thread")]
async fn a_backtracking_pattern_match_is_killed_by_script_kill() {
    let server = start().await;
    let mut admin = Raw::to(&server).await;
    for script in [
        "return string.find(string.rep('a', 40), string.rep('a*', 40) .. 'b')",
        "return string.gsub(string.rep('a', 40), string.rep('a*', 40) .. 'b', '')",
    ] {
        let mut looping = Raw::to(&server).await;
        looping.send(&resp(&["EVAL", script, "0"])).await;
        wait_until("script starts", Duration::from_secs(10), || {
            server.script_running()
        })
        .await;
        assert_eq!(admin.cmd(&["SCRIPT", "KILL"]).await, "+OK\r\n");
        let took = wait_until("script stops", Duration::from_secs(10), || {
            !server.script_running()
        })
        .await;
        let reply = looping.reply().await;
        assert!(reply.starts_with(KILLED), "{script}: {reply}");
        assert!(took < Duration::from_secs(1), "{script}: took {took:?}");
    }
}
