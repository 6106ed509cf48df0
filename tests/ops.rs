//! Operator commands (SLOWLOG, LATENCY, WAIT, CONFIG SET) and the metrics endpoint,
//! with Redis 7's replies (checked against redis-server 7.0.15 while writing these).

mod support;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A script that keeps the server busy for a few milliseconds at least.
const SLOW: &str = "local i = 0 while i < 2000000 do i = i + 1 end return i";

#[tokio::test]
async fn slowlog_records_commands_over_the_threshold_newest_first() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).await, int(0));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"])
            .await,
        OK
    );
    c.cmd(&["CLIENT", "SETNAME", "worker"]).await;
    c.cmd(&["SET", "lock", "me", "NX", "PX", "1000"]).await;
    let got = c.cmd(&["SLOWLOG", "GET", "1"]).await;
    // [id, unix time, microseconds, args, "ip:port", name]
    let addr = c.stream.local_addr().unwrap().to_string();
    assert!(got.starts_with("*1\r\n*6\r\n:2\r\n:"), "{got}");
    assert!(
        got.ends_with(&format!(
            "*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$2\r\nme\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1000\r\n${}\r\n{addr}\r\n$6\r\nworker\r\n",
            addr.len()
        )),
        "{got}"
    );
    // CONFIG SET, CLIENT SETNAME, SET, SLOWLOG GET (each logged after it ran).
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).await, int(4));
    assert!(c.cmd(&["SLOWLOG", "GET"]).await.starts_with("*5\r\n"));
    assert!(c.cmd(&["SLOWLOG", "GET", "-1"]).await.starts_with("*6\r\n"));
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "-2"]).await,
        err("ERR count should be greater than or equal to -1")
    );
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]).await, OK);
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).await, int(1));
    // Passwords never reach the log.
    c.cmd(&["AUTH", "secret"]).await;
    assert!(!c.cmd(&["SLOWLOG", "GET", "-1"]).await.contains("secret"));
    h.shutdown().await;
}

#[tokio::test]
async fn slowlog_trims_long_commands_like_redis() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"])
        .await;
    let long = "x".repeat(200);
    let mut args = vec!["MSET"];
    let pairs: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    for p in &pairs {
        args.push(p);
        args.push(&long);
    }
    c.cmd(&args).await;
    let got = c.cmd(&["SLOWLOG", "GET", "1"]).await;
    assert!(got.contains("*32\r\n$4\r\nMSET\r\n"), "{got}");
    let trimmed = format!("{}... (72 more bytes)", "x".repeat(128));
    assert!(
        got.contains(&format!("${}\r\n{trimmed}\r\n", trimmed.len())),
        "{got}"
    );
    assert!(got.contains("$23\r\n... (10 more arguments)\r\n"), "{got}");
    h.shutdown().await;
}

#[tokio::test]
async fn slowlog_errors_and_arity_match_redis() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["SLOWLOG", "LEN", "x"]).await,
        err("ERR wrong number of arguments for 'slowlog|len' command")
    );
    assert_eq!(
        c.cmd(&["SLOWLOG", "FOO"]).await,
        err("ERR unknown subcommand 'FOO'. Try SLOWLOG HELP.")
    );
    assert!(c.cmd(&["SLOWLOG", "HELP"]).await.starts_with(
        "*12\r\n+SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
    ));
    // Off by default for fast commands (10 ms threshold).
    c.cmd(&["SET", "a", "b"]).await;
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn latency_monitor_records_slow_commands_once_enabled() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]).await, "*0\r\n");
    c.cmd(&["EVAL", SLOW, "0"]).await;
    assert_eq!(
        c.cmd(&["LATENCY", "LATEST"]).await,
        "*0\r\n",
        "off by default"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"])
            .await,
        OK
    );
    c.cmd(&["EVAL", SLOW, "0"]).await;
    let latest = c.cmd(&["LATENCY", "LATEST"]).await;
    assert!(
        latest.starts_with("*1\r\n*4\r\n$7\r\ncommand\r\n:"),
        "{latest}"
    );
    assert!(c
        .cmd(&["LATENCY", "HISTORY", "command"])
        .await
        .starts_with("*1\r\n*2\r\n:"));
    assert_eq!(c.cmd(&["LATENCY", "HISTORY", "nothing"]).await, "*0\r\n");
    assert_eq!(
        c.cmd(&["LATENCY", "RESET", "command", "nothing"]).await,
        int(1)
    );
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]).await, "*0\r\n");
    assert_eq!(
        c.cmd(&["LATENCY", "HISTORY"]).await,
        err("ERR wrong number of arguments for 'latency|history' command")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn latency_histogram_is_cumulative_per_command() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["HELLO", "3"]).await;
    c.cmd(&["SET", "a", "b"]).await;
    c.cmd(&["SET", "a", "c"]).await;
    let got = c
        .cmd(&["LATENCY", "HISTOGRAM", "set", "nosuchcommand"])
        .await;
    assert!(
        got.starts_with("%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:2\r\n$14\r\nhistogram_usec\r\n%"),
        "{got}"
    );
    // The last bucket's cumulative count is every call.
    assert!(got.ends_with(":2\r\n"), "{got}");
    h.shutdown().await;
}

#[tokio::test]
async fn wait_answers_zero_at_once_there_are_no_replicas() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["WAIT", "1", "0"]).await, int(0));
    assert_eq!(
        c.cmd(&["WAIT", "0", "-1"]).await,
        err("ERR timeout is negative")
    );
    assert_eq!(
        c.cmd(&["WAIT", "0", "x"]).await,
        err("ERR timeout is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('wait',0,0)", "0"]).await,
        err("ERR This Redis command is not allowed from script script: bf73943552e0faee9594d9a1c5ba3d14c7dccd99, on @user_script:1.")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn config_set_changes_live_settings_all_or_nothing() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let failed = |arg: &str, why: &str| {
        err(&format!(
            "ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}"
        ))
    };
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-max-len"]).await,
        err("ERR wrong number of arguments for 'config|set' command")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxclients", "5", "slowlog-max-len"])
            .await,
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "foo", "1"]).await,
        err("ERR Unknown option or number of arguments for CONFIG SET - 'foo'")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "databases", "3"]).await,
        failed("databases", "can't set immutable config")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxclients", "0"]).await,
        failed(
            "maxclients",
            "argument must be between 1 and 4294967295 inclusive"
        )
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxclients", "x"]).await,
        failed("maxclients", "argument couldn't be parsed into an integer")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxclients", "5", "maxclients", "6"])
            .await,
        failed("maxclients", "duplicate parameter")
    );
    // A bad second pair leaves the first unchanged.
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "slowlog-max-len",
            "5",
            "slowlog-log-slower-than",
            "-2"
        ])
        .await,
        failed(
            "slowlog-log-slower-than",
            "argument must be between -1 and 9223372036854775807 inclusive"
        )
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "slowlog-max-len"]).await,
        "*2\r\n$15\r\nslowlog-max-len\r\n$3\r\n128\r\n"
    );
    // maxclients applies to the next connection.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "1"]).await, OK);
    let mut refused = Raw::to(&h).await;
    assert_eq!(
        refused.reply().await,
        err("ERR max number of clients reached")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxclients"]).await,
        "*2\r\n$10\r\nmaxclients\r\n$1\r\n1\r\n"
    );
    h.shutdown().await;
}

/// In cluster mode the routing check's refusals are counted by reply, as INFO cluster
/// counts them; a plain node has no such family.
#[tokio::test]
async fn the_metrics_endpoint_counts_cluster_redirections() {
    let plain = start_with(|c| c.metrics_addr = Some("127.0.0.1:0".parse().unwrap())).await;
    let body = scrape(plain.metrics_addr().expect("metrics bound")).await;
    assert!(!body.contains("redlockd_cluster_"), "{body}");
    plain.shutdown().await;
    let h = start_with(|c| {
        c.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
        c.cluster.mode = redlockd::config::ClusterMode::Map;
        c.cluster.node_id = Some(format!("{:040x}", 1));
    })
    .await;
    let mut c = Raw::to(&h).await;
    // Before any map every slot is unserved; then a map gives this node slots 0-8000.
    c.cmd(&["GET", "a"]).await;
    let map = format!(
        r#"{{"version":1,"nodes":[{{"id":"{:040x}","host":"127.0.0.1","port":{},"slots":[[0,8000]]}},{{"id":"{:040x}","host":"127.0.0.1","port":1,"slots":[[8001,16383]]}}]}}"#,
        1,
        h.addr().port(),
        2
    );
    assert_eq!(c.cmd(&["CLUSTER", "SETMAP", &map]).await, "+OK\r\n");
    // "a" is slot 15495 (node 2's), "b" slot 3300 (ours).
    assert!(c.cmd(&["GET", "a"]).await.starts_with("-MOVED 15495 "));
    assert!(c.cmd(&["GET", "a"]).await.starts_with("-MOVED 15495 "));
    assert!(c
        .cmd(&["MGET", "b", "{b}x", "c"])
        .await
        .starts_with("-CROSSSLOT "));
    assert_eq!(c.cmd(&["GET", "b"]).await, "$-1\r\n");
    let body = scrape(h.metrics_addr().expect("metrics bound")).await;
    let count = |reply: &str| {
        metric(
            &body,
            &format!("redlockd_cluster_redirections_total{{reply=\"{reply}\"}}"),
        )
    };
    assert_eq!(
        (count("moved"), count("crossslot"), count("clusterdown")),
        (2.0, 1.0, 1.0)
    );
    let info = c.cmd(&["INFO", "cluster"]).await;
    assert!(info.contains("cluster_moved_replies:2\r\n"), "{info}");
    h.shutdown().await;
}

fn metric(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{body}"))
}

#[tokio::test]
async fn the_metrics_endpoint_counts_grants_and_refusals_by_reason() {
    let h = start_with(|c| {
        c.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
        c.restart_delay = Some(Duration::from_secs(31));
        c.fence_at_boot = true;
    })
    .await;
    let at = h.metrics_addr().expect("metrics bound");
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await;
    let body = scrape(at).await;
    assert_eq!(
        metric(&body, "redlockd_lock_refusals_total{reason=\"fence\"}"),
        1.0
    );
    assert_eq!(metric(&body, "redlockd_fence_active"), 1.0);
    h.clock().advance(Duration::from_secs(31));
    c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await;
    c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await;
    c.cmd(&["SET", "other", "b", "NX", "PX", "99000"]).await;
    let body = scrape(at).await;
    assert_eq!(metric(&body, "redlockd_lock_grants_total"), 1.0);
    assert_eq!(
        metric(&body, "redlockd_lock_refusals_total{reason=\"held\"}"),
        1.0
    );
    assert_eq!(
        metric(&body, "redlockd_lock_refusals_total{reason=\"max_ttl\"}"),
        1.0
    );
    assert_eq!(metric(&body, "redlockd_fence_active"), 0.0);
    assert_eq!(metric(&body, "redlockd_keys{db=\"0\"}"), 1.0);
    // Above --maxmemory: refused with OOM, counted apart from the fence.
    assert_eq!(metric(&body, "redlockd_maxmemory_bytes"), 0.0);
    assert!(metric(&body, "redlockd_used_memory_bytes") > 0.0);
    c.cmd(&["CONFIG", "SET", "maxmemory", "1"]).await;
    c.cmd(&["SET", "lock2", "a", "NX", "PX", "1000"]).await;
    let body = scrape(at).await;
    assert_eq!(metric(&body, "redlockd_maxmemory_bytes"), 1.0);
    assert_eq!(
        metric(&body, "redlockd_lock_refusals_total{reason=\"oom\"}"),
        1.0
    );
    assert_eq!(
        metric(&body, "redlockd_lock_refusals_total{reason=\"fence\"}"),
        1.0
    );
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]).await;
    // Refused calls are not calls (INFO commandstats counts them as rejected_calls).
    assert_eq!(metric(&body, "redlockd_commands_total{cmd=\"set\"}"), 3.0);
    assert_eq!(
        metric(
            &body,
            "redlockd_command_duration_seconds_count{cmd=\"set\"}"
        ),
        3.0
    );
    assert!(body.contains("# TYPE redlockd_command_duration_seconds histogram"));
    // Anything but GET /metrics is refused.
    let mut s = tokio::net::TcpStream::connect(at).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 404 Not Found\r\n"), "{out}");
    h.shutdown().await;
}
