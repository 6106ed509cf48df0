//! Lock introspection: LOCKS LIST / INFO (who holds what, since when, extensions,
//! refused requests), and the counters of INFO `locks` and the metrics: releases,
//! extensions, locks that expired while held, and overruns (a release that came after
//! its lock expired).

use crate::support;
use std::collections::HashMap;
use std::time::Duration;
use support::*;

type Fields = HashMap<String, Option<String>>;

async fn info_of(c: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<Fields> {
    q(c, &["LOCKS", "INFO", key]).await.unwrap()
}

fn field<'a>(f: &'a Fields, name: &str) -> Option<&'a str> {
    f.get(name)
        .unwrap_or_else(|| panic!("no {name} in {f:?}"))
        .as_deref()
}

/// INFO locks's `name` as a number.
async fn counter(c: &mut redis::aio::MultiplexedConnection, name: &str) -> u64 {
    let info: String = q(c, &["INFO", "locks"]).await.unwrap();
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .parse()
        .unwrap()
}

/// A lock taken with SET NX PX is listed with its holder (id, name, address, user),
/// its token, TTL, age and the requests refused while held; a cache key with a TTL is
/// no lock and is not listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_listed_with_its_holder() {
    let h = start_on().await;
    let mut holder = conn(&h).await;
    let mut other = conn(&h).await;
    let _: () = q(&mut holder, &["CLIENT", "SETNAME", "worker-1"])
        .await
        .unwrap();
    let id: i64 = q(&mut holder, &["CLIENT", "ID"]).await.unwrap();
    let set: Option<String> = q(
        &mut holder,
        &["SET", "lock:a", "tok-1", "NX", "PX", "10000"],
    )
    .await
    .unwrap();
    assert_eq!(set.as_deref(), Some("OK"));
    let _: () = q(&mut other, &["SET", "cache:x", "v", "EX", "10"])
        .await
        .unwrap();
    for _ in 0..2 {
        let r: Option<String> = q(&mut other, &["SET", "lock:a", "tok-2", "NX", "PX", "10000"])
            .await
            .unwrap();
        assert_eq!(r, None);
    }
    h.clock().advance(Duration::from_millis(1500));
    let f = info_of(&mut other, "lock:a").await.expect("a lock");
    assert_eq!(field(&f, "key"), Some("lock:a"));
    assert_eq!(field(&f, "value"), Some("tok-1"));
    assert_eq!(field(&f, "ttl-ms"), Some("8500"));
    assert_eq!(field(&f, "client-id"), Some(id.to_string().as_str()));
    assert_eq!(field(&f, "client-name"), Some("worker-1"));
    assert_eq!(field(&f, "user"), Some("default"));
    assert_eq!(field(&f, "client-connected"), Some("1"));
    assert_eq!(field(&f, "held-ms"), Some("1500"));
    assert_eq!(field(&f, "extensions"), Some("0"));
    assert_eq!(field(&f, "refused"), Some("2"));
    assert!(field(&f, "client-addr").unwrap().starts_with("127.0.0.1:"));
    assert_eq!(info_of(&mut other, "cache:x").await, None);
    assert_eq!(info_of(&mut other, "nosuch").await, None);
    let list: Vec<Fields> = q(&mut other, &["LOCKS", "LIST"]).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(field(&list[0], "key"), Some("lock:a"));
    let none: Vec<Fields> = q(&mut other, &["LOCKS", "LIST", "MATCH", "other:*"])
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(counter(&mut other, "locks_held").await, 1);
    // The owner's release.
    let n: i64 = q(&mut holder, &["DELIFEQ", "lock:a", "tok-1"])
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(counter(&mut other, "lock_releases").await, 1);
    assert_eq!(counter(&mut other, "locks_held").await, 0);
    h.shutdown().await;
}

/// Redisson's shape (a hash made a lock by a script's PEXPIRE) and a SET IFEQ ... PX
/// renewal count as extensions of the same holder's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_count_as_extensions() {
    let h = start_on().await;
    let mut c = conn(&h).await;
    let script = "redis.call('hincrby', KEYS[1], ARGV[2], 1); return redis.call('pexpire', KEYS[1], ARGV[1])";
    for _ in 0..3 {
        let r: i64 = q(&mut c, &["EVAL", script, "1", "rlock", "30000", "uuid:1"])
            .await
            .unwrap();
        assert_eq!(r, 1);
    }
    let f = info_of(&mut c, "rlock").await.expect("a lock");
    assert_eq!(field(&f, "extensions"), Some("2"));
    assert_eq!(field(&f, "value"), Some(""));
    let _: () = q(&mut c, &["SET", "lock:b", "t", "NX", "PX", "1000"])
        .await
        .unwrap();
    let _: () = q(&mut c, &["SET", "lock:b", "t", "IFEQ", "t", "PX", "5000"])
        .await
        .unwrap();
    let f = info_of(&mut c, "lock:b").await.expect("a lock");
    assert_eq!(field(&f, "extensions"), Some("1"));
    assert_eq!(field(&f, "ttl-ms"), Some("5000"));
    assert_eq!(counter(&mut c, "lock_extensions").await, 3);
    h.shutdown().await;
}

/// A holder paused past its TTL: the lock expires while held (counted), and its late
/// release, by DELIFEQ or by the compare-and-delete script redsync and node-redlock
/// send, is an overrun. A release in time is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_releases_are_overruns() {
    let h = start_with(|c| {
        c.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
        c.lock_introspection = true;
    })
    .await;
    let mut c = conn(&h).await;
    let release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    for key in ["lock:x", "lock:y", "lock:z"] {
        let _: () = q(&mut c, &["SET", key, "tok", "NX", "PX", "100"])
            .await
            .unwrap();
    }
    let n: i64 = q(&mut c, &["EVAL", release, "1", "lock:z", "tok"])
        .await
        .unwrap();
    assert_eq!(n, 1);
    h.clock().advance(Duration::from_millis(150));
    assert_eq!(counter(&mut c, "lock_expired_held").await, 2);
    assert_eq!(counter(&mut c, "lock_overruns").await, 0);
    let n: i64 = q(&mut c, &["DELIFEQ", "lock:x", "tok"]).await.unwrap();
    assert_eq!(n, 0);
    let n: i64 = q(&mut c, &["EVAL", release, "1", "lock:y", "tok"])
        .await
        .unwrap();
    assert_eq!(n, 0);
    // A wrong token or a second late release is no overrun.
    let n: i64 = q(&mut c, &["DELIFEQ", "lock:y", "tok"]).await.unwrap();
    assert_eq!(n, 0);
    assert_eq!(counter(&mut c, "lock_overruns").await, 2);
    assert_eq!(counter(&mut c, "lock_releases").await, 1);
    let metrics = scrape(h.metrics_addr().unwrap()).await;
    assert!(
        metrics.contains("\nredlockd_lock_overruns_total 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("\nredlockd_lock_expired_held_total 2\n"),
        "{metrics}"
    );
    assert!(metrics.contains("\nredlockd_locks_held 0\n"), "{metrics}");
    // Every metric the Grafana dashboard reads is one the node exports.
    let dashboard = include_str!("../../packaging/grafana/redlockd-dashboard.json");
    let mut rest = dashboard;
    let mut names = 0;
    while let Some(at) = rest.find("redlockd_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        let family = name.strip_suffix("_bucket").unwrap_or(&name);
        assert!(metrics.contains(&format!("# TYPE {family} ")), "{family}");
        names += 1;
        rest = &rest[at + name.len()..];
    }
    assert!(names >= 9, "{names}");
    h.shutdown().await;
}

/// With introspection off, locks are still listed (the keyspace knows them) without
/// holder fields, and nothing is counted; a plain SET over a lock drops its record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_can_be_turned_off() {
    let h = start_on().await;
    let mut c = conn(&h).await;
    let _: () = q(&mut c, &["SET", "lock:a", "t", "NX", "PX", "1000"])
        .await
        .unwrap();
    let _: () = q(&mut c, &["SET", "lock:a", "plain"]).await.unwrap();
    assert_eq!(info_of(&mut c, "lock:a").await, None);
    assert_eq!(counter(&mut c, "locks_held").await, 0);
    let _: () = q(&mut c, &["CONFIG", "SET", "lock-introspection", "no"])
        .await
        .unwrap();
    let off: Vec<String> = q(&mut c, &["CONFIG", "GET", "lock-introspection"])
        .await
        .unwrap();
    assert_eq!(off, ["lock-introspection", "no"]);
    let _: () = q(&mut c, &["SET", "lock:b", "t", "NX", "PX", "1000"])
        .await
        .unwrap();
    let f = info_of(&mut c, "lock:b").await.expect("a lock");
    assert_eq!(field(&f, "value"), Some("t"));
    assert_eq!(field(&f, "client-id"), None);
    assert_eq!(counter(&mut c, "locks_held").await, 0);
    let e = query_err(&mut c, &["CONFIG", "SET", "lock-introspection", "maybe"]).await;
    assert!(e.contains("'yes' or 'no'"), "{e}");
    h.shutdown().await;
}

/// LOCKS's errors: an unknown subcommand, a bad COUNT, a syntax error; LOCKS INFO's key
/// is a key (COMMAND GETKEYS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_redis_style_errors() {
    let h = start_on().await;
    let mut r = Raw::to(&h).await;
    assert_eq!(
        r.cmd(&["LOCKS", "NOPE"]).await,
        "-ERR unknown subcommand 'NOPE'. Try LOCKS HELP.\r\n"
    );
    assert_eq!(
        r.cmd(&["LOCKS", "LIST", "COUNT", "0"]).await,
        "-ERR COUNT must be positive\r\n"
    );
    assert_eq!(
        r.cmd(&["LOCKS", "LIST", "MATCH"]).await,
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        r.cmd(&["LOCKS", "INFO"]).await,
        "-ERR wrong number of arguments for 'locks|info' command\r\n"
    );
    assert_eq!(
        r.cmd(&["COMMAND", "GETKEYS", "LOCKS", "INFO", "k1"]).await,
        "*1\r\n$2\r\nk1\r\n"
    );
    h.shutdown().await;
}

/// `redlockd status --json` reads each node (a node that is down is reported so) and
/// lists its locks with their holders; a holder whose connection closed shows as gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_nodes_and_their_locks() {
    let h = start_on().await;
    {
        let mut holder = Raw::to(&h).await;
        assert_eq!(holder.cmd(&["CLIENT", "SETNAME", "worker-9"]).await, OK);
        assert_eq!(
            holder
                .cmd(&["SET", "lock:s", "tok", "NX", "PX", "10000"])
                .await,
            OK
        );
    }
    let mut c = conn(&h).await;
    let down = format!("127.0.0.1:{}", support::process::free_ports(1));
    let up = h.addr().to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(support::process::BIN)
            .args(["status", &up, &down, "--json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["up"], true);
    assert_eq!(nodes[0]["locks_held"], 1);
    assert_eq!(nodes[0]["fence_rule"], "off");
    assert_eq!(nodes[0]["locks"][0]["key"], "lock:s");
    assert_eq!(nodes[0]["locks"][0]["client-name"], "worker-9");
    assert_eq!(nodes[1]["up"], false);
    // Once the holder's connection is gone, its lock shows as orphaned.
    for _ in 0..200 {
        let f = info_of(&mut c, "lock:s").await.unwrap();
        if field(&f, "client-connected") == Some("0") {
            h.shutdown().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("the holder never showed as disconnected");
}

/// A node with lock introspection on (it is off by default).
async fn start_on() -> redlockd::testing::TestServer {
    start_with(|c| c.lock_introspection = true).await
}

#[tokio::test]
async fn introspection_is_off_by_default_and_locks_are_listed_without_holders() {
    let h = start().await;
    let mut c = conn(&h).await;
    let on: Vec<String> = q(&mut c, &["CONFIG", "GET", "lock-introspection"])
        .await
        .unwrap();
    assert_eq!(on, ["lock-introspection", "no"]);
    let _: () = q(&mut c, &["SET", "job", "t1", "NX", "PX", "10000"])
        .await
        .unwrap();
    let info: String = q(&mut c, &["INFO", "locks"]).await.unwrap();
    assert!(info.contains("lock_introspection:0\r\n"), "{info}");
    assert!(info.contains("locks_held:0\r\n"), "{info}");
    let one: redis::Value = q(&mut c, &["LOCKS", "INFO", "job"]).await.unwrap();
    assert_ne!(one, redis::Value::Nil, "the keyspace still knows the lock");
}

#[tokio::test]
async fn records_of_locks_that_left_another_way_are_dropped() {
    let h = start_on().await;
    let mut c = conn(&h).await;
    for k in ["a", "b", "c", "d"] {
        let _: () = q(&mut c, &["SET", k, "t", "NX", "PX", "10000"])
            .await
            .unwrap();
    }
    let _: () = q(&mut c, &["RENAME", "a", "a2"]).await.unwrap();
    let _: String = q(&mut c, &["GETDEL", "b"]).await.unwrap();
    let _: () = q(&mut c, &["MSET", "c", "plain"]).await.unwrap();
    let info: String = q(&mut c, &["INFO", "locks"]).await.unwrap();
    // a2 is still a lock (RENAME keeps the key's entry): its record went with the
    // old name, d's stays.
    assert!(info.contains("locks_held:1\r\n"), "{info}");
    let _: () = q(&mut c, &["FLUSHALL"]).await.unwrap();
    let info: String = q(&mut c, &["INFO", "locks"]).await.unwrap();
    assert!(info.contains("locks_held:0\r\n"), "{info}");
}
