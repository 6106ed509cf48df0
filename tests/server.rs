//! Server commands: INFO, DBSIZE, FLUSHDB, FLUSHALL, TIME, COMMAND, CONFIG, SHUTDOWN,
//! DEBUG.

mod support;
use redlockd::clock::MANUAL_WALL_START_MS;
use std::time::Duration;
use support::*;

#[tokio::test]
async fn info_has_the_default_sections_and_loading_zero() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let info = c.cmd(&["INFO"]).await;
    assert!(info.starts_with('$'), "RESP2 INFO is a bulk string: {info}");
    for needle in [
        "# Server\r\n",
        "redis_version:7.2.4\r\n",
        "# Clients\r\n",
        "connected_clients:1\r\n",
        "# Persistence\r\n",
        "loading:0\r\n",
        "# Stats\r\n",
        "# Replication\r\n",
        "role:master\r\n",
        "# Fence\r\n",
        "# Keyspace\r\n",
    ] {
        assert!(info.contains(needle), "missing {needle:?} in {info}");
    }
    assert!(!info.contains("# Commandstats"), "{info}");
    h.shutdown().await;
}

#[tokio::test]
async fn info_in_resp3_is_a_verbatim_string() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["HELLO", "3"]).await;
    let info = c.cmd(&["INFO", "server"]).await;
    assert!(info.starts_with('='), "{info}");
    assert!(info.contains("\r\ntxt:# Server\r\n"), "{info}");
    h.shutdown().await;
}

#[tokio::test]
async fn info_fence_section_describes_the_fence() {
    let h = start_with(|c| {
        c.restart_delay = Some(Duration::from_secs(31));
        c.require_ttl = true;
    })
    .await;
    let mut c = Raw::to(&h).await;
    let info = c.cmd(&["INFO", "fence"]).await;
    let until = MANUAL_WALL_START_MS + 31_000;
    for needle in [
        "# Fence\r\n".to_string(),
        "fence_active:1\r\n".into(),
        "fence_remaining_ms:31000\r\n".into(),
        format!("fence_until_unix_ms:{until}\r\n"),
        "max_ttl_ms:30000\r\n".into(),
        "restart_delay_ms:31000\r\n".into(),
        "require_ttl:1\r\n".into(),
    ] {
        assert!(info.contains(&needle), "missing {needle:?} in {info}");
    }
    assert!(!info.contains("# Server"), "{info}");
    h.shutdown().await;
}

#[tokio::test]
async fn info_commandstats_counts_calls_and_failures() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    c.cmd(&["SET", "k", "v", "EX", "0"]).await;
    c.cmd(&["GET", "k"]).await;
    let info = c.cmd(&["INFO", "commandstats"]).await;
    assert!(info.contains("# Commandstats\r\n"), "{info}");
    let line = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
            .unwrap_or_else(|| panic!("no cmdstat_{name} in {info}"))
            .to_string()
    };
    assert!(line("set").starts_with("cmdstat_set:calls=2,"), "{info}");
    assert!(
        line("set").ends_with(",rejected_calls=0,failed_calls=1"),
        "{info}"
    );
    assert!(line("get").starts_with("cmdstat_get:calls=1,"), "{info}");
    assert!(!info.contains("cmdstat_del:"), "{info}");
    let all = c.cmd(&["INFO", "all"]).await;
    assert!(all.contains("# Commandstats\r\n") && all.contains("# Server\r\n"));
    h.shutdown().await;
}

#[tokio::test]
async fn info_keyspace_counts_keys_and_expires() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["MSET", "a", "1", "b", "2"]).await;
    c.cmd(&["SET", "c", "3", "PX", "1000"]).await;
    let info = c.cmd(&["INFO", "keyspace"]).await;
    assert!(info.contains("db0:keys=3,expires=1,"), "{info}");
    h.shutdown().await;
}

#[tokio::test]
async fn dbsize_counts_the_selected_database() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    c.cmd(&["MSET", "a", "1", "b", "2"]).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(2));
    c.cmd(&["SELECT", "1"]).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn flushdb_empties_only_the_selected_database() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1"]).await;
    c.cmd(&["SELECT", "1"]).await;
    c.cmd(&["SET", "b", "1"]).await;
    assert_eq!(c.cmd(&["FLUSHDB"]).await, OK);
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    c.cmd(&["SELECT", "0"]).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(1));
    assert_eq!(c.cmd(&["FLUSHDB", "ASYNC"]).await, OK);
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    assert_eq!(c.cmd(&["FLUSHDB", "foo"]).await, err("ERR syntax error"));
    h.shutdown().await;
}

#[tokio::test]
async fn flushall_empties_every_database() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1"]).await;
    c.cmd(&["SELECT", "5"]).await;
    c.cmd(&["SET", "b", "1"]).await;
    assert_eq!(c.cmd(&["FLUSHALL", "SYNC"]).await, OK);
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    c.cmd(&["SELECT", "0"]).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn time_follows_the_manual_clock() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let secs = MANUAL_WALL_START_MS / 1000;
    assert_eq!(
        c.cmd(&["TIME"]).await,
        format!("*2\r\n{}{}", bulk(&secs.to_string()), bulk("0"))
    );
    h.clock().advance(Duration::from_millis(1250));
    assert_eq!(
        c.cmd(&["TIME"]).await,
        format!("*2\r\n{}{}", bulk(&(secs + 1).to_string()), bulk("250000"))
    );
    h.shutdown().await;
}

#[tokio::test]
async fn command_count_matches_command_list() {
    let h = start().await;
    let mut con = conn(&h).await;
    let count: i64 = redis::cmd("COMMAND")
        .arg("COUNT")
        .query_async(&mut con)
        .await
        .unwrap();
    let names: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(count as usize, names.len());
    for name in ["get", "set", "pexpire", "hello", "client", "info"] {
        assert!(names.iter().any(|n| n == name), "{name} missing");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn command_info_describes_arity_flags_and_keys() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let r = c.cmd(&["COMMAND", "INFO", "get", "nosuch"]).await;
    assert!(
        r.starts_with(
            "*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
        ),
        "{r}"
    );
    assert!(r.ends_with("*-1\r\n"), "{r}");
    let r = c.cmd(&["COMMAND", "INFO", "SET"]).await;
    assert!(r.contains("$3\r\nset\r\n:-3\r\n"), "{r}");
    assert_eq!(
        c.cmd(&["COMMAND", "COUNT", "x"]).await,
        err("ERR wrong number of arguments for 'command|count' command")
    );
    assert_eq!(
        c.cmd(&["COMMAND", "FOO"]).await,
        err("ERR unknown subcommand 'FOO'. Try COMMAND HELP.")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn command_docs_is_a_map_per_command() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let r = c.cmd(&["COMMAND", "DOCS", "get"]).await;
    assert!(
        r.starts_with("*2\r\n$3\r\nget\r\n*6\r\n$7\r\nsummary\r\n"),
        "{r}"
    );
    c.cmd(&["HELLO", "3"]).await;
    let r = c.cmd(&["COMMAND", "DOCS", "get"]).await;
    assert!(r.starts_with("%1\r\n$3\r\nget\r\n%3\r\n"), "{r}");
    h.shutdown().await;
}

#[tokio::test]
async fn config_get_matches_glob_patterns() {
    let h = start_with(|c| c.proto_max_bulk_len = 4096).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]).await,
        format!("*2\r\n{}{}", bulk("proto-max-bulk-len"), bulk("4096"))
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "max-ttl"]).await,
        format!("*2\r\n{}{}", bulk("max-ttl"), bulk("30000"))
    );
    // Redis's five: maxmemory, -policy, -samples, -eviction-tenacity, -clients.
    let r = c.cmd(&["CONFIG", "GET", "maxmemory*"]).await;
    assert!(r.starts_with("*10\r\n"), "{r}");
    assert_eq!(c.cmd(&["CONFIG", "GET", "nosuch"]).await, "*0\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "GET"]).await,
        err("ERR wrong number of arguments for 'config|get' command")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_the_server() {
    let mut h = start().await;
    let addr = h.addr();
    let mut other = Raw::to(&h).await;
    let mut c = Raw::to(&h).await;
    c.send(&resp(&["SHUTDOWN", "NOSAVE"])).await;
    assert!(c.closed().await);
    assert!(other.closed().await, "other clients are disconnected");
    tokio::time::timeout(TIMEOUT, h.stopped())
        .await
        .expect("server stops in time");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    h.shutdown().await;
}

#[tokio::test]
async fn shutdown_with_a_bad_option_is_a_syntax_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SHUTDOWN", "LATER"]).await, err("ERR syntax error"));
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    h.shutdown().await;
}

// Multi-threaded, so that a server thread stuck in DEBUG SLEEP fails the test through
// the client's timeout instead of hanging it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_sleep_replies_ok_and_the_server_keeps_answering() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]).await, OK);
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.001"]).await, OK);
    let mut other = Raw::to(&h).await;
    assert_eq!(other.cmd(&["PING"]).await, "+PONG\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn debug_clock_advance_expires_keys_over_the_wire() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v", "PX", "100"]).await;
    assert_eq!(c.cmd(&["DEBUG", "CLOCK", "ADVANCE", "101"]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, NIL);
    assert_eq!(c.cmd(&["DEBUG", "CLOCK", "JUMP-WALL", "+1000"]).await, OK);
    assert_eq!(h.clock().wall_ms(), MANUAL_WALL_START_MS + 101 + 1000);
    h.shutdown().await;
}

#[tokio::test]
async fn a_client_past_maxclients_is_refused_and_the_others_keep_working() {
    let h = start_with(|c| c.maxclients = 2).await;
    let mut a = Raw::to(&h).await;
    let mut b = Raw::to(&h).await;
    assert_eq!(a.cmd(&["PING"]).await, "+PONG\r\n");
    assert_eq!(b.cmd(&["PING"]).await, "+PONG\r\n");
    let mut third = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let mut buf = vec![0u8; 128];
    let n = tokio::time::timeout(TIMEOUT, tokio::io::AsyncReadExt::read(&mut third, &mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf[..n], b"-ERR max number of clients reached\r\n");
    assert_eq!(a.cmd(&["PING"]).await, "+PONG\r\n");
}

/// With the real clock, the background sweeper (not a read) reclaims expired keys
/// within about a second.
#[tokio::test]
async fn the_sweeper_reclaims_expired_keys_on_the_real_clock() {
    let h = start_with(|c| c.clock = Some(redlockd::Clock::real())).await;
    let mut c = Raw::to(&h).await;
    for i in 0..100 {
        assert_eq!(
            c.cmd(&["SET", &format!("k{i}"), "v", "PX", "20"]).await,
            "+OK\r\n"
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        if c.cmd(&["DBSIZE"]).await == ":0\r\n" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expired keys still counted"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn info_field(info: &str, name: &str) -> u64 {
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"));
    line.trim().parse().unwrap()
}

#[tokio::test]
async fn info_memory_counts_a_big_value_and_gives_it_back() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let info = c.cmd(&["INFO", "memory"]).await;
    for needle in [
        "# Memory\r\n",
        "used_memory_human:",
        "used_memory_rss_human:",
        "used_memory_peak:",
        "mem_allocator:libc\r\n",
    ] {
        assert!(info.contains(needle), "missing {needle:?} in {info}");
    }
    let before = info_field(&info, "used_memory");
    let big = "x".repeat(64 << 20);
    assert_eq!(c.cmd(&["SET", "big", &big]).await, "+OK\r\n");
    drop(big);
    let held = info_field(&c.cmd(&["INFO", "memory"]).await, "used_memory");
    assert!(held >= before + (60 << 20), "{before} -> {held}");
    assert_eq!(c.cmd(&["DEL", "big"]).await, ":1\r\n");
    let after = info_field(&c.cmd(&["INFO", "memory"]).await, "used_memory");
    // Other tests in this process allocate too: only the 64 MB must be gone.
    assert!(after + (48 << 20) < held, "{held} -> {after}");
    // The connection's read buffer that held the request went too (and the slow log
    // kept copies of the short arguments, not slices pinning that buffer).
    assert!(after < before + (32 << 20), "{before} -> {held} -> {after}");
    h.shutdown().await;
}

#[tokio::test]
async fn memory_subcommands_answer_as_redis_does() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "0123456789abcdefghijkl"]).await;
    c.cmd(&["HSET", "h", "f1", "v1", "f2", "v2"]).await;
    let usage = c.cmd(&["MEMORY", "USAGE", "k"]).await;
    let n: i64 = usage.trim_start_matches(':').trim().parse().unwrap();
    // Redis 7.0 answers 80; here the slot (8 bytes and a control byte) and one 48-byte
    // chunk for key, value and deadline: 58.
    assert!((40..400).contains(&n), "{usage}");
    assert!(c
        .cmd(&["MEMORY", "USAGE", "h", "SAMPLES", "0"])
        .await
        .starts_with(':'));
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "nokey"]).await, "$-1\r\n");
    assert_eq!(
        c.cmd(&["memory", "usage", "k", "samples"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["memory", "usage", "k", "samples", "-1"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["memory", "usage", "k", "samples", "x"]).await,
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["memory", "usage"]).await,
        err("ERR wrong number of arguments for 'memory|usage' command")
    );
    assert_eq!(
        c.cmd(&["memory", "purge", "x"]).await,
        err("ERR wrong number of arguments for 'memory|purge' command")
    );
    assert_eq!(
        c.cmd(&["memory", "foo"]).await,
        err("ERR unknown subcommand 'foo'. Try MEMORY HELP.")
    );
    assert_eq!(
        c.cmd(&["memory"]).await,
        err("ERR wrong number of arguments for 'memory' command")
    );
    assert_eq!(c.cmd(&["MEMORY", "PURGE"]).await, "+OK\r\n");
    let help = c.cmd(&["MEMORY", "HELP"]).await;
    assert!(help.starts_with("*14\r\n+MEMORY <subcommand>"), "{help}");
    let stats = c.cmd(&["MEMORY", "STATS"]).await;
    for needle in [
        "peak.allocated",
        "total.allocated",
        "db.0",
        "overhead.hashtable.main",
        "keys.count",
        "fragmentation.bytes",
    ] {
        assert!(stats.contains(needle), "missing {needle} in {stats}");
    }
    let doctor = c.cmd(&["MEMORY", "DOCTOR"]).await;
    assert!(doctor.contains("Sam"), "{doctor}");
    h.shutdown().await;
}
